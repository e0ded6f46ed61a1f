//! `kusari::gradient_check`: finite differences against hand-derived gradients, the checkers
//! passing on built-in functions and catching deliberately wrong backwards, and
//! `assert_allclose`'s report. Expected values come from formulas written out here with plain
//! loops, never from the code under test.

use std::slice::from_ref;

use kusari::gradient_check::{
    CheckOptions, NumericalGradOptions, allclose, assert_allclose, check_backward,
    check_double_backward, numerical_grad, numerical_grad_with,
};
use kusari::prelude::*;
use kusari::random;
use kusari_tests::uniform;

// ----- helpers -----

fn arr(values: &[f64], shape: &[usize], dtype: DType) -> Array {
    Array::from_vec(values.to_vec(), shape)
        .and_then(|a| a.astype(dtype))
        .expect("values fill the shape")
}

/// Seeded values in `[-1, 1)` of `dtype`.
fn values(shape: &[usize], dtype: DType, seed: u64) -> Array {
    uniform(shape, seed).astype(dtype).expect("cast")
}

/// Seeded values in `±[0.2, 1)`: away from 0, for functions with a kink there.
fn away_from_zero(shape: &[usize], dtype: DType, seed: u64) -> Array {
    let mut rng = Rng::seed(seed);
    let n = shape.iter().product();
    let v: Vec<f64> = (0..n)
        .map(|_| {
            let m = 0.2 + 0.8 * rng.next_f64();
            if rng.next_f64() < 0.5 { -m } else { m }
        })
        .collect();
    arr(&v, shape, dtype)
}

fn f64s(a: &Array) -> Vec<f64> {
    a.to_f64_vec().expect("readable")
}

const FLOATS: [DType; 2] = [DType::F32, DType::F64];

/// The GradientCheck error's two numbers, after checking that its message shows both.
fn mismatch(result: Result<()>) -> (f64, f64) {
    let err = result.expect_err("the check must fail");
    let msg = err.to_string();
    let Error::GradientCheck {
        backward,
        numerical,
        ..
    } = err
    else {
        panic!("expected Error::GradientCheck, got {err:?}");
    };
    assert!(
        msg.contains(&backward.to_string()) && msg.contains(&numerical.to_string()),
        "{msg}"
    );
    assert!(
        msg.contains("inputs[0]") && msg.contains("direction"),
        "{msg}"
    );
    (backward, numerical)
}

// ----- numerical_grad -----

#[test]
fn numerical_grad_of_a_square_is_two_x_gy_in_the_input_dtype() -> Result<()> {
    for dtype in FLOATS {
        let x = values(&[2, 3], dtype, 1);
        let gy = values(&[2, 3], dtype, 2);
        let gx = numerical_grad(|v| &v[0] * &v[0], from_ref(&x), &[Some(gy.clone())], 1e-3)?;
        assert_eq!(gx.len(), 1);
        assert_eq!(gx[0].dtype(), dtype);
        assert_eq!(gx[0].shape(), &[2, 3]);
        let expected: Vec<f64> = f64s(&x)
            .iter()
            .zip(f64s(&gy))
            .map(|(x, gy)| 2.0 * x * gy)
            .collect();
        assert_allclose(&gx[0], &arr(&expected, &[2, 3], DType::F64), 1e-6, 1e-5)?;
    }
    Ok(())
}

#[test]
fn numerical_grad_of_a_product_gives_each_input_the_other() -> Result<()> {
    let x = values(&[4], DType::F64, 3);
    let y = values(&[4], DType::F32, 4);
    let gz = values(&[4], DType::F64, 5);
    // The inputs reach f in f64 whatever their dtypes, so mixing them is fine.
    let g = numerical_grad(
        |v| &v[0] * &v[1],
        &[x.clone(), y.clone()],
        &[Some(gz.clone())],
        1e-3,
    )?;
    let (xs, ys, gzs) = (f64s(&x), f64s(&y), f64s(&gz));
    let gx: Vec<f64> = (0..4).map(|i| ys[i] * gzs[i]).collect();
    let gy: Vec<f64> = (0..4).map(|i| xs[i] * gzs[i]).collect();
    assert_eq!((g[0].dtype(), g[1].dtype()), (DType::F64, DType::F32));
    assert_allclose(&g[0], &arr(&gx, &[4], DType::F64), 1e-9, 1e-9)?;
    assert_allclose(&g[1], &arr(&gy, &[4], DType::F64), 1e-6, 1e-6)?;
    Ok(())
}

#[test]
fn numerical_grad_of_exp_is_exp_times_gy() -> Result<()> {
    for dtype in FLOATS {
        let x = values(&[5], dtype, 6);
        let gy = values(&[5], dtype, 7);
        let gx = numerical_grad(|v| v[0].exp(), from_ref(&x), &[Some(gy.clone())], 1e-3)?;
        let expected: Vec<f64> = f64s(&x)
            .iter()
            .zip(f64s(&gy))
            .map(|(x, gy)| x.exp() * gy)
            .collect();
        // Centred differences err by eps²/6 * f''' = 1.7e-7 * e^x.
        assert_allclose(&gx[0], &arr(&expected, &[5], DType::F64), 1e-6, 1e-5)?;
    }
    Ok(())
}

