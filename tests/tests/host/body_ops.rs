//! Ops declared by `#[function_node(kernel(..))]`: the kernel's body is the op. The macro
//! checks the body at compile time (the expression language, one placeholder, a backward that
//! derives) and generates the forward on every device from the body and, without a
//! hand-written `backward`, the backward derived from it. Each op runs through `op_tests!`
//! (forward against a float64 reference written out in Rust, backward and double backward
//! against numerical gradients, on every device present, float32 and float64); the derived
//! backward of MulAdd equals the tutorial's hand-written one; what is retained is what the
//! derivative reads.

use kusari::kernels::expr::erf;
use kusari::prelude::*;
use kusari::testing::OpTest;

use super::elementwise_ops::{uniforms, zip};

/// The tutorial's MulAdd, written as its body alone.
pub struct BodyMulAdd;

#[function_node(kernel(inputs = "T x, T y, T z", outputs = "T w", body = "w = x * y + z"))]
impl BodyMulAdd {}

/// The same op with the tutorial's hand-written backward: only the forward is generated.
pub struct HandMulAdd;

#[function_node(kernel(inputs = "T x, T y, T z", outputs = "T w", body = "w = x * y + z"))]
impl HandMulAdd {
    #[retain(x, y)]
    fn backward(
        &self,
        x: &Variable,
        y: &Variable,
        gw: &Variable,
    ) -> Result<(Variable, Variable, Variable)> {
        Ok(((y * gw)?, (x * gw)?, gw.clone()))
    }
}

/// The tutorial's ExpAdd.
pub struct BodyExpAdd;

#[function_node(kernel(inputs = "T x, T y", outputs = "T z", body = "z = exp(x) + exp(y)"))]
impl BodyExpAdd {}

/// swish with beta a variable broadcast along the rows.
pub struct BodySwish;

#[function_node(kernel(
    inputs = "T x, T beta",
    outputs = "T y",
    body = "y = x / (1 + exp(-beta * x))"
))]
impl BodySwish {}

/// softplus with beta a scalar field.
pub struct BodySoftplus {
    beta: f64,
}

#[function_node(kernel(
    inputs = "T x",
    outputs = "T y",
    params = "T beta",
    body = "y = log1p(exp(beta * x)) / beta"
))]
impl BodySoftplus {
    fn new(beta: f64) -> Self {
        BodySoftplus { beta }
    }
}

/// gelu with erf, the exact form.
pub struct BodyGelu;

#[function_node(kernel(
    inputs = "T x",
    outputs = "T y",
    body = "y = 0.5 * x * (1 + erf(x * 0.7071067811865476))"
))]
impl BodyGelu {}

/// A clipped log: no gradient below eps.
pub struct ClippedLog {
    eps: f32,
}

#[function_node(kernel(
    inputs = "T x",
    outputs = "T y",
    params = "T eps",
    body = "y = log(fmax(x, eps))"
))]
impl ClippedLog {
    fn new(eps: f32) -> Self {
        ClippedLog { eps }
    }
}

/// Two outputs sharing a local.
pub struct SumAndRatio;

#[function_node(kernel(
    inputs = "T x, T y",
    outputs = "T s, T d",
    body = "T t = x * y; s = t + sin(t); d = t / (1 + x * x);"
))]
impl SumAndRatio {}

kusari::op_tests!(body_mul_add => OpTest::new("BodyMulAdd", uniforms(&[&[3, 4], &[3, 4], &[4]], -1.0, 1.0))
    .forward(|v| body_mul_add(&v[0], &v[1], &v[2]))
    .expected(|x| vec![zip(&zip(&x[0], &x[1], |a, b| a * b), &x[2], |p, c| p + c)]));

kusari::op_tests!(hand_mul_add => OpTest::new("HandMulAdd", uniforms(&[&[3, 4], &[3, 4], &[3, 4]], -1.0, 1.0))
    .forward(|v| hand_mul_add(&v[0], &v[1], &v[2]))
    .expected(|x| vec![zip(&zip(&x[0], &x[1], |a, b| a * b), &x[2], |p, c| p + c)]));

kusari::op_tests!(body_exp_add => OpTest::new("BodyExpAdd", uniforms(&[&[5], &[5]], -1.0, 1.0))
    .forward(|v| body_exp_add(&v[0], &v[1]))
    .expected(|x| vec![zip(&x[0], &x[1], |a, b| a.exp() + b.exp())]));

kusari::op_tests!(body_swish => OpTest::new("BodySwish", uniforms(&[&[3, 5], &[5]], -2.0, 2.0))
    .forward(|v| body_swish(&v[0], &v[1]))
    .expected(|x| vec![zip(&x[0], &x[1], |x, b| x / (1.0 + (-b * x).exp()))]));

kusari::op_tests!(body_softplus => OpTest::new("BodySoftplus", uniforms(&[&[7]], -3.0, 3.0))
    .forward(|v| body_softplus(&v[0], 1.5))
    .expected(|x| vec![x[0].mapv(|v| (1.5 * v).exp().ln_1p() / 1.5)]));

kusari::op_tests!(body_gelu => OpTest::new("BodyGelu", uniforms(&[&[4, 6]], -3.0, 3.0))
    .forward(|v| body_gelu(&v[0]))
    .expected(|x| vec![x[0].mapv(|v| 0.5 * v * (1.0 + erf(v / 2f64.sqrt())))]));

