//! Built-in functions and example ops tested with the declarative harness (`kusari::op_tests!`):
//! forward against an independent ndarray computation, inputs unchanged, backward and double
//! backward by finite differences, on every device present, in float32 and float64, with
//! contiguous, transposed and negative-stride inputs.

use kusari::prelude::*;
use kusari::testing::OpTest;
// The examples' ops by their crate's name: `linear` here is the built-in's test.
use kusari_examples as examples;
use ndarray::{ArrayD, Axis, Ix2, IxDyn};

fn uniform(shape: &'static [usize], low: f64, high: f64) -> impl Fn(&mut Rng, DType) -> Vec<Array> {
    move |rng, dtype| vec![Array::uniform(shape, low, high, dtype, rng).unwrap()]
}

fn two(a: &'static [usize], b: &'static [usize]) -> impl Fn(&mut Rng, DType) -> Vec<Array> {
    move |rng, dtype| {
        vec![
            Array::uniform(a, -1.0, 1.0, dtype, rng).unwrap(),
            Array::uniform(b, -1.0, 1.0, dtype, rng).unwrap(),
        ]
    }
}

/// True when two elements of `x` are closer than `gap` (a max or maximum tie).
fn near_tie(x: &ArrayD<f64>, gap: f64) -> bool {
    let v: Vec<f64> = x.iter().copied().collect();
    v.iter()
        .enumerate()
        .any(|(i, a)| v[i + 1..].iter().any(|b| (a - b).abs() < gap))
}

kusari::op_tests!(exp => OpTest::new("exp", uniform(&[3, 4], -1.0, 1.0))
    .forward(|x| F::exp(&x[0]))
    .expected(|x| vec![x[0].mapv(f64::exp)]));

kusari::op_tests!(expm1 => OpTest::new("expm1", uniform(&[3, 4], -1.0, 1.0))
    .forward(|x| F::expm1(&x[0]))
    .expected(|x| vec![x[0].mapv(f64::exp_m1)]));

/// erf by its Taylor series (independent of the library's erf): for |x| ≤ 2 the terms peak
/// near e^(x²) ≈ 55, so about 14 of float64's digits survive.
fn erf_series(x: f64) -> f64 {
    let (mut term, mut sum) = (x, x);
    for n in 1..80 {
        term *= -x * x / n as f64;
        sum += term / (2 * n + 1) as f64;
    }
    sum * std::f64::consts::FRAC_2_SQRT_PI
}

kusari::op_tests!(erf => OpTest::new("erf", uniform(&[3, 4], -2.0, 2.0))
    .forward(|x| F::erf(&x[0]))
    .expected(|x| vec![x[0].mapv(erf_series)]));

kusari::op_tests!(log1p => OpTest::new("log1p", uniform(&[3, 4], -0.5, 2.0))
    .forward(|x| F::log1p(&x[0]))
    .expected(|x| vec![x[0].mapv(f64::ln_1p)]));

kusari::op_tests!(log => OpTest::new("log", uniform(&[3, 4], 0.5, 2.0))
    .forward(|x| F::log(&x[0]))
    .expected(|x| vec![x[0].mapv(f64::ln)]));

kusari::op_tests!(sqrt => OpTest::new("sqrt", uniform(&[3, 4], 0.5, 2.0))
    .forward(|x| F::sqrt(&x[0]))
    .expected(|x| vec![x[0].mapv(f64::sqrt)]));

kusari::op_tests!(tanh => OpTest::new("tanh", uniform(&[3, 4], -2.0, 2.0))
    .forward(|x| F::tanh(&x[0]))
    .expected(|x| vec![x[0].mapv(f64::tanh)]));

kusari::op_tests!(sigmoid => OpTest::new("sigmoid", uniform(&[3, 4], -3.0, 3.0))
    .forward(|x| F::sigmoid(&x[0]))
    .expected(|x| vec![x[0].mapv(|v| 1.0 / (1.0 + (-v).exp()))]));

kusari::op_tests!(relu => OpTest::new("relu", uniform(&[3, 4], -1.0, 1.0))
    .forward(|x| F::relu(&x[0]))
    .expected(|x| vec![x[0].mapv(|v| v.max(0.0))])
    .avoid(|x| x[0].iter().any(|v| v.abs() < 0.02)));

kusari::op_tests!(neg => OpTest::new("neg", uniform(&[2, 3], -1.0, 1.0))
    .forward(|x| F::neg(&x[0]))
    .expected(|x| vec![x[0].mapv(|v| -v)]));

kusari::op_tests!(mul_broadcast => OpTest::new("mul", two(&[3, 4], &[4]))
    .forward(|x| F::mul(&x[0], &x[1]))
    .expected(|x| vec![&x[0] * &x[1]]));

