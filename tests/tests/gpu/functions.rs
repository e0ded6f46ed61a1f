//! Variables and the built-in functions on the GPU: forward, backward and second order against the
//! host, and the functions that must stay on the GPU.

use super::*;

type VarFn = Box<dyn Fn(&[Variable], Device) -> Result<Variable>>;

/// A built-in function applied to seeded inputs.
struct Case {
    name: &'static str,
    inputs: Vec<Array>,
    f: VarFn,
}

fn case(
    name: &'static str,
    inputs: Vec<Array>,
    f: impl Fn(&[Variable], Device) -> Result<Variable> + 'static,
) -> Case {
    Case {
        name,
        inputs,
        f: Box::new(f),
    }
}

/// Every built-in of `kusari::functions` (but select_item and softmax_cross_entropy, tested on
/// their own) on inputs of `t`.
fn function_cases(t: DType) -> Vec<Case> {
    let s = |shape: &[usize], seed: u64| smooth(shape, t, seed);
    let p = |shape: &[usize], seed: u64| positive(shape, t, seed);
    let other = if t == DType::F32 {
        DType::F64
    } else {
        DType::F32
    };
    let cond = values(&[3, 4], DType::Bool, 7);
    vec![
        case("add", vec![s(&[3, 4], 1), s(&[4], 2)], |v, _| {
            F::add(&v[0], &v[1])
        }),
        case("sub", vec![s(&[3, 1], 3), s(&[1, 4], 4)], |v, _| {
            F::sub(&v[0], &v[1])
        }),
        case("mul", vec![s(&[3, 4], 5), s(&[3, 4], 6)], |v, _| {
            F::mul(&v[0], &v[1])
        }),
        case("div", vec![s(&[3, 4], 7), p(&[3, 1], 8)], |v, _| {
            F::div(&v[0], &v[1])
        }),
        case("maximum", vec![s(&[3, 4], 9), s(&[3, 4], 10)], |v, _| {
            F::maximum(&v[0], &v[1])
        }),
        case("pow", vec![p(&[3, 4], 11), s(&[3, 4], 12)], |v, _| {
            F::pow(&v[0], &v[1])
        }),
        case("neg", vec![s(&[3, 4], 13)], |v, _| F::neg(&v[0])),
        case("add_scalar", vec![s(&[3, 4], 14)], |v, _| {
            F::add_scalar(&v[0], 1.5)
        }),
        case("sub_scalar", vec![s(&[3, 4], 15)], |v, _| {
            F::sub_scalar(&v[0], 0.5)
        }),
        case("mul_scalar", vec![s(&[3, 4], 16)], |v, _| {
            F::mul_scalar(&v[0], -2.0)
        }),
        case("div_scalar", vec![s(&[3, 4], 17)], |v, _| {
            F::div_scalar(&v[0], 4.0)
        }),
        case("rsub_scalar", vec![s(&[3, 4], 18)], |v, _| {
            F::rsub_scalar(&v[0], 3.0)
        }),
        case("rdiv_scalar", vec![p(&[3, 4], 19)], |v, _| {
            F::rdiv_scalar(&v[0], 2.0)
        }),
        case("pow_scalar", vec![p(&[3, 4], 20)], |v, _| {
            F::pow_scalar(&v[0], 1.5)
        }),
        case(
            "where_",
            vec![s(&[3, 4], 21), s(&[3, 4], 22)],
            move |v, d| F::where_(&cond.to_device(d)?, &v[0], &v[1]),
        ),
        case("astype", vec![s(&[3, 4], 23)], move |v, _| {
            F::astype(&v[0], other)
        }),
        case("broadcast_to", vec![s(&[3, 1], 24)], |v, _| {
            F::broadcast_to(&v[0], &[3, 4])
        }),
        case("expand_dims", vec![s(&[3, 4], 25)], |v, _| {
            F::expand_dims(&v[0], 1)
        }),
        case("reshape", vec![s(&[3, 4], 26)], |v, _| {
            F::reshape(&v[0], &[2, 6])
        }),
        case("reshape of transposed", vec![s(&[3, 4], 27)], |v, _| {
            F::reshape(&F::transpose(&v[0], None)?, &[2, 6])
        }),
        case("squeeze", vec![s(&[3, 1, 4], 28)], |v, _| {
            F::squeeze(&v[0], None)
        }),
        case("sum_to", vec![s(&[3, 4], 29)], |v, _| {
            F::sum_to(&v[0], &[1, 4])
        }),
        case("transpose", vec![s(&[2, 3, 4], 30)], |v, _| {
            F::transpose(&v[0], Some(&[2, 0, 1]))
        }),
        case("dropout", vec![s(&[4, 5], 31)], |v, _| {
            // The mask is drawn on the host: one seed, one mask on every device.
            random::seed(11);
            F::dropout(&v[0], 0.4)
        }),
        case(
            "linear",
            vec![s(&[5, 3], 32), s(&[2, 3], 33), s(&[2], 34)],
            |v, _| F::linear(&v[0], &v[1], Some(&v[2])),
        ),
        case(
            "linear without bias",
            vec![s(&[5, 3], 35), s(&[2, 3], 36)],
            |v, _| F::linear(&v[0], &v[1], None),
        ),
        case(
            "linear of [5,2,3]",
            vec![s(&[5, 2, 3], 37), s(&[4, 6], 38), s(&[4], 39)],
            |v, _| F::linear(&v[0], &v[1], Some(&v[2])),
        ),
        case("matmul", vec![s(&[2, 3, 4], 40), s(&[4, 5], 41)], |v, _| {
            F::matmul(&v[0], &v[1])
        }),
        case(
            "matmul [4] @ [4,5]",
            vec![s(&[4], 42), s(&[4, 5], 43)],
            |v, _| F::matmul(&v[0], &v[1]),
        ),
        case(
            "matmul [4] @ [4]",
            vec![s(&[4], 44), s(&[4], 45)],
            |v, _| F::matmul(&v[0], &v[1]),
        ),
        case("log_softmax", vec![s(&[4, 5], 46)], |v, _| {
            F::log_softmax(&v[0], 1)
        }),
        case("softmax", vec![s(&[4, 5], 47)], |v, _| F::softmax(&v[0], 0)),
        case("exp", vec![s(&[3, 4], 48)], |v, _| F::exp(&v[0])),
        case("log", vec![p(&[3, 4], 49)], |v, _| F::log(&v[0])),
        case("relu", vec![s(&[3, 4], 50)], |v, _| F::relu(&v[0])),
        case("sigmoid", vec![s(&[3, 4], 51)], |v, _| F::sigmoid(&v[0])),
        case("sqrt", vec![p(&[3, 4], 52)], |v, _| F::sqrt(&v[0])),
        case("tanh", vec![s(&[3, 4], 53)], |v, _| F::tanh(&v[0])),
        case("sin", vec![s(&[3, 4], 62)], |v, _| F::sin(&v[0])),
        case("cos", vec![s(&[3, 4], 63)], |v, _| F::cos(&v[0])),
        case("absolute", vec![s(&[3, 4], 64)], |v, _| F::absolute(&v[0])),
        case("clip", vec![s(&[3, 4], 65)], |v, _| {
            F::clip(&v[0], Some(-0.3), Some(0.4))
        }),
        case("leaky_relu", vec![s(&[3, 4], 66)], |v, _| {
            F::leaky_relu(&v[0], 0.2)
        }),
        case("elu", vec![s(&[3, 4], 67)], |v, _| F::elu(&v[0], 1.0)),
        case("softplus", vec![s(&[3, 4], 68)], |v, _| {
            F::softplus(&v[0], 1.5)
        }),
        case("swish", vec![s(&[2, 3, 4], 69), s(&[3], 70)], |v, _| {
            F::swish(&v[0], &v[1])
        }),
        case("gelu", vec![s(&[3, 4], 71)], |v, _| F::gelu(&v[0])),
        case(
            "layer_normalization",
            vec![s(&[3, 4], 72), p(&[4], 73), s(&[4], 74)],
            |v, _| F::layer_normalization(&v[0], &v[1], &v[2], 1e-5),
        ),
        case("max", vec![s(&[3, 4, 5], 54)], |v, _| {
            F::max_axes(&v[0], &[1], false)
        }),
        case("min", vec![s(&[3, 4, 5], 55)], |v, _| F::min(&v[0])),
        case("min keepdims", vec![s(&[3, 4, 5], 56)], |v, _| {
            F::min_axes(&v[0], &[0, 2], true)
        }),
        case("mean", vec![s(&[3, 4, 5], 57)], |v, _| {
            F::mean_axes(&v[0], &[0], true)
        }),
        case("sum", vec![s(&[3, 4], 58)], |v, _| F::sum(&v[0])),
        case("sum_axes", vec![s(&[3, 4, 5], 59)], |v, _| {
            F::sum_axes(&v[0], &[0, 2], true)
        }),
        case(
            "concat",
            vec![s(&[3, 2], 62), s(&[3, 4], 63), s(&[3, 1], 64)],
            |v, _| F::concat(&[&v[0], &v[1], &v[2]], 1),
        ),
        case("stack", vec![s(&[3, 4], 65), s(&[3, 4], 66)], |v, _| {
            F::stack(&[&v[0], &v[1]], -1)
        }),
        case("split_axis", vec![s(&[5, 4], 67)], |v, _| {
            // The middle piece is not used: its gradient is zeros.
            let parts = F::split_axis(&v[0], &[1, 3], 0)?;
            F::concat(&[&parts[2], &parts[0]], 0)
        }),
        case("pad", vec![s(&[3, 4], 68)], |v, _| {
            F::pad(&v[0], &[(1, 2), (0, 3)], "constant", -0.5)
        }),
        case("get_item basic", vec![s(&[3, 4, 5], 69)], |v, _| {
            v[0].get_item(&[
                Ix::slice(None, None, -2),
                Ix::NewAxis,
                Ix::Ellipsis,
                Ix::Int(-2),
            ])
        }),
        case("get_item array", vec![s(&[4, 3, 2], 70)], |v, d| {
            let idx = Array::from_vec(vec![2i64, 0, 2, -1, 1, 2], &[2, 3])?.to_device(d)?;
            v[0].get_item(&[Ix::all(), Ix::Array(&idx)])
        }),
        case("get_item array apart", vec![s(&[3, 4, 5], 71)], |v, _| {
            let idx = Array::from_vec(vec![4i32, 4, 0], &[3])?;
            v[0].get_item(&[Ix::Int(1), Ix::range(1, 4), Ix::Array(&idx)])
        }),
        case("embed_id", vec![s(&[6, 3], 72)], |v, d| {
            let ids = Array::from_vec(vec![5i32, 0, -1, 5, 2, 5, 0, 1], &[2, 4])?.to_device(d)?;
            F::embed_id(&ids, &v[0], Some(-1))
        }),
        case("operators", vec![s(&[3, 4], 60), p(&[4], 61)], |v, _| {
            let a = ((&v[0] * &v[1])? + 1.0)?;
            let b = (2.0 - &v[0])?;
            (&a / &v[1])? - (-b)?
        }),
    ]
}

