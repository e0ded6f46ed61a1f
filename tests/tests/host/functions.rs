//! Integration tests of the built-in differentiable functions (`kusari::functions`).
//!
//! For every function: forward values against an independent computation (hand values, Rust's
//! own `f64` math or a plain loop written here), first-order gradients against central finite
//! differences ([`numerical_grad`]), and, for a representative set, second-order gradients
//! against finite differences of the first-order gradient. Inputs are small f64 arrays kept away
//! from non-differentiable points (zero for relu, ties for maximum and max).

use kusari::functions as F;
use kusari::{
    Array, BackwardContext, DType, ForwardContext, FunctionNode, GradOptions, Result, Variable,
    config, grad,
};
use kusari_tests::{arr, assert_close, broadcast_pos, numerical_grad, uniform, unravel};

/// Finite-difference step.
const EPS: f64 = 1e-6;
/// Tolerance (absolute and relative) for first-order gradients.
const TOL: f64 = 1e-6;
/// Tolerance for second-order gradients.
const TOL2: f64 = 1e-5;

/// A function of a list of variables, as the checks take it.
type Fun<'a> = &'a dyn Fn(&[Variable]) -> Result<Variable>;

// ----- helpers -----

fn vals(a: &Array) -> Vec<f64> {
    a.to_f64_vec().expect("host array")
}

/// Seeded values in `[lo, hi)`: [`uniform`]'s `[-1, 1)` rescaled with plain arithmetic.
fn rand_in(shape: &[usize], seed: u64, lo: f64, hi: f64) -> Array {
    let v: Vec<f64> = vals(&uniform(shape, seed))
        .iter()
        .map(|u| lo + (u + 1.0) / 2.0 * (hi - lo))
        .collect();
    arr(&v, shape)
}

/// The forward value of `f` on constants (no graph).
fn eval(f: Fun, xs: &[Array]) -> Result<Array> {
    let vars: Vec<Variable> = xs.iter().cloned().map(Variable::constant).collect();
    Ok(f(&vars)?.array().clone())
}

/// A seeded output gradient in the shape and dtype of `f`'s output.
fn seed_gy(f: Fun, xs: &[Array]) -> Result<Array> {
    let y = eval(f, xs)?;
    uniform(y.shape(), 1001).astype(y.dtype())
}

/// The gradients of `Σ gy · f(xs)` with respect to every input, through the graph (zeros where
/// no gradient arrives), with the input variables they were taken at.
fn grads_of(
    f: Fun,
    xs: &[Array],
    gy: &Array,
    double: bool,
) -> Result<(Vec<Variable>, Vec<Variable>)> {
    let vars: Vec<Variable> = xs.iter().cloned().map(Variable::new).collect();
    let y = f(&vars)?;
    let refs: Vec<&Variable> = vars.iter().collect();
    let opts = GradOptions {
        enable_double_backprop: double,
        ..Default::default()
    };
    let gs = grad(&[&y], &refs, &[Variable::constant(gy.clone())], opts)?;
    let gs = gs
        .into_iter()
        .zip(xs)
        .map(|(g, x)| g.unwrap_or_else(|| Variable::constant(x.zeros_like().unwrap())))
        .collect();
    Ok((vars, gs))
}

/// Checks the first-order gradients of `f` at `xs` against central differences.
#[track_caller]
fn check_grad(f: Fun, xs: &[Array]) -> Result<()> {
    check_grad_with(f, xs, EPS, TOL)
}

#[track_caller]
fn check_grad_with(f: Fun, xs: &[Array], eps: f64, tol: f64) -> Result<()> {
    let gy = seed_gy(f, xs)?;
    let (_, gs) = grads_of(f, xs, &gy, false)?;
    let numeric = numerical_grad(|a| eval(f, a), xs, &gy, eps)?;
    for (k, (g, n)) in gs.iter().zip(&numeric).enumerate() {
        assert_eq!(
            g.shape(),
            xs[k].shape(),
            "gradient {k} has its input's shape"
        );
        assert_eq!(
            g.dtype(),
            xs[k].dtype(),
            "gradient {k} has its input's dtype"
        );
        assert_close(g.array(), n, tol, tol);
    }
    Ok(())
}

/// Checks second-order gradients: `d(Σ_k gx_k · ggx_k)/dx` through the recorded backward graph
/// against central differences of `x ↦ Σ_k gx_k(x) · ggx_k`, where `gx_k` is the first-order
/// gradient (already checked against finite differences by [`check_grad`]).
#[track_caller]
fn check_double_grad(f: Fun, xs: &[Array]) -> Result<()> {
    let gy = seed_gy(f, xs)?;
    let ggxs: Vec<Array> = xs
        .iter()
        .enumerate()
        .map(|(k, x)| uniform(x.shape(), 2001 + k as u64).astype(x.dtype()))
        .collect::<Result<_>>()?;

    let (vars, gs) = grads_of(f, xs, &gy, true)?;
    let mut total: Option<Variable> = None;
    for (g, gg) in gs.iter().zip(&ggxs) {
        let term = F::sum(&F::mul(g, &Variable::constant(gg.clone()))?)?;
        total = Some(match total {
            None => term,
            Some(acc) => F::add(&acc, &term)?,
        });
    }
    let total = total.expect("at least one input");
    let refs: Vec<&Variable> = vars.iter().collect();
    let second = grad(&[&total], &refs, None, GradOptions::default())?;

    let directional = |a: &[Array]| -> Result<Array> {
        let (_, gs) = grads_of(f, a, &gy, false)?;
        let mut s = 0.0;
        for (g, gg) in gs.iter().zip(&ggxs) {
            s += vals(g.array())
                .iter()
                .zip(vals(gg))
                .map(|(p, q)| p * q)
                .sum::<f64>();
        }
        Ok(Array::scalar(s))
    };
    let numeric = numerical_grad(directional, xs, &Array::scalar(1.0f64), EPS)?;
    for (k, (g, n)) in second.iter().zip(&numeric).enumerate() {
        let g = match g {
            Some(g) => g.array().clone(),
            None => xs[k].zeros_like().unwrap(),
        };
        assert_eq!(g.shape(), xs[k].shape(), "second-order gradient {k} shape");
        assert_close(&g, n, TOL2, TOL2);
    }
    Ok(())
}

/// NumPy's broadcast shape of two (compatible) shapes.
fn broadcast_shape(a: &[usize], b: &[usize]) -> Vec<usize> {
    let n = a.len().max(b.len());
    let dim = |s: &[usize], i: usize| {
        if i + s.len() >= n {
            s[i + s.len() - n]
        } else {
            1
        }
    };
    (0..n).map(|i| dim(a, i).max(dim(b, i))).collect()
}

/// `f(a, b)` elementwise with broadcasting, by explicit index arithmetic.
fn binary_ref(a: &Array, b: &Array, f: impl Fn(f64, f64) -> f64) -> Array {
    let shape = broadcast_shape(a.shape(), b.shape());
    let (av, bv) = (vals(a), vals(b));
    let n: usize = shape.iter().product();
    let out: Vec<f64> = (0..n)
        .map(|flat| {
            let idx = unravel(flat, &shape);
            f(
                av[broadcast_pos(&idx, a.shape())],
                bv[broadcast_pos(&idx, b.shape())],
            )
        })
        .collect();
    arr(&out, &shape)
}

/// `f` elementwise.
fn unary_ref(a: &Array, f: impl Fn(f64) -> f64) -> Array {
    arr(&vals(a).into_iter().map(f).collect::<Vec<_>>(), a.shape())
}

