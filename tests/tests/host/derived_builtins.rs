//! The built-in functions whose backward is derived from their formula (`exp`, `tanh`, `mul`,
//! `gelu`, ...), held against derivatives worked out by hand in float64, first and second
//! order; the same in float16 and bfloat16, which the host executor computes in float32; and an
//! op of the user's with a forward of its own and a backward derived from `formula = ".."`
//! (`op_tests!`, so on the emulated CUDA device too in CI), whose nodes compute only the
//! gradients asked for.

use kusari::prelude::*;
use kusari::testing::OpTest;

use super::elementwise_ops::{uniforms, zip};

type Unary = fn(&Variable) -> Result<Variable>;
type Real = fn(f64) -> f64;

/// `erf'(x) = 2/√π e^(-x²)`.
fn erf_d1(x: f64) -> f64 {
    std::f64::consts::FRAC_2_SQRT_PI * (-x * x).exp()
}

/// Φ(x) = (1 + erf(x/√2)) / 2 and φ(x) = e^(-x²/2) / √(2π): gelu' = Φ + xφ, gelu'' = (2 - x²)φ.
fn phi(x: f64) -> f64 {
    (-0.5 * x * x).exp() / (2.0 * std::f64::consts::PI).sqrt()
}

/// gelu'(x) = Φ(x) + x φ(x).
fn gelu_d1(x: f64) -> f64 {
    0.5 * (1.0 + kusari::kernels::expr::erf(x * std::f64::consts::FRAC_1_SQRT_2)) + x * phi(x)
}

/// Each derived built-in of one input: (name, function, f', f'', low, high), the inputs drawn
/// in [low, high] away from kinks.
fn unary_cases() -> Vec<(&'static str, Unary, Real, Real, f64, f64)> {
    vec![
        ("exp", F::exp, f64::exp, f64::exp, -2.0, 2.0),
        ("log", F::log, |x| 1.0 / x, |x| -1.0 / (x * x), 0.3, 3.0),
        ("expm1", F::expm1, f64::exp, f64::exp, -2.0, 2.0),
        (
            "log1p",
            F::log1p,
            |x| 1.0 / (1.0 + x),
            |x| -1.0 / ((1.0 + x) * (1.0 + x)),
            -0.5,
            3.0,
        ),
        ("erf", F::erf, erf_d1, |x| -2.0 * x * erf_d1(x), -2.0, 2.0),
        (
            "sqrt",
            F::sqrt,
            |x| 0.5 / x.sqrt(),
            |x| -0.25 / (x * x.sqrt()),
            0.3,
            3.0,
        ),
        (
            "tanh",
            F::tanh,
            |x| 1.0 - x.tanh().powi(2),
            |x| -2.0 * x.tanh() * (1.0 - x.tanh().powi(2)),
            -2.0,
            2.0,
        ),
        ("relu", F::relu, |x| f64::from(x > 0.0), |_| 0.0, -2.0, 2.0),
        ("sin", F::sin, f64::cos, |x| -x.sin(), -3.0, 3.0),
        ("cos", F::cos, |x| -x.sin(), |x| -x.cos(), -3.0, 3.0),
        ("absolute", F::absolute, f64::signum, |_| 0.0, -2.0, 2.0),
        (
            "leaky_relu",
            |x| F::leaky_relu(x, 0.2),
            |x| if x >= 0.0 { 1.0 } else { 0.2 },
            |_| 0.0,
            -2.0,
            2.0,
        ),
        (
            "elu",
            |x| F::elu(x, 1.5),
            |x| if x >= 0.0 { 1.0 } else { 1.5 * x.exp() },
            |x| if x >= 0.0 { 0.0 } else { 1.5 * x.exp() },
            -2.0,
            2.0,
        ),
        (
            "gelu",
            F::gelu,
            gelu_d1,
            |x| (2.0 - x * x) * phi(x),
            -3.0,
            3.0,
        ),
        (
            "mul_scalar",
            |x| F::mul_scalar(x, -1.7),
            |_| -1.7,
            |_| 0.0,
            -2.0,
            2.0,
        ),
        (
            "rdiv_scalar",
            |x| F::rdiv_scalar(x, 1.5),
            |x| -1.5 / (x * x),
            |x| 3.0 / (x * x * x),
            0.5,
            2.0,
        ),
        (
            "pow_scalar",
            |x| F::pow_scalar(x, 2.5),
            |x| 2.5 * x.powf(1.5),
            |x| 3.75 * x.powf(0.5),
            0.3,
            2.0,
        ),
    ]
}