kusari::op_tests!(add_broadcast => OpTest::new("add", two(&[3, 1], &[1, 4]))
    .forward(|x| F::add(&x[0], &x[1]))
    .expected(|x| vec![&x[0] + &x[1]]));

kusari::op_tests!(sub => OpTest::new("sub", two(&[2, 3], &[2, 3]))
    .forward(|x| F::sub(&x[0], &x[1]))
    .expected(|x| vec![&x[0] - &x[1]]));

kusari::op_tests!(div => OpTest::new("div", |rng, dtype| vec![
        Array::uniform(&[2, 3], -1.0, 1.0, dtype, rng).unwrap(),
        Array::uniform(&[2, 3], 0.5, 2.0, dtype, rng).unwrap(),
    ])
    .forward(|x| F::div(&x[0], &x[1]))
    .expected(|x| vec![&x[0] / &x[1]]));

kusari::op_tests!(pow => OpTest::new("pow", |rng, dtype| vec![
        Array::uniform(&[2, 3], 0.5, 2.0, dtype, rng).unwrap(),
        Array::uniform(&[2, 3], -1.0, 2.0, dtype, rng).unwrap(),
    ])
    .forward(|x| F::pow(&x[0], &x[1]))
    .expected(|x| vec![ndarray::Zip::from(&x[0]).and(&x[1]).map_collect(|a, b| a.powf(*b))]));

kusari::op_tests!(pow_scalar => OpTest::new("pow_scalar", uniform(&[2, 3], 0.5, 2.0))
    .forward(|x| F::pow_scalar(&x[0], 3.0))
    .expected(|x| vec![x[0].mapv(|v| v.powi(3))]));

kusari::op_tests!(maximum => OpTest::new("maximum", two(&[2, 3], &[2, 3]))
    .forward(|x| F::maximum(&x[0], &x[1]))
    .expected(|x| vec![ndarray::Zip::from(&x[0]).and(&x[1]).map_collect(|a, b| a.max(*b))])
    .avoid(|x| (&x[0] - &x[1]).iter().any(|d| d.abs() < 0.02)));

kusari::op_tests!(matmul => OpTest::new("matmul", two(&[2, 3], &[3, 4]))
.forward(|x| F::matmul(&x[0], &x[1]))
.expected(|x| {
    let a = x[0].clone().into_dimensionality::<Ix2>().expect("2-D");
    let b = x[1].clone().into_dimensionality::<Ix2>().expect("2-D");
    vec![a.dot(&b).into_dyn()]
}));

kusari::op_tests!(linear => OpTest::new("linear", |rng, dtype| vec![
    Array::uniform(&[2, 3], -1.0, 1.0, dtype, rng).unwrap(),
    Array::uniform(&[4, 3], -1.0, 1.0, dtype, rng).unwrap(),
    Array::uniform(&[4], -1.0, 1.0, dtype, rng).unwrap(),
])
.forward(|x| F::linear(&x[0], &x[1], Some(&x[2])))
.expected(|x| {
    let a = x[0].clone().into_dimensionality::<Ix2>().expect("2-D");
    let w = x[1].clone().into_dimensionality::<Ix2>().expect("2-D");
    vec![(a.dot(&w.t()) + &x[2]).into_dyn()]
}));

kusari::op_tests!(sum_axes => OpTest::new("sum_axes", uniform(&[2, 3, 4], -1.0, 1.0))
    .forward(|x| F::sum_axes(&x[0], &[1], true))
    .expected(|x| vec![x[0].sum_axis(Axis(1)).insert_axis(Axis(1))]));

kusari::op_tests!(mean => OpTest::new("mean", uniform(&[3, 4], -1.0, 1.0))
    .forward(|x| F::mean_axes(&x[0], &[0], false))
    .expected(|x| vec![x[0].mean_axis(Axis(0)).expect("non-empty")]));

kusari::op_tests!(max => OpTest::new("max", uniform(&[3, 4], -1.0, 1.0))
    .forward(|x| F::max_axes(&x[0], &[1], false))
    .expected(|x| vec![x[0].map_axis(Axis(1), |r| r.fold(f64::MIN, |m, &v| m.max(v)))])
    .avoid(|x| near_tie(&x[0], 0.02)));

kusari::op_tests!(transpose => OpTest::new("transpose", uniform(&[2, 3, 4], -1.0, 1.0))
    .forward(|x| F::transpose(&x[0], Some(&[2, 0, 1])))
    .expected(|x| vec![x[0].clone().permuted_axes(IxDyn(&[2, 0, 1])).as_standard_layout().to_owned()]));