#[test]
fn numerical_grad_of_a_sum_over_axes_broadcasts_gy_back() -> Result<()> {
    let x = values(&[2, 3, 4], DType::F32, 8);
    // Summing over axes 0 and 2 leaves shape [3]: every x[i, j, k] gets gy[j].
    let gy = arr(&[0.5, -1.0, 2.0], &[3], DType::F32);
    let gx = numerical_grad(|v| v[0].sum_axes(&[0, 2], false), &[x], &[Some(gy)], 1e-3)?;
    let mut expected = Vec::new();
    for _i in 0..2 {
        for g in [0.5, -1.0, 2.0] {
            expected.extend([g; 4]);
        }
    }
    assert_allclose(&gx[0], &arr(&expected, &[2, 3, 4], DType::F64), 1e-4, 1e-4)?;
    Ok(())
}

#[test]
fn numerical_grad_leaves_out_outputs_without_a_gradient() -> Result<()> {
    let x = values(&[3], DType::F64, 9);
    let xs = f64s(&x);
    let ones = arr(&[1.0; 3], &[3], DType::F64);
    let two = |v: &[Array]| -> Result<(Array, Array)> { Ok(((&v[0] * &v[0])?, v[0].exp()?)) };
    // Both outputs: 2x + e^x; the first only: 2x; the second only: e^x.
    type Case = (Option<Array>, Option<Array>, fn(f64) -> f64);
    let cases: [Case; 3] = [
        (Some(ones.clone()), Some(ones.clone()), |x| {
            2.0 * x + x.exp()
        }),
        (Some(ones.clone()), None, |x| 2.0 * x),
        (None, Some(ones.clone()), f64::exp),
    ];
    for (g0, g1, expected) in cases {
        let gx = numerical_grad(two, from_ref(&x), &[g0, g1], 1e-3)?;
        let want: Vec<f64> = xs.iter().map(|&x| expected(x)).collect();
        assert_allclose(&gx[0], &arr(&want, &[3], DType::F64), 1e-6, 1e-6)?;
    }
    Ok(())
}

#[test]
fn numerical_grad_rejects_bad_arguments() {
    let x = values(&[3], DType::F64, 10);
    let gy = Some(arr(&[1.0; 3], &[3], DType::F64));
    let square = |v: &[Array]| &v[0] * &v[0];
    let cases = [
        numerical_grad(square, from_ref(&x), &[], 1e-3),
        numerical_grad(square, from_ref(&x), &[gy.clone(), gy.clone()], 1e-3),
        numerical_grad(
            square,
            from_ref(&x),
            &[Some(arr(&[1.0; 4], &[4], DType::F64))],
            1e-3,
        ),
        numerical_grad(square, from_ref(&x), from_ref(&gy), 0.0),
        numerical_grad(
            |v| v[0].astype(DType::F64),
            &[Array::from_vec(vec![1i64, 2, 3], &[3]).unwrap()],
            &[gy],
            1e-3,
        ),
    ];
    let wanted = [
        "0 grad_outputs for 1 output",
        "2 grad_outputs",
        "shape [4]",
        "eps",
        "int64",
    ];
    for (result, wanted) in cases.into_iter().zip(wanted) {
        let err = result.expect_err(wanted);
        assert!(
            matches!(
                err,
                Error::CheckArguments {
                    op: "numerical_grad",
                    ..
                }
            ),
            "{err:?}"
        );
        assert!(err.to_string().contains(wanted), "{err}");
    }
}

#[test]
fn detection_flags_abs_and_relu_at_zero_and_names_the_element() {
    let detect = NumericalGradOptions::default().detect_nondifferentiable(true);
    let x = arr(&[0.5, -0.7, 0.0, 0.3], &[2, 2], DType::F64);
    let gy = Some(arr(&[1.0; 4], &[2, 2], DType::F64));
    let abs = |v: &[Array]| v[0].abs();
    let relu = |v: &[Array]| v[0].relu();
    for (name, err) in [
        (
            "abs",
            numerical_grad_with(abs, from_ref(&x), from_ref(&gy), 1e-3, &detect),
        ),
        (
            "relu",
            numerical_grad_with(relu, from_ref(&x), from_ref(&gy), 1e-3, &detect),
        ),
    ] {
        let err = err.expect_err(name);
        let Error::NonDifferentiable {
            op,
            ref point,
            output,
            ref output_index,
            ref samples,
            ..
        } = err
        else {
            panic!("{name}: expected NonDifferentiable, got {err:?}");
        };
        assert_eq!(op, "numerical_grad");
        assert_eq!(point, "inputs[0][1, 0] = 0", "{name}");
        assert_eq!(
            (output, output_index.as_slice()),
            (0, &[1usize, 0][..]),
            "{name}"
        );
        assert_eq!(samples.len(), 5);
        assert!(err.to_string().contains("not differentiable"), "{err}");
    }
    // Without detection the same call gives the average of the one-sided slopes.
    let gx = numerical_grad(abs, &[x], &[gy], 1e-3).expect("no detection");
    assert_eq!(f64s(&gx[0])[2], 0.0);
}

#[test]
fn detection_does_not_flag_smooth_functions_even_where_y_is_zero() -> Result<()> {
    let detect = NumericalGradOptions::default().detect_nondifferentiable(true);
    // 0 is included: x², x³ and tanh vanish there, which a tolerance relative to |y| would flag.
    let points = [0.0, 0.5, -1.25, 2.0];
    for dtype in FLOATS {
        let x = arr(&points, &[4], dtype);
        let gy = Some(arr(&[1.0; 4], &[4], DType::F64));
        type Case = (fn(&[Array]) -> Result<Array>, fn(f64) -> f64);
        let cases: [Case; 4] = [
            (|v| &v[0] * &v[0], |x| 2.0 * x),
            (|v| &(&v[0] * &v[0])? * &v[0], |x| 3.0 * x * x),
            (|v| v[0].tanh(), |x| 1.0 - x.tanh().powi(2)),
            (|v| v[0].exp(), f64::exp),
        ];
        for (f, df) in cases {
            let gx = numerical_grad_with(f, from_ref(&x), from_ref(&gy), 1e-3, &detect)?;
            let want: Vec<f64> = points.iter().map(|&x| df(x)).collect();
            // The five-point stencil errs by eps⁴/30 * f⁽⁵⁾: far below this.
            assert_allclose(&gx[0], &arr(&want, &[4], DType::F64), 1e-6, 1e-6)?;
        }
    }
    Ok(())
}