/// Reduction over `axes` (sorted, non-negative) by visiting every element once.
fn reduce_ref(a: &Array, axes: &[usize], init: f64, f: impl Fn(f64, f64) -> f64) -> Vec<f64> {
    let shape = a.shape();
    let len: usize = (0..shape.len())
        .filter(|d| !axes.contains(d))
        .map(|d| shape[d])
        .product();
    let mut out = vec![init; len];
    for (flat, x) in vals(a).into_iter().enumerate() {
        let idx = unravel(flat, shape);
        let o = (0..shape.len())
            .filter(|d| !axes.contains(d))
            .fold(0, |o, d| o * shape[d] + idx[d]);
        out[o] = f(out[o], x);
    }
    out
}

/// Plain triple loop: the (n, k) by (k, m) product of C-order matrices.
fn matmul_ref(a: &[f64], b: &[f64], n: usize, k: usize, m: usize) -> Vec<f64> {
    let mut out = vec![0.0; n * m];
    for i in 0..n {
        for j in 0..m {
            out[i * m + j] = (0..k).map(|p| a[i * k + p] * b[p * m + j]).sum();
        }
    }
    out
}

/// `log softmax` of the rows of a C-order (rows, cols) matrix, by the log-sum-exp formula.
fn log_softmax_rows(x: &[f64], rows: usize, cols: usize) -> Vec<f64> {
    let mut out = vec![0.0; rows * cols];
    for r in 0..rows {
        let row = &x[r * cols..(r + 1) * cols];
        let m = row.iter().cloned().fold(f64::NEG_INFINITY, f64::max);
        let lse = m + row.iter().map(|v| (v - m).exp()).sum::<f64>().ln();
        for c in 0..cols {
            out[r * cols + c] = row[c] - lse;
        }
    }
    out
}

/// A one-input argument list.
fn one(x: &Array) -> &[Array] {
    std::slice::from_ref(x)
}

fn v(a: &Array) -> Variable {
    Variable::new(a.clone())
}

// ----- arithmetic -----

#[test]
fn binary_arithmetic_with_broadcasting() -> Result<()> {
    type Case<'a> = (&'a str, Fun<'a>, fn(f64, f64) -> f64);
    let cases: [Case; 4] = [
        ("add", &|x| F::add(&x[0], &x[1]), |a, b| a + b),
        ("sub", &|x| F::sub(&x[0], &x[1]), |a, b| a - b),
        ("mul", &|x| F::mul(&x[0], &x[1]), |a, b| a * b),
        ("div", &|x| F::div(&x[0], &x[1]), |a, b| a / b),
    ];
    // Shapes (lhs, rhs): equal, a row, a column against a row, a 0-d operand on either side.
    let shapes: [(&[usize], &[usize]); 5] = [
        (&[2, 3], &[2, 3]),
        (&[2, 3], &[3]),
        (&[3, 1], &[1, 4]),
        (&[2, 3], &[]),
        (&[], &[2, 2]),
    ];
    for (name, f, reference) in cases {
        for (i, (sa, sb)) in shapes.iter().enumerate() {
            let a = uniform(sa, 10 + i as u64);
            // Divisors in [1, 3): far from zero.
            let b = rand_in(sb, 20 + i as u64, 1.0, 3.0);
            // Shown if a check below fails (the harness prints a failing test's output).
            println!("{name}: {sa:?} with {sb:?}");
            let y = eval(f, &[a.clone(), b.clone()])?;
            assert_close(&y, &binary_ref(&a, &b, reference), 1e-15, 1e-15);
            check_grad(f, &[a, b])?;
        }
    }
    // Second order, broadcasting: mul's is gy on the other input's slot, div's is not constant.
    for (_, f, _) in cases {
        check_double_grad(f, &[uniform(&[2, 3], 30), rand_in(&[3], 31, 1.0, 3.0)])?;
        check_double_grad(
            f,
            &[uniform(&[3, 1], 32), rand_in(&[2, 1, 4], 33, 1.0, 3.0)],
        )?;
    }
    Ok(())
}

#[test]
fn broadcast_gradients_sum_to_the_input_shapes() -> Result<()> {
    // y = a * b with a (2, 3), b (3,): d(Σ y)/db[j] = Σ_i a[i, j]; d(Σ y)/da[i, j] = b[j].
    let a = arr(&[1.0, 2.0, 3.0, 4.0, 5.0, 6.0], &[2, 3]);
    let b = arr(&[10.0, 20.0, 30.0], &[3]);
    let (va, vb) = (v(&a), v(&b));
    let y = F::sum(&F::mul(&va, &vb)?)?;
    y.backward()?;
    let gb = vb.grad_array().expect("b gets a gradient");
    assert_eq!(gb.shape(), &[3]);
    assert_eq!(vals(&gb), vec![5.0, 7.0, 9.0]);
    let ga = va.grad_array().expect("a gets a gradient");
    assert_eq!(ga.shape(), &[2, 3]);
    assert_eq!(vals(&ga), vec![10.0, 20.0, 30.0, 10.0, 20.0, 30.0]);
    // (3, 1) - (1, 4): the column's gradient sums over 4 columns, the row's (negated) over 3.
    let (c, r) = (
        v(&Array::zeros(&[3, 1], DType::F64)?),
        v(&Array::zeros(&[1, 4], DType::F64)?),
    );
    F::sum(&F::sub(&c, &r)?)?.backward()?;
    assert_eq!(vals(&c.grad_array().expect("grad")), vec![4.0; 3]);
    assert_eq!(vals(&r.grad_array().expect("grad")), vec![-3.0; 4]);
    Ok(())
}

#[test]
fn neg_and_scalar_arithmetic() -> Result<()> {
    let x = arr(&[-1.5, 0.5, 2.0, 4.0], &[2, 2]);
    type Case<'a> = (Fun<'a>, [f64; 4]);
    let cases: [Case; 7] = [
        (&|x| F::neg(&x[0]), [1.5, -0.5, -2.0, -4.0]),
        (&|x| F::add_scalar(&x[0], 2.0), [0.5, 2.5, 4.0, 6.0]),
        (&|x| F::sub_scalar(&x[0], 2.0), [-3.5, -1.5, 0.0, 2.0]),
        (&|x| F::rsub_scalar(&x[0], 2.0), [3.5, 1.5, 0.0, -2.0]),
        (&|x| F::mul_scalar(&x[0], -3.0), [4.5, -1.5, -6.0, -12.0]),
        (&|x| F::div_scalar(&x[0], 4.0), [-0.375, 0.125, 0.5, 1.0]),
        // 2 / x
        (&|x| F::rdiv_scalar(&x[0], 2.0), [-4.0 / 3.0, 4.0, 1.0, 0.5]),
    ];
    for (f, want) in cases {
        assert_close(&eval(f, one(&x))?, &arr(&want, &[2, 2]), 1e-15, 1e-15);
        check_grad(f, one(&x))?;
    }
    // Hand-derived gradients of the linear ones: d(-x) = -1, d(x - 2) = 1, d(2 - x) = -1,
    // d(-3x) = -3, d(x / 4) = 0.25; and d(2 / x) = -2 / x².
    let xv = v(&x);
    let total = F::sum(&F::add(
        &F::rsub_scalar(&xv, 2.0)?,
        &F::add(&F::div_scalar(&xv, 4.0)?, &F::rdiv_scalar(&xv, 2.0)?)?,
    )?)?;
    total.backward()?;
    let want: Vec<f64> = vals(&x)
        .iter()
        .map(|x| -1.0 + 0.25 - 2.0 / (x * x))
        .collect();
    assert_close(
        &xv.grad_array().expect("grad"),
        &arr(&want, &[2, 2]),
        1e-15,
        1e-15,
    );
    // Second order: 2 / x and c * x.
    check_double_grad(&|x| F::rdiv_scalar(&x[0], 2.0), one(&x))?;
    check_double_grad(&|x| F::mul_scalar(&x[0], -3.0), &[x])?;
    Ok(())
}