kusari::op_tests!(reshape => OpTest::new("reshape", uniform(&[2, 3, 4], -1.0, 1.0))
    .forward(|x| F::reshape(&x[0], &[6, 4]))
    .expected(|x| vec![x[0].as_standard_layout().into_shape_with_order(IxDyn(&[6, 4])).expect("same size").to_owned()]));

kusari::op_tests!(broadcast_to => OpTest::new("broadcast_to", uniform(&[3, 1], -1.0, 1.0))
    .forward(|x| F::broadcast_to(&x[0], &[2, 3, 4]))
    .expected(|x| vec![x[0].broadcast(IxDyn(&[2, 3, 4])).expect("broadcastable").to_owned()]));

kusari::op_tests!(softmax => OpTest::new("softmax", uniform(&[3, 4], -2.0, 2.0))
.forward(|x| F::softmax(&x[0], 1))
.expected(|x| {
    let e = x[0].mapv(f64::exp);
    let s = e.sum_axis(Axis(1)).insert_axis(Axis(1));
    vec![&e / &s]
}));

kusari::op_tests!(log_softmax => OpTest::new("log_softmax", uniform(&[3, 4], -2.0, 2.0))
.forward(|x| F::log_softmax(&x[0], 1))
.expected(|x| {
    let s = x[0].mapv(f64::exp).sum_axis(Axis(1)).mapv(f64::ln).insert_axis(Axis(1));
    vec![&x[0] - &s]
}));

kusari::op_tests!(softmax_cross_entropy => OpTest::new("softmax_cross_entropy", |rng, dtype| vec![
    Array::uniform(&[4, 3], -2.0, 2.0, dtype, rng).unwrap(),
    Array::from_vec(vec![0i64, 2, -1, 1], &[4]).expect("4 labels"),
])
.forward(|x| F::softmax_cross_entropy(&x[0], x[1].array()))
.expected(|x| {
    // Mean over the rows whose label is not -1 of -log softmax(x)[t].
    let (mut total, mut count) = (0.0, 0.0);
    for (row, &t) in x[0].outer_iter().zip(x[1].iter()) {
        if t >= 0.0 {
            let lse = row.mapv(f64::exp).sum().ln();
            total += lse - row[t as usize];
            count += 1.0;
        }
    }
    vec![ndarray::arr0(total / count).into_dyn()]
}));

kusari::op_tests!(muladd_example => OpTest::new("MulAdd", |rng, dtype| vec![
        Array::uniform(&[3, 2], -1.0, 1.0, dtype, rng).unwrap(),
        Array::uniform(&[3, 2], -1.0, 1.0, dtype, rng).unwrap(),
        Array::uniform(&[3, 2], -1.0, 1.0, dtype, rng).unwrap(),
    ])
    .forward(|x| examples::muladd_kernel::mul_add(&x[0], &x[1], &x[2]))
    .expected(|x| vec![&x[0] * &x[1] + &x[2]]));

/// The harness fails an op whose backward is wrong, naming the op and the case.
#[test]
fn the_harness_catches_a_wrong_backward() {
    struct Twice;
    #[function_node]
    impl Twice {
        fn forward(&self, x: &Array) -> Result<Array> {
            x * 2.0
        }
        // Wrong: the gradient of 2x is 2 gy.
        fn backward(&self, gy: &Variable) -> Result<Variable> {
            F::mul_scalar(gy, 3.0)
        }
    }
    let case = OpTest::new("twice", uniform(&[2, 3], -1.0, 1.0))
        .forward(|x| twice(&x[0]))
        .expected(|x| vec![x[0].mapv(|v| 2.0 * v)]);
    case.check_forward().expect("the forward is right");
    let err = case
        .check_backward()
        .expect_err("the backward is wrong")
        .to_string();
    assert!(err.contains("twice on native:0"), "{err}");
}

/// An `avoid` that rejects every draw ends after a bounded number of tries, with an error.
#[test]
fn resampling_is_bounded() {
    let case = OpTest::new("never", uniform(&[2], -1.0, 1.0))
        .forward(|x| F::relu(&x[0]))
        .expected(|x| vec![x[0].mapv(|v| v.max(0.0))])
        .avoid(|_| true);
    let err = case
        .check_forward()
        .expect_err("no draw is accepted")
        .to_string();
    assert!(err.contains("draws of the inputs"), "{err}");
}

// ----- the scalar forms, shapes and reductions -----