/// The output of `case` on `device` and the gradients of its inputs for a seeded output
/// gradient, all as arrays on `device`.
fn run_case(case: &Case, device: Device) -> Result<(Array, Vec<Option<Array>>)> {
    let xs: Vec<Variable> = case
        .inputs
        .iter()
        .map(|a| Ok(Variable::new(a.to_device(device)?)))
        .collect::<Result<_>>()?;
    let y = (case.f)(&xs, device)?;
    let gy = smooth(y.shape(), y.dtype(), 99).to_device(device)?;
    let refs: Vec<&Variable> = xs.iter().collect();
    let grads = grad(
        &[&y],
        &refs,
        &[Variable::constant(gy)],
        GradOptions::default(),
    )?;
    Ok((
        y.array().clone(),
        grads
            .into_iter()
            .map(|g| g.map(|g| g.array().clone()))
            .collect(),
    ))
}

fn functions_match_the_host(test: &str, dtype: DType) {
    let Some(dev) = gpu(test) else {
        return;
    };
    let _suite = shared();
    let fallbacks = cuda::host_fallback_count();
    for case in function_cases(dtype) {
        let what = format!("F::{} {dtype}", case.name);
        let (y, grads) =
            run_case(&case, Device::Cpu).unwrap_or_else(|e| panic!("{what} on the host: {e}"));
        let (gy, ggrads) = run_case(&case, dev).unwrap_or_else(|e| panic!("{what} on {dev}: {e}"));
        assert_eq!(gy.device(), dev, "{what}: the output is not on {dev}");
        close(&gy, &y, tol(y.dtype(), Math::Transcendental), &what);
        assert_eq!(grads.len(), ggrads.len());
        for (i, (h, g)) in grads.iter().zip(&ggrads).enumerate() {
            let what = format!("{what}: gradient of input {i}");
            match (h, g) {
                (Some(h), Some(g)) => {
                    assert_eq!(g.device(), dev, "{what} is not on {dev}");
                    close(g, h, tol(h.dtype(), Math::Transcendental), &what);
                }
                (None, None) => {}
                _ => panic!("{what}: present on one device only ({h:?} vs {g:?})"),
            }
        }
    }
    // Every built-in runs on the GPU itself: none fell back to the host.
    assert_eq!(
        cuda::host_fallback_count(),
        fallbacks,
        "a built-in fell back to the host"
    );
}

