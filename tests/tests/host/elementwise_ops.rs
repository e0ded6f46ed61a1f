//! `ElementwiseOp`: ops written once, as a body, with the host forward, the CUDA kernel and the
//! backward derived from it. Each op here runs through `op_tests!` (forward against a float64
//! reference written out in Rust, backward and double backward against numerical gradients, on
//! every device present, float32 and float64, broadcast inputs included); the derived backward
//! of `tanh` equals the built-in's hand-written one; and mistakes are errors naming the op and
//! the construct.

use kusari::kernels::expr::erf;
use kusari::prelude::*;
use kusari::testing::OpTest;
use kusari::{ElementwiseOp, Error, Scalar};

pub(super) fn uniforms(
    shapes: &'static [&'static [usize]],
    lo: f64,
    hi: f64,
) -> impl Fn(&mut kusari::random::Rng, DType) -> Vec<Array> {
    move |rng, dtype| {
        shapes
            .iter()
            .map(|s| Array::uniform(s, lo, hi, dtype, rng).unwrap())
            .collect()
    }
}

/// Each element of `a` and `b` broadcast together, through `f`.
pub(super) fn zip(
    a: &ndarray::ArrayD<f64>,
    b: &ndarray::ArrayD<f64>,
    f: impl Fn(f64, f64) -> f64,
) -> ndarray::ArrayD<f64> {
    let shape = if a.len() >= b.len() {
        a.shape()
    } else {
        b.shape()
    };
    let a = a.broadcast(shape).unwrap();
    let b = b.broadcast(shape).unwrap();
    ndarray::Zip::from(&a).and(&b).map_collect(|&x, &y| f(x, y))
}

static MUL_ADD: ElementwiseOp =
    ElementwiseOp::new("mul_add", "T x, T y, T z", "T w", "", "w = x * y + z");

kusari::op_tests!(mul_add_derived => OpTest::new("mul_add (derived)", uniforms(&[&[3, 4], &[3, 4], &[4]], -1.0, 1.0))
    .forward(|v| Ok(MUL_ADD.apply(&[&v[0], &v[1], &v[2]], &[])?.remove(0)))
    .expected(|x| vec![zip(&zip(&x[0], &x[1], |a, b| a * b), &x[2], |p, c| p + c)]));

// A column and a row broadcast: the host executor gathers the column and cycles the row.
kusari::op_tests!(mul_add_broadcast_derived => OpTest::new(
    "mul_add (derived, a column and a row broadcast)",
    uniforms(&[&[3, 4], &[3, 1], &[1, 4]], -1.0, 1.0),
)
.forward(|v| Ok(MUL_ADD.apply(&[&v[0], &v[1], &v[2]], &[])?.remove(0)))
.expected(|x| vec![zip(&zip(&x[0], &x[1], |a, b| a * b), &x[2], |p, c| p + c)]));

// swish, beta broadcast along the rows (Chainer's swish takes beta as a variable).
static SWISH: ElementwiseOp = ElementwiseOp::new(
    "swish",
    "T x, T beta",
    "T y",
    "",
    "y = x / (1 + exp(-beta * x))",
);

kusari::op_tests!(swish_derived => OpTest::new("swish (derived)", uniforms(&[&[3, 5], &[5]], -2.0, 2.0))
    .forward(|v| Ok(SWISH.apply(&[&v[0], &v[1]], &[])?.remove(0)))
    .expected(|x| vec![zip(&x[0], &x[1], |x, b| x / (1.0 + (-b * x).exp()))]));

// gelu with erf, the exact form.
static GELU: ElementwiseOp = ElementwiseOp::new(
    "gelu_exact",
    "T x",
    "T y",
    "",
    "y = 0.5 * x * (1 + erf(x * 0.7071067811865476))",
);

kusari::op_tests!(gelu_derived => OpTest::new("gelu (derived)", uniforms(&[&[4, 6]], -3.0, 3.0))
    .forward(|v| Ok(GELU.apply(&[&v[0]], &[])?.remove(0)))
    .expected(|x| vec![x[0].mapv(|v| 0.5 * v * (1.0 + erf(v / 2f64.sqrt())))]));

// softplus, beta a scalar parameter.
static SOFTPLUS: ElementwiseOp = ElementwiseOp::new(
    "softplus_beta",
    "T x",
    "T y",
    "T beta",
    "y = log1p(exp(beta * x)) / beta",
);

kusari::op_tests!(softplus_derived => OpTest::new("softplus (derived)", uniforms(&[&[7]], -3.0, 3.0))
    .forward(|v| Ok(SOFTPLUS.apply(&[&v[0]], &[Scalar::F64(1.5)])?.remove(0)))
    .expected(|x| vec![x[0].mapv(|v| (1.5 * v).exp().ln_1p() / 1.5)]));

// A clipped log: the gradient stops below eps.
static CLIPPED_LOG: ElementwiseOp = ElementwiseOp::new(
    "clipped_log",
    "T x",
    "T y",
    "T eps",
    "y = log(fmax(x, eps))",
);

kusari::op_tests!(clipped_log_derived => OpTest::new("clipped log (derived)", uniforms(&[&[9]], 0.0, 2.0))
    .forward(|v| Ok(CLIPPED_LOG.apply(&[&v[0]], &[Scalar::F64(0.25)])?.remove(0)))
    .expected(|x| vec![x[0].mapv(|v| v.max(0.25).ln())])
    .avoid(|x| x[0].iter().any(|&v| (v - 0.25).abs() < 0.02)));