macro_rules! scalar_op {
    ($name:ident, $f:path, $c:expr, $low:expr, |$v:ident| $e:expr) => {
        kusari::op_tests!($name => OpTest::new(stringify!($name), uniform(&[2, 3], $low, 2.0))
            .forward(|x| $f(&x[0], $c))
            .expected(|x| vec![x[0].mapv(|$v| $e)]));
    };
}
scalar_op!(add_scalar, F::add_scalar, 1.5, -1.0, |v| v + 1.5);
scalar_op!(sub_scalar, F::sub_scalar, 1.5, -1.0, |v| v - 1.5);
scalar_op!(rsub_scalar, F::rsub_scalar, 1.5, -1.0, |v| 1.5 - v);
scalar_op!(mul_scalar, F::mul_scalar, -2.5, -1.0, |v| -2.5 * v);
scalar_op!(div_scalar, F::div_scalar, 4.0, -1.0, |v| v / 4.0);
scalar_op!(rdiv_scalar, F::rdiv_scalar, 3.0, 0.5, |v| 3.0 / v);

kusari::op_tests!(where_ => OpTest::new("where_", two(&[2, 3], &[2, 3]))
.forward(|x| {
    let cond = Array::from_vec(vec![true, false, true, false, false, true], &[2, 3])?
        .to_device(x[0].device())?;
    F::where_(&cond, &x[0], &x[1])
})
.expected(|x| {
    let cond = [true, false, true, false, false, true];
    let v: Vec<f64> = x[0]
        .iter()
        .zip(x[1].iter())
        .zip(cond)
        .map(|((a, b), c)| if c { *a } else { *b })
        .collect();
    vec![ArrayD::from_shape_vec(IxDyn(&[2, 3]), v).expect("6 values")]
}));

kusari::op_tests!(astype => OpTest::new("astype", uniform(&[2, 3], -1.0, 1.0))
    .forward(|x| F::astype(&x[0], DType::F64))
    .expected(|x| vec![x[0].clone()]));

kusari::op_tests!(expand_dims => OpTest::new("expand_dims", uniform(&[3, 4], -1.0, 1.0))
    .forward(|x| F::expand_dims(&x[0], 1))
    .expected(|x| vec![x[0].clone().insert_axis(Axis(1))]));

kusari::op_tests!(squeeze => OpTest::new("squeeze", uniform(&[3, 1, 4], -1.0, 1.0))
    .forward(|x| F::squeeze(&x[0], None))
    .expected(|x| vec![x[0].clone().remove_axis(Axis(1))]));

kusari::op_tests!(sum_to => OpTest::new("sum_to", uniform(&[2, 3, 4], -1.0, 1.0))
    .forward(|x| F::sum_to(&x[0], &[3, 1]))
    .expected(|x| vec![x[0].sum_axis(Axis(0)).sum_axis(Axis(1)).insert_axis(Axis(1))]));

kusari::op_tests!(sum => OpTest::new("sum", uniform(&[3, 4], -1.0, 1.0))
    .forward(|x| F::sum(&x[0]))
    .expected(|x| vec![ndarray::arr0(x[0].sum()).into_dyn()]));

kusari::op_tests!(min => OpTest::new("min", uniform(&[3, 4], -1.0, 1.0))
    .forward(|x| F::min_axes(&x[0], &[0], true))
    .expected(|x| vec![x[0].map_axis(Axis(0), |r| r.fold(f64::MAX, |m, &v| m.min(v))).insert_axis(Axis(0))])
    .avoid(|x| near_tie(&x[0], 0.02)));

kusari::op_tests!(select_item => OpTest::new("select_item", |rng, dtype| vec![
        Array::uniform(&[3, 4], -1.0, 1.0, dtype, rng).unwrap(),
        Array::from_vec(vec![3i32, -1, 0], &[3]).expect("3 labels"),
    ])
    .forward(|x| F::select_item(&x[0], x[1].array()))
    .expected(|x| vec![ArrayD::from_shape_vec(
        IxDyn(&[3]),
        x[0].outer_iter().zip(x[1].iter()).map(|(row, &t)| if t < 0.0 { 0.0 } else { row[t as usize] }).collect(),
    ).expect("3 values")]));

/// The mask `dropout` draws after `random::seed(seed)`, as an independent loop computes it.
fn dropout_expected(x: &ArrayD<f64>, ratio: f64, seed: u64) -> ArrayD<f64> {
    let mut rng = Rng::seed(seed);
    let u = Array::uniform(x.shape(), 0.0, 1.0, DType::F64, &mut rng)
        .unwrap()
        .to_f64_vec()
        .expect("host");
    let scaled: Vec<f64> = x
        .iter()
        .zip(u)
        .map(|(v, u)| if u >= ratio { v / (1.0 - ratio) } else { 0.0 })
        .collect();
    ArrayD::from_shape_vec(x.raw_dim(), scaled).expect("same size")
}