#[test]
fn functions_match_the_host_in_float32() {
    functions_match_the_host("functions_match_the_host_in_float32", DType::F32);
}

#[test]
fn functions_match_the_host_in_float64() {
    functions_match_the_host("functions_match_the_host_in_float64", DType::F64);
}

/// `x` on `device` and the classification loss or item selection of it, with its gradient.
fn labelled(
    device: Device,
    x: &Array,
    t: &Array,
    f: fn(&Variable, &Array) -> Result<Variable>,
) -> Result<(Variable, Array)> {
    let xv = Variable::new(x.to_device(device)?);
    let y = f(&xv, &t.to_device(device)?)?;
    if y.device() != device {
        return Err(Error::msg(format!(
            "the output is on {}, not on its input's device {device}",
            y.device()
        )));
    }
    let gy = smooth(y.shape(), y.dtype(), 5).to_device(device)?;
    let g = grad(
        &[&y],
        &[&xv],
        &[Variable::constant(gy)],
        GradOptions::default(),
    )?
    .remove(0)
    .expect("x gets a gradient");
    Ok((y, g.array().clone()))
}

#[test]
fn select_item_stays_on_the_gpu() {
    let Some(dev) = gpu("select_item_stays_on_the_gpu") else {
        return;
    };
    let _suite = shared();
    for dtype in [DType::F32, DType::F64] {
        let x = smooth(&[4, 5], dtype, 1);
        let t = host(&[1.0, -1.0, 4.0, 0.0], &[4], DType::I32);
        let (y, g) = labelled(Device::Cpu, &x, &t, F::select_item).unwrap();
        let (gy, gg) = labelled(dev, &x, &t, F::select_item)
            .unwrap_or_else(|e| panic!("select_item {dtype} on {dev}: {e}"));
        assert_eq!(
            gy.device(),
            dev,
            "select_item's output is on {}",
            gy.device()
        );
        close(gy.array(), y.array(), EXACT, "select_item");
        assert_eq!(gg.device(), dev);
        close(&gg, &g, EXACT, "select_item's gradient");
    }
}

