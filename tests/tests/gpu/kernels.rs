//! Kernels of ops and users: the examples' ops, kernels with several outputs and mixed types, and
//! the caches (a warm launch compiles and loads nothing).

use super::*;

#[test]
fn muladd_example_ops_match_the_host() {
    let Some(dev) = gpu("muladd_example_ops_match_the_host") else {
        return;
    };
    let _suite = shared();
    let fallbacks = cuda::host_fallback_count();
    for dtype in [DType::F32, DType::F64, DType::F16, DType::BF16] {
        let inputs: Vec<Array> = (0..3).map(|k| smooth(&[3, 4], dtype, 20 + k)).collect();
        let gw = smooth(&[3, 4], dtype, 30);
        let run = |device: Device| -> Result<Vec<Array>> {
            let v: Vec<Variable> = inputs
                .iter()
                .map(|a| Ok(Variable::new(a.to_device(device)?)))
                .collect::<Result<_>>()?;
            let w = muladd_kernel::mul_add(&v[0], &v[1], &v[2])?;
            assert_eq!(w.creator_label().as_deref(), Some("MulAdd"));
            let record = GradOptions {
                enable_double_backprop: true,
                ..Default::default()
            };
            let gw = Variable::constant(gw.to_device(device)?);
            let grads = grad(&[&w], &[&v[0], &v[1], &v[2]], &[gw], record)?;
            let grads: Vec<Variable> = grads.into_iter().map(|g| g.expect("a gradient")).collect();
            // Backward applied MulAddGrad, whose one kernel computes gx and gy.
            assert_eq!(grads[0].creator_label().as_deref(), Some("MulAddGrad"));
            // MulAddGrad's two outputs, applied directly.
            let (gx, gy) = muladd_kernel::mul_add_grad(&v[0], &v[1], &v[2])?;
            let mut out = vec![w.array().clone()];
            out.extend(grads.iter().map(|g| g.array().clone()));
            out.extend([gx.array().clone(), gy.array().clone()]);
            Ok(out)
        };
        let h = run(Device::Cpu).unwrap();
        let g = run(dev).unwrap_or_else(|e| panic!("MulAdd {dtype} on {dev}: {e}"));
        let names = ["w", "gx", "gy", "gz", "mul_add_grad gx", "mul_add_grad gy"];
        for ((h, g), name) in h.iter().zip(&g).zip(names) {
            assert_eq!(g.device(), dev, "{name} {dtype}");
            close(
                g,
                h,
                tol(dtype, Math::Arith),
                &format!("MulAdd {dtype}: {name}"),
            );
        }
    }
    // The ops ran their kernels: nothing fell back to the host.
    assert_eq!(cuda::host_fallback_count(), fallbacks);
}

pub(crate) static SUM_DIFF: ElementwiseKernel = ElementwiseKernel::new(
    "sum_diff",
    "T x, T y",
    "T s, T d",
    "",
    "s = x + y; d = x - y;",
);

static SCALED: ElementwiseKernel = ElementwiseKernel::new(
    "scaled_mixed",
    "float32 x, int32 k",
    "float64 out, int64 twice",
    "int64 shift, float64 scale, bool flip, float32 bias",
    "const double v = (double)x * scale + (double)k + (double)shift + (double)bias;\n\
     out = flip ? -v : v;\n\
     twice = 2 * (long long)k;",
);