#[test]
fn pow_of_two_variables() -> Result<()> {
    let f: Fun = &|x| F::pow(&x[0], &x[1]);
    // Bases in [0.5, 2) keep a^b and ln a finite.
    for (sa, sb) in [
        (&[2usize, 3][..], &[2usize, 3][..]),
        (&[2, 3], &[3]),
        (&[3, 1], &[]),
    ] {
        let a = rand_in(sa, 40, 0.5, 2.0);
        let b = rand_in(sb, 41, -2.0, 3.0);
        assert_close(
            &eval(f, &[a.clone(), b.clone()])?,
            &binary_ref(&a, &b, f64::powf),
            1e-15,
            1e-14,
        );
        check_grad(f, &[a.clone(), b.clone()])?;
        check_double_grad(f, &[a, b])?;
    }
    // 2^3 = 8: d/da = 3 * 2^2 = 12, d/db = 8 ln 2.
    let (a, b) = (v(&arr(&[2.0], &[1])), v(&arr(&[3.0], &[1])));
    F::sum(&F::pow(&a, &b)?)?.backward()?;
    assert_close(
        &a.grad_array().expect("grad"),
        &arr(&[12.0], &[1]),
        1e-14,
        0.0,
    );
    assert_close(
        &b.grad_array().expect("grad"),
        &arr(&[8.0 * 2f64.ln()], &[1]),
        1e-14,
        0.0,
    );
    Ok(())
}

#[test]
fn pow_scalar_for_several_exponents() -> Result<()> {
    let x = rand_in(&[2, 3], 42, 0.5, 2.0);
    for p in [2.5, 3.0, -1.5, 0.5, 1.0] {
        let f = move |x: &[Variable]| F::pow_scalar(&x[0], p);
        assert_close(
            &eval(&f, one(&x))?,
            &unary_ref(&x, |t| t.powf(p)),
            1e-15,
            1e-14,
        );
        check_grad(&f, one(&x))?;
        check_double_grad(&f, one(&x))?;
    }
    // An integer power of negative numbers: x³ at -1.5 has derivative 3 * 2.25 = 6.75.
    let neg = arr(&[-1.5, 0.5, -0.25], &[3]);
    let cube: Fun = &|x| F::pow_scalar(&x[0], 3.0);
    assert_close(
        &eval(cube, one(&neg))?,
        &arr(&[-3.375, 0.125, -0.015625], &[3]),
        1e-15,
        0.0,
    );
    check_grad(cube, one(&neg))?;
    check_double_grad(cube, &[neg])?;
    Ok(())
}

#[test]
fn maximum_routes_the_gradient_to_the_larger_input() -> Result<()> {
    let f: Fun = &|x| F::maximum(&x[0], &x[1]);
    // Every pair differs by at least 0.1, far more than the finite-difference step.
    let a = arr(&[0.1, -0.5, 0.9, 0.3, -0.8, 0.0], &[2, 3]);
    let b = arr(&[0.4, -0.9, 0.2, 0.7, -0.1, 0.5], &[2, 3]);
    assert_eq!(
        vals(&eval(f, &[a.clone(), b.clone()])?),
        vec![0.4, -0.5, 0.9, 0.7, -0.1, 0.5]
    );
    check_grad(f, &[a.clone(), b.clone()])?;
    // Broadcast against a row: columns compare a[:, j] with row[j].
    let row = arr(&[0.0, 0.2, -0.3], &[3]);
    assert_eq!(
        vals(&eval(f, &[a.clone(), row.clone()])?),
        vec![0.1, 0.2, 0.9, 0.3, 0.2, 0.0]
    );
    check_grad(f, &[a.clone(), row.clone()])?;
    // By hand with gy = 1: a wins at (0, 0), (0, 2), (1, 0), (1, 2); row wins at column 1 twice.
    let (va, vr) = (v(&a), v(&row));
    F::sum(&F::maximum(&va, &vr)?)?.backward()?;
    assert_eq!(
        vals(&va.grad_array().expect("grad")),
        vec![1.0, 0.0, 1.0, 1.0, 0.0, 1.0]
    );
    assert_eq!(vals(&vr.grad_array().expect("grad")), vec![0.0, 2.0, 0.0]);
    // A tie sends the gradient to the first input (Chainer's rule).
    let (p, q) = (v(&arr(&[1.0], &[1])), v(&arr(&[1.0], &[1])));
    F::sum(&F::maximum(&p, &q)?)?.backward()?;
    assert_eq!(vals(&p.grad_array().expect("grad")), vec![1.0]);
    assert_eq!(vals(&q.grad_array().expect("grad")), vec![0.0]);
    Ok(())
}

#[test]
fn where_selects_values_and_gradients() -> Result<()> {
    let cond = Array::from_vec(vec![true, false, true, false, false, true], &[2, 3])?;
    let a = uniform(&[2, 3], 50);
    let b = uniform(&[3], 51);
    let f = |x: &[Variable]| F::where_(&cond, &x[0], &x[1]);
    let (av, bv) = (vals(&a), vals(&b));
    let c = cond.to_vec::<bool>()?;
    let want: Vec<f64> = (0..6)
        .map(|i| if c[i] { av[i] } else { bv[i % 3] })
        .collect();
    assert_eq!(vals(&eval(&f, &[a.clone(), b.clone()])?), want);
    check_grad(&f, &[a.clone(), b.clone()])?;
    // By hand with gy = 1: a gets the mask, b counts the false entries in each column.
    let (va, vb) = (v(&a), v(&b));
    F::sum(&F::where_(&cond, &va, &vb)?)?.backward()?;
    assert_eq!(
        vals(&va.grad_array().expect("grad")),
        vec![1.0, 0.0, 1.0, 0.0, 0.0, 1.0]
    );
    assert_eq!(vals(&vb.grad_array().expect("grad")), vec![1.0, 2.0, 0.0]);
    // A broadcast condition.
    let row_cond = Array::from_vec(vec![false, true, true], &[3])?;
    let g = |x: &[Variable]| F::where_(&row_cond, &x[0], &x[1]);
    check_grad(&g, &[a, uniform(&[2, 1], 52)])?;
    Ok(())
}

// ----- elementwise math -----

#[test]
fn exp_log_sqrt_tanh_sigmoid() -> Result<()> {
    let x = uniform(&[2, 3], 60);
    let pos = rand_in(&[2, 3], 61, 0.5, 2.0);
    type Case<'a> = (Fun<'a>, fn(f64) -> f64, &'a Array);
    let cases: [Case; 5] = [
        (&|x| F::exp(&x[0]), f64::exp, &x),
        (&|x| F::log(&x[0]), f64::ln, &pos),
        (&|x| F::sqrt(&x[0]), f64::sqrt, &pos),
        (&|x| F::tanh(&x[0]), f64::tanh, &x),
        (&|x| F::sigmoid(&x[0]), |t| 1.0 / (1.0 + (-t).exp()), &x),
    ];
    for (f, reference, input) in cases {
        let xs = [input.clone()];
        assert_close(&eval(f, &xs)?, &unary_ref(input, reference), 1e-15, 1e-14);
        check_grad(f, &xs)?;
        check_double_grad(f, &xs)?;
    }
    // Hand values at simple points: d exp(0) = 1, d log(2) = 0.5, d sqrt(4) = 0.25,
    // d tanh(0) = 1, d sigmoid(0) = 0.25.
    let at = |f: fn(&Variable) -> Result<Variable>, x0: f64| -> Result<f64> {
        let x = v(&arr(&[x0], &[1]));
        F::sum(&f(&x)?)?.backward()?;
        Ok(vals(&x.grad_array().expect("grad"))[0])
    };
    assert_eq!(at(F::exp, 0.0)?, 1.0);
    assert_eq!(at(F::log, 2.0)?, 0.5);
    assert_eq!(at(F::sqrt, 4.0)?, 0.25);
    assert_eq!(at(F::tanh, 0.0)?, 1.0);
    assert_eq!(at(F::sigmoid, 0.0)?, 0.25);
    Ok(())
}