/// `gx = gy f'(x)`, and the gradient of `Σ gx` in `x`, `gy f''(x)` (the double backward),
/// against the hand-derived derivatives, in float32 and float64.
#[test]
fn every_derived_builtin_matches_its_hand_derived_derivatives() -> Result<()> {
    for (name, f, d1, d2, lo, hi) in unary_cases() {
        for dtype in [DType::F32, DType::F64] {
            let mut rng = kusari::random::Rng::seed(23);
            let raw = Array::uniform(&[48], lo, hi, dtype, &mut rng)?.to_f64_vec()?;
            // Away from the kinks at 0 (relu, absolute, leaky_relu, elu).
            let xs: Vec<f64> = raw.into_iter().filter(|x| x.abs() > 0.02).collect();
            let x = Variable::new(Array::from_vec(xs.clone(), &[xs.len()])?.astype(dtype)?);
            let gy_data = Array::uniform(&[xs.len()], -1.0, 1.0, dtype, &mut rng)?;
            let gy = Variable::new(gy_data.clone());
            let y = f(&x)?;
            let double = kusari::GradOptions {
                enable_double_backprop: true,
                ..Default::default()
            };
            let gx = kusari::grad(&[&y], &[&x], &[&gy], double)?
                .remove(0)
                .expect("a gradient");
            let ggx = kusari::grad(&[&F::sum(&gx)?], &[&x], None, Default::default())?
                .remove(0)
                .map(|g| g.array().to_f64_vec())
                .transpose()?
                .unwrap_or_else(|| vec![0.0; xs.len()]);
            let (gx, gy) = (gx.array().to_f64_vec()?, gy_data.to_f64_vec()?);
            // The inputs as they are in `dtype`.
            let xs = x.array().to_f64_vec()?;
            let tol = if dtype == DType::F32 { 2e-6 } else { 1e-14 };
            for i in 0..xs.len() {
                let (want1, want2) = (gy[i] * d1(xs[i]), gy[i] * d2(xs[i]));
                assert!(
                    (gx[i] - want1).abs() <= tol * (1.0 + want1.abs()),
                    "{name} {dtype}: gradient at {} is {}, not {want1}",
                    xs[i],
                    gx[i]
                );
                assert!(
                    (ggx[i] - want2).abs() <= 4.0 * tol * (1.0 + want2.abs()),
                    "{name} {dtype}: second derivative at {} is {}, not {want2}",
                    xs[i],
                    ggx[i]
                );
            }
        }
    }
    Ok(())
}