#[test]
fn kernels_with_several_outputs_and_mixed_types() {
    let Some(dev) = gpu("kernels_with_several_outputs_and_mixed_types") else {
        return;
    };
    let _suite = shared();
    for dtype in [DType::F32, DType::F64, DType::I32, DType::I64, DType::F16] {
        for pair in PAIRS {
            let (a, b) = (values(pair.a.0, dtype, 1), values(pair.b.0, dtype, 2));
            let (ga, gb) = (on(dev, &a), on(dev, &b));
            let (ha, hb) = ((pair.a.1)(&a).unwrap(), (pair.b.1)(&b).unwrap());
            let (va, vb) = ((pair.a.1)(&ga).unwrap(), (pair.b.1)(&gb).unwrap());
            let out = SUM_DIFF.launch(&[&va, &vb], &[]).unwrap();
            let what = format!("sum_diff {dtype} {}", pair.name);
            assert_eq!(out.len(), 2, "{what}");
            for o in &out {
                assert_eq!(o.device(), dev, "{what}");
                assert!(o.is_contiguous(), "{what}");
            }
            let t = tol(dtype, Math::Arith);
            close(&out[0], &ha.add(&hb).unwrap(), t, &format!("{what}: s"));
            close(&out[1], &ha.sub(&hb).unwrap(), t, &format!("{what}: d"));
        }
    }

    // Concrete types of every width, in the arrays and in the scalar parameters.
    let x = values(&[3, 4], DType::F32, 3);
    let k = values(&[4], DType::I32, 4);
    let (gx, gk) = (on(dev, &x), on(dev, &k));
    for (shift, scale, flip, bias) in [(3.0, 0.5, 0.0, 0.25), (-7.0, -2.0, 1.0, 1.5)] {
        let out = SCALED
            .launch(
                &[&gx.t().t(), &gk],
                &[
                    shift.into(),
                    scale.into(),
                    (flip != 0.0).into(),
                    bias.into(),
                ],
            )
            .unwrap();
        assert_eq!(out[0].dtype(), DType::F64);
        assert_eq!(out[1].dtype(), DType::I64);
        let (xs, ks) = (x.to_f64_vec().unwrap(), k.to_f64_vec().unwrap());
        let expected: Vec<f64> = xs
            .iter()
            .enumerate()
            .map(|(i, &xv)| {
                let v = xv * scale + ks[i % 4] + shift + bias;
                if flip != 0.0 { -v } else { v }
            })
            .collect();
        let twice: Vec<f64> = (0..12).map(|i| 2.0 * ks[i % 4]).collect();
        close(
            &out[0],
            &host(&expected, &[3, 4], DType::F64),
            (1e-12, 1e-12),
            "scaled_mixed out",
        );
        close(
            &out[1],
            &host(&twice, &[3, 4], DType::I64),
            EXACT,
            "scaled_mixed twice",
        );
    }
    // Arguments are checked before anything runs.
    let e = SCALED.launch(&[&gx, &gk], &[1.0.into()]).unwrap_err();
    assert!(e.to_string().contains("scalar parameter"), "{e}");
    let e = SUM_DIFF.launch(&[&gx, &gk], &[]).unwrap_err();
    assert!(
        e.to_string().contains("`T` was bound to float32 by `x`"),
        "{e}"
    );
}

/// CuPy's documented `squared_diff`, as its users write it: no `;` after the statement.
static SQUARED_DIFF: ElementwiseKernel = ElementwiseKernel::new(
    "squared_diff",
    "float32 x, float32 y",
    "float32 z",
    "",
    "z = (x - y) * (x - y)",
);

/// Two statements, the second without its `;` and followed by a comment, on its own line.
static HALVED_THEN_SHIFTED: ElementwiseKernel = ElementwiseKernel::new(
    "halved_then_shifted",
    "T x",
    "T z",
    "",
    "T h = x / 2;\nz = h + 1 // the shift\n",
);