#[test]
fn relu_away_from_zero() -> Result<()> {
    let x = arr(&[-1.2, 0.3, -0.1, 2.0, 0.7, -0.4], &[2, 3]);
    let f: Fun = &|x| F::relu(&x[0]);
    assert_eq!(vals(&eval(f, one(&x))?), vec![0.0, 0.3, 0.0, 2.0, 0.7, 0.0]);
    check_grad(f, one(&x))?;
    check_double_grad(f, one(&x))?;
    let xv = v(&x);
    F::sum(&F::relu(&xv)?)?.backward()?;
    assert_eq!(
        vals(&xv.grad_array().expect("grad")),
        vec![0.0, 1.0, 0.0, 1.0, 1.0, 0.0]
    );
    Ok(())
}

// ----- reductions -----

#[test]
fn sum_and_mean_over_axes() -> Result<()> {
    let x = uniform(&[2, 3, 4], 70);
    let total: f64 = vals(&x).iter().sum();
    let s: Fun = &|x| F::sum(&x[0]);
    let y = eval(s, one(&x))?;
    assert_eq!(y.shape(), &[] as &[usize]);
    assert_close(&y, &Array::scalar(total), 1e-14, 1e-14);
    check_grad(s, one(&x))?;
    check_double_grad(s, one(&x))?;

    let cases: [(&[isize], &[usize]); 5] = [
        (&[0], &[0]),
        (&[-1], &[2]),
        (&[0, 2], &[0, 2]),
        (&[1, -1], &[1, 2]),
        (&[0, 1, 2], &[0, 1, 2]),
    ];
    for (axes, norm) in cases {
        let count: usize = norm.iter().map(|&a| x.shape()[a]).product();
        let sum = reduce_ref(&x, norm, 0.0, |a, b| a + b);
        let mean: Vec<f64> = sum.iter().map(|t| t / count as f64).collect();
        for keepdims in [false, true] {
            let shape: Vec<usize> = (0..3)
                .filter_map(|d| match (norm.contains(&d), keepdims) {
                    (true, true) => Some(1),
                    (true, false) => None,
                    (false, _) => Some(x.shape()[d]),
                })
                .collect();
            let fs = move |v: &[Variable]| F::sum_axes(&v[0], axes, keepdims);
            let fm = move |v: &[Variable]| F::mean_axes(&v[0], axes, keepdims);
            assert_close(&eval(&fs, one(&x))?, &arr(&sum, &shape), 1e-14, 1e-14);
            assert_close(&eval(&fm, one(&x))?, &arr(&mean, &shape), 1e-14, 1e-14);
            check_grad(&fs, one(&x))?;
            check_grad(&fm, one(&x))?;
        }
    }
    let m: Fun = &|x| F::mean(&x[0]);
    assert_close(
        &eval(m, one(&x))?,
        &Array::scalar(total / 24.0),
        1e-15,
        1e-14,
    );
    check_double_grad(m, one(&x))?;
    check_double_grad(&|x| F::sum_axes(&x[0], &[1], true), &[x])?;
    // By hand: the mean over 4 elements gives each 1/4 of the gradient.
    let xv = v(&Array::ones(&[2, 4], DType::F64)?);
    F::sum(&F::mean_axes(&xv, &[1], false)?)?.backward()?;
    assert_eq!(vals(&xv.grad_array().expect("grad")), vec![0.25; 8]);
    Ok(())
}

#[test]
fn max_and_min_without_ties() -> Result<()> {
    // Seeded uniform values: all distinct.
    let x = uniform(&[2, 3, 4], 80);
    for (axes, norm) in [
        (None, vec![0, 1, 2]),
        (Some(&[1isize][..]), vec![1]),
        (Some(&[-1, 0][..]), vec![0, 2]),
    ] {
        for keepdims in [false, true] {
            let fmax = move |v: &[Variable]| match axes {
                Some(axes) => F::max_axes(&v[0], axes, keepdims),
                None if keepdims => F::max_axes(&v[0], &[0, 1, 2], true),
                None => F::max(&v[0]),
            };
            let fmin = move |v: &[Variable]| match axes {
                Some(axes) => F::min_axes(&v[0], axes, keepdims),
                None if keepdims => F::min_axes(&v[0], &[0, 1, 2], true),
                None => F::min(&v[0]),
            };
            let want_max = reduce_ref(&x, &norm, f64::NEG_INFINITY, f64::max);
            let want_min = reduce_ref(&x, &norm, f64::INFINITY, f64::min);
            assert_eq!(vals(&eval(&fmax, one(&x))?), want_max);
            assert_eq!(vals(&eval(&fmin, one(&x))?), want_min);
            if keepdims {
                assert_eq!(eval(&fmax, one(&x))?.ndim(), 3);
            }
            check_grad(&fmax, one(&x))?;
            check_grad(&fmin, one(&x))?;
        }
    }
    // By hand: the gradient goes to the extremum only; tied extrema each get all of it.
    let t = v(&arr(&[1.0, 3.0, 3.0, 2.0, -1.0, 0.0], &[2, 3]));
    let g = grad(
        &[&F::max_axes(&t, &[1], false)?],
        &[&t],
        &[Variable::constant(arr(&[10.0, 20.0], &[2]))],
        GradOptions::default(),
    )?;
    let g = g[0].as_ref().expect("grad");
    assert_eq!(vals(g.array()), vec![0.0, 10.0, 10.0, 20.0, 0.0, 0.0]);
    let g = grad(&[&F::min(&t)?], &[&t], None, GradOptions::default())?;
    let g = g[0].as_ref().expect("grad");
    assert_eq!(vals(g.array()), vec![0.0, 0.0, 0.0, 0.0, 1.0, 0.0]);
    Ok(())
}

// ----- shapes and types -----

#[test]
fn shape_functions_move_values_and_gradients() -> Result<()> {
    let x = uniform(&[2, 3, 4], 90);
    let xv = vals(&x);

    let reshape: Fun = &|x| F::reshape(&x[0], &[4, 6]);
    let y = eval(reshape, one(&x))?;
    assert_eq!((y.shape(), vals(&y)), (&[4usize, 6][..], xv.clone()));
    check_grad(reshape, one(&x))?;

    // transpose(1, 2, 0): y[j, k, i] = x[i, j, k].
    let tr: Fun = &|x| F::transpose(&x[0], Some(&[1, 2, 0]));
    let y = eval(tr, one(&x))?;
    assert_eq!(y.shape(), &[3, 4, 2]);
    let yv = vals(&y);
    for i in 0..2 {
        for j in 0..3 {
            for k in 0..4 {
                assert_eq!(yv[(j * 4 + k) * 2 + i], xv[(i * 3 + j) * 4 + k]);
            }
        }
    }
    check_grad(tr, one(&x))?;
    let rev: Fun = &|x| F::transpose(&x[0], None);
    assert_eq!(eval(rev, one(&x))?.shape(), &[4, 3, 2]);
    check_grad(rev, one(&x))?;

    // broadcast_to: (3, 1) -> (2, 3, 4) repeats x[j] along the other axes.
    let col = uniform(&[3, 1], 91);
    let cv = vals(&col);
    let bt: Fun = &|x| F::broadcast_to(&x[0], &[2, 3, 4]);
    let y = eval(bt, one(&col))?;
    let want: Vec<f64> = (0..24).map(|f| cv[unravel(f, &[2, 3, 4])[1]]).collect();
    assert_eq!(vals(&y), want);
    check_grad(bt, one(&col))?;
    check_grad(&|x| F::broadcast_to(&x[0], &[2, 3]), &[uniform(&[3], 92)])?;

    // sum_to: (2, 3, 4) -> (3, 1) sums axes 0 and 2.
    let st: Fun = &|x| F::sum_to(&x[0], &[3, 1]);
    let want = reduce_ref(&x, &[0, 2], 0.0, |a, b| a + b);
    assert_close(&eval(st, one(&x))?, &arr(&want, &[3, 1]), 1e-15, 1e-14);
    check_grad(st, one(&x))?;
    check_grad(&|x| F::sum_to(&x[0], &[4]), one(&x))?;

    // squeeze and expand_dims change only the shape.
    let u = uniform(&[1, 3, 1, 2], 93);
    let sq: Fun = &|x| F::squeeze(&x[0], None);
    let y = eval(sq, one(&u))?;
    assert_eq!((y.shape(), vals(&y)), (&[3usize, 2][..], vals(&u)));
    check_grad(sq, one(&u))?;
    let sq2: Fun = &|x| F::squeeze(&x[0], Some(&[-2]));
    assert_eq!(eval(sq2, one(&u))?.shape(), &[1, 3, 2]);
    check_grad(sq2, &[u])?;
    let ed: Fun = &|x| F::expand_dims(&x[0], 1);
    let y = eval(ed, one(&x))?;
    assert_eq!((y.shape(), vals(&y)), (&[2usize, 1, 3, 4][..], xv));
    check_grad(ed, one(&x))?;
    check_grad(&|x| F::expand_dims(&x[0], -1), &[x])?;
    Ok(())
}