kusari::op_tests!(dropout => OpTest::new("dropout", uniform(&[4, 5], -1.0, 1.0))
    .forward(|x| {
        kusari::random::seed(11);
        F::dropout(&x[0], 0.4)
    })
    .expected(|x| vec![dropout_expected(&x[0], 0.4, 11)]));

// ----- the example ops (imported from kusari_examples, a module per example) -----

fn three(shape: &'static [usize]) -> impl Fn(&mut Rng, DType) -> Vec<Array> {
    move |rng, dtype| {
        (0..3)
            .map(|_| Array::uniform(shape, -1.0, 1.0, dtype, rng).unwrap())
            .collect()
    }
}

fn muladd_expected(x: &[ArrayD<f64>]) -> Vec<ArrayD<f64>> {
    vec![&x[0] * &x[1] + &x[2]]
}

kusari::op_tests!(example_01_muladd => OpTest::new("01 MulAdd", three(&[3, 2]))
    .forward(|x| examples::muladd::mul_add(&x[0], &x[1], &x[2]))
    .expected(muladd_expected));

kusari::op_tests!(example_02_muladd => OpTest::new("02 MulAdd", three(&[3, 2]))
    .forward(|x| examples::muladd_unified::mul_add(&x[0], &x[1], &x[2]))
    .expected(muladd_expected));

kusari::op_tests!(example_03_expadd => OpTest::new("03 ExpAdd", two(&[3, 2], &[3, 2]))
    .forward(|x| examples::expadd::exp_add(&x[0], &x[1]))
    .expected(|x| vec![x[0].mapv(f64::exp) + x[1].mapv(f64::exp)]));

kusari::op_tests!(example_04_muladd_grad => OpTest::new("04 MulAddGrad", three(&[3, 2]))
    .forward(|x| {
        examples::muladd_kernel::mul_add_grad(&x[0], &x[1], &x[2]).map(|(a, b)| vec![a, b])
    })
    .expected(|x| vec![&x[1] * &x[2], &x[0] * &x[2]]));

kusari::op_tests!(example_05_dropout => OpTest::new("05 Dropout", uniform(&[4, 5], -1.0, 1.0))
    .forward(|x| {
        kusari::random::seed(5);
        examples::dropout_train_test::dropout_always(&x[0], 0.25)
    })
    .expected(|x| vec![dropout_expected(&x[0], 0.25, 5)]));

kusari::op_tests!(example_06_linear => OpTest::new("06 LinearFunction", |rng, dtype| vec![
    Array::uniform(&[2, 3], -1.0, 1.0, dtype, rng).unwrap(),
    Array::uniform(&[4, 3], -1.0, 1.0, dtype, rng).unwrap(),
    Array::uniform(&[4], -1.0, 1.0, dtype, rng).unwrap(),
])
.forward(|x| examples::linear::linear(&x[0], &x[1], &x[2]))
.expected(|x| {
    let a = x[0].clone().into_dimensionality::<Ix2>().expect("2-D");
    let w = x[1].clone().into_dimensionality::<Ix2>().expect("2-D");
    vec![(a.dot(&w.t()) + &x[2]).into_dyn()]
}));

kusari::op_tests!(example_07_muladd_by_hand => OpTest::new("07 MulAdd", three(&[3, 2]))
    .forward(|x| examples::muladd_by_hand::muladd(&x[0], &x[1], &x[2]))
    .expected(muladd_expected));

// Old-style functions have no second order (DoubleBackwardUnsupported, tested in graph.rs).
kusari::op_tests!(example_08_old_style => OpTest::new("08 MulAdd", three(&[3, 2]))
    .forward(|x| examples::old_style::muladd(&x[0], &x[1], &x[2]))
    .expected(muladd_expected)
    .no_double_backward());

// The float32 kernels take float32 only (so finite differences are taken in float32, not in
// float64 as by default); their gradient op is declared non-differentiable.
kusari::op_tests!(example_10_muladd_float32 => OpTest::new("10 MulAdd", three(&[3, 2]))
    .forward(|x| examples::muladd_kernel_float32::mul_add(&x[0], &x[1], &x[2]))
    .expected(muladd_expected)
    .dtypes(&[DType::F32])
    .numerical_dtype(None)
    .no_double_backward());

// ----- activations and elementwise functions (issue 22) -----

/// True when an element of `x` is within `gap` of one of `points` (a kink).
fn near(x: &ArrayD<f64>, points: &[f64], gap: f64) -> bool {
    x.iter().any(|v| points.iter().any(|p| (v - p).abs() < gap))
}

fn logistic(v: f64) -> f64 {
    1.0 / (1.0 + (-v).exp())
}