#[test]
fn softmax_cross_entropy_stays_on_the_gpu() {
    let Some(dev) = gpu("softmax_cross_entropy_stays_on_the_gpu") else {
        return;
    };
    let _suite = shared();
    for dtype in [DType::F32, DType::F64] {
        let x = smooth(&[6, 5], dtype, 2);
        let t = host(&[1.0, -1.0, 4.0, 0.0, 2.0, 2.0], &[6], DType::I64);
        let (y, g) = labelled(Device::Cpu, &x, &t, F::softmax_cross_entropy).unwrap();
        let (gy, gg) = labelled(dev, &x, &t, F::softmax_cross_entropy)
            .unwrap_or_else(|e| panic!("softmax_cross_entropy {dtype} on {dev}: {e}"));
        assert_eq!(
            gy.device(),
            dev,
            "softmax_cross_entropy's loss is on {}",
            gy.device()
        );
        let t = tol(dtype, Math::Transcendental);
        close(gy.array(), y.array(), t, "softmax_cross_entropy");
        assert_eq!(gg.device(), dev);
        close(&gg, &g, t, "softmax_cross_entropy's gradient");
    }
}

/// First- and second-order gradients of `f` at `inputs` on `device`: each input's gradient for
/// a seeded output gradient, then the gradient of `Σ gx²` (through the recorded backward).
fn second_order(
    device: Device,
    inputs: &[Array],
    f: &dyn Fn(&[Variable]) -> Result<Variable>,
) -> Result<Vec<Option<Array>>> {
    let xs: Vec<Variable> = inputs
        .iter()
        .map(|a| Ok(Variable::new(a.to_device(device)?)))
        .collect::<Result<_>>()?;
    let refs: Vec<&Variable> = xs.iter().collect();
    let y = f(&xs)?;
    let gy = Variable::constant(smooth(y.shape(), y.dtype(), 7).to_device(device)?);
    let record = GradOptions {
        enable_double_backprop: true,
        ..Default::default()
    };
    let gxs: Vec<Variable> = grad(&[&y], &refs, &[gy], record)?
        .into_iter()
        .map(|g| g.expect("every input gets a gradient"))
        .collect();
    let mut z: Option<Variable> = None;
    for g in &gxs {
        let s = F::sum(&F::mul(g, g)?)?;
        z = Some(match z {
            Some(z) => F::add(&z, &s)?,
            None => s,
        });
    }
    let z = z.expect("at least one input");
    let ggs = grad(&[&z], &refs, None, GradOptions::default())?;
    // An input the first-order gradients do not depend on gets no second-order one.
    let mut out: Vec<Option<Array>> = gxs.iter().map(|g| Some(g.array().clone())).collect();
    out.extend(ggs.into_iter().map(|g| g.map(|g| g.array().clone())));
    Ok(out)
}