#[test]
fn astype_converts_values_and_gradients_back() -> Result<()> {
    let x = uniform(&[2, 3], 100);
    // Casting to f32 and back is the identity up to f32 rounding; a finite-difference step of
    // 1e-2 keeps that rounding (6e-8 relative) far below the tolerance.
    let to32: Fun = &|x| F::astype(&x[0], DType::F32);
    let y = eval(to32, one(&x))?;
    assert_eq!(y.dtype(), DType::F32);
    assert_close(&y, &x, 0.0, 6e-8);
    check_grad_with(to32, one(&x), 1e-2, 1e-5)?;
    let x32 = x.astype(DType::F32)?;
    let to64: Fun = &|x| F::astype(&x[0], DType::F64);
    check_grad_with(to64, &[x32], 1e-2, 1e-5)?;
    // Round trip through f32 within one graph: the gradient is gy itself (f64 again).
    let roundtrip: Fun = &|x| F::astype(&F::astype(&x[0], DType::F32)?, DType::F64);
    check_grad_with(roundtrip, one(&x), 1e-2, 1e-5)?;

    // Same dtype: the variable itself. To integers: a constant with truncated values.
    let xv = v(&arr(&[1.7, -2.2], &[2]));
    assert!(F::astype(&xv, DType::F64)?.same_node(&xv));
    let i = F::astype(&xv, DType::I32)?;
    assert!(!i.requires_grad());
    assert_eq!(i.array().to_vec::<i32>()?, vec![1, -2]);
    Ok(())
}

// ----- matrix products -----

#[test]
fn matmul_in_every_rank_combination() -> Result<()> {
    let f: Fun = &|x| F::matmul(&x[0], &x[1]);
    // (lhs shape, rhs shape, output shape).
    let cases: [(&[usize], &[usize], &[usize]); 6] = [
        (&[4], &[4], &[]),
        (&[3, 4], &[4], &[3]),
        (&[4], &[4, 2], &[2]),
        (&[3, 4], &[4, 2], &[3, 2]),
        (&[2, 1, 2, 3], &[3, 3, 2], &[2, 3, 2, 2]),
        (&[3, 4], &[2, 4, 2], &[2, 3, 2]),
    ];
    for (i, (sa, sb, so)) in cases.iter().enumerate() {
        let a = uniform(sa, 110 + i as u64);
        let b = uniform(sb, 120 + i as u64);
        let y = eval(f, &[a.clone(), b.clone()])?;
        assert_eq!(y.shape(), *so, "{sa:?} @ {sb:?}");
        check_grad(f, &[a.clone(), b.clone()])?;
        check_double_grad(f, &[a, b])?;
    }
    // Values against a plain loop: 2-D and the broadcast batch (2, 1, 2, 3) @ (3, 3, 2), where
    // out[i, j] = a[i, 0] @ b[j].
    let (a, b) = (uniform(&[3, 4], 130), uniform(&[4, 2], 131));
    let want = matmul_ref(&vals(&a), &vals(&b), 3, 4, 2);
    assert_close(&eval(f, &[a, b])?, &arr(&want, &[3, 2]), 1e-15, 1e-14);
    let (a, b) = (uniform(&[2, 1, 2, 3], 132), uniform(&[3, 3, 2], 133));
    let (av, bv) = (vals(&a), vals(&b));
    let mut want = vec![];
    for i in 0..2 {
        for j in 0..3 {
            want.extend(matmul_ref(
                &av[i * 6..(i + 1) * 6],
                &bv[j * 6..(j + 1) * 6],
                2,
                3,
                2,
            ));
        }
    }
    assert_close(&eval(f, &[a, b])?, &arr(&want, &[2, 3, 2, 2]), 1e-15, 1e-14);
    // 1-D · 1-D = Σ v w: [1, 2, 3] · [4, 5, 6] = 32, and its gradient is the other vector.
    let (p, q) = (
        v(&arr(&[1.0, 2.0, 3.0], &[3])),
        v(&arr(&[4.0, 5.0, 6.0], &[3])),
    );
    let d = F::matmul(&p, &q)?;
    assert_eq!(d.array().item::<f64>()?, 32.0);
    d.backward()?;
    assert_eq!(vals(&p.grad_array().expect("grad")), vec![4.0, 5.0, 6.0]);
    assert_eq!(vals(&q.grad_array().expect("grad")), vec![1.0, 2.0, 3.0]);
    Ok(())
}

#[test]
fn linear_with_and_without_bias() -> Result<()> {
    let x = uniform(&[4, 3], 140);
    let w = uniform(&[2, 3], 141);
    let b = uniform(&[2], 142);
    // y[n, o] = Σ_i x[n, i] W[o, i] + b[o], by loops.
    let (xv, wv, bv) = (vals(&x), vals(&w), vals(&b));
    let mut want = vec![0.0; 8];
    for n in 0..4 {
        for o in 0..2 {
            want[n * 2 + o] = (0..3).map(|i| xv[n * 3 + i] * wv[o * 3 + i]).sum::<f64>() + bv[o];
        }
    }
    let with_b: Fun = &|v| F::linear(&v[0], &v[1], Some(&v[2]));
    let no_b: Fun = &|v| F::linear(&v[0], &v[1], None);
    let xs = [x.clone(), w.clone(), b.clone()];
    assert_close(&eval(with_b, &xs)?, &arr(&want, &[4, 2]), 1e-15, 1e-14);
    let nb: Vec<f64> = want
        .iter()
        .enumerate()
        .map(|(k, y)| y - bv[k % 2])
        .collect();
    assert_close(&eval(no_b, &xs[..2])?, &arr(&nb, &[4, 2]), 1e-15, 1e-14);
    check_grad(with_b, &xs)?;
    check_grad(no_b, &xs[..2])?;
    check_double_grad(with_b, &xs)?;
    check_double_grad(no_b, &xs[..2])?;

    // x of shape (N, 2, 3) is flattened to (N, 6).
    let x3 = uniform(&[4, 2, 3], 143);
    let w6 = uniform(&[5, 6], 144);
    let b5 = uniform(&[5], 145);
    let flat = vals(&x3);
    let (w6v, b5v) = (vals(&w6), vals(&b5));
    let mut want = vec![0.0; 20];
    for n in 0..4 {
        for o in 0..5 {
            want[n * 5 + o] = (0..6)
                .map(|i| flat[n * 6 + i] * w6v[o * 6 + i])
                .sum::<f64>()
                + b5v[o];
        }
    }
    let xs3 = [x3, w6, b5];
    let y = eval(with_b, &xs3)?;
    assert_eq!(y.shape(), &[4, 5]);
    assert_close(&y, &arr(&want, &[4, 5]), 1e-15, 1e-14);
    check_grad(with_b, &xs3)?;
    check_double_grad(with_b, &xs3)?;
    Ok(())
}