#[test]
fn bodies_without_their_last_semicolon_compile_as_in_cupy() {
    let Some(dev) = gpu("bodies_without_their_last_semicolon_compile_as_in_cupy") else {
        return;
    };
    let _suite = shared();
    let (x, y) = (
        values(&[3, 4], DType::F32, 5),
        values(&[3, 4], DType::F32, 6),
    );
    let out = SQUARED_DIFF
        .launch(&[&on(dev, &x), &on(dev, &y)], &[])
        .unwrap();
    let (xs, ys) = (x.to_f64_vec().unwrap(), y.to_f64_vec().unwrap());
    let want: Vec<f64> = xs.iter().zip(&ys).map(|(a, b)| (a - b) * (a - b)).collect();
    close(
        &out[0],
        &host(&want, &[3, 4], DType::F32),
        tol(DType::F32, Math::Arith),
        "squared_diff",
    );
    for dtype in [DType::F64, DType::I32] {
        let x = values(&[5], dtype, 7);
        let out = HALVED_THEN_SHIFTED.launch(&[&on(dev, &x)], &[]).unwrap();
        let want: Vec<f64> = x
            .to_f64_vec()
            .unwrap()
            .iter()
            .map(|&v| {
                if dtype == DType::I32 {
                    (v / 2.0).trunc() + 1.0
                } else {
                    v / 2.0 + 1.0
                }
            })
            .collect();
        close(
            &out[0],
            &host(&want, &[5], dtype),
            EXACT,
            &format!("halved_then_shifted {dtype}"),
        );
    }
}

fn delta(before: KernelStats, after: KernelStats) -> KernelStats {
    KernelStats {
        compiles: after.compiles - before.compiles,
        disk_hits: after.disk_hits - before.disk_hits,
        memory_hits: after.memory_hits - before.memory_hits,
        module_loads: after.module_loads - before.module_loads,
        launches: after.launches - before.launches,
    }
}

static CACHE_PROBE: ElementwiseKernel = ElementwiseKernel::new(
    "kusari_test_cache_probe",
    "T x, T y",
    "T w",
    "T a",
    "w = a * x + y;",
);

#[test]
fn warm_launches_compile_and_load_nothing() {
    let Some(dev) = gpu("warm_launches_compile_and_load_nothing") else {
        return;
    };
    let _suite = exclusive();
    let (hx, hy) = (
        values(&[3, 4], DType::F32, 1),
        values(&[3, 4], DType::F32, 2),
    );
    let (x, y) = (on(dev, &hx), on(dev, &hy));
    let expected = hx.mul_scalar(2.0).unwrap().add(&hy).unwrap();
    let launch = |x: &Array| {
        CACHE_PROBE
            .launch(&[x, &y], &[2.0.into()])
            .unwrap()
            .remove(0)
    };

    // First launch of this kernel in the process: compiled (or read from the disk cache) and
    // loaded once.
    let s0 = cuda::kernel_stats();
    let first = launch(&x);
    let d1 = delta(s0, cuda::kernel_stats());
    assert_eq!(d1.launches, 1, "first launch: {d1:?}");
    assert_eq!(d1.module_loads, 1, "first launch: {d1:?}");
    assert!(d1.compiles + d1.disk_hits >= 1, "first launch: {d1:?}");

    // The same launch again: nothing but the launch.
    let s1 = cuda::kernel_stats();
    let second = launch(&x);
    let d2 = delta(s1, cuda::kernel_stats());
    assert_eq!(d2.compiles, 0, "warm launch: {d2:?}");
    assert_eq!(d2.disk_hits, 0, "warm launch: {d2:?}");
    assert_eq!(d2.module_loads, 0, "warm launch: {d2:?}");
    assert_eq!(d2.launches, 1, "warm launch: {d2:?}");
    let t = tol(DType::F32, Math::Arith);
    close(&first, &expected, t, "first launch");
    close(&second, &expected, t, "second launch");

    // Another variant (a transposed operand takes the strided path) is compiled and loaded
    // once, then warm too.
    let xt = on(dev, &hx.t().contiguous().unwrap()).t();
    let s2 = cuda::kernel_stats();
    let strided = launch(&xt);
    let d3 = delta(s2, cuda::kernel_stats());
    assert_eq!(
        (d3.module_loads, d3.launches),
        (1, 1),
        "strided variant: {d3:?}"
    );
    let s3 = cuda::kernel_stats();
    launch(&xt);
    let d4 = delta(s3, cuda::kernel_stats());
    assert_eq!(
        (d4.compiles, d4.disk_hits, d4.module_loads, d4.launches),
        (0, 0, 0, 1),
        "warm strided launch: {d4:?}"
    );
    close(&strided, &expected, t, "strided launch");

    // Built-in operations go through the same caches: a repeated sum over the last axis (one
    // reduction kernel, no copy) compiles and loads nothing the second time.
    let a = on(dev, &values(&[8, 33], DType::F64, 3));
    a.sum_axes(&[1], false).unwrap();
    let s4 = cuda::kernel_stats();
    let r = a.sum_axes(&[1], false).unwrap();
    let d5 = delta(s4, cuda::kernel_stats());
    assert_eq!(
        (d5.compiles, d5.disk_hits, d5.module_loads, d5.launches),
        (0, 0, 0, 1),
        "warm reduction: {d5:?}"
    );
    close(
        &r,
        &values(&[8, 33], DType::F64, 3)
            .sum_axes(&[1], false)
            .unwrap(),
        EXACT,
        "sum",
    );
}