kusari::op_tests!(sin => OpTest::new("sin", uniform(&[3, 4], -3.0, 3.0))
    .forward(|x| F::sin(&x[0]))
    .expected(|x| vec![x[0].mapv(f64::sin)]));

kusari::op_tests!(cos => OpTest::new("cos", uniform(&[3, 4], -3.0, 3.0))
    .forward(|x| F::cos(&x[0]))
    .expected(|x| vec![x[0].mapv(f64::cos)]));

kusari::op_tests!(leaky_relu => OpTest::new("leaky_relu", uniform(&[3, 4], -1.0, 1.0))
    .forward(|x| F::leaky_relu(&x[0], 0.2))
    .expected(|x| vec![x[0].mapv(|v| if v >= 0.0 { v } else { 0.2 * v })])
    .avoid(|x| near(&x[0], &[0.0], 0.02)));

kusari::op_tests!(elu => OpTest::new("elu", uniform(&[3, 4], -2.0, 2.0))
    .forward(|x| F::elu(&x[0], 1.5))
    .expected(|x| vec![x[0].mapv(|v| if v >= 0.0 { v } else { 1.5 * (v.exp() - 1.0) })])
    .avoid(|x| near(&x[0], &[0.0], 0.02)));

kusari::op_tests!(softplus => OpTest::new("softplus", uniform(&[3, 4], -3.0, 3.0))
    .forward(|x| F::softplus(&x[0], 2.0))
    .expected(|x| vec![x[0].mapv(|v| (1.0 + (2.0 * v).exp()).ln() / 2.0)]));

// beta of shape (3,) along axis 1 of x (2, 3, 4): beta[j] for every x[i, j, k].
kusari::op_tests!(swish => OpTest::new("swish", |rng, dtype| vec![
    Array::uniform(&[2, 3, 4], -2.0, 2.0, dtype, rng).unwrap(),
    Array::uniform(&[3], -1.5, 1.5, dtype, rng).unwrap(),
])
.forward(|x| F::swish(&x[0], &x[1]))
.expected(|x| {
    let mut y = x[0].clone();
    for (idx, v) in y.indexed_iter_mut() {
        let b = x[1][[idx[1]]];
        *v *= logistic(b * *v);
    }
    vec![y]
}));

kusari::op_tests!(gelu => OpTest::new("gelu", uniform(&[3, 4], -2.5, 2.5))
    .forward(|x| F::gelu(&x[0]))
    .expected(|x| vec![x[0].mapv(|v| 0.5 * v * (1.0 + erf_series(v / 2f64.sqrt())))]));

kusari::op_tests!(absolute => OpTest::new("absolute", uniform(&[3, 4], -1.0, 1.0))
    .forward(|x| F::absolute(&x[0]))
    .expected(|x| vec![x[0].mapv(|v| if v < 0.0 { -v } else { v })])
    .avoid(|x| near(&x[0], &[0.0], 0.02)));

kusari::op_tests!(clip => OpTest::new("clip", uniform(&[3, 4], -1.0, 1.0))
    .forward(|x| F::clip(&x[0], Some(-0.4), Some(0.5)))
    .expected(|x| vec![x[0].mapv(|v| v.clamp(-0.4, 0.5))])
    .avoid(|x| near(&x[0], &[-0.4, 0.5], 0.02)));

kusari::op_tests!(clip_one_sided => OpTest::new("clip", uniform(&[3, 4], -1.0, 1.0))
    .forward(|x| F::clip(&x[0], None, Some(0.25)))
    .expected(|x| vec![x[0].mapv(|v| if v > 0.25 { 0.25 } else { v })])
    .avoid(|x| near(&x[0], &[0.25], 0.02)));

/// Layer normalization by a direct loop over each sample: its mean, its biased variance, then
/// `(x - mean) / sqrt(var + eps) * gamma + beta` elementwise.
fn layer_norm_expected(
    x: &ArrayD<f64>,
    gamma: &ArrayD<f64>,
    beta: &ArrayD<f64>,
    eps: f64,
) -> ArrayD<f64> {
    let n = x.shape()[0];
    let per: usize = x.shape()[1..].iter().product();
    let xs: Vec<f64> = x.iter().copied().collect();
    let (g, b): (Vec<f64>, Vec<f64>) = (
        gamma.iter().copied().collect(),
        beta.iter().copied().collect(),
    );
    let mut out = Vec::with_capacity(xs.len());
    for s in 0..n {
        let row = &xs[s * per..(s + 1) * per];
        let mean = row.iter().sum::<f64>() / per as f64;
        let var = row.iter().map(|v| (v - mean) * (v - mean)).sum::<f64>() / per as f64;
        for (j, v) in row.iter().enumerate() {
            out.push((v - mean) / (var + eps).sqrt() * g[j] + b[j]);
        }
    }
    ArrayD::from_shape_vec(x.raw_dim(), out).expect("same size")
}