/// The derived built-ins of two inputs: their gradients, each summed to its input's shape,
/// against the hand-derived partial derivatives (b broadcast along the rows).
#[test]
fn derived_builtins_of_two_inputs_match_their_partial_derivatives() -> Result<()> {
    type Binary = fn(&Variable, &Variable) -> Result<Variable>;
    type Partial = fn(f64, f64) -> (f64, f64);
    let cases: [(&str, Binary, Partial, f64, f64); 4] = [
        ("mul", F::mul, |a, b| (b, a), -2.0, 2.0),
        ("div", F::div, |a, b| (1.0 / b, -a / (b * b)), 0.5, 2.0),
        (
            "pow",
            F::pow,
            |a, b| (b * a.powf(b - 1.0), a.powf(b) * a.ln()),
            0.3,
            2.0,
        ),
        // Ties go to a, as Chainer's: none are drawn here.
        (
            "maximum",
            F::maximum,
            |a, b| if a >= b { (1.0, 0.0) } else { (0.0, 1.0) },
            -2.0,
            2.0,
        ),
    ];
    for (name, f, partial, lo, hi) in cases {
        for dtype in [DType::F32, DType::F64] {
            let mut rng = kusari::random::Rng::seed(29);
            let a = Variable::new(Array::uniform(&[4, 5], lo, hi, dtype, &mut rng)?);
            let b = Variable::new(Array::uniform(&[5], lo, hi, dtype, &mut rng)?);
            let gy = Array::uniform(&[4, 5], -1.0, 1.0, dtype, &mut rng)?;
            let y = f(&a, &b)?;
            let gs = kusari::grad(
                &[&y],
                &[&a, &b],
                &[&Variable::new(gy.clone())],
                Default::default(),
            )?;
            let (ga, gb) = (
                gs[0].as_ref().expect("a's gradient").array().to_f64_vec()?,
                gs[1].as_ref().expect("b's gradient").array().to_f64_vec()?,
            );
            assert_eq!(gb.len(), 5, "{name}: b's gradient is summed to its shape");
            let (av, bv, gyv) = (
                a.array().to_f64_vec()?,
                b.array().to_f64_vec()?,
                gy.to_f64_vec()?,
            );
            let tol = if dtype == DType::F32 { 1e-5 } else { 1e-13 };
            let mut want_b = [0.0; 5];
            for r in 0..4 {
                for c in 0..5 {
                    let k = r * 5 + c;
                    let (da, db) = partial(av[k], bv[c]);
                    let want_a = gyv[k] * da;
                    want_b[c] += gyv[k] * db;
                    assert!(
                        (ga[k] - want_a).abs() <= tol * (1.0 + want_a.abs()),
                        "{name} {dtype}: d/da at {k} is {}, not {want_a}",
                        ga[k]
                    );
                }
            }
            for c in 0..5 {
                assert!(
                    (gb[c] - want_b[c]).abs() <= tol * (1.0 + want_b[c].abs()),
                    "{name} {dtype}: d/db at {c} is {}, not {}",
                    gb[c],
                    want_b[c]
                );
            }
        }
    }
    Ok(())
}

/// In float16 and bfloat16 the derived backwards run on the host executor in float32, each
/// gradient rounded once: within a few units in the last place of the half type of the
/// float64 derivative at the same (half-precision) inputs and output.
#[test]
fn derived_builtins_differentiate_half_types() -> Result<()> {
    let cases: [(&str, Unary, Real, f64, f64); 4] = [
        ("exp", F::exp, f64::exp, -2.0, 2.0),
        ("tanh", F::tanh, |x| 1.0 - x.tanh().powi(2), -2.0, 2.0),
        ("sqrt", F::sqrt, |x| 0.5 / x.sqrt(), 0.3, 3.0),
        ("gelu", F::gelu, gelu_d1, -3.0, 3.0),
    ];
    for (name, f, d1, lo, hi) in cases {
        // Relative: 4 ulps of float16 (2^-10 each) and of bfloat16 (2^-7).
        for (dtype, ulps) in [(DType::F16, 4.0 / 1024.0), (DType::BF16, 4.0 / 128.0)] {
            let mut rng = kusari::random::Rng::seed(31);
            let x = Variable::new(Array::uniform(&[40], lo, hi, dtype, &mut rng)?);
            let y = f(&x)?;
            F::sum(&y)?.backward()?;
            let g = x.grad().expect("a gradient");
            assert_eq!(g.dtype(), dtype, "{name}: the gradient keeps the dtype");
            let (xs, gs) = (x.array().to_f64_vec()?, g.array().to_f64_vec()?);
            for (x, g) in xs.iter().zip(&gs) {
                let want = d1(*x);
                assert!(
                    (g - want).abs() <= ulps * want.abs().max(0.25),
                    "{name} {dtype}: gradient at {x} is {g}, not {want}"
                );
            }
        }
    }
    Ok(())
}