// ----- dropout -----

#[test]
fn dropout_masks_and_scales_in_training() -> Result<()> {
    assert!(config::train(), "training mode is the default");
    let ratio = 0.4;
    let scale = 1.0 / (1.0 - ratio);
    let xa = rand_in(&[1000], 150, 0.5, 1.5);
    let x = v(&xa);
    kusari::random::seed(7);
    let y = F::dropout(&x, ratio)?;
    let (xv, yv) = (vals(&xa), vals(y.array()));
    // The mask actually used: y / x, each element 0 or 1 / (1 - ratio).
    let mask: Vec<f64> = yv.iter().zip(&xv).map(|(y, x)| y / x).collect();
    for m in &mask {
        assert!(*m == 0.0 || (m - scale).abs() < 1e-12, "mask value {m}");
    }
    // About 40% dropped: the fraction of 1000 Bernoulli(0.4) draws has std 0.015.
    let dropped = mask.iter().filter(|&&m| m == 0.0).count() as f64 / 1000.0;
    assert!((dropped - ratio).abs() < 0.06, "dropped fraction {dropped}");
    // gx = gy * mask.
    let gy = uniform(&[1000], 151);
    let gx = grad(
        &[&y],
        &[&x],
        &[Variable::constant(gy.clone())],
        GradOptions::default(),
    )?;
    let want: Vec<f64> = vals(&gy).iter().zip(&mask).map(|(g, m)| g * m).collect();
    assert_close(
        gx[0].as_ref().expect("grad").array(),
        &arr(&want, &[1000]),
        1e-12,
        1e-12,
    );

    // The same seed draws the same mask, another seed another one.
    kusari::random::seed(7);
    assert_eq!(vals(F::dropout(&x, ratio)?.array()), yv);
    kusari::random::seed(8);
    assert_ne!(vals(F::dropout(&x, ratio)?.array()), yv);
    // Reseeding before every evaluation makes dropout a fixed linear map: check it against
    // finite differences.
    let small = uniform(&[3, 4], 152);
    let seeded: Fun = &|x| {
        kusari::random::seed(11);
        F::dropout(&x[0], 0.5)
    };
    check_grad(seeded, &[small])?;

    // Outside training, dropout is the identity (the same variable).
    {
        let _eval = config::using_train(false);
        assert!(F::dropout(&x, ratio)?.same_node(&x));
    }
    // ratio 0 keeps everything; ratios outside [0, 1) are errors.
    assert_eq!(vals(F::dropout(&x, 0.0)?.array()), xv);
    assert!(F::dropout(&x, 1.0).is_err());
    assert!(F::dropout(&x, -0.1).is_err());
    Ok(())
}

// ----- softmax and losses -----

#[test]
fn log_softmax_and_softmax() -> Result<()> {
    let x = uniform(&[3, 4], 160).mul_scalar(3.0)?;
    let xv = vals(&x);
    let rows = log_softmax_rows(&xv, 3, 4);
    // Along axis 0: the same formula on the transpose, transposed back.
    let mut xt = vec![0.0; 12];
    for i in 0..3 {
        for j in 0..4 {
            xt[j * 3 + i] = xv[i * 4 + j];
        }
    }
    let cols_t = log_softmax_rows(&xt, 4, 3);
    let mut cols = vec![0.0; 12];
    for i in 0..3 {
        for j in 0..4 {
            cols[i * 4 + j] = cols_t[j * 3 + i];
        }
    }
    for (axis, want) in [(1isize, &rows), (-1, &rows), (0, &cols)] {
        let ls = move |v: &[Variable]| F::log_softmax(&v[0], axis);
        let sm = move |v: &[Variable]| F::softmax(&v[0], axis);
        assert_close(&eval(&ls, one(&x))?, &arr(want, &[3, 4]), 1e-14, 1e-14);
        let probs: Vec<f64> = want.iter().map(|l| l.exp()).collect();
        assert_close(&eval(&sm, one(&x))?, &arr(&probs, &[3, 4]), 1e-15, 1e-14);
        check_grad(&ls, one(&x))?;
        check_grad(&sm, one(&x))?;
        check_double_grad(&ls, one(&x))?;
        check_double_grad(&sm, one(&x))?;
    }
    // Large logits stay finite: log_softmax([1000, 0]) = [0, -1000].
    let big = eval(&|v| F::log_softmax(&v[0], 0), &[arr(&[1000.0, 0.0], &[2])])?;
    assert_eq!(vals(&big), vec![0.0, -1000.0]);
    assert!(F::log_softmax(&v(&x), 2).is_err());
    Ok(())
}

/// The backward of softmax and log-softmax over rows large enough to be split across threads
/// (and of a length that leaves a remainder to every unrolled loop), in float32 and float64,
/// against the formulas written out in a plain f64 loop: `y (gy - Σ y gy)` and
/// `gy - softmax Σ gy`; and the same gradient when the backward is recorded (double backprop
/// on, composed of array operations).
#[test]
fn softmax_backward_of_many_rows_matches_its_formula() -> Result<()> {
    let (rows, cols) = (257, 1029);
    let x = rand_in(&[rows, cols], 181, -4.0, 4.0);
    let gy = rand_in(&[rows, cols], 182, -1.0, 1.0);
    let lsm = log_softmax_rows(&vals(&x), rows, cols);
    let gyv = vals(&gy);
    let (mut want_sm, mut want_ls) = (vec![0.0; rows * cols], vec![0.0; rows * cols]);
    for r in 0..rows {
        let row = r * cols..(r + 1) * cols;
        let y: Vec<f64> = lsm[row.clone()].iter().map(|l| l.exp()).collect();
        let g = &gyv[row.clone()];
        let dot: f64 = y.iter().zip(g).map(|(a, b)| a * b).sum();
        let total: f64 = g.iter().sum();
        for j in 0..cols {
            want_sm[r * cols + j] = y[j] * (g[j] - dot);
            want_ls[r * cols + j] = g[j] - y[j] * total;
        }
    }
    for (dtype, tol) in [(DType::F64, 1e-12), (DType::F32, 2e-5)] {
        let (xd, gd) = (x.astype(dtype)?, gy.astype(dtype)?);
        for (name, want) in [("softmax", &want_sm), ("log_softmax", &want_ls)] {
            let f = move |v: &[Variable]| match name {
                "softmax" => F::softmax(&v[0], -1),
                _ => F::log_softmax(&v[0], 1),
            };
            for double in [false, true] {
                let (_, g) = grads_of(&f, one(&xd), &gd, double)?;
                assert_eq!(g[0].dtype(), dtype, "{name} {dtype:?} double={double}");
                assert_close(g[0].array(), &arr(want, &[rows, cols]), tol, tol);
            }
        }
    }
    Ok(())
}

#[test]
fn select_item_picks_one_element_per_row() -> Result<()> {
    let x = uniform(&[4, 3], 170);
    let xv = vals(&x);
    let t = Array::from_vec(vec![2i32, 0, -1, 1], &[4])?;
    let f = |v: &[Variable]| F::select_item(&v[0], &t);
    // x[0, 2], x[1, 0], 0 for the ignored row, x[3, 1].
    assert_eq!(vals(&eval(&f, one(&x))?), vec![xv[2], xv[3], 0.0, xv[10]]);
    check_grad(&f, one(&x))?;
    check_double_grad(&f, one(&x))?;
    let t64 = t.astype(DType::I64)?;
    let g = |v: &[Variable]| F::select_item(&v[0], &t64);
    assert_eq!(vals(&eval(&g, one(&x))?), vec![xv[2], xv[3], 0.0, xv[10]]);
    let xvar = v(&x);
    let bad =
        |labels: Vec<i32>| F::select_item(&xvar, &Array::from_vec(labels, &[4]).expect("4 labels"));
    assert!(bad(vec![3, 0, 0, 0]).is_err());
    assert!(bad(vec![-2, 0, 0, 0]).is_err());
    assert!(F::select_item(&xvar, &arr(&[0.0, 1.0, 2.0, 0.0], &[4])).is_err());
    assert!(F::select_item(&xvar, &Array::from_vec(vec![0i32, 1], &[2])?).is_err());
    Ok(())
}

