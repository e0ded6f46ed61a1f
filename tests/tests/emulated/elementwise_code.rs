//! An elementwise kernel's code besides its body, on the emulated CUDA device against host
//! results: the preamble (CuPy's `preamble`, also from `#[forward_gpu(.., preamble = "..")]`),
//! `loop_prep` and `after_loop`; a kernel differing only in its preamble compiles anew; and the
//! errors: unbalanced code, code that does not compile, a kernel name that is no C identifier.
//! And a kernel whose array inputs are all `raw`, run over the size given (CuPy's `size=`).

use kusari::prelude::*;
use kusari::{ElementwiseKernel, Error};
use kusari_tests::code_part_kernels::{CUBE_PLUS, MEAN_SHARE, PAIR_SUMS, ScaledCube, scaled_cube};
use kusari_tests::{assert_close, uniform};

use super::emulated;

fn on_gpu(a: &Array) -> Array {
    a.to_device(Device::Cuda(0)).unwrap()
}

#[test]
fn a_preamble_defines_device_functions_the_body_calls() {
    if !emulated("a_preamble_defines_device_functions_the_body_calls") {
        return;
    }
    for dtype in [DType::F32, DType::F64] {
        let hx = uniform(&[4, 5], 1).astype(dtype).unwrap();
        let expected = (&(&hx * &hx).unwrap() * &hx)
            .unwrap()
            .add_scalar(0.5)
            .unwrap();
        let y = CUBE_PLUS
            .launch(&[&on_gpu(&hx)], &[0.5.into()])
            .unwrap()
            .remove(0);
        assert_eq!(y.dtype(), dtype);
        assert_close(&y.to_device(Device::Cpu).unwrap(), &expected, 1e-6, 1e-6);
        // A strided (transposed) input takes the other variant, with the same preamble.
        let y = CUBE_PLUS
            .launch(&[&on_gpu(&hx).t()], &[0.5.into()])
            .unwrap()
            .remove(0);
        assert_close(
            &y.to_device(Device::Cpu).unwrap(),
            &expected.t(),
            1e-6,
            1e-6,
        );
    }
}

#[test]
fn loop_prep_runs_before_the_loop_and_after_loop_after_it() {
    if !emulated("loop_prep_runs_before_the_loop_and_after_loop_after_it") {
        return;
    }
    let n = 37;
    let hx = uniform(&[n], 2);
    let mut outs = MEAN_SHARE.launch(&[&on_gpu(&hx)], &[]).unwrap();
    let count = outs.pop().unwrap().to_vec::<i32>().unwrap();
    let y = outs.pop().unwrap().to_device(Device::Cpu).unwrap();
    assert_close(&y, &hx.mul_scalar(1.0 / n as f64).unwrap(), 1e-6, 1e-6);
    // Every thread that got an element wrote how many its loop visited, after the loop: n
    // elements in all, each counted once (a slot no thread wrote would read -1).
    assert!(count.iter().all(|&c| c >= 1), "{count:?}");
    assert_eq!(
        count
            .iter()
            .take_while(|&&c| c >= 1)
            .map(|&c| c as usize)
            .sum::<usize>(),
        n
    );
}

#[test]
fn a_kernel_differing_only_in_its_preamble_is_compiled_anew() {
    if !emulated("a_kernel_differing_only_in_its_preamble_is_compiled_anew") {
        return;
    }
    static PLUS_ONE: ElementwiseKernel =
        ElementwiseKernel::new("shifted", "T x", "T y", "", "y = shift(x);")
            .with_preamble("__device__ T shift(T v) { return v + 1; }");
    static PLUS_TWO: ElementwiseKernel =
        ElementwiseKernel::new("shifted", "T x", "T y", "", "y = shift(x);")
            .with_preamble("__device__ T shift(T v) { return v + 2; }");
    let x = on_gpu(&Array::from_vec(vec![1.0f32, 2.0, 3.0], &[3]).unwrap());
    // The generated sources differ (so do the binary cache's keys, which hash the source).
    let (one, two) = (
        PLUS_ONE.source_for(&[&x]).unwrap(),
        PLUS_TWO.source_for(&[&x]).unwrap(),
    );
    assert_eq!(one.entry, two.entry);
    assert_ne!(one.source, two.source);
    let run = |k: &ElementwiseKernel| k.launch(&[&x], &[]).unwrap()[0].to_vec::<f32>().unwrap();
    assert_eq!(run(&PLUS_ONE), [2.0, 3.0, 4.0]);
    assert_eq!(run(&PLUS_TWO), [3.0, 4.0, 5.0]);
    assert_eq!(run(&PLUS_ONE), [2.0, 3.0, 4.0]);
    // Built at run time: the same strings at other addresses, and a third preamble.
    let leak = |s: String| -> &'static str { Box::leak(s.into_boxed_str()) };
    for k in [1, 2, 5] {
        let kernel =
            ElementwiseKernel::new("shifted", "T x", "T y", "", leak("y = shift(x);".into()))
                .with_preamble(leak(format!(
                    "__device__ T shift(T v) {{ return v + {k}; }}"
                )));
        let expected: Vec<f32> = [1.0, 2.0, 3.0].iter().map(|v| v + k as f32).collect();
        assert_eq!(run(&kernel), expected, "preamble adding {k}");
    }
}