/// The host executor computes an `ElementwiseOp` of a half type in float32 and rounds each
/// output once: bit for bit the float32 result converted.
#[test]
fn a_body_of_a_half_type_is_its_float32_result_rounded_once() -> Result<()> {
    static OP: kusari::ElementwiseOp = kusari::ElementwiseOp::new(
        "half_body",
        "T x, T y",
        "T z",
        "",
        "T t = x * y; z = exp(t) / (1 + t * t)",
    );
    for dtype in [DType::F16, DType::BF16] {
        let mut rng = kusari::random::Rng::seed(37);
        let x = Array::uniform(&[3, 7], -2.0, 2.0, dtype, &mut rng)?;
        let y = Array::uniform(&[7], -2.0, 2.0, dtype, &mut rng)?;
        let got = OP.forward(&[&x, &y], &[])?.remove(0);
        assert_eq!(got.dtype(), dtype);
        let wide = OP
            .forward(&[&x.astype(DType::F32)?, &y.astype(DType::F32)?], &[])?
            .remove(0)
            .astype(dtype)?;
        assert_eq!(got.to_f64_vec()?, wide.to_f64_vec()?, "{dtype}");
    }
    Ok(())
}

/// An op of the user's: its forward written with array operations, its backward derived from
/// `formula`, with what it keeps (both inputs: d/dx = y + 3c x², d/dy = x).
pub struct CubicMix {
    c: f64,
}

#[function_node(formula = "x * y + c * x * x * x")]
impl CubicMix {
    fn new(c: f64) -> Self {
        CubicMix { c }
    }

    fn forward(&self, x: &Array, y: &Array) -> Result<Array> {
        x.mul(y)?.add(&x.mul(x)?.mul(x)?.mul_scalar(self.c)?)
    }
}

kusari::op_tests!(cubic_mix => OpTest::new("CubicMix", uniforms(&[&[3, 4], &[4]], -1.0, 1.0))
    .forward(|v| cubic_mix(&v[0], &v[1], 0.5))
    .expected(|x| vec![zip(&x[0], &x[1], |a, b| a * b + 0.5 * a * a * a)]));

/// The derived backward of a formula op, by hand; a node of which one input wants a gradient
/// computes that one alone (the other is `None`), with the same values.
#[test]
fn a_formula_op_derives_its_backward_and_computes_only_what_is_asked() -> Result<()> {
    assert_eq!(
        CubicMix::elementwise_op().retained()?,
        (&[0, 1][..], &[][..])
    );
    assert_eq!(
        CubicMix::elementwise_op().backward_op()?.kernel().outputs,
        "T grad_x, T grad_y"
    );
    let xs = [0.5f64, -1.0, 2.0];
    let ys = [1.5f64, 0.25, -3.0];
    let (c, gys) = (0.5, [1.0f64, -2.0, 0.5]);
    let want_x: Vec<f64> = (0..3)
        .map(|i| gys[i] * (ys[i] + 3.0 * c * xs[i] * xs[i]))
        .collect();
    let want_y: Vec<f64> = (0..3).map(|i| gys[i] * xs[i]).collect();
    let var = |v: &[f64]| Variable::new(Array::from_vec(v.to_vec(), &[3]).unwrap());
    let gy = var(&gys);
    for (wrt_x, wrt_y) in [(true, true), (true, false), (false, true)] {
        let (x, y) = (var(&xs), var(&ys));
        let z = cubic_mix(&x, &y, c)?;
        let mut targets = Vec::new();
        if wrt_x {
            targets.push(&x);
        }
        if wrt_y {
            targets.push(&y);
        }
        let gs = kusari::grad(&[&z], &targets, &[&gy], Default::default())?;
        let mut gs = gs.into_iter();
        if wrt_x {
            let g = gs.next().unwrap().expect("x's gradient");
            close(&g.array().to_vec::<f64>()?, &want_x);
        }
        if wrt_y {
            let g = gs.next().unwrap().expect("y's gradient");
            close(&g.array().to_vec::<f64>()?, &want_y);
        }
    }
    // A constant y: the node's backward is asked for x's gradient alone.
    let x = var(&xs);
    let y = Variable::constant(Array::from_vec(ys.to_vec(), &[3])?);
    let z = cubic_mix(&x, &y, c)?;
    z.set_grad_array(gy.array().clone())?;
    z.backward()?;
    close(&x.grad().unwrap().array().to_vec::<f64>()?, &want_x);
    assert!(y.grad().is_none());
    Ok(())
}