#[test]
fn detection_flags_a_jump_to_infinity() {
    let detect = NumericalGradOptions::default().detect_nondifferentiable(true);
    // log is finite at 1e-3 + eps and 2eps but not at 1e-3 - 2eps < 0.
    let x = arr(&[1e-3], &[1], DType::F64);
    let err = numerical_grad_with(
        |v| v[0].log(),
        &[x],
        &[Some(arr(&[1.0], &[1], DType::F64))],
        1e-3,
        &detect,
    )
    .expect_err("log near 0");
    assert!(err.to_string().contains("finite at some"), "{err}");
}

// ----- check_backward on built-in functions -----

type Op = fn(&[Variable]) -> Result<Variable>;

/// Checks `f` on `inputs` in f32 and f64 with seeded output gradients.
fn passes(name: &str, f: Op, inputs: &dyn Fn(DType) -> Vec<Array>) -> Result<()> {
    for dtype in FLOATS {
        let xs = inputs(dtype);
        let vars: Vec<Variable> = xs.iter().cloned().map(Variable::new).collect();
        let y = f(&vars)?;
        let gy = values(y.shape(), y.dtype(), 99);
        for seed in 0..3 {
            let options = CheckOptions::default().seed(seed);
            check_backward(f, &xs, Some(from_ref(&gy)), &options)
                .unwrap_or_else(|e| panic!("{name} in {dtype}: {e}"));
        }
    }
    Ok(())
}

#[test]
fn check_backward_passes_on_elementwise_functions() -> Result<()> {
    let one = |d| vec![values(&[3, 4], d, 20)];
    let two = |d| vec![values(&[3, 4], d, 21), values(&[3, 4], d, 22)];
    passes("mul", |v| F::mul(&v[0], &v[1]), &two)?;
    passes("exp", |v| F::exp(&v[0]), &one)?;
    passes("tanh", |v| F::tanh(&v[0]), &one)?;
    passes("sigmoid", |v| F::sigmoid(&v[0]), &one)?;
    passes("relu away from 0", |v| F::relu(&v[0]), &|d| {
        vec![away_from_zero(&[3, 4], d, 23)]
    })?;
    // maximum away from ties: the operands differ by at least 0.2 everywhere.
    passes("maximum", |v| F::maximum(&v[0], &v[1]), &|d| {
        let a = values(&[3, 4], d, 24);
        let b = (&a + &away_from_zero(&[3, 4], d, 25)).expect("same shape");
        vec![a, b]
    })?;
    Ok(())
}

#[test]
fn check_backward_passes_on_products_reductions_and_softmax() -> Result<()> {
    passes("matmul", |v| F::matmul(&v[0], &v[1]), &|d| {
        vec![values(&[2, 3], d, 30), values(&[3, 4], d, 31)]
    })?;
    passes("linear", |v| F::linear(&v[0], &v[1], Some(&v[2])), &|d| {
        vec![
            values(&[2, 3], d, 32),
            values(&[4, 3], d, 33),
            values(&[4], d, 34),
        ]
    })?;
    passes("sum_axes", |v| F::sum_axes(&v[0], &[0, 2], false), &|d| {
        vec![values(&[2, 3, 4], d, 35)]
    })?;
    passes(
        "sum_axes keepdims",
        |v| F::sum_axes(&v[0], &[1], true),
        &|d| vec![values(&[2, 3], d, 36)],
    )?;
    passes(
        "broadcast_to",
        |v| F::broadcast_to(&v[0], &[2, 3, 4]),
        &|d| vec![values(&[3, 1], d, 37)],
    )?;
    passes("softmax", |v| F::softmax(&v[0], 1), &|d| {
        vec![values(&[3, 5], d, 38)]
    })?;
    passes("log_softmax", |v| F::log_softmax(&v[0], 0), &|d| {
        vec![values(&[3, 5], d, 39)]
    })?;
    Ok(())
}

#[test]
fn scalar_outputs_need_no_grad_outputs() -> Result<()> {
    for dtype in FLOATS {
        let x = values(&[4, 3], dtype, 40);
        let labels = Array::from_vec(vec![0i64, 2, 1, -1], &[4])?;
        // The int64 labels are a no-grad input by default and are never perturbed.
        let loss = |v: &[Variable]| F::softmax_cross_entropy(&v[0], v[1].array());
        check_backward(loss, &[x.clone(), labels], None, &CheckOptions::default())?;
        let sum_of_squares = |v: &[Variable]| F::sum(&(&v[0] * &v[0])?);
        check_backward(sum_of_squares, &[x], None, &CheckOptions::default())?;
    }
    Ok(())
}

#[test]
fn several_outputs_are_weighted_by_their_own_gradients() -> Result<()> {
    let x = values(&[2, 3], DType::F32, 41);
    let gys = [
        values(&[2, 3], DType::F32, 42),
        values(&[2, 3], DType::F32, 43),
    ];
    let f =
        |v: &[Variable]| -> Result<(Variable, Variable)> { Ok((F::exp(&v[0])?, F::tanh(&v[0])?)) };
    check_backward(f, &[x], Some(&gys), &CheckOptions::default())
}