#[test]
fn an_op_declares_its_preamble_in_forward_gpu() {
    if !emulated("an_op_declares_its_preamble_in_forward_gpu") {
        return;
    }
    let kernel = ScaledCube::KERNELS[0];
    assert_eq!(
        kernel.preamble,
        "__device__ T cube(T v) { return v * v * v; }"
    );
    assert_eq!(
        (kernel.loop_prep, kernel.after_loop),
        ("const T a = alpha;", "(void)a;")
    );
    let hx = uniform(&[3, 4], 3);
    let op = |x: &Variable| scaled_cube(x, 1.5);
    let host = op(&Variable::new(hx.clone())).unwrap();
    let x = Variable::new(on_gpu(&hx));
    let y = op(&x).unwrap();
    assert_eq!(y.array().device(), Device::Cuda(0));
    assert_close(
        &y.array().to_device(Device::Cpu).unwrap(),
        host.array(),
        1e-12,
        1e-12,
    );
}

#[test]
fn code_that_does_not_balance_is_refused_before_compiling() {
    if !emulated("code_that_does_not_balance_is_refused_before_compiling") {
        return;
    }
    let x = on_gpu(&Array::zeros(&[2], DType::F32).unwrap());
    let parts = [
        CUBE_PLUS.with_preamble("__device__ T cube(T v) { return v * v * v; } }"),
        CUBE_PLUS.with_loop_prep("{"),
        CUBE_PLUS.with_after_loop("#define X }"),
    ];
    for (k, part) in parts.iter().zip(["preamble", "loop_prep", "after_loop"]) {
        let e = k.launch(&[&x], &[0.0.into()]).unwrap_err();
        assert!(matches!(e, Error::InvalidKernel { .. }), "{e:?}");
        assert!(e.to_string().contains(&format!("invalid {part}")), "{e}");
    }
}

#[test]
fn a_preamble_that_does_not_compile_is_reported_on_its_own_lines() {
    if !emulated("a_preamble_that_does_not_compile_is_reported_on_its_own_lines") {
        return;
    }
    let bad = CUBE_PLUS.with_preamble("__device__ T cube(T v) {\n  return v * undeclared;\n}");
    let x = on_gpu(&Array::zeros(&[2], DType::F32).unwrap());
    let e = bad.launch(&[&x], &[0.0.into()]).unwrap_err();
    assert!(matches!(e, Error::KernelCompile { .. }), "{e:?}");
    let msg = format!(
        "{e}: {:?}",
        std::error::Error::source(&e).map(ToString::to_string)
    );
    assert!(
        msg.contains(&kusari_tests::compiler_line("cube_plus_preamble", 2)),
        "{msg}"
    );
}

#[test]
fn a_kernel_name_that_is_no_c_identifier_is_an_error_at_launch() {
    if !emulated("a_kernel_name_that_is_no_c_identifier_is_an_error_at_launch") {
        return;
    }
    let x = on_gpu(&Array::zeros(&[2], DType::F32).unwrap());
    for name in ["cube-plus", "2cube", "class"] {
        let k = ElementwiseKernel::new(name, "T x", "T y", "", "y = x;");
        let e = k.launch(&[&x], &[]).unwrap_err();
        assert!(matches!(e, Error::InvalidKernel { .. }), "{name}: {e:?}");
        let msg = e.to_string();
        assert!(
            msg.contains(&format!("`{name}`"))
                && (msg.contains("not a valid kernel name") || msg.contains("name a kernel")),
            "{name}: {msg}"
        );
    }
    let e = ElementwiseKernel::new("", "T x", "T y", "", "y = x;")
        .launch(&[&x], &[])
        .unwrap_err();
    assert!(e.to_string().contains("the kernel name is empty"), "{e}");
}