#[test]
fn softmax_cross_entropy_is_the_mean_negative_log_likelihood() -> Result<()> {
    let x = uniform(&[4, 3], 180).mul_scalar(2.0)?;
    let t = Array::from_vec(vec![2i32, 0, -1, 1], &[4])?;
    let labels = [2i64, 0, -1, 1];
    let ls = log_softmax_rows(&vals(&x), 4, 3);
    // Mean over the three labelled rows of -log softmax(x)[i, t_i]; row 2 is ignored.
    let picked: Vec<f64> = labels
        .iter()
        .enumerate()
        .filter(|&(_, &l)| l >= 0)
        .map(|(i, &l)| -ls[i * 3 + l as usize])
        .collect();
    let want = picked.iter().sum::<f64>() / picked.len() as f64;
    let f = |v: &[Variable]| F::softmax_cross_entropy(&v[0], &t);
    let loss = eval(&f, one(&x))?;
    assert_eq!(loss.shape(), &[] as &[usize]);
    assert_close(&loss, &Array::scalar(want), 1e-15, 1e-14);
    check_grad(&f, one(&x))?;
    check_double_grad(&f, one(&x))?;
    // By hand for the gradient: (softmax - onehot) / 3 on labelled rows, 0 on the ignored one.
    let xvar = v(&x);
    F::softmax_cross_entropy(&xvar, &t)?.backward()?;
    let g = vals(&xvar.grad_array().expect("grad"));
    for i in 0..4 {
        for c in 0..3 {
            let want = if labels[i] < 0 {
                0.0
            } else {
                (ls[i * 3 + c].exp() - if c as i64 == labels[i] { 1.0 } else { 0.0 }) / 3.0
            };
            assert!(
                (g[i * 3 + c] - want).abs() < 1e-15,
                "[{i}, {c}]: {} vs {want}",
                g[i * 3 + c]
            );
        }
    }
    // Uniform logits over 3 classes: loss ln 3 whatever the labels.
    let flat = v(&Array::zeros(&[2, 3], DType::F64)?);
    let l = F::softmax_cross_entropy(&flat, &Array::from_vec(vec![0i64, 2], &[2])?)?;
    assert!((l.array().item::<f64>()? - 3f64.ln()).abs() < 1e-15);
    // Every sample ignored: zero loss and zero gradient.
    let none = Array::from_vec(vec![-1i32; 4], &[4])?;
    let l = F::softmax_cross_entropy(&xvar, &none)?;
    assert_eq!(l.array().item::<f64>()?, 0.0);
    let g = grad(&[&l], &[&xvar], None, GradOptions::default())?;
    assert_eq!(vals(g[0].as_ref().expect("grad").array()), vec![0.0; 12]);
    Ok(())
}

/// Rows longer than the host's 1024-element chunk of exp (and the per-row scratch buffer of the
/// loss), in float64 and float32: the loss and its gradient against the float64 formula.
#[test]
fn softmax_cross_entropy_over_rows_longer_than_a_chunk() -> Result<()> {
    let (rows, cols) = (3, 2500);
    let labels = [5i64, 2499, 1024];
    let x = uniform(&[rows, cols], 181).mul_scalar(8.0)?;
    let ls = log_softmax_rows(&vals(&x), rows, cols);
    let want = -labels
        .iter()
        .enumerate()
        .map(|(i, &l)| ls[i * cols + l as usize])
        .sum::<f64>()
        / rows as f64;
    let t = Array::from_vec(labels.to_vec(), &[rows])?;
    for (dtype, tol) in [(DType::F64, 1e-13), (DType::F32, 2e-6)] {
        let xv = v(&x.astype(dtype)?);
        let loss = F::softmax_cross_entropy(&xv, &t)?;
        let got = loss.array().to_f64_vec()?[0];
        assert!(
            (got - want).abs() <= tol * want.abs(),
            "{dtype}: loss {got} vs {want}"
        );
        loss.backward()?;
        let g = vals(&xv.grad_array().expect("grad"));
        for i in 0..rows {
            for c in 0..cols {
                let onehot = if c as i64 == labels[i] { 1.0 } else { 0.0 };
                let want = (ls[i * cols + c].exp() - onehot) / rows as f64;
                let got = g[i * cols + c];
                assert!(
                    (got - want).abs() <= tol * (want.abs() + 1e-6),
                    "{dtype} [{i}, {c}]: {got} vs {want}"
                );
            }
        }
    }
    Ok(())
}

// ----- operators on &Variable -----

#[test]
fn operators_on_variables() -> Result<()> {
    let x = v(&arr(&[1.0, 2.0, 3.0], &[3]));
    let y = v(&arr(&[4.0, 5.0, 6.0], &[3]));
    assert_eq!(vals((&x * &y)?.array()), vec![4.0, 10.0, 18.0]);
    assert_eq!(vals(((&x + &y)? * 2.0)?.array()), vec![10.0, 14.0, 18.0]);
    assert_eq!(vals((2.0 - &x)?.array()), vec![1.0, 0.0, -1.0]);
    assert_eq!(vals((-&x)?.array()), vec![-1.0, -2.0, -3.0]);
    assert_eq!(vals((&y / &x)?.array()), vec![4.0, 2.5, 2.0]);
    assert_eq!(vals((6.0 / &x)?.array()), vec![6.0, 3.0, 2.0]);
    assert_eq!(vals((&x - 1.0)?.array()), vec![0.0, 1.0, 2.0]);
    assert_eq!(vals((&y - &x)?.array()), vec![3.0, 3.0, 3.0]);

    // Σ (x y + (2 - x)): d/dx = y - 1 = [3, 4, 5], d/dy = x = [1, 2, 3].
    let s = F::sum(&((&x * &y)? + (2.0 - &x)?)?)?;
    let g = grad(&[&s], &[&x, &y], None, GradOptions::default())?;
    assert_eq!(
        vals(g[0].as_ref().expect("grad").array()),
        vec![3.0, 4.0, 5.0]
    );
    assert_eq!(
        vals(g[1].as_ref().expect("grad").array()),
        vec![1.0, 2.0, 3.0]
    );
    // Σ 2 (x + y): 2 for both.
    let s = F::sum(&((&x + &y)? * 2.0)?)?;
    let g = grad(&[&s], &[&x, &y], None, GradOptions::default())?;
    assert_eq!(vals(g[0].as_ref().expect("grad").array()), vec![2.0; 3]);
    assert_eq!(vals(g[1].as_ref().expect("grad").array()), vec![2.0; 3]);
    // Σ 6 / x: -6 / x² = [-6, -1.5, -2/3]; Σ y / x: d/dy = 1 / x.
    let s = F::sum(&((6.0 / &x)? + (&y / &x)?)?)?;
    let g = grad(&[&s], &[&x, &y], None, GradOptions::default())?;
    let want: Vec<f64> = [1.0f64, 2.0, 3.0]
        .iter()
        .zip([4.0, 5.0, 6.0])
        .map(|(x, y)| -6.0 / (x * x) - y / (x * x))
        .collect();
    assert_close(
        g[0].as_ref().expect("grad").array(),
        &arr(&want, &[3]),
        1e-15,
        1e-15,
    );
    assert_close(
        g[1].as_ref().expect("grad").array(),
        &arr(&[1.0, 0.5, 1.0 / 3.0], &[3]),
        1e-15,
        1e-15,
    );
    // Operators check shapes like the functions do.
    assert!((&x + &v(&arr(&[1.0, 2.0], &[2]))).is_err());
    Ok(())
}