#[test]
fn params_are_perturbed_and_checked() -> Result<()> {
    for dtype in FLOATS {
        let w = Variable::new(values(&[4, 3], dtype, 50)).with_name("W");
        let b = Variable::new(values(&[4], dtype, 51)).with_name("b");
        let x = values(&[2, 3], dtype, 52);
        let gy = values(&[2, 4], dtype, 53);
        let options = CheckOptions::default().params([w.clone(), b.clone()]);
        // f gets the input, then the parameters.
        let layer = |v: &[Variable]| F::linear(&v[0], &v[1], Some(&v[2]));
        check_backward(layer, from_ref(&x), Some(from_ref(&gy)), &options)?;
        // Checking leaves the parameters' own gradients alone.
        assert!(w.grad().is_none() && b.grad().is_none());

        // A parameter whose gradient is wrong is caught: here W's gradient has its sign flipped.
        let wrong_w = |v: &[Variable]| F::linear(&v[0], &flip(&v[1])?, Some(&v[2]));
        mismatch(check_backward(wrong_w, &[x], Some(&[gy]), &options));
    }
    Ok(())
}

#[test]
fn float32_numerical_side_works_with_looser_tolerances() -> Result<()> {
    let x = values(&[3, 4], DType::F32, 54);
    let gy = values(&[3, 4], DType::F32, 55);
    let own = CheckOptions::default()
        .dtype(None)
        .eps(1e-2)
        .atol(1e-3)
        .rtol(1e-2);
    check_backward(|v| F::tanh(&v[0]), &[x], Some(&[gy]), &own)
}

#[test]
fn check_backward_records_the_graph_inside_no_backprop_mode() -> Result<()> {
    let _inference = no_backprop_mode();
    let x = values(&[3], DType::F64, 56);
    check_backward(
        |v| F::sum(&F::exp(&v[0])?),
        &[x],
        None,
        &CheckOptions::default(),
    )
}

#[test]
fn check_backward_detects_relu_at_zero_only_when_asked() -> Result<()> {
    let x = arr(&[0.5, 0.0, -0.5], &[3], DType::F64);
    let gy = arr(&[1.0, 1.0, 1.0], &[3], DType::F64);
    let relu = |v: &[Variable]| F::relu(&v[0]);
    let detect = CheckOptions::default().detect_nondifferentiable(true);
    let err = check_backward(relu, &[x], Some(from_ref(&gy)), &detect).expect_err("kink");
    assert!(
        matches!(
            err,
            Error::NonDifferentiable {
                op: "check_backward",
                output: 0,
                ..
            }
        ),
        "{err:?}"
    );
    let away = away_from_zero(&[3], DType::F64, 57);
    check_backward(relu, &[away], Some(&[gy]), &detect)
}

// ----- deliberately wrong backwards -----

/// x² with the gradient's sign flipped.
struct SquareSignFlip;

#[function_node]
impl SquareSignFlip {
    #[retain(x)]
    fn forward(&self, x: &Array) -> Result<Array> {
        x * x
    }

    fn backward(&self, x: &Variable, gy: &Variable) -> Result<Variable> {
        &(x * gy)? * -2.0
    }
}

/// The identity with its gradient negated: flips a variable's gradient, not its value.
struct Flip;

#[function_node]
impl Flip {
    fn forward(&self, x: &Array) -> Result<Array> {
        Ok(x.clone())
    }

    fn backward(&self, gy: &Variable) -> Result<Variable> {
        F::neg(gy)
    }
}

/// `a @ b` whose gradient for `a` is transposed: right in shape for square operands only.
struct MatmulTransposedGrad;

#[function_node]
impl MatmulTransposedGrad {
    #[retain(a, b)]
    fn forward(&self, a: &Array, b: &Array) -> Result<Array> {
        a.matmul(b)
    }

    fn backward(&self, a: &Variable, b: &Variable, gy: &Variable) -> Result<(Variable, Variable)> {
        let right = F::matmul(gy, &F::transpose(b, None)?)?; // gy bᵀ
        let ga = F::transpose(&right, None)?; // wrong: (gy bᵀ)ᵀ
        let gb = F::matmul(&F::transpose(a, None)?, gy)?;
        Ok((ga, gb))
    }
}

/// `x² w` whose gradient for `x` misses a term of the product rule: `x w gy` instead of
/// `2 x w gy`.
struct SquareTimesMissingTerm;

#[function_node]
impl SquareTimesMissingTerm {
    #[retain(x, w)]
    fn forward(&self, x: &Array, w: &Array) -> Result<Array> {
        &(x * x)? * w
    }

    fn backward(&self, x: &Variable, w: &Variable, gy: &Variable) -> Result<(Variable, Variable)> {
        let gx = &(x * w)? * gy;
        let gw = &(x * x)? * gy;
        Ok((gx?, gw?))
    }
}

/// 2x whose gradient is 1% too large.
struct DoubleOnePercentOff;

#[function_node]
impl DoubleOnePercentOff {
    fn forward(&self, x: &Array) -> Result<Array> {
        x * 2.0
    }

    fn backward(&self, gy: &Variable) -> Result<Variable> {
        gy * 2.02
    }
}