kusari::op_tests!(layer_normalization => OpTest::new("layer_normalization", |rng, dtype| vec![
        Array::uniform(&[3, 4], -1.0, 1.0, dtype, rng).unwrap(),
        Array::uniform(&[4], 0.5, 1.5, dtype, rng).unwrap(),
        Array::uniform(&[4], -1.0, 1.0, dtype, rng).unwrap(),
    ])
    .forward(|x| F::layer_normalization(&x[0], &x[1], &x[2], 1e-5))
    .expected(|x| vec![layer_norm_expected(&x[0], &x[1], &x[2], 1e-5)]));

// Over every axis but the first: x (2, 3, 2) with gamma and beta (3, 2).
kusari::op_tests!(layer_normalization_3d => OpTest::new("layer_normalization", |rng, dtype| vec![
        Array::uniform(&[2, 3, 2], -1.0, 1.0, dtype, rng).unwrap(),
        Array::uniform(&[3, 2], 0.5, 1.5, dtype, rng).unwrap(),
        Array::uniform(&[3, 2], -1.0, 1.0, dtype, rng).unwrap(),
    ])
    .forward(|x| F::layer_normalization(&x[0], &x[1], &x[2], 0.1))
    .expected(|x| vec![layer_norm_expected(&x[0], &x[1], &x[2], 0.1)]));

// ----- indexing, joining, splitting, padding, embeddings -----

/// `v` with shape `shape` (C order).
fn shaped(shape: &[usize], v: Vec<f64>) -> ArrayD<f64> {
    ArrayD::from_shape_vec(IxDyn(shape), v).expect("the count matches the shape")
}

/// Python's `range(start, stop, step)` positions of a slice, written out by hand.
fn positions(start: i64, stop: i64, step: i64) -> Vec<usize> {
    let mut out = Vec::new();
    let mut i = start;
    while (step > 0 && i < stop) || (step < 0 && i > stop) {
        out.push(i as usize);
        i += step;
    }
    out
}

kusari::op_tests!(concat => OpTest::new("concat", |rng, dtype| vec![
    Array::uniform(&[2, 3], -1.0, 1.0, dtype, rng).unwrap(),
    Array::uniform(&[2, 1], -1.0, 1.0, dtype, rng).unwrap(),
    Array::uniform(&[2, 2], -1.0, 1.0, dtype, rng).unwrap(),
])
.forward(|x| F::concat(&[&x[0], &x[1], &x[2]], 1))
.expected(|x| {
    let mut v = Vec::new();
    for r in 0..2 {
        for a in x {
            v.extend(a.index_axis(Axis(0), r).iter());
        }
    }
    vec![shaped(&[2, 6], v)]
}));

kusari::op_tests!(concat_axis0 => OpTest::new("concat", two(&[1, 3], &[2, 3]))
    .forward(|x| F::concat(&[&x[0], &x[1]], 0))
    .expected(|x| vec![ndarray::concatenate(Axis(0), &[x[0].view(), x[1].view()]).expect("same columns")]));

kusari::op_tests!(stack => OpTest::new("stack", two(&[2, 3], &[2, 3]))
.forward(|x| F::stack(&[&x[0], &x[1]], 1))
.expected(|x| {
    // out[i, k, j] = x[k][i, j]
    let mut v = Vec::new();
    for i in 0..2 {
        for a in x {
            v.extend(a.index_axis(Axis(0), i).iter());
        }
    }
    vec![shaped(&[2, 2, 3], v)]
}));

kusari::op_tests!(split_axis => OpTest::new("split_axis", uniform(&[2, 5], -1.0, 1.0))
.forward(|x| F::split_axis(&x[0], &[1, 3], 1))
.expected(|x| {
    let cols = |a: usize, b: usize| {
        let v = (0..2).flat_map(|r| (a..b).map(move |c| (r, c))).map(|(r, c)| x[0][[r, c]]).collect();
        shaped(&[2, b - a], v)
    };
    vec![cols(0, 1), cols(1, 3), cols(3, 5)]
}));

// Only two of three pieces used: the unused one's gradient is zeros.
kusari::op_tests!(split_axis_unused_output => OpTest::new("split_axis", uniform(&[6, 2], -1.0, 1.0))
.forward(|x| {
    let parts = F::split_axis(&x[0], 3, 0)?;
    Ok(vec![parts[0].clone(), parts[2].clone()])
})
.expected(|x| {
    let rows = |a: usize| shaped(&[2, 2], (a..a + 2).flat_map(|r| [x[0][[r, 0]], x[0][[r, 1]]]).collect());
    vec![rows(0), rows(4)]
}));