// ----- the checks themselves -----

/// `exp` whose backward multiplies by `scale * y`, with `y` detached when `detach`: a wrong
/// first-order gradient for `scale != 1`, a wrong second-order one for `detach`.
struct FaultyExp {
    scale: f64,
    detach: bool,
}
impl FunctionNode for FaultyExp {
    fn forward(&mut self, ctx: &mut ForwardContext, x: &[Array]) -> Result<Vec<Array>> {
        ctx.retain_outputs(&[0]);
        Ok(vec![x[0].exp()?])
    }
    fn backward(
        &self,
        ctx: &BackwardContext<'_>,
        _: &[usize],
        gys: &[Option<Variable>],
    ) -> Result<Vec<Option<Variable>>> {
        let y = ctx.retained_output(0)?;
        let y = if self.detach { y.detach() } else { y };
        let gy = gys[0].as_ref().expect("one output, one gradient");
        Ok(vec![Some(F::mul_scalar(&F::mul(gy, &y)?, self.scale)?)])
    }
}

fn faulty_exp(scale: f64, detach: bool) -> impl Fn(&[Variable]) -> Result<Variable> {
    move |x| Ok(FaultyExp { scale, detach }.apply(&[&x[0]])?.remove(0))
}

#[test]
fn the_gradient_checks_reject_wrong_gradients() -> Result<()> {
    use std::panic::{AssertUnwindSafe, catch_unwind};
    let x = [uniform(&[2, 3], 190)];
    // The faithful version passes both checks.
    check_grad(&faulty_exp(1.0, false), &x)?;
    check_double_grad(&faulty_exp(1.0, false), &x)?;
    // A first-order error by one part in a thousand is caught.
    let wrong = catch_unwind(AssertUnwindSafe(|| {
        check_grad(&faulty_exp(1.001, false), &x)
    }));
    assert!(wrong.is_err(), "check_grad accepted a wrong gradient");
    // A backward right to first order but not differentiable again (its output detached) passes
    // the first-order check and fails the second-order one.
    check_grad(&faulty_exp(1.0, true), &x)?;
    let wrong = catch_unwind(AssertUnwindSafe(|| {
        check_double_grad(&faulty_exp(1.0, true), &x)
    }));
    assert!(
        wrong.is_err(),
        "check_double_grad accepted a wrong second-order gradient"
    );
    Ok(())
}

/// The value and the gradient (of the sum of the output) of `f` at each of `xs`, against hand
/// values: the conventions at the kinks, which follow Chainer, and far-out inputs.
fn value_and_grad_at(
    name: &str,
    f: impl Fn(&Variable) -> Result<Variable>,
    cases: &[(f64, f64, f64)],
) -> Result<()> {
    let xs: Vec<f64> = cases.iter().map(|c| c.0).collect();
    let x = Variable::new(arr(&xs, &[xs.len()]));
    let y = f(&x)?;
    y.sum()?.backward()?;
    let (got, gx) = (vals(y.array()), vals(&x.grad_array().expect("a gradient")));
    for (i, &(at, want, dwant)) in cases.iter().enumerate() {
        assert!(
            (got[i] - want).abs() <= 1e-15 * want.abs().max(1.0),
            "{name}({at}) = {}, not {want}",
            got[i]
        );
        assert!(
            (gx[i] - dwant).abs() <= 1e-15 * dwant.abs().max(1.0),
            "{name}'({at}) = {}, not {dwant}",
            gx[i]
        );
    }
    Ok(())
}

#[test]
fn activations_at_their_kinks_and_far_out() -> Result<()> {
    // Chainer: the gradient at 0 is 1 for leaky_relu and elu (x >= 0 takes the identity).
    value_and_grad_at(
        "leaky_relu",
        |x| F::leaky_relu(x, 0.2),
        &[(0.0, 0.0, 1.0), (-5.0, -1.0, 0.2), (3.0, 3.0, 1.0)],
    )?;
    value_and_grad_at(
        "elu",
        |x| F::elu(x, 2.0),
        &[
            (0.0, 0.0, 1.0),
            (1e300, 1e300, 1.0), // no exp of it, forward or backward
            (-1000.0, -2.0, 0.0),
        ],
    )?;
    // softplus(x) = ln(1 + e^x): no overflow at ±1000; ln 2 and 1/2 at 0.
    value_and_grad_at(
        "softplus",
        |x| F::softplus(x, 1.0),
        &[
            (0.0, std::f64::consts::LN_2, 0.5),
            (1000.0, 1000.0, 1.0),
            (-1000.0, 0.0, 0.0),
        ],
    )?;
    // |x|: gradient sign(x), 0 at 0.
    value_and_grad_at(
        "absolute",
        F::absolute,
        &[(0.0, 0.0, 0.0), (-2.5, 2.5, -1.0), (4.0, 4.0, 1.0)],
    )?;
    // clip: the bounds themselves pass the gradient (x_min <= x <= x_max, as Chainer's).
    value_and_grad_at(
        "clip",
        |x| F::clip(x, Some(-1.0), Some(2.0)),
        &[
            (-1.0, -1.0, 1.0),
            (2.0, 2.0, 1.0),
            (-1.5, -1.0, 0.0),
            (2.5, 2.0, 0.0),
            (0.5, 0.5, 1.0),
        ],
    )?;
    // gelu: 0 at 0 with slope 1/2; x at +∞ side, 0 far on the other.
    value_and_grad_at(
        "gelu",
        F::gelu,
        &[(0.0, 0.0, 0.5), (40.0, 40.0, 1.0), (-40.0, 0.0, 0.0)],
    )?;
    // sin and cos at multiples of π/2 (f64's π/2: sin is 1 exactly there, cos 6.1e-17).
    let h = std::f64::consts::FRAC_PI_2;
    value_and_grad_at("sin", F::sin, &[(0.0, 0.0, 1.0), (h, 1.0, h.cos())])?;
    value_and_grad_at("cos", F::cos, &[(0.0, 1.0, 0.0), (h, h.cos(), -1.0)])?;
    Ok(())
}

/// swish's `beta` gets its gradient, summed over every axis but those it runs along:
/// d/dβ_j Σ x σ(β_j x) = Σ_{i,k} x² σ'(β_j x).
#[test]
fn swish_beta_gets_the_gradient_summed_over_the_batch() -> Result<()> {
    let xs = [0.5, -1.0, 2.0, 1.5, -0.25, 0.75];
    let x = Variable::new(arr(&xs, &[2, 3]));
    let bs = [0.5, -1.0, 2.0];
    let beta = Variable::new(arr(&bs, &[3]));
    F::swish(&x, &beta)?.sum()?.backward()?;
    let s = |v: f64| 1.0 / (1.0 + (-v).exp());
    let want: Vec<f64> = (0..3)
        .map(|j| {
            [xs[j], xs[3 + j]]
                .iter()
                .map(|&v| v * v * s(bs[j] * v) * (1.0 - s(bs[j] * v)))
                .sum()
        })
        .collect();
    assert_close(
        &beta.grad_array().expect("beta's gradient"),
        &arr(&want, &[3]),
        1e-15,
        1e-14,
    );
    // A 0-dimensional beta is one value for everything: x (2, 3) with beta of shape ().
    let b0 = Variable::new(arr(&[2.0], &[]));
    let y = F::swish(&x, &b0)?;
    let want: Vec<f64> = xs.iter().map(|&v| v * s(2.0 * v)).collect();
    assert_close(y.array(), &arr(&want, &[2, 3]), 1e-15, 1e-15);
    Ok(())
}