#[test]
fn a_gradient_one_percent_off_is_caught() {
    let x = values(&[5], DType::F64, 68);
    let gy = values(&[5], DType::F64, 69);
    let f = |v: &[Variable]| double_one_percent_off(&v[0]);
    let (backward, numerical) = mismatch(check_backward(
        f,
        &[x],
        Some(&[gy]),
        &CheckOptions::default(),
    ));
    assert!(
        (backward / numerical - 1.01).abs() < 1e-6,
        "{backward} {numerical}"
    );
}

#[test]
fn a_sign_flip_is_caught_with_both_numbers() -> Result<()> {
    for dtype in FLOATS {
        let x = values(&[2, 3], dtype, 60);
        let gy = values(&[2, 3], dtype, 61);
        let (backward, numerical) = mismatch(check_backward(
            |v| square_sign_flip(&v[0]),
            from_ref(&x),
            Some(from_ref(&gy)),
            &CheckOptions::default(),
        ));
        // Backward gives exactly minus the true projection.
        assert!(
            (backward + numerical).abs() < 1e-4 * numerical.abs().max(1.0),
            "{backward} {numerical}"
        );
        assert!(numerical.abs() > 1e-3);
        // The same check passes on the right backward.
        check_backward(
            |v| F::mul(&v[0], &v[0]),
            &[x],
            Some(&[gy]),
            &CheckOptions::default(),
        )?;
    }
    Ok(())
}

#[test]
fn a_transposed_gradient_is_caught() -> Result<()> {
    for dtype in FLOATS {
        let (a, b) = (values(&[3, 3], dtype, 62), values(&[3, 3], dtype, 63));
        let gy = values(&[3, 3], dtype, 64);
        let inputs = [a, b];
        let (backward, numerical) = mismatch(check_backward(
            |v| matmul_transposed_grad(&v[0], &v[1]),
            &inputs,
            Some(from_ref(&gy)),
            &CheckOptions::default(),
        ));
        assert!(
            (backward - numerical).abs() > 1e-3,
            "{backward} {numerical}"
        );
        check_backward(
            |v| F::matmul(&v[0], &v[1]),
            &inputs,
            Some(&[gy]),
            &CheckOptions::default(),
        )?;
    }
    Ok(())
}

#[test]
fn a_missing_term_is_caught() -> Result<()> {
    for dtype in FLOATS {
        let x = away_from_zero(&[4], dtype, 65);
        let w = away_from_zero(&[4], dtype, 66);
        let gy = away_from_zero(&[4], dtype, 67);
        // Only x is differentiated: backward gives half the true projection, x w gy · d.
        let options = CheckOptions::default().no_grads(&[false, true]);
        let inputs = [x.clone(), w.clone()];
        let missing = |v: &[Variable]| {
            square_times_missing_term(&v[0], &Variable::constant(v[1].array().clone()))
        };
        let (backward, numerical) = mismatch(check_backward(
            missing,
            &inputs,
            Some(from_ref(&gy)),
            &options,
        ));
        assert!(
            (2.0 * backward - numerical).abs() < 1e-4 * numerical.abs().max(1.0),
            "{backward} {numerical}"
        );

        // With both inputs the check fails too; the right op passes.
        let both = |v: &[Variable]| square_times_missing_term(&v[0], &v[1]);
        mismatch(check_backward(
            both,
            &inputs,
            Some(from_ref(&gy)),
            &CheckOptions::default(),
        ));
        let right = |v: &[Variable]| F::mul(&F::mul(&v[0], &v[0])?, &v[1]);
        check_backward(right, &inputs, Some(&[gy]), &CheckOptions::default())?;
    }
    Ok(())
}

// ----- inputs that get no gradient, and bad options -----

/// `x * n` for an integer `n`, whose backward (wrongly) returns a gradient for `n` too.
struct ScaleByInt;

#[function_node]
impl ScaleByInt {
    #[retain(n)]
    fn forward(&self, x: &Array, n: &Array) -> Result<Array> {
        x * &n.astype(x.dtype())?
    }

    fn backward(&self, n: &Variable, gy: &Variable) -> Result<(Variable, Variable)> {
        let gx = (gy * &Variable::constant(n.array().astype(gy.dtype())?))?;
        Ok((gx, Variable::constant(n.array().zeros_like()?)))
    }
}

#[test]
fn an_integer_input_that_gets_a_gradient_is_an_error() -> Result<()> {
    let x = values(&[3], DType::F64, 70);
    let n = Array::from_vec(vec![1i64, -2, 3], &[3])?;
    let gy = values(&[3], DType::F64, 71);
    let err = check_backward(
        |v| scale_by_int(&v[0], &v[1]),
        &[x.clone(), n],
        Some(from_ref(&gy)),
        &CheckOptions::default(),
    )
    .expect_err("n got a gradient");
    assert_eq!(
        err,
        Error::UnexpectedGradient {
            op: "check_backward",
            input: 1,
            dtype: DType::I64,
            shape: vec![3],
        }
    );
    assert!(err.to_string().contains("inputs[1] (int64[3])"), "{err}");

    // A float input marked in no_grads that gets a gradient is an error too.
    let y = values(&[3], DType::F64, 72);
    let err = check_backward(
        |v| F::mul(&v[0], &v[1]),
        &[x, y],
        Some(&[gy]),
        &CheckOptions::default().no_grads(&[false, true]),
    )
    .expect_err("y got a gradient");
    assert!(
        matches!(err, Error::UnexpectedGradient { input: 1, .. }),
        "{err:?}"
    );
    Ok(())
}