/// A module compiled already runs on a GPU as its source would: the same saxpy from NVRTC's
/// PTX (the driver compiles it) and from a cubin for the device's own architecture, and a
/// template instance by its name expression. The emulated device runs only what it compiles
/// from source, and says so.
#[test]
fn compiled_modules_and_template_instances_run_as_their_source() {
    let Some(dev) = gpu("compiled_modules_and_template_instances_run_as_their_source") else {
        return;
    };
    let _suite = shared();
    const SAXPY: &str = r#"
template <typename T>
__global__ void axpy(T a, const T* x, T* y, int n) {
    int i = blockIdx.x * blockDim.x + threadIdx.x;
    if (i < n) y[i] = a * x[i] + y[i];
}
extern "C" __global__ void saxpy(float a, const float* x, float* y, int n) {
    axpy<float>(a, x, y, n);
}"#;
    let n = 1000;
    let x = values(&[n], DType::F32, 11);
    let y = values(&[n], DType::F32, 12);
    let (xs, ys) = (x.to_f64_vec().unwrap(), y.to_f64_vec().unwrap());
    let want: Vec<f64> = xs.iter().zip(&ys).map(|(a, b)| 2.5 * a + b).collect();
    let want = host(&want, &[n], DType::F32);
    let run = |k: &kusari::RawKernel, what: &str| -> kusari::Result<()> {
        let (gx, gy) = (on(dev, &x), on(dev, &y));
        k.launch(
            n.div_ceil(128) as u32,
            128,
            &[2.5f32.into(), (&gx).into(), (&gy).into(), (n as i32).into()],
        )?;
        close(&gy, &want, tol(DType::F32, Math::Arith), what);
        Ok(())
    };
    // The template instance, from source.
    let module = kusari::RawModule::with_name_expressions(SAXPY, &[], &["axpy<float>"]).unwrap();
    run(&module.get_function("axpy<float>").unwrap(), "axpy<float>").unwrap();
    if !kusari::kernels::compile::nvrtc_available() {
        return;
    }
    let source = module.get_function("saxpy").unwrap();
    let (_, (major, minor)) = kusari::cuda::properties(0).unwrap();
    for target in [
        kusari::kernels::compile::Target::Ptx { major: 8, minor: 0 },
        kusari::kernels::compile::target_for(major, minor),
    ] {
        let (made, image) =
            kusari::kernels::compile::compile_binary(source.source(), &target).unwrap();
        let compiled = kusari::RawModule::from_binary(&image).unwrap();
        let k = compiled.get_function("saxpy").unwrap();
        match run(&k, &format!("saxpy from {made}")) {
            Ok(()) => assert!(!kusari::cuda::is_emulated()),
            Err(e) => {
                assert!(kusari::cuda::is_emulated(), "{made}: {e}");
                assert!(e.to_string().contains("runs only on a GPU"), "{e}");
            }
        }
    }
}