kusari::op_tests!(pad => OpTest::new("pad", uniform(&[2, 3], -1.0, 1.0))
.forward(|x| F::pad(&x[0], &[(1, 0), (2, 1)], "constant", 0.5))
.expected(|x| {
    let mut out = ArrayD::from_elem(IxDyn(&[3, 6]), 0.5);
    for r in 0..2 {
        for c in 0..3 {
            out[[r + 1, c + 2]] = x[0][[r, c]];
        }
    }
    vec![out]
}));

// x[-1, ::-2, None, ...] of a (3, 4, 5) array: (2, 1, 5).
kusari::op_tests!(get_item_basic => OpTest::new("get_item", uniform(&[3, 4, 5], -1.0, 1.0))
.forward(|x| x[0].get_item(&[Ix::Int(-1), Ix::slice(None, None, -2), Ix::NewAxis, Ix::Ellipsis]))
.expected(|x| {
    let v = positions(3, -1, -2).into_iter().flat_map(|j| (0..5).map(move |k| (j, k))).map(|(j, k)| x[0][[2, j, k]]).collect();
    vec![shaped(&[2, 1, 5], v)]
}));

// x[1:, 4:0:-3, -2] of a (3, 6, 2) array: (2, 2).
kusari::op_tests!(get_item_steps => OpTest::new("get_item", uniform(&[3, 6, 2], -1.0, 1.0))
.forward(|x| F::get_item(&x[0], &[Ix::slice(Some(1), None, 1), Ix::slice(Some(4), Some(0), -3), Ix::Int(-2)]))
.expected(|x| {
    let v = (1..3).flat_map(|i| positions(4, 0, -3).into_iter().map(move |j| (i, j))).map(|(i, j)| x[0][[i, j, 0]]).collect();
    vec![shaped(&[2, 2], v)]
}));

const TAKE_IDX: [i64; 4] = [2, 0, 2, -1];

// x[idx, 1:3] with a repeated index: its gradients add.
kusari::op_tests!(get_item_array => OpTest::new("get_item", uniform(&[4, 3], -1.0, 1.0))
.forward(|x| {
    let idx = Array::from_vec(TAKE_IDX.to_vec(), &[4])?;
    F::get_item(&x[0], &[Ix::Array(&idx), Ix::range(1, 3)])
})
.expected(|x| {
    let v = TAKE_IDX.iter().map(|&i| (i + 4) as usize % 4).flat_map(|r| [x[0][[r, 1]], x[0][[r, 2]]]).collect();
    vec![shaped(&[4, 2], v)]
}));

// x[0, :, idx]: the integer and the array stand apart, so the array's axis goes first (NumPy).
kusari::op_tests!(get_item_array_apart => OpTest::new("get_item", uniform(&[2, 3, 4], -1.0, 1.0))
.forward(|x| {
    let idx = Array::from_vec(vec![1i32, 3, 1], &[3])?;
    F::get_item(&x[0], &[Ix::Int(0), Ix::all(), Ix::Array(&idx)])
})
.expected(|x| {
    let v = [1, 3, 1].into_iter().flat_map(|j| (0..3).map(move |k| x[0][[0, k, j]])).collect();
    vec![shaped(&[3, 3], v)]
}));

// x[:, idx] with a 2-D index: its shape replaces the axis.
kusari::op_tests!(get_item_array_2d => OpTest::new("get_item", uniform(&[2, 5], -1.0, 1.0))
.forward(|x| {
    let idx = Array::from_vec(vec![4i64, 0, 0, -2], &[2, 2])?;
    F::get_item(&x[0], &[Ix::all(), Ix::Array(&idx)])
})
.expected(|x| {
    let v = (0..2).flat_map(|r| [4, 0, 0, 3].map(|c| x[0][[r, c]])).collect();
    vec![shaped(&[2, 2, 2], v)]
}));

const EMBED_IDS: [i32; 6] = [3, 0, -1, 3, 4, 3];

kusari::op_tests!(embed_id => OpTest::new("embed_id", |rng, dtype| vec![
    Array::uniform(&[5, 3], -1.0, 1.0, dtype, rng).unwrap(),
    Array::from_vec(EMBED_IDS.to_vec(), &[2, 3]).expect("6 ids"),
])
.forward(|x| F::embed_id(x[1].array(), &x[0], Some(-1)))
.expected(|x| {
    let v = x[1].iter().flat_map(|&id| (0..3).map(move |u| (id, u))).map(|(id, u)| if id < 0.0 { 0.0 } else { x[0][[id as usize, u]] }).collect();
    vec![shaped(&[2, 3, 3], v)]
}));