#[test]
fn bad_options_and_arguments_are_errors() -> Result<()> {
    let x = values(&[3], DType::F64, 73);
    let n = Array::from_vec(vec![1i64, 2, 3], &[3])?;
    let gy = values(&[3], DType::F64, 74);
    let exp = |v: &[Variable]| F::exp(&v[0]);
    let d = CheckOptions::default;
    let cases: Vec<(Result<()>, &str)> = vec![
        (
            check_backward(
                exp,
                from_ref(&x),
                Some(from_ref(&gy)),
                &d().no_grads(&[false, false]),
            ),
            "no_grads has 2 flag(s) for 1 input(s)",
        ),
        (
            check_backward(
                exp,
                &[x.clone(), n.clone()],
                Some(from_ref(&gy)),
                &d().no_grads(&[false, false]),
            ),
            "inputs[1] is int64[3] and cannot be differentiated",
        ),
        (
            check_backward(exp, from_ref(&x), None, &d()),
            "grad_outputs omitted, but output 0 is float64[3]",
        ),
        (
            check_backward(exp, from_ref(&x), Some(&[gy.astype(DType::F32)?]), &d()),
            "grad_outputs[0] is float32[3] on native:0, but output 0 is float64[3]",
        ),
        (
            check_backward(exp, from_ref(&x), Some(&[gy.clone(), gy.clone()]), &d()),
            "2 grad_outputs for 1 output(s)",
        ),
        (
            check_backward(exp, from_ref(&x), Some(from_ref(&gy)), &d().eps(-1.0)),
            "eps must be positive",
        ),
        (
            check_backward(exp, from_ref(&x), Some(from_ref(&gy)), &d().atol(f64::NAN)),
            "atol",
        ),
        (
            check_backward(
                exp,
                from_ref(&x),
                Some(from_ref(&gy)),
                &d().dtype(DType::I32),
            ),
            "floating-point dtype, not int32",
        ),
        (
            check_backward(
                exp,
                from_ref(&x),
                Some(from_ref(&gy)),
                &d().params([Variable::new(n.clone())]),
            ),
            "params[0] is int64[3]",
        ),
    ];
    for (result, wanted) in cases {
        let err = result.expect_err(wanted);
        assert!(
            matches!(
                err,
                Error::CheckArguments {
                    op: "check_backward",
                    ..
                }
            ),
            "{err:?}"
        );
        assert!(err.to_string().contains(wanted), "{err}\nwanted: {wanted}");
    }
    Ok(())
}

#[test]
fn a_function_failing_on_the_numerical_side_is_reported_with_its_error() {
    // The constant is float32: fine for the float32 input, a dtype mismatch once the numerical
    // side casts the input to float64.
    let x = values(&[3], DType::F32, 75);
    let c = Variable::constant(Array::ones(&[3], DType::F32).unwrap());
    let gy = values(&[3], DType::F32, 76);
    let err = check_backward(
        |v| F::mul(&v[0], &c),
        &[x],
        Some(&[gy]),
        &CheckOptions::default(),
    )
    .expect_err("dtype mismatch on the numerical side");
    let Error::CheckFunction { op, stage, source } = &err else {
        panic!("expected CheckFunction, got {err:?}");
    };
    assert_eq!(*op, "check_backward");
    assert!(stage.contains("float64"), "{stage}");
    assert!(
        matches!(source.root_cause(), Error::DTypeMismatch { .. }),
        "{source:?}"
    );
}

#[test]
fn a_nondeterministic_function_is_an_error() {
    random::seed(0);
    let x = values(&[50], DType::F64, 77);
    let gy = values(&[50], DType::F64, 78);
    // Dropout draws a new mask on every call, so the outputs do not follow the inputs.
    let err = check_backward(
        |v| F::dropout(&v[0], 0.5),
        &[x],
        Some(&[gy]),
        &CheckOptions::default(),
    )
    .expect_err("a new mask per call");
    assert!(matches!(err, Error::GradientCheck { .. }), "{err:?}");
}

// ----- check_double_backward -----

/// x², whose backward multiplies gy by the constant 2x: right to first order, but its own
/// gradient misses the dependence on x.
struct SquareConstantGrad;

#[function_node]
impl SquareConstantGrad {
    #[retain(x)]
    fn forward(&self, x: &Array) -> Result<Array> {
        x * x
    }

    fn backward(&self, x: &Variable, gy: &Variable) -> Result<Variable> {
        &Variable::constant((x.array() * 2.0)?) * gy
    }
}

#[test]
fn double_backward_of_a_cube_matches_six_x() -> Result<()> {
    for dtype in FLOATS {
        let x = values(&[2, 3], dtype, 80);
        let gy = values(&[2, 3], dtype, 81);
        let ggx = values(&[2, 3], dtype, 82);
        let cube = |v: &[Variable]| &(&v[0] * &v[0])? * &v[0];
        let options = CheckOptions::default().atol(1e-4).rtol(1e-3);
        check_double_backward(
            cube,
            from_ref(&x),
            Some(from_ref(&gy)),
            from_ref(&ggx),
            &options,
        )?;

        // By hand: gx = 3x²·gy, so d<gx, ggx>/dx = 6x·gy·ggx and d<gx, ggx>/dgy = 3x²·ggx.
        let xv = Variable::new(x.clone());
        let gyv = Variable::new(gy.clone());
        let y = cube(std::slice::from_ref(&xv))?;
        let record = GradOptions {
            enable_double_backprop: true,
            ..Default::default()
        };
        let gx = grad(&[&y], &[&xv], &[&gyv], record)?.remove(0).expect("gx");
        let second = grad(
            &[&gx],
            &[&xv, &gyv],
            &[Variable::constant(ggx.clone())],
            GradOptions::default(),
        )?;
        let (xs, gys, ggxs) = (f64s(&x), f64s(&gy), f64s(&ggx));
        let want_x: Vec<f64> = (0..6).map(|i| 6.0 * xs[i] * gys[i] * ggxs[i]).collect();
        let want_gy: Vec<f64> = (0..6).map(|i| 3.0 * xs[i] * xs[i] * ggxs[i]).collect();
        assert_allclose(
            second[0].as_ref().expect("x").array(),
            &arr(&want_x, &[2, 3], DType::F64),
            1e-5,
            1e-5,
        )?;
        assert_allclose(
            second[1].as_ref().expect("gy").array(),
            &arr(&want_gy, &[2, 3], DType::F64),
            1e-5,
            1e-5,
        )?;
    }
    Ok(())
}