// Two outputs sharing a local.
static TWO_OUTPUTS: ElementwiseOp = ElementwiseOp::new(
    "two_outputs",
    "T x, T y",
    "T s, T d",
    "",
    "T t = x * y; s = t + sin(t); d = t / (1 + x * x);",
);

kusari::op_tests!(two_outputs_derived => OpTest::new("two outputs (derived)", uniforms(&[&[2, 3], &[2, 3]], -1.5, 1.5))
.forward(|v| {
    let mut out = TWO_OUTPUTS.apply(&[&v[0], &v[1]], &[])?;
    let d = out.pop().unwrap();
    Ok((out.pop().unwrap(), d))
})
.expected(|x| {
    let t = zip(&x[0], &x[1], |a, b| a * b);
    vec![
        t.mapv(|t| t + t.sin()),
        zip(&t, &x[0], |t, x| t / (1.0 + x * x)),
    ]
}));

/// The derived backward of `tanh` equals the built-in's hand-written one, to within rounding,
/// first and second order.
#[test]
fn a_derived_backward_equals_the_hand_written_one() -> kusari::Result<()> {
    static TANH: ElementwiseOp =
        ElementwiseOp::new("tanh_derived", "T x", "T y", "", "y = tanh(x)");
    for dtype in [DType::F32, DType::F64] {
        let mut rng = kusari::random::Rng::seed(3);
        let data = Array::uniform(&[64], -2.0, 2.0, dtype, &mut rng)?;
        let gy = Variable::new(Array::uniform(&[64], -1.0, 1.0, dtype, &mut rng)?);
        let grads = |derived: bool| -> kusari::Result<(Vec<f64>, Vec<f64>)> {
            let x = Variable::new(data.clone());
            let y = if derived {
                TANH.apply(&[&x], &[])?.remove(0)
            } else {
                F::tanh(&x)?
            };
            let double = kusari::GradOptions {
                enable_double_backprop: true,
                ..Default::default()
            };
            let gx = kusari::grad(&[&y], &[&x], &[&gy], double)?
                .remove(0)
                .unwrap();
            let s = F::sum(&(&gx * &gx)?)?;
            let ggx = kusari::grad(&[&s], &[&x], None, Default::default())?
                .remove(0)
                .unwrap();
            Ok((gx.array().to_f64_vec()?, ggx.array().to_f64_vec()?))
        };
        let (derived, hand) = (grads(true)?, grads(false)?);
        let tol = if dtype == DType::F32 { 1e-6 } else { 1e-14 };
        for (a, b) in derived
            .0
            .iter()
            .zip(&hand.0)
            .chain(derived.1.iter().zip(&hand.1))
        {
            assert!(
                (a - b).abs() <= tol * (1.0 + b.abs()),
                "{dtype}: {a} against {b}"
            );
        }
    }
    // What the op retains: the output, which the derivative reads (1 - y²), not the input.
    let b = TANH.backward_op()?;
    assert_eq!(b.kernel().inputs, "T y, T grad_y");
    Ok(())
}

#[test]
fn mistakes_are_errors_naming_the_op_and_the_construct() {
    let x = Variable::new(Array::from_vec(vec![1.0f32, 2.0], &[2]).unwrap());
    static LOOP: ElementwiseOp = ElementwiseOp::new(
        "looping",
        "T x",
        "T y",
        "",
        "y = 0; for (int k = 0; k < 3; k++) y += x;",
    );
    let e = LOOP.apply(&[&x], &[]).unwrap_err();
    let msg = e.to_string();
    assert!(
        matches!(&e, Error::InvalidKernel { kernel, .. } if kernel == "looping"),
        "{e:?}"
    );
    assert!(
        msg.contains("a loop (`for`) cannot be differentiated"),
        "{msg}"
    );
    assert!(
        msg.contains("\n") && msg.contains("^^^"),
        "the construct is underlined: {msg}"
    );
    static MIXED: ElementwiseOp = ElementwiseOp::new("mixed", "T x, U y", "T z", "", "z = x * y");
    let e = MIXED.check().unwrap_err().to_string();
    assert!(e.contains("`U y` is not of type `T`"), "{e}");
    static CONCRETE: ElementwiseOp =
        ElementwiseOp::new("concrete", "float32 x", "float32 y", "", "y = x");
    assert!(
        CONCRETE
            .check()
            .unwrap_err()
            .to_string()
            .contains("of one type placeholder")
    );
    // Counts, dtypes.
    let e = SWISH.apply(&[&x], &[]).unwrap_err().to_string();
    assert!(
        e.contains("kernel swish: it takes 2 input(s) and 0 parameter(s), but 1 and 0 were given"),
        "{e}"
    );
    let x64 = Variable::new(Array::from_vec(vec![1.0f64, 2.0], &[2]).unwrap());
    assert!(matches!(
        SWISH.apply(&[&x, &x64], &[]),
        Err(Error::DTypeMismatch { .. })
    ));
    let ints = Variable::new(Array::from_vec(vec![1i32, 2], &[2]).unwrap());
    assert!(matches!(
        GELU.apply(&[&ints], &[]),
        Err(Error::UnsupportedDType { .. })
    ));
    // An op made at run time.
    let op = ElementwiseOp::try_new("sq", "T x", "T y", "", format!("y = x * x * {}", 3)).unwrap();
    let y = op.apply(&[&x], &[]).unwrap().remove(0);
    assert_eq!(y.array().to_vec::<f32>().unwrap(), [3.0, 12.0]);
    assert!(ElementwiseOp::try_new("bad", "T x", "T y", "", "y = x[0]").is_err());
}