fn close(got: &[f64], want: &[f64]) {
    assert_eq!(got.len(), want.len());
    for (g, w) in got.iter().zip(want) {
        assert!(
            (g - w).abs() <= 1e-14 * (1.0 + w.abs()),
            "{got:?} against {want:?}"
        );
    }
}

/// The backward of an integer product is an error naming the derived backward and the dtype
/// (as PyTorch, which gives integer tensors no gradient), not a panic.
#[test]
fn an_integer_product_has_no_derived_gradient() -> Result<()> {
    let x = Variable::new(Array::from_vec(vec![2i32, 3], &[2])?);
    let y = F::mul(&x, &x)?;
    assert_eq!(y.array().to_vec::<i32>()?, [4, 9]);
    let e = F::sum(&y)?.backward().unwrap_err().to_string();
    assert!(e.contains("Mul_grad") && e.contains("int32"), "{e}");
    Ok(())
}

/// On CUDA (a GPU, or the emulated device in CI) the derived backwards of half types are
/// computed in float32 and rounded once, as on the host: the gradients agree to within an ulp
/// of the half type (the device's `tanh` and `exp` may round the forward differently).
#[test]
fn derived_builtins_of_half_types_agree_on_cuda_and_the_host() -> Result<()> {
    let Some(device) = kusari::testing::cuda_or_skip("derived backwards of half types on CUDA")?
    else {
        return Ok(());
    };
    // `?:` in the forward or the derived backward (relu, leaky_relu, elu, absolute) mixes the
    // half struct with `float`, which CUDA C++ finds ambiguous: such bodies run in float32.
    let cases: [(&str, Unary); 7] = [
        ("tanh", F::tanh),
        ("gelu", F::gelu),
        ("exp", F::exp),
        ("relu", F::relu),
        ("leaky_relu", |x| F::leaky_relu(x, 0.2)),
        ("elu", |x| F::elu(x, 1.0)),
        ("absolute", F::absolute),
    ];
    for (name, f) in cases {
        for (dtype, ulp) in [(DType::F16, 1.0 / 1024.0), (DType::BF16, 1.0 / 128.0)] {
            let mut rng = kusari::random::Rng::seed(41);
            let data = Array::uniform(&[3, 33], -2.0, 2.0, dtype, &mut rng)?;
            let grad_on = |d: Device| -> Result<Vec<f64>> {
                let x = Variable::new(data.to_device(d)?);
                F::sum(&f(&x)?)?.backward()?;
                let g = x.grad().expect("a gradient");
                assert_eq!((g.dtype(), g.device()), (dtype, d), "{name}");
                g.array().to_f64_vec()
            };
            let (host, cuda) = (grad_on(Device::Cpu)?, grad_on(device)?);
            for (h, c) in host.iter().zip(&cuda) {
                assert!(
                    (h - c).abs() <= 2.0 * ulp * h.abs().max(0.5),
                    "{name} {dtype}: {c} on CUDA, {h} on the host"
                );
            }
        }
    }
    Ok(())
}