#[test]
fn double_backward_passes_on_tanh_sigmoid_and_mul() -> Result<()> {
    let options = CheckOptions::default().atol(1e-4).rtol(1e-3);
    for dtype in FLOATS {
        let x = values(&[3, 2], dtype, 83);
        let gy = values(&[3, 2], dtype, 84);
        let ggx = values(&[3, 2], dtype, 85);
        for (name, f) in [
            ("tanh", F::tanh as fn(&Variable) -> Result<Variable>),
            ("sigmoid", F::sigmoid),
        ] {
            check_double_backward(
                |v| f(&v[0]),
                from_ref(&x),
                Some(from_ref(&gy)),
                from_ref(&ggx),
                &options,
            )
            .unwrap_or_else(|e| panic!("{name} in {dtype}: {e}"));
        }
        let y = values(&[3, 2], dtype, 86);
        let ggy = values(&[3, 2], dtype, 87);
        check_double_backward(
            |v| F::mul(&v[0], &v[1]),
            &[x.clone(), y],
            Some(from_ref(&gy)),
            &[ggx.clone(), ggy],
            &options,
        )?;
        // A scalar output needs no grad_outputs (fixed ones, not perturbed).
        check_double_backward(
            |v| F::sum(&F::tanh(&v[0])?),
            from_ref(&x),
            None,
            from_ref(&ggx),
            &options,
        )?;
    }
    Ok(())
}

#[test]
fn double_backward_catches_a_constant_in_the_backward() -> Result<()> {
    for dtype in FLOATS {
        let x = values(&[2, 3], dtype, 88);
        let gy = values(&[2, 3], dtype, 89);
        let ggx = values(&[2, 3], dtype, 90);
        let square = |v: &[Variable]| square_constant_grad(&v[0]);
        // First order is right...
        check_backward(
            square,
            from_ref(&x),
            Some(from_ref(&gy)),
            &CheckOptions::default(),
        )?;
        // ...second order is not: d<gx, ggx>/dx should be 2·gy·ggx, backward gives 0.
        let options = CheckOptions::default().atol(1e-4).rtol(1e-3);
        let err = check_double_backward(square, &[x], Some(&[gy]), &[ggx], &options)
            .expect_err("constant 2x");
        let msg = err.to_string();
        let Error::GradientCheck {
            op,
            backward,
            numerical,
            ..
        } = err
        else {
            panic!("expected GradientCheck, got {err:?}");
        };
        assert_eq!(op, "check_double_backward");
        assert!(
            msg.contains(&backward.to_string()) && msg.contains(&numerical.to_string()),
            "{msg}"
        );
        assert!((backward - numerical).abs() > 1e-3, "{msg}");
    }
    Ok(())
}

#[test]
fn double_backward_needs_one_grad_grad_per_differentiated_input() -> Result<()> {
    let x = values(&[3], DType::F64, 91);
    let gy = values(&[3], DType::F64, 92);
    let err = check_double_backward(
        |v| F::tanh(&v[0]),
        from_ref(&x),
        Some(from_ref(&gy)),
        &[],
        &CheckOptions::default(),
    )
    .expect_err("no grad_grad_inputs");
    assert!(
        err.to_string()
            .contains("0 grad_grad_inputs, but there are 1"),
        "{err}"
    );
    let n = Array::from_vec(vec![1i64, 2, 3], &[3])?;
    let err = check_double_backward(
        |v| scale_by_int(&v[0], &v[1]),
        &[x, n],
        Some(&[gy]),
        &[values(&[3], DType::F64, 93)],
        &CheckOptions::default(),
    )
    .expect_err("n got a gradient");
    assert!(
        matches!(
            err,
            Error::UnexpectedGradient {
                op: "check_double_backward",
                input: 1,
                ..
            }
        ),
        "{err:?}"
    );
    Ok(())
}

// ----- assert_allclose -----

#[test]
fn assert_allclose_passes_within_tolerance() -> Result<()> {
    let a = arr(&[1.0, 2.0, 100.0], &[3], DType::F64);
    // |diff| <= atol + rtol·|expected|: 1e-6 + 1e-4·100 = 0.010001 allows 0.01 at 100.
    let b = arr(&[1.0 + 1e-6, 2.0 - 1e-6, 100.01], &[3], DType::F64);
    assert_allclose(&b, &a, 1e-6, 1e-4)?;
    assert!(allclose(&b, &a, 1e-6, 1e-4)?);
    assert!(!allclose(&b, &a, 1e-6, 0.0)?);
    let nan = arr(&[f64::NAN, f64::INFINITY], &[2], DType::F64);
    assert_allclose(&nan, &nan, 0.0, 0.0)?;
    Ok(())
}