#[test]
fn second_order_gradients_match_the_host() {
    let Some(dev) = gpu("second_order_gradients_match_the_host") else {
        return;
    };
    let _suite = shared();
    type Of = Box<dyn Fn(&[Variable]) -> Result<Variable>>;
    for dtype in [DType::F32, DType::F64] {
        let cases: Vec<(&str, Vec<Array>, Of)> = vec![
            (
                "tanh",
                vec![smooth(&[3, 4], dtype, 1)],
                Box::new(|v: &[Variable]| F::tanh(&v[0])),
            ),
            (
                "sigmoid",
                vec![smooth(&[3, 4], dtype, 2)],
                Box::new(|v: &[Variable]| F::sigmoid(&v[0])),
            ),
            (
                "exp",
                vec![smooth(&[3, 4], dtype, 3)],
                Box::new(|v: &[Variable]| F::exp(&v[0])),
            ),
            (
                "log",
                vec![positive(&[3, 4], dtype, 4)],
                Box::new(|v: &[Variable]| F::log(&v[0])),
            ),
            (
                "pow_scalar",
                vec![positive(&[3, 4], dtype, 5)],
                Box::new(|v: &[Variable]| F::pow_scalar(&v[0], 3.0)),
            ),
            (
                "mul with broadcasting",
                vec![smooth(&[3, 4], dtype, 6), smooth(&[4], dtype, 7)],
                Box::new(|v: &[Variable]| F::mul(&v[0], &v[1])),
            ),
            (
                "MulAdd (kusari_examples::muladd_kernel)",
                vec![
                    smooth(&[3, 4], dtype, 8),
                    smooth(&[3, 4], dtype, 9),
                    smooth(&[3, 4], dtype, 10),
                ],
                Box::new(|v: &[Variable]| muladd_kernel::mul_add(&v[0], &v[1], &v[2])),
            ),
        ];
        for (name, inputs, f) in cases {
            let what = format!("{name} {dtype}");
            let h = second_order(Device::Cpu, &inputs, &*f).unwrap();
            let g =
                second_order(dev, &inputs, &*f).unwrap_or_else(|e| panic!("{what} on {dev}: {e}"));
            assert_eq!(h.len(), g.len());
            for (i, (h, g)) in h.iter().zip(&g).enumerate() {
                let what = format!("{what}: gradient {i}");
                match (h, g) {
                    (Some(h), Some(g)) => {
                        assert_eq!(g.device(), dev, "{what}");
                        close(g, h, tol(dtype, Math::Transcendental), &what);
                    }
                    (None, None) => {}
                    _ => panic!("{what}: present on one device only ({h:?} vs {g:?})"),
                }
            }
        }
    }
}