kusari::op_tests!(clipped_log => OpTest::new("ClippedLog", uniforms(&[&[9]], 0.0, 2.0))
    .forward(|v| clipped_log(&v[0], 0.25))
    .expected(|x| vec![x[0].mapv(|v| v.max(0.25).ln())])
    .avoid(|x| x[0].iter().any(|&v| (v - 0.25).abs() < 0.02)));

kusari::op_tests!(sum_and_ratio => OpTest::new("SumAndRatio", uniforms(&[&[2, 3], &[2, 3]], -1.5, 1.5))
.forward(|v| sum_and_ratio(&v[0], &v[1]))
.expected(|x| {
    let t = zip(&x[0], &x[1], |a, b| a * b);
    vec![t.mapv(|t| t + t.sin()), zip(&t, &x[0], |t, x| t / (1.0 + x * x))]
}));

/// The derived backward equals the tutorial's hand-written one, first and second order, and
/// retains what that one does (x and y: d/dx = y·gw, d/dy = x·gw, d/dz = gw).
#[test]
fn the_derived_backward_equals_the_hand_written_one() -> Result<()> {
    assert_eq!(
        BodyMulAdd::elementwise_op().retained()?,
        (&[0, 1][..], &[][..])
    );
    for dtype in [DType::F32, DType::F64] {
        let mut rng = kusari::random::Rng::seed(5);
        let data: Vec<Array> = (0..4)
            .map(|_| Array::uniform(&[2, 8], -1.0, 1.0, dtype, &mut rng))
            .collect::<Result<_>>()?;
        let run = |derived: bool| -> Result<Vec<Vec<f64>>> {
            let v: Vec<Variable> = data[..3].iter().cloned().map(Variable::new).collect();
            let w = if derived {
                body_mul_add(&v[0], &v[1], &v[2])?
            } else {
                hand_mul_add(&v[0], &v[1], &v[2])?
            };
            let gw = Variable::new(data[3].clone());
            let double = kusari::GradOptions {
                enable_double_backprop: true,
                ..Default::default()
            };
            let refs: Vec<&Variable> = v.iter().collect();
            let gs = kusari::grad(&[&w], &refs, &[&gw], double)?;
            let gx = gs[0].clone().unwrap();
            let s = F::sum(&(&gx * &gs[1].clone().unwrap())?)?;
            let ggs = kusari::grad(&[&s], &refs[..2], None, Default::default())?;
            let mut out = Vec::new();
            for g in gs.into_iter().chain(ggs) {
                out.push(g.unwrap().array().to_f64_vec()?);
            }
            Ok(out)
        };
        let (derived, hand) = (run(true)?, run(false)?);
        for (d, h) in derived.iter().flatten().zip(hand.iter().flatten()) {
            assert!(
                (d - h).abs() <= 1e-6 * (1.0 + h.abs()),
                "{dtype}: {d} against {h}"
            );
        }
    }
    Ok(())
}

/// What each op keeps for its derived backward is what the derivative reads: tanh-like ops
/// their output, swish its inputs, an op with a constant derivative nothing.
#[test]
fn what_is_retained_is_what_the_derivative_reads() -> Result<()> {
    // d(e^x + e^y) = e^x dx + e^y dy: both inputs.
    assert_eq!(
        BodyExpAdd::elementwise_op().retained()?,
        (&[0, 1][..], &[][..])
    );
    // d(x / d)/dx = 1/d - (x / d)·d'/d: the quotient's derivative reuses the output y = x / d.
    assert_eq!(
        BodySwish::elementwise_op().retained()?,
        (&[0, 1][..], &[0][..])
    );
    let b = BodyGelu::elementwise_op().backward_op()?;
    assert_eq!(b.kernel().inputs, "T x, T grad_y");
    // The scalar field reaches the kernel and the host alike: log(fmax(x, 0.25)) at 0.1.
    let x = Variable::new(Array::from_vec(vec![0.1f32, 1.0], &[2])?);
    let y = clipped_log(&x, 0.25)?;
    let got = y.array().to_vec::<f32>()?;
    assert!(
        (got[0] - 0.25f32.ln()).abs() < 1e-6 && got[1].abs() < 1e-7,
        "{got:?}"
    );
    F::sum(&y)?.backward()?;
    assert_eq!(x.grad().unwrap().array().to_vec::<f32>()?, [0.0, 1.0]);
    Ok(())
}

/// An op that is its body, marked `non_differentiable`: its forward runs, keeps nothing, and
/// its backward is an error naming it.
pub struct Rounded;

#[function_node(
    non_differentiable,
    kernel(inputs = "T x", outputs = "T y", body = "y = floor(x + 0.5)")
)]
impl Rounded {}

#[test]
fn a_non_differentiable_body_op_runs_forward_only() -> Result<()> {
    let x = Variable::new(Array::from_vec(vec![0.4f64, 1.6], &[2])?);
    let y = rounded(&x)?;
    assert_eq!(y.array().to_vec::<f64>()?, [0.0, 2.0]);
    let e = F::sum(&y)?.backward().unwrap_err().to_string();
    assert!(e.contains("Rounded"), "{e}");
    Ok(())
}

/// A wrong number of inputs through the untyped `apply` is an error naming the op.
#[test]
fn a_wrong_input_count_names_the_op() {
    let x = Variable::new(Array::from_vec(vec![1.0f64], &[1]).unwrap());
    let e = kusari::apply(BodyGelu, &[&x, &x]).unwrap_err();
    assert!(e.to_string().contains("BodyGelu"), "{e}");
    let i = Variable::new(Array::from_vec(vec![1i32], &[1]).unwrap());
    let e = body_gelu(&i).unwrap_err();
    assert!(e.to_string().contains("int32"), "{e}");
}