#[test]
fn assert_allclose_lists_the_worst_elements_first() {
    let expected = arr(&[0.0; 8], &[2, 4], DType::F64);
    let actual = arr(
        &[0.0, 0.5, 0.0, 0.0, 0.0, 0.0, -3.0, 0.25],
        &[2, 4],
        DType::F64,
    );
    let err = assert_allclose(&actual, &expected, 1e-3, 1e-3).expect_err("three differ");
    let msg = err.to_string();
    assert!(
        matches!(
            err,
            Error::NotClose {
                failed: 3,
                total: 8,
                ..
            }
        ),
        "{err:?}"
    );
    assert!(msg.contains("3 of 8 element(s) differ"), "{msg}");
    let lines: Vec<&str> = msg.lines().skip(1).collect();
    assert_eq!(lines.len(), 3, "{msg}");
    assert!(
        lines[0].contains("[1, 2]: actual -3, expected 0, |diff| 3e0 > tolerance 1e-3"),
        "{msg}"
    );
    assert!(lines[1].contains("[0, 1]: actual 0.5"), "{msg}");
    assert!(lines[2].contains("[1, 3]: actual 0.25"), "{msg}");
}

#[test]
fn assert_allclose_shows_at_most_five_elements() {
    let expected = arr(&[0.0; 9], &[9], DType::F32);
    let actual = arr(&[1.0; 9], &[9], DType::F32);
    let msg = assert_allclose(&actual, &expected, 0.0, 0.0)
        .expect_err("all differ")
        .to_string();
    assert!(msg.contains("9 of 9"), "{msg}");
    assert_eq!(msg.lines().count(), 6, "{msg}");
}

#[test]
fn assert_allclose_names_both_shapes() {
    let a = arr(&[1.0; 6], &[2, 3], DType::F32);
    let b = arr(&[1.0; 6], &[3, 2], DType::F64);
    let err = assert_allclose(&a, &b, 1.0, 1.0).expect_err("shapes differ");
    assert!(
        matches!(
            err,
            Error::Shape {
                op: "assert_allclose",
                ..
            }
        ),
        "{err:?}"
    );
    let msg = err.to_string();
    assert!(
        msg.contains("float32[2, 3]") && msg.contains("float64[3, 2]"),
        "{msg}"
    );
    assert!(allclose(&a, &b, 1.0, 1.0).is_err());
}

#[test]
fn assert_allclose_compares_mixed_dtypes_in_f64() -> Result<()> {
    // 0.1f32 is 0.100000001490116..., 1.49e-9 away from 0.1f64.
    let a = arr(&[0.1, 0.25], &[2], DType::F32);
    let b = arr(&[0.1, 0.25], &[2], DType::F64);
    assert_allclose(&a, &b, 1e-8, 0.0)?;
    let err = assert_allclose(&a, &b, 1e-10, 0.0).expect_err("f32 rounding is visible in f64");
    assert!(matches!(err, Error::NotClose { failed: 1, .. }), "{err:?}");
    assert!(err.to_string().contains("float32 vs float64"), "{err}");
    assert!(
        err.to_string()
            .contains("[0]: actual 0.10000000149011612, expected 0.1"),
        "{err}"
    );
    Ok(())
}

// ----- devices -----

/// `cuda:0`, or `None` after printing why the test skips (a failure under
/// `KUSARI_REQUIRE_GPU`).
fn gpu(test: &str) -> Option<Device> {
    kusari::testing::cuda_or_skip(test).unwrap_or_else(|e| panic!("{e}"))
}

#[test]
fn the_checks_run_on_the_gpu_and_compare_across_devices() -> Result<()> {
    let Some(device) = gpu("the_checks_run_on_the_gpu_and_compare_across_devices") else {
        return Ok(());
    };
    let on = |a: Array| a.to_device(device);
    for dtype in FLOATS {
        let x = values(&[3, 4], dtype, 100);
        let gy = values(&[3, 4], dtype, 101);
        let (xd, gyd) = (on(x.clone())?, on(gy.clone())?);

        let gx = numerical_grad(|v| &v[0] * &v[0], from_ref(&xd), &[Some(gyd.clone())], 1e-3)?;
        assert_eq!((gx[0].device(), gx[0].dtype()), (device, dtype));
        let expected: Vec<f64> = f64s(&x)
            .iter()
            .zip(f64s(&gy))
            .map(|(x, g)| 2.0 * x * g)
            .collect();
        // A CUDA array against a host one.
        assert_allclose(&gx[0], &arr(&expected, &[3, 4], DType::F64), 1e-5, 1e-4)?;

        let options = CheckOptions::default();
        check_backward(
            |v| F::tanh(&v[0]),
            from_ref(&xd),
            Some(from_ref(&gyd)),
            &options,
        )?;
        let w = on(values(&[4, 2], dtype, 102))?;
        let gz = on(values(&[3, 2], dtype, 103))?;
        check_backward(
            |v| F::matmul(&v[0], &v[1]),
            &[xd.clone(), w],
            Some(&[gz]),
            &options,
        )?;
        let second = CheckOptions::default().atol(1e-4).rtol(1e-3);
        let ggx = on(values(&[3, 4], dtype, 104))?;
        check_double_backward(
            |v| F::tanh(&v[0]),
            from_ref(&xd),
            Some(from_ref(&gyd)),
            &[ggx],
            &second,
        )?;
        mismatch(check_backward(
            |v| square_sign_flip(&v[0]),
            &[xd],
            Some(&[gyd]),
            &options,
        ));
    }
    Ok(())
}