#[test]
fn a_kernel_whose_arrays_are_all_raw_runs_over_the_size_given() {
    if !emulated("a_kernel_whose_arrays_are_all_raw_runs_over_the_size_given") {
        return;
    }
    let values: Vec<f64> = (0..10).map(|v| f64::from(v) * 1.5).collect();
    let a = on_gpu(&Array::from_vec(values.clone(), &[2, 5]).unwrap());
    let mut outs = PAIR_SUMS.launch_sized(&[&a], &[], 5).unwrap();
    let sizes = outs.pop().unwrap();
    let y = outs.pop().unwrap();
    assert_eq!(y.shape(), [5]);
    let expected: Vec<f64> = values.chunks(2).map(|p| p[0] + p[1]).collect();
    assert_eq!(y.to_vec::<f64>().unwrap(), expected);
    // `n` is the size, in every iteration `i` of 0..size.
    assert_eq!(sizes.to_vec::<i64>().unwrap(), [5; 5]);
    // A smaller size runs fewer iterations; a transposed raw input is read in C order of its
    // own shape (as `launch` reads raw inputs).
    let y = PAIR_SUMS.launch_sized(&[&a], &[], 2).unwrap().remove(0);
    assert_eq!(y.to_vec::<f64>().unwrap(), &expected[..2]);
    let t = a.t();
    let ht: Vec<f64> = t.to_device(Device::Cpu).unwrap().to_vec::<f64>().unwrap();
    let y = PAIR_SUMS.launch_sized(&[&t], &[], 5).unwrap().remove(0);
    let expected_t: Vec<f64> = ht.chunks(2).map(|p| p[0] + p[1]).collect();
    assert_eq!(y.to_vec::<f64>().unwrap(), expected_t);
    // Size 0: empty outputs, nothing launched.
    let y = PAIR_SUMS.launch_sized(&[&a], &[], 0).unwrap().remove(0);
    assert_eq!(y.shape(), [0]);
}

#[test]
fn the_arrays_given_decide_the_loop_size_as_in_cupy() {
    if !emulated("the_arrays_given_decide_the_loop_size_as_in_cupy") {
        return;
    }
    let a = on_gpu(&Array::zeros(&[4], DType::F32).unwrap());
    let e = PAIR_SUMS.launch(&[&a], &[]).unwrap_err();
    assert!(matches!(e, Error::KernelArguments { .. }), "{e:?}");
    let msg = e.to_string();
    assert!(
        msg.contains("kernel pair_sums: the loop's size is undecided: every array argument is raw")
            && msg.contains("launch_sized"),
        "{msg}"
    );
    assert!(PAIR_SUMS.source_for(&[&a]).is_err());
    assert!(PAIR_SUMS.source_for_sized(&[&a], 2).is_ok());
    // On host arrays the same check comes first, before "no CUDA".
    let host = Array::zeros(&[4], DType::F32).unwrap();
    let e = PAIR_SUMS.launch(&[&host], &[]).unwrap_err();
    assert!(
        e.to_string().contains("the loop's size is undecided"),
        "{e}"
    );
    // An array for a non-raw input sets the loop's size itself.
    let e = CUBE_PLUS.launch_sized(&[&a], &[1.0.into()], 4).unwrap_err();
    assert!(matches!(e, Error::KernelArguments { .. }), "{e:?}");
    assert!(
        e.to_string()
            .contains("a size (4) is given, but input `x` is given an array"),
        "{e}"
    );
    // A scalar for it does not: without a size the loop is undecided (CuPy's "Loop size is
    // undecided"), with one the scalar is broadcast over it.
    let scalar = || CUBE_PLUS.call().arg(2.0).param(0.5).device(Device::Cuda(0));
    let e = scalar().run().unwrap_err();
    assert!(
        e.to_string().contains(
            "the loop's size is undecided: no non-raw argument is given an array (`x` is given a scalar"
        ),
        "{e}"
    );
    let y = scalar().size(3).run().unwrap().remove(0);
    assert_eq!(y.shape(), [3]);
    assert_eq!(y.to_vec::<f64>().unwrap(), [8.5; 3]);
    // A non-raw output given decides it too, and then a size is refused (CuPy: "Specified
    // 'size' can be used only if all of the ndarray are 'raw'").
    let out = on_gpu(&Array::zeros(&[2, 2], DType::F64).unwrap());
    scalar().out(&out).run().unwrap();
    assert_eq!(out.to_vec::<f64>().unwrap(), [8.5; 4]);
    let e = scalar().out(&out).size(4).run().unwrap_err();
    assert!(
        e.to_string()
            .contains("a size (4) is given, but output `y` is given an array"),
        "{e}"
    );
}
