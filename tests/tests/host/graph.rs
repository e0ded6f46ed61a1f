//! The backward graph: user-written `FunctionNode`s (the tutorial's MulAdd and ExpAdd), gradient
//! accumulation, higher-order gradients, `grad()`, memory release, configuration and old-style
//! `Function`s.
//!
//! Expected values are derived by hand (in the comments) or by finite differences
//! ([`numerical_grad`]), never taken from the code under test.

use std::sync::{Arc, Mutex};

use kusari::config;
use kusari::prelude::*;
use kusari::{BackwardOptions, GradOptions};
use kusari_tests::{arr, assert_close, numerical_grad, uniform};

// ---------------------------------------------------------------------------------------------
// Helpers
// ---------------------------------------------------------------------------------------------

/// A leaf variable of `dtype` holding `values` in `shape`.
fn var(values: &[f64], shape: &[usize], dtype: DType) -> Variable {
    Variable::new(arr(values, shape).astype(dtype).expect("cast"))
}

/// An f64 array of `shape` whose elements are `f` of the given element lists, elementwise.
fn elementwise(shape: &[usize], cols: &[&[f64]], f: impl Fn(&[f64]) -> f64) -> Array {
    let n = cols[0].len();
    let values: Vec<f64> = (0..n)
        .map(|i| f(&cols.iter().map(|c| c[i]).collect::<Vec<_>>()))
        .collect();
    arr(&values, shape)
}

/// The gradient of a variable as an array (panics with a message if there is none).
#[track_caller]
fn grad_of(v: &Variable) -> Array {
    v.grad_array().expect("variable should have a gradient")
}

/// The single result of a `grad()` call that must exist.
#[track_caller]
fn some(g: Option<Variable>) -> Variable {
    g.expect("gradient should be Some")
}

fn first(mut v: Vec<Variable>) -> Variable {
    v.remove(0)
}

/// Checks the gradients that `backward()` gives for `make()` applied to `inputs` (with output
/// gradient `gy`) against central differences of the same function's forward.
fn check_backward_numerically<N: FunctionNode>(
    make: impl Fn() -> N,
    inputs: &[Array],
    gy: &Array,
    eps: f64,
    tol: f64,
) -> Result<()> {
    let vars: Vec<Variable> = inputs.iter().cloned().map(Variable::new).collect();
    let refs: Vec<&Variable> = vars.iter().collect();
    let out = first(make().apply(&refs)?);
    out.set_grad_array(gy.astype(out.dtype())?)?;
    out.backward()?;
    let expected = numerical_grad(
        |xs| {
            let consts: Vec<Variable> = xs.iter().cloned().map(Variable::constant).collect();
            let refs: Vec<&Variable> = consts.iter().collect();
            Ok(first(make().apply(&refs)?).array().clone())
        },
        inputs,
        gy,
        eps,
    )?;
    for (v, e) in vars.iter().zip(&expected) {
        let g = grad_of(v);
        assert_eq!(g.dtype(), v.dtype(), "gradient keeps the input's dtype");
        assert_close(&g, e, tol, tol);
    }
    Ok(())
}

// ---------------------------------------------------------------------------------------------
// The tutorial's functions, written by hand against the FunctionNode trait
// ---------------------------------------------------------------------------------------------

/// f(x, y, z) = x * y + z (Chainer's tutorial MulAdd).
struct MulAdd;

impl FunctionNode for MulAdd {
    fn forward_cpu(&mut self, ctx: &mut ForwardContext, inputs: &[Array]) -> Result<Vec<Array>> {
        // Mark x and y as retained: backward needs them, not z.
        ctx.retain_inputs(&[0, 1]);
        let (x, y, z) = (&inputs[0], &inputs[1], &inputs[2]);
        Ok(vec![(x * y + z)?])
    }

    fn backward(
        &self,
        ctx: &BackwardContext<'_>,
        _target_input_indexes: &[usize],
        grad_outputs: &[Option<Variable>],
    ) -> Result<Vec<Option<Variable>>> {
        let (x, y) = (ctx.retained_input(0)?, ctx.retained_input(1)?);
        let gw = grad_outputs[0]
            .as_ref()
            .ok_or_else(|| Error::msg("MulAdd: no gradient for w"))?;
        Ok(vec![Some((&y * gw)?), Some((&x * gw)?), Some(gw.clone())])
    }
}

/// f(x, y) = exp(x) + exp(y) (Chainer's tutorial ExpAdd); backward uses `F::exp`, so it can be
/// differentiated again.
struct ExpAdd;

impl FunctionNode for ExpAdd {
    fn forward_cpu(&mut self, ctx: &mut ForwardContext, inputs: &[Array]) -> Result<Vec<Array>> {
        ctx.retain_inputs(&[0, 1]);
        Ok(vec![(inputs[0].exp()? + inputs[1].exp()?)?])
    }

    fn backward(
        &self,
        ctx: &BackwardContext<'_>,
        _target_input_indexes: &[usize],
        grad_outputs: &[Option<Variable>],
    ) -> Result<Vec<Option<Variable>>> {
        let (x, y) = (ctx.retained_input(0)?, ctx.retained_input(1)?);
        let gz = grad_outputs[0]
            .as_ref()
            .ok_or_else(|| Error::msg("ExpAdd: no gradient for z"))?;
        Ok(vec![Some((gz * &F::exp(&x)?)?), Some((gz * &F::exp(&y)?)?)])
    }
}

const XS: [f64; 6] = [1.0, 2.0, 3.0, 4.0, 5.0, 6.0];
const YS: [f64; 6] = [-1.0, 0.5, 2.0, -3.0, 1.5, 0.25];
const ZS: [f64; 6] = [0.5, -2.0, 1.0, 0.0, 3.0, -1.0];
const GW: [f64; 6] = [1.0, 2.0, 3.0, -1.0, 0.5, 2.0];

fn muladd_by_hand(dtype: DType) -> Result<()> {
    let shape = [3, 2];
    let (x, y, z) = (
        var(&XS, &shape, dtype),
        var(&YS, &shape, dtype),
        var(&ZS, &shape, dtype),
    );
    let w = first(MulAdd.apply(&[&x, &y, &z])?);
    assert_eq!(w.dtype(), dtype);
    assert_eq!(w.shape(), &[3, 2]);
    assert_eq!(w.creator_label().as_deref(), Some("MulAdd"));
    // w = x*y + z = [1*-1+0.5, 2*0.5-2, 3*2+1, 4*-3+0, 5*1.5+3, 6*0.25-1]
    //             = [-0.5, -1, 7, -12, 10.5, 0.5]   (all exact in f32)
    assert_close(
        w.array(),
        &arr(&[-0.5, -1.0, 7.0, -12.0, 10.5, 0.5], &shape),
        0.0,
        0.0,
    );

    w.set_grad_array(arr(&GW, &shape).astype(dtype)?)?;
    w.backward()?;
    // gx = y * gw = [-1*1, 0.5*2, 2*3, -3*-1, 1.5*0.5, 0.25*2] = [-1, 1, 6, 3, 0.75, 0.5]
    // gy = x * gw = [1*1, 2*2, 3*3, 4*-1, 5*0.5, 6*2]          = [1, 4, 9, -4, 2.5, 12]
    // gz = gw
    for (v, expected) in [
        (&x, [-1.0, 1.0, 6.0, 3.0, 0.75, 0.5]),
        (&y, [1.0, 4.0, 9.0, -4.0, 2.5, 12.0]),
        (&z, GW),
    ] {
        let g = grad_of(v);
        assert_eq!(g.dtype(), dtype, "gradient has the input's dtype");
        assert_close(&g, &arr(&expected, &shape), 0.0, 0.0);
    }
    Ok(())
}

#[test]
fn muladd_forward_and_backward_by_hand_f32() -> Result<()> {
    muladd_by_hand(DType::F32)
}

#[test]
fn muladd_forward_and_backward_by_hand_f64() -> Result<()> {
    muladd_by_hand(DType::F64)
}

#[test]
fn muladd_matches_numerical_gradient() -> Result<()> {
    let inputs = [
        uniform(&[3, 2], 1),
        uniform(&[3, 2], 2),
        uniform(&[3, 2], 3),
    ];
    let gy = uniform(&[3, 2], 4);
    check_backward_numerically(|| MulAdd, &inputs, &gy, 1e-6, 1e-7)?;
    let inputs32: Vec<Array> = inputs
        .iter()
        .map(|a| a.astype(DType::F32))
        .collect::<Result<_>>()?;
    check_backward_numerically(|| MulAdd, &inputs32, &gy, 1e-2, 1e-3)
}

fn expadd_by_hand(dtype: DType, tol: f64) -> Result<()> {
    let shape = [3, 2];
    let xs = [0.0, 1.0, -1.0, 0.5, 2.0, -0.5];
    let ys = [0.0, -1.0, 1.0, 0.25, -2.0, 3.0];
    let (x, y) = (var(&xs, &shape, dtype), var(&ys, &shape, dtype));
    let z = first(ExpAdd.apply(&[&x, &y])?);
    // z = e^x + e^y; e.g. z[0] = e^0 + e^0 = 2, z[1] = e + 1/e ≈ 3.0862
    let expected = elementwise(&shape, &[&xs, &ys], |v| v[0].exp() + v[1].exp());
    assert_close(z.array(), &expected, tol, tol);

    z.set_grad_array(arr(&GW, &shape).astype(dtype)?)?;
    z.backward()?;
    // gx = gz * e^x, gy = gz * e^y
    let gx = elementwise(&shape, &[&xs, &GW], |v| v[1] * v[0].exp());
    let gy = elementwise(&shape, &[&ys, &GW], |v| v[1] * v[0].exp());
    assert_close(&grad_of(&x), &gx, tol, tol);
    assert_close(&grad_of(&y), &gy, tol, tol);
    assert_eq!(grad_of(&x).dtype(), dtype);
    Ok(())
}

#[test]
fn expadd_forward_and_backward_by_hand_f32() -> Result<()> {
    expadd_by_hand(DType::F32, 1e-6)
}

#[test]
fn expadd_forward_and_backward_by_hand_f64() -> Result<()> {
    expadd_by_hand(DType::F64, 1e-12)
}

#[test]
fn expadd_matches_numerical_gradient() -> Result<()> {
    let inputs = [uniform(&[3, 2], 5), uniform(&[3, 2], 6)];
    let gy = uniform(&[3, 2], 7);
    check_backward_numerically(|| ExpAdd, &inputs, &gy, 1e-6, 1e-7)?;
    let inputs32: Vec<Array> = inputs
        .iter()
        .map(|a| a.astype(DType::F32))
        .collect::<Result<_>>()?;
    check_backward_numerically(|| ExpAdd, &inputs32, &gy, 1e-2, 1e-3)
}

#[test]
fn expadd_backward_is_differentiable_again() -> Result<()> {
    // d²/dx² Σ (e^x + e^y) = e^x: ExpAdd's backward is written with F::exp.
    let xs = [0.0, 1.0, -1.0, 0.5, 2.0, -0.5];
    let x = var(&xs, &[3, 2], DType::F64);
    let y = var(&[0.0; 6], &[3, 2], DType::F64);
    let s = F::sum(&first(ExpAdd.apply(&[&x, &y])?))?;
    let opts = GradOptions {
        enable_double_backprop: true,
        ..Default::default()
    };
    let gx = some(grad(&[&s], &[&x], None, opts)?.remove(0));
    assert!(gx.has_creator(), "double backprop records the gradient");
    let ggx = some(grad(&[&F::sum(&gx)?], &[&x], None, GradOptions::default())?.remove(0));
    assert_close(
        ggx.array(),
        &elementwise(&[3, 2], &[&xs], |v| v[0].exp()),
        1e-12,
        1e-12,
    );
    Ok(())
}

// ---------------------------------------------------------------------------------------------
// Higher-order gradients
// ---------------------------------------------------------------------------------------------

#[test]
fn second_derivative_of_cube_via_grad() -> Result<()> {
    let xs = [-2.0, -0.5, 0.0, 1.0, 1.5, 3.0];
    let x = var(&xs, &[3, 2], DType::F64);
    let y = F::sum(&(&(&x * &x)? * &x)?)?;
    let opts = GradOptions {
        enable_double_backprop: true,
        ..Default::default()
    };
    let gx = some(grad(&[&y], &[&x], None, opts)?.remove(0));
    // d/dx x³ = 3x² = [12, 0.75, 0, 3, 6.75, 27]
    assert_close(
        gx.array(),
        &arr(&[12.0, 0.75, 0.0, 3.0, 6.75, 27.0], &[3, 2]),
        0.0,
        0.0,
    );
    assert!(x.grad().is_none(), "grad() leaves x.grad alone");
    // d²/dx² x³ = 6x = [-12, -3, 0, 6, 9, 18]
    let ggx = some(grad(&[&F::sum(&gx)?], &[&x], None, GradOptions::default())?.remove(0));
    assert_close(
        ggx.array(),
        &arr(&[-12.0, -3.0, 0.0, 6.0, 9.0, 18.0], &[3, 2]),
        1e-12,
        0.0,
    );
    Ok(())
}

#[test]
fn second_derivative_of_cube_via_backward_on_the_gradient() -> Result<()> {
    let xs = [-2.0, -0.5, 0.0, 1.0, 1.5, 3.0];
    let x = var(&xs, &[3, 2], DType::F64);
    let y = F::sum(&(&(&x * &x)? * &x)?)?;
    let opts = GradOptions {
        enable_double_backprop: true,
        ..Default::default()
    };
    let gx = some(grad(&[&y], &[&x], None, opts)?.remove(0));
    // Σ 3x² backward gives 6x in x.grad (x.grad was empty: grad() did not fill it).
    F::sum(&gx)?.backward()?;
    assert_close(
        &grad_of(&x),
        &arr(&[-12.0, -3.0, 0.0, 6.0, 9.0, 18.0], &[3, 2]),
        1e-12,
        0.0,
    );
    Ok(())
}

#[test]
fn second_derivative_via_backward_with_double_backprop() -> Result<()> {
    let x = var(&[2.0, -1.0], &[2], DType::F64);
    let y = F::sum(&(&(&x * &x)? * &x)?)?;
    y.backward_with(BackwardOptions {
        enable_double_backprop: true,
        ..Default::default()
    })?;
    let gx = x.grad().expect("backward filled x.grad");
    // 3x² = [12, 3]
    assert_close(gx.array(), &arr(&[12.0, 3.0], &[2]), 0.0, 0.0);
    assert!(gx.has_creator(), "the gradient was recorded");
    x.cleargrad();
    F::sum(&gx)?.backward()?;
    // 6x = [12, -6]
    assert_close(&grad_of(&x), &arr(&[12.0, -6.0], &[2]), 1e-12, 0.0);
    Ok(())
}

#[test]
fn without_double_backprop_gradients_are_constants() -> Result<()> {
    let x = var(&[2.0], &[1], DType::F64);
    let y = (&(&x * &x)? * &x)?;
    let gx = some(grad(&[&y], &[&x], None, GradOptions::default())?.remove(0));
    assert!(!gx.has_creator());
    // 3x² = 12
    assert_close(gx.array(), &arr(&[12.0], &[1]), 0.0, 0.0);
    // Differentiating a constant gradient again gives nothing.
    assert!(grad(&[&gx], &[&x], None, GradOptions::default())?[0].is_none());
    Ok(())
}

/// Two outputs, both e^x; backward reads only the retained second output:
/// d(y0 + y1)/dx = (g0 + g1) · e^x = (g0 + g1) · y1.
struct TwinExp;

impl FunctionNode for TwinExp {
    fn forward(&mut self, ctx: &mut ForwardContext, inputs: &[Array]) -> Result<Vec<Array>> {
        ctx.retain_outputs(&[1]);
        Ok(vec![inputs[0].exp()?, inputs[0].exp()?])
    }

    fn backward(
        &self,
        ctx: &BackwardContext<'_>,
        _: &[usize],
        grad_outputs: &[Option<Variable>],
    ) -> Result<Vec<Option<Variable>>> {
        let y1 = ctx.retained_output(1)?;
        let g = match grad_outputs {
            [Some(g0), Some(g1)] => (g0 + g1)?,
            [Some(g), None] | [None, Some(g)] => g.clone(),
            _ => return Err(Error::msg("TwinExp: no gradient")),
        };
        Ok(vec![Some((&g * &y1)?)])
    }
}

#[test]
fn double_backprop_through_a_retained_output_whose_variable_is_gone() -> Result<()> {
    // Only y0 is used; the variable of y1 (retained, read by backward) is dropped at once. The
    // gradient e^x still depends on x through y1, so d²/dx² Σ e^x = e^x.
    let xs = [0.5, -1.0];
    let x = var(&xs, &[2], DType::F64);
    let y0 = TwinExp.apply(&[&x])?.remove(0);
    let s = F::sum(&y0)?;
    let opts = GradOptions {
        enable_double_backprop: true,
        ..Default::default()
    };
    let gx = some(grad(&[&s], &[&x], None, opts)?.remove(0));
    let e = elementwise(&[2], &[&xs], |v| v[0].exp());
    assert_close(gx.array(), &e, 0.0, 1e-15);
    let ggx = grad(&[&F::sum(&gx)?], &[&x], None, GradOptions::default())?.remove(0);
    assert_close(some(ggx).array(), &e, 0.0, 1e-15);
    Ok(())
}

// ---------------------------------------------------------------------------------------------
// Accumulation, seeding, retain_grad, loss scale
// ---------------------------------------------------------------------------------------------

#[test]
fn gradients_accumulate_over_backward_calls_and_cleargrad_resets() -> Result<()> {
    let x = var(&[1.0, -2.0, 3.0], &[3], DType::F64);
    let y = F::sum(&(&x * &x)?)?;
    y.backward()?;
    // d Σx²/dx = 2x
    assert_close(&grad_of(&x), &arr(&[2.0, -4.0, 6.0], &[3]), 0.0, 0.0);
    y.backward()?;
    // accumulated: 2x + 2x = 4x
    assert_close(&grad_of(&x), &arr(&[4.0, -8.0, 12.0], &[3]), 0.0, 0.0);
    x.cleargrad();
    assert!(x.grad().is_none());
    y.backward()?;
    assert_close(&grad_of(&x), &arr(&[2.0, -4.0, 6.0], &[3]), 0.0, 0.0);
    Ok(())
}

#[test]
fn intermediate_gradients_are_dropped_unless_retained() -> Result<()> {
    let x = var(&[1.0, 2.0], &[2], DType::F64);
    let h = (&x * 3.0)?;
    let y = F::sum(&(&h * &h)?)?;
    y.backward()?;
    assert!(h.grad().is_none(), "intermediate grad dropped by default");
    // y = Σ 9x², dy/dx = 18x = [18, 36]
    assert_close(&grad_of(&x), &arr(&[18.0, 36.0], &[2]), 0.0, 0.0);

    x.cleargrad();
    y.backward_with(BackwardOptions {
        retain_grad: true,
        ..Default::default()
    })?;
    // dy/dh = 2h = [6, 12]
    assert_close(&grad_of(&h), &arr(&[6.0, 12.0], &[2]), 0.0, 0.0);
    assert_close(&grad_of(&x), &arr(&[18.0, 36.0], &[2]), 0.0, 0.0);
    Ok(())
}

#[test]
fn one_element_output_is_seeded_with_one() -> Result<()> {
    let x = var(&[1.0, 2.0, 3.0], &[3], DType::F32);
    // A 0-d output.
    let y = F::sum(&(&x * 3.0)?)?;
    assert_eq!(y.shape(), &[] as &[usize]);
    assert!(y.grad().is_none());
    y.backward()?;
    assert_close(&grad_of(&y), &Array::ones(&[], DType::F32)?, 0.0, 0.0);
    assert_close(&grad_of(&x), &arr(&[3.0, 3.0, 3.0], &[3]), 0.0, 0.0);

    // A [1, 1] output is also one element.
    let u = var(&[5.0], &[1, 1], DType::F64);
    let v = (&u * &u)?;
    v.backward()?;
    // d u²/du = 2u = 10
    assert_close(&grad_of(&u), &arr(&[10.0], &[1, 1]), 0.0, 0.0);
    Ok(())
}

#[test]
fn loss_scale_multiplies_leaf_gradients_and_is_recorded() -> Result<()> {
    let x = var(&[1.0, -2.0], &[2], DType::F64);
    let y = F::sum(&(&x * &x)?)?;
    y.backward_with(BackwardOptions {
        loss_scale: Some(8.0),
        ..Default::default()
    })?;
    // 8 * 2x = [16, -32]
    assert_close(&grad_of(&x), &arr(&[16.0, -32.0], &[2]), 0.0, 0.0);
    assert_eq!(x.loss_scale(), Some(8.0));
    x.cleargrad();
    assert_eq!(x.loss_scale(), None, "cleargrad forgets the loss scale");
    y.backward()?;
    assert_close(&grad_of(&x), &arr(&[2.0, -4.0], &[2]), 0.0, 0.0);
    assert_eq!(x.loss_scale(), None);

    // grad() honours it too.
    let g = some(
        grad(
            &[&y],
            &[&x],
            None,
            GradOptions {
                loss_scale: Some(0.5),
                ..Default::default()
            },
        )?
        .remove(0),
    );
    // 0.5 * 2x = x
    assert_close(g.array(), &arr(&[1.0, -2.0], &[2]), 0.0, 0.0);
    Ok(())
}

// ---------------------------------------------------------------------------------------------
// Graph shapes: reuse, diamonds, rank order
// ---------------------------------------------------------------------------------------------

#[test]
fn variable_used_several_times_gets_the_summed_gradient() -> Result<()> {
    let x = var(&[-1.5, 0.0, 2.0], &[3], DType::F64);
    let y = F::sum(&(&(&x * &x)? + &x)?)?;
    y.backward()?;
    // d(x² + x)/dx = 2x + 1 = [-2, 1, 5]
    assert_close(&grad_of(&x), &arr(&[-2.0, 1.0, 5.0], &[3]), 0.0, 0.0);

    // The same input twice in one function: x + x → 2.
    let a = var(&[4.0], &[1], DType::F64);
    F::add(&a, &a)?.backward()?;
    assert_close(&grad_of(&a), &arr(&[2.0], &[1]), 0.0, 0.0);
    Ok(())
}

#[test]
fn diamond_graph() -> Result<()> {
    //        x
    //        |
    //      h = 2x
    //     /      \
    //  p = h*h   q = 3h
    //     \      /
    //     w = p + q
    // w = 4x² + 6x, dw/dx = 8x + 6
    let xs = [-1.0, 0.5, 2.0];
    let x = var(&xs, &[3], DType::F64);
    let h = (&x * 2.0)?;
    let p = (&h * &h)?;
    let q = (&h * 3.0)?;
    let w = F::sum(&(&p + &q)?)?;
    w.backward()?;
    assert_close(&grad_of(&x), &arr(&[-2.0, 10.0, 22.0], &[3]), 0.0, 0.0);

    // Check against finite differences of the same graph.
    let num = numerical_grad(
        |xs| {
            let x = Variable::constant(xs[0].clone());
            let h = (&x * 2.0)?;
            Ok(F::sum(&(&(&h * &h)? + &(&h * 3.0)?)?)?.array().clone())
        },
        &[arr(&xs, &[3])],
        &Array::ones(&[], DType::F64)?,
        1e-6,
    )?;
    assert_close(&grad_of(&x), &num[0], 1e-6, 1e-6);
    Ok(())
}

/// Identity that records, in a shared log, each backward call with the gradient it received.
struct Tracer {
    name: &'static str,
    log: Arc<Mutex<Vec<(&'static str, f64)>>>,
}

impl FunctionNode for Tracer {
    fn forward(&mut self, _: &mut ForwardContext, inputs: &[Array]) -> Result<Vec<Array>> {
        Ok(vec![inputs[0].mul_scalar(1.0)?])
    }

    fn backward(
        &self,
        _: &BackwardContext<'_>,
        _: &[usize],
        grad_outputs: &[Option<Variable>],
    ) -> Result<Vec<Option<Variable>>> {
        let g = grad_outputs[0]
            .as_ref()
            .ok_or_else(|| Error::msg("Tracer: no gradient"))?;
        let sum = g.array().to_f64_vec()?.iter().sum();
        self.log
            .lock()
            .unwrap_or_else(|e| e.into_inner())
            .push((self.name, sum));
        Ok(vec![Some(g.clone())])
    }
}

fn trace(
    name: &'static str,
    log: &Arc<Mutex<Vec<(&'static str, f64)>>>,
    x: &Variable,
) -> Result<Variable> {
    Ok(first(
        Tracer {
            name,
            log: log.clone(),
        }
        .apply(&[x])?,
    ))
}

#[test]
fn functions_run_only_after_all_their_output_gradients_arrived() -> Result<()> {
    // a feeds both the final add directly and a chain b → c. a's backward must run once, after
    // c and b, with the sum of both gradients (1 + 1 = 2).
    let log = Arc::new(Mutex::new(Vec::new()));
    let x = var(&[1.0], &[1], DType::F64);
    let a = trace("a", &log, &x)?;
    let b = trace("b", &log, &a)?;
    let c = trace("c", &log, &b)?;
    let y = (&a + &c)?;
    y.backward()?;
    let log = log.lock().unwrap_or_else(|e| e.into_inner()).clone();
    assert_eq!(log, vec![("c", 1.0), ("b", 1.0), ("a", 2.0)]);
    assert_close(&grad_of(&x), &arr(&[2.0], &[1]), 0.0, 0.0);
    Ok(())
}

/// Two outputs, `x` and `2x`; records which output gradients each backward call received.
struct Fork {
    seen: Arc<Mutex<Vec<(bool, bool)>>>,
}

impl FunctionNode for Fork {
    fn forward(&mut self, _: &mut ForwardContext, inputs: &[Array]) -> Result<Vec<Array>> {
        Ok(vec![inputs[0].mul_scalar(1.0)?, inputs[0].mul_scalar(2.0)?])
    }

    fn backward(
        &self,
        _: &BackwardContext<'_>,
        _: &[usize],
        grad_outputs: &[Option<Variable>],
    ) -> Result<Vec<Option<Variable>>> {
        self.seen
            .lock()
            .unwrap_or_else(|e| e.into_inner())
            .push((grad_outputs[0].is_some(), grad_outputs[1].is_some()));
        // d(x)/dx = 1, d(2x)/dx = 2
        let gx = match grad_outputs {
            [Some(g0), Some(g1)] => (g0 + &(g1 * 2.0)?)?,
            [Some(g0), None] => g0.clone(),
            [None, Some(g1)] => (g1 * 2.0)?,
            _ => return Err(Error::msg("Fork: no gradient")),
        };
        Ok(vec![Some(gx)])
    }
}

#[test]
fn multi_output_function_waits_for_both_gradients() -> Result<()> {
    let seen = Arc::new(Mutex::new(Vec::new()));
    let log = Arc::new(Mutex::new(Vec::new()));
    let x = var(&[1.0, 2.0], &[2], DType::F64);
    let mut outs = Fork { seen: seen.clone() }.apply(&[&x])?;
    let (o0, o1) = (outs.remove(0), outs.remove(0));
    // o1 goes through a longer path than o0.
    let mut long = o1;
    for _ in 0..5 {
        long = trace("t", &log, &long)?;
    }
    let y = (F::sum(&o0)? + F::sum(&long)?)?;
    y.backward()?;
    assert_eq!(
        *seen.lock().unwrap_or_else(|e| e.into_inner()),
        vec![(true, true)]
    );
    // d(Σx + Σ2x)/dx = 3
    assert_close(&grad_of(&x), &arr(&[3.0, 3.0], &[2]), 0.0, 0.0);
    Ok(())
}

#[test]
fn output_without_gradient_is_passed_as_none() -> Result<()> {
    let seen = Arc::new(Mutex::new(Vec::new()));
    let x = var(&[1.0, 2.0], &[2], DType::F64);
    let mut outs = Fork { seen: seen.clone() }.apply(&[&x])?;
    let o0 = outs.remove(0);
    let _unused_o1 = outs.remove(0);
    F::sum(&o0)?.backward()?;
    assert_eq!(
        *seen.lock().unwrap_or_else(|e| e.into_inner()),
        vec![(true, false)]
    );
    assert_close(&grad_of(&x), &arr(&[1.0, 1.0], &[2]), 0.0, 0.0);

    // Same when the unused output variable is gone.
    let seen = Arc::new(Mutex::new(Vec::new()));
    let x = var(&[1.0, 2.0], &[2], DType::F64);
    let o1 = Fork { seen: seen.clone() }.apply(&[&x])?.remove(1);
    F::sum(&o1)?.backward()?;
    assert_eq!(
        *seen.lock().unwrap_or_else(|e| e.into_inner()),
        vec![(false, true)]
    );
    assert_close(&grad_of(&x), &arr(&[2.0, 2.0], &[2]), 0.0, 0.0);
    Ok(())
}

#[test]
fn ranks_count_the_longest_path_from_a_leaf() -> Result<()> {
    let x = var(&[1.0], &[1], DType::F64);
    assert_eq!(x.rank(), 0);
    let a = (&x * 2.0)?; // 1
    let b = (&a * 2.0)?; // 2
    let c = (&b + &x)?; // max(2, 0) + 1 = 3
    assert_eq!((a.rank(), b.rank(), c.rank()), (1, 2, 3));
    Ok(())
}

// ---------------------------------------------------------------------------------------------
// Memory
// ---------------------------------------------------------------------------------------------

#[test]
fn retained_inputs_live_as_long_as_the_output() -> Result<()> {
    let (w, wx, wy, wz) = {
        let x = var(&XS, &[3, 2], DType::F32);
        let y = var(&YS, &[3, 2], DType::F32);
        let z = var(&ZS, &[3, 2], DType::F32);
        let handles = (
            x.array().downgrade(),
            y.array().downgrade(),
            z.array().downgrade(),
        );
        let w = first(MulAdd.apply(&[&x, &y, &z])?);
        (w, handles.0, handles.1, handles.2)
    };
    // Only the graph holds x and y (retained); z was not retained, so it is already gone.
    assert!(wx.is_alive() && wy.is_alive());
    assert!(
        !wz.is_alive(),
        "a non-retained input is not kept by the graph"
    );
    let w_data = w.array().downgrade();
    drop(w);
    assert!(
        !wx.is_alive() && !wy.is_alive(),
        "dropping the output frees the graph"
    );
    assert!(!w_data.is_alive());
    Ok(())
}

#[test]
fn intermediate_arrays_are_freed_when_their_variable_goes() -> Result<()> {
    let x = var(&[1.0, 2.0], &[2], DType::F64);
    let h = (&x * 3.0)?; // MulConstant retains nothing
    let weak_h = h.array().downgrade();
    let y = F::sum(&F::exp(&h)?)?; // Exp retains its output, not h
    drop(h);
    assert!(!weak_h.is_alive(), "nothing in the graph needs h's data");
    y.backward()?;
    // d Σ e^{3x} / dx = 3 e^{3x}
    let expected = elementwise(&[2], &[&[1.0, 2.0]], |v| 3.0 * (3.0 * v[0]).exp());
    assert_close(&grad_of(&x), &expected, 0.0, 1e-12);
    Ok(())
}

#[test]
fn unchain_backward_frees_retained_arrays_while_the_output_lives() -> Result<()> {
    let (w, wx, wy) = {
        let x = var(&XS, &[3, 2], DType::F64);
        let y = var(&YS, &[3, 2], DType::F64);
        let z = var(&ZS, &[3, 2], DType::F64);
        let w = first(MulAdd.apply(&[&x, &y, &z])?);
        (w, x.array().downgrade(), y.array().downgrade())
    };
    let v = (&w * 2.0)?;
    assert!(wx.is_alive() && wy.is_alive());
    v.unchain_backward();
    assert!(!v.has_creator() && !w.has_creator());
    assert!(
        !wx.is_alive() && !wy.is_alive(),
        "unchain_backward frees the graph"
    );
    // The data of the outputs is untouched.
    assert_close(
        w.array(),
        &arr(&[-0.5, -1.0, 7.0, -12.0, 10.5, 0.5], &[3, 2]),
        0.0,
        0.0,
    );
    Ok(())
}

#[test]
fn unchain_stops_backward_at_that_variable() -> Result<()> {
    let x = var(&[1.0, 2.0], &[2], DType::F64);
    let h = (&x * &x)?;
    let y = F::sum(&(&h * 3.0)?)?;
    h.unchain();
    assert!(!h.has_creator());
    y.backward()?;
    // h is now where backward stops: it gets dy/dh = 3, and x gets nothing.
    assert_close(&grad_of(&h), &arr(&[3.0, 3.0], &[2]), 0.0, 0.0);
    assert!(x.grad().is_none());
    Ok(())
}

#[test]
fn a_very_deep_chain_is_built_and_dropped_without_stack_overflow() -> Result<()> {
    let x = var(&[0.0], &[1], DType::F32);
    let c = Variable::constant(arr(&[1.0], &[1]).astype(DType::F32)?);
    let weak_x = x.array().downgrade();
    let mut v = x.clone();
    drop(x);
    for i in 0..100_000 {
        // Mul retains both of its inputs, so every step keeps data alive until the drop.
        v = if i % 2 == 0 { (&v * &c)? } else { (&v + 1.0)? };
    }
    assert_eq!(v.rank(), 100_000);
    // 50 000 additions of 1 (exact in f32).
    assert_close(v.array(), &arr(&[50_000.0], &[1]), 0.0, 0.0);
    assert!(weak_x.is_alive(), "the first Mul retained x");
    drop(v);
    assert!(!weak_x.is_alive());
    Ok(())
}

#[test]
fn a_very_deep_chain_is_unchained_without_stack_overflow() -> Result<()> {
    let x = var(&[0.0], &[1], DType::F32);
    let c = Variable::constant(arr(&[1.0], &[1]).astype(DType::F32)?);
    let weak_x = x.array().downgrade();
    let mut v = x.clone();
    drop(x);
    for _ in 0..100_000 {
        v = (&v * &c)?;
    }
    assert!(weak_x.is_alive());
    v.unchain_backward();
    assert!(!v.has_creator());
    assert!(!weak_x.is_alive(), "the whole chain was freed");
    Ok(())
}

#[test]
fn backward_through_a_deep_chain() -> Result<()> {
    let x = var(&[1.0, 2.0], &[2], DType::F64);
    let mut v = x.clone();
    for _ in 0..10_000 {
        v = (&v + 0.5)?;
    }
    // v = x + 5000, dv/dx = 1
    assert_close(v.array(), &arr(&[5001.0, 5002.0], &[2]), 0.0, 0.0);
    let y = F::sum(&(&v * 2.0)?)?;
    y.backward()?;
    assert_close(&grad_of(&x), &arr(&[2.0, 2.0], &[2]), 0.0, 0.0);
    // grad() walks the same chain to decide what leads to x.
    let g = some(grad(&[&y], &[&x], None, GradOptions::default())?.remove(0));
    assert_close(g.array(), &arr(&[2.0, 2.0], &[2]), 0.0, 0.0);
    Ok(())
}

// ---------------------------------------------------------------------------------------------
// grad()
// ---------------------------------------------------------------------------------------------

#[test]
fn grad_does_not_touch_leaf_grads() -> Result<()> {
    let x = var(&[1.0, 2.0], &[2], DType::F64);
    x.set_grad_array(arr(&[100.0, 200.0], &[2]))?;
    let y = F::sum(&(&x * &x)?)?;
    let g = some(grad(&[&y], &[&x], None, GradOptions::default())?.remove(0));
    assert_close(g.array(), &arr(&[2.0, 4.0], &[2]), 0.0, 0.0);
    assert_close(&grad_of(&x), &arr(&[100.0, 200.0], &[2]), 0.0, 0.0);
    assert!(
        y.grad().is_none(),
        "grad() does not set the output's grad either"
    );
    Ok(())
}

#[test]
fn grad_with_respect_to_an_intermediate_variable() -> Result<()> {
    let x = var(&[1.0, -2.0], &[2], DType::F64);
    let h = (&x * &x)?;
    let y = F::sum(&(&h * 3.0)?)?;
    // dy/dh = 3
    let gh = some(grad(&[&y], &[&h], None, GradOptions::default())?.remove(0));
    assert_close(gh.array(), &arr(&[3.0, 3.0], &[2]), 0.0, 0.0);
    // Both at once: dy/dh = 3, dy/dx = 3 * 2x = [6, -12]
    let gs = grad(&[&y], &[&h, &x], None, GradOptions::default())?;
    assert_close(
        some(gs[0].clone()).array(),
        &arr(&[3.0, 3.0], &[2]),
        0.0,
        0.0,
    );
    assert_close(
        some(gs[1].clone()).array(),
        &arr(&[6.0, -12.0], &[2]),
        0.0,
        0.0,
    );
    assert!(h.grad().is_none() && x.grad().is_none());
    Ok(())
}

#[test]
fn grad_with_grad_outputs_and_grad_inputs() -> Result<()> {
    let x = var(&[1.0, 2.0, 3.0], &[3], DType::F64);
    let y = (&x * &x)?; // not one element: needs grad_outputs
    let gy = Variable::constant(arr(&[1.0, 0.5, -1.0], &[3]));
    let g = some(grad(&[&y], &[&x], &[&gy], GradOptions::default())?.remove(0));
    // 2x * gy = [2, 2, -6]
    assert_close(g.array(), &arr(&[2.0, 2.0, -6.0], &[3]), 0.0, 0.0);

    let extra = Variable::constant(arr(&[10.0, 20.0, 30.0], &[3]));
    let g = some(
        grad(
            &[&y],
            &[&x],
            &[gy],
            GradOptions {
                grad_inputs: Some(vec![Some(extra)]),
                ..Default::default()
            },
        )?
        .remove(0),
    );
    // [2, 2, -6] + [10, 20, 30]
    assert_close(g.array(), &arr(&[12.0, 22.0, 24.0], &[3]), 0.0, 0.0);

    // Two outputs, each with its own gradient: y1 = x², y2 = 3x → 2x·g1 + 3·g2
    let y2 = (&x * 3.0)?;
    let g1 = Variable::constant(arr(&[1.0, 1.0, 1.0], &[3]));
    let g2 = Variable::constant(arr(&[0.0, 1.0, 2.0], &[3]));
    let g = some(grad(&[&y, &y2], &[&x], &[g1, g2], GradOptions::default())?.remove(0));
    // [2+0, 4+3, 6+6]
    assert_close(g.array(), &arr(&[2.0, 7.0, 12.0], &[3]), 0.0, 0.0);
    Ok(())
}

#[test]
fn grad_set_grad_stores_the_results() -> Result<()> {
    let x = var(&[1.0, 2.0], &[2], DType::F64);
    x.set_grad_array(arr(&[100.0, 100.0], &[2]))?;
    let y = F::sum(&(&x * &x)?)?;
    grad(
        &[&y],
        &[&x],
        None,
        GradOptions {
            set_grad: true,
            ..Default::default()
        },
    )?;
    // Replaced, not accumulated: 2x
    assert_close(&grad_of(&x), &arr(&[2.0, 4.0], &[2]), 0.0, 0.0);
    Ok(())
}

#[test]
fn grad_of_unrelated_inputs_is_none() -> Result<()> {
    let x = var(&[1.0], &[1], DType::F64);
    let unrelated = var(&[5.0], &[1], DType::F64);
    let c = Variable::constant(arr(&[2.0], &[1]));
    let y = (&x * &c)?;
    let gs = grad(&[&y], &[&x, &unrelated, &c], None, GradOptions::default())?;
    assert_close(some(gs[0].clone()).array(), &arr(&[2.0], &[1]), 0.0, 0.0);
    assert!(gs[1].is_none(), "an input the output does not depend on");
    assert!(gs[2].is_none(), "a constant input");
    Ok(())
}

// ---------------------------------------------------------------------------------------------
// Configuration
// ---------------------------------------------------------------------------------------------

#[test]
fn no_backprop_mode_records_no_graph() -> Result<()> {
    let x = var(&[1.0, 2.0], &[2], DType::F64);
    {
        let _guard = no_backprop_mode();
        assert!(!config::enable_backprop());
        let y = F::sum(&(&x * &x)?)?;
        assert!(!y.has_creator());
        // Values are still computed: 1 + 4
        assert_close(y.array(), &Array::full(&[], 5.0, DType::F64)?, 0.0, 0.0);
        y.backward()?;
        assert!(x.grad().is_none(), "nothing to backprop through");
        {
            let _force = config::force_backprop_mode();
            let z = (&x * 2.0)?;
            assert!(
                z.has_creator(),
                "force_backprop_mode records inside no_backprop_mode"
            );
        }
        assert!(!config::enable_backprop());
    }
    assert!(config::enable_backprop(), "guard restored the mode");
    let y = F::sum(&(&x * &x)?)?;
    assert!(y.has_creator());
    Ok(())
}

#[test]
fn config_guards_restore_on_drop_in_any_nesting() {
    let before = config::current();
    let a = using_train(false);
    assert!(!config::train());
    let b = using_train(true);
    assert!(config::train());
    let c = config::using_debug(!before.debug);
    assert_eq!(config::debug(), !before.debug);
    assert!(config::train());
    drop(c);
    assert_eq!(config::debug(), before.debug);
    drop(b);
    assert!(!config::train());
    drop(a);
    assert_eq!(config::current(), before);
}

#[test]
fn dropout_in_test_mode_is_the_identity() -> Result<()> {
    let x = var(&[1.0, 2.0, 3.0, 4.0], &[4], DType::F32);
    let _test = using_train(false);
    let y = F::dropout(&x, 0.5)?;
    assert!(y.same_node(&x), "x itself comes back");
    assert_close(y.array(), &arr(&[1.0, 2.0, 3.0, 4.0], &[4]), 0.0, 0.0);
    Ok(())
}

#[test]
fn dropout_in_train_mode_zeroes_about_ratio_and_scales_survivors() -> Result<()> {
    kusari::random::seed(1234);
    let n = 20_000;
    let ratio = 0.25;
    let x = Variable::new(Array::ones(&[n], DType::F64)?);
    let y = {
        let _train = using_train(true);
        F::dropout(&x, ratio)?
    };
    let values = y.array().to_vec::<f64>()?;
    let zeros = values.iter().filter(|&&v| v == 0.0).count();
    let scale = 1.0 / (1.0 - ratio); // 4/3
    assert!(
        values
            .iter()
            .all(|&v| v == 0.0 || (v - scale).abs() < 1e-12),
        "survivors are scaled by 1/(1 - ratio)"
    );
    // Binomial(20000, 0.25): mean 5000, sd ≈ 61; allow ±6 sd.
    assert!(
        (4_630..=5_370).contains(&zeros),
        "{zeros} of {n} zeroed for ratio {ratio}"
    );
    // The gradient is the same mask.
    F::sum(&y)?.backward()?;
    assert_eq!(grad_of(&x).to_vec::<f64>()?, values);
    Ok(())
}

#[test]
fn a_new_thread_starts_from_the_global_defaults() {
    let _eval = using_train(false);
    let _no_bp = no_backprop_mode();
    assert!(!config::train() && !config::enable_backprop());
    let seen = std::thread::spawn(|| (config::train(), config::enable_backprop()))
        .join()
        .expect("thread ran");
    // The guards belong to this thread; the new one starts from the (untouched) defaults.
    assert_eq!(seen, (true, true));
    assert!(!config::train(), "this thread's guard is still in force");
}

#[test]
fn set_global_changes_the_defaults_of_new_threads() {
    // Only `debug` is toggled here, and restored at the end: other tests in this binary produce
    // no NaN, so they do not care about it if their thread starts meanwhile.
    let old = config::global();
    let mine = config::current();
    config::set_global(config::Config {
        debug: !old.debug,
        ..old
    });
    let seen = std::thread::spawn(config::current)
        .join()
        .expect("thread ran");
    config::set_global(old);
    assert_eq!(seen.debug, !old.debug);
    assert_eq!(
        (seen.train, seen.enable_backprop),
        (old.train, old.enable_backprop)
    );
    assert_eq!(
        config::current(),
        mine,
        "a running thread keeps its configuration"
    );
    let after = std::thread::spawn(config::current)
        .join()
        .expect("thread ran");
    assert_eq!(after, old);
}

// ---------------------------------------------------------------------------------------------
// Old-style Function
// ---------------------------------------------------------------------------------------------

/// The tutorial's MulAdd as an old-style function: forward and backward on arrays.
struct OldMulAdd;

impl Function for OldMulAdd {
    fn forward(&mut self, inputs: &[Array]) -> Result<Vec<Array>> {
        Ok(vec![inputs[0].mul_add(&inputs[1], &inputs[2])?])
    }

    fn backward(
        &self,
        inputs: &[Array],
        grad_outputs: &[Option<Array>],
    ) -> Result<Vec<Option<Array>>> {
        let gw = grad_outputs[0]
            .as_ref()
            .ok_or_else(|| Error::msg("OldMulAdd: no gradient"))?;
        Ok(vec![
            Some(inputs[1].mul(gw)?),
            Some(inputs[0].mul(gw)?),
            Some(gw.clone()),
        ])
    }
}

#[test]
fn old_style_function_first_order_gradients() -> Result<()> {
    let shape = [3, 2];
    let (x, y, z) = (
        var(&XS, &shape, DType::F32),
        var(&YS, &shape, DType::F32),
        var(&ZS, &shape, DType::F32),
    );
    let w = first(OldMulAdd.call(&[&x, &y, &z])?);
    assert_eq!(w.creator_label().as_deref(), Some("OldMulAdd"));
    assert_close(
        w.array(),
        &arr(&[-0.5, -1.0, 7.0, -12.0, 10.5, 0.5], &shape),
        0.0,
        0.0,
    );
    w.set_grad_array(arr(&GW, &shape).astype(DType::F32)?)?;
    w.backward()?;
    // Same hand-derived values as the FunctionNode MulAdd.
    assert_close(
        &grad_of(&x),
        &arr(&[-1.0, 1.0, 6.0, 3.0, 0.75, 0.5], &shape),
        0.0,
        0.0,
    );
    assert_close(
        &grad_of(&y),
        &arr(&[1.0, 4.0, 9.0, -4.0, 2.5, 12.0], &shape),
        0.0,
        0.0,
    );
    assert_close(&grad_of(&z), &arr(&GW, &shape), 0.0, 0.0);

    // And against finite differences.
    let inputs = [
        uniform(&[3, 2], 11),
        uniform(&[3, 2], 12),
        uniform(&[3, 2], 13),
    ];
    let gy = uniform(&[3, 2], 14);
    let vars: Vec<Variable> = inputs.iter().cloned().map(Variable::new).collect();
    let w = first(OldMulAdd.call(&[&vars[0], &vars[1], &vars[2]])?);
    w.set_grad_array(gy.clone())?;
    w.backward()?;
    let num = numerical_grad(|xs| xs[0].mul_add(&xs[1], &xs[2]), &inputs, &gy, 1e-6)?;
    for (v, e) in vars.iter().zip(&num) {
        assert_close(&grad_of(v), e, 1e-7, 1e-7);
    }
    Ok(())
}

#[test]
fn old_style_function_gradient_cannot_be_differentiated_again() -> Result<()> {
    let (x, y, z) = (
        var(&[2.0], &[1], DType::F64),
        var(&[3.0], &[1], DType::F64),
        var(&[1.0], &[1], DType::F64),
    );
    let w = first(OldMulAdd.call(&[&x, &y, &z])?);
    let opts = GradOptions {
        enable_double_backprop: true,
        ..Default::default()
    };
    // First order still works with double backprop on: dw/dx = y = 3.
    let gx = some(grad(&[&w], &[&x], None, opts)?.remove(0));
    assert_close(gx.array(), &arr(&[3.0], &[1]), 0.0, 0.0);
    // Second order: a clear error naming the function, not a silently wrong zero.
    let err = grad(&[&gx], &[&y], None, GradOptions::default())
        .expect_err("the gradient of an old-style Function cannot be differentiated");
    match &err {
        Error::Backward { function, .. } => assert_eq!(function, "GradientOfOldMulAdd"),
        other => panic!("expected the error wrapped by the gradient's node, got {other:?}"),
    }
    match err.root_cause() {
        Error::DoubleBackwardUnsupported { function } => assert_eq!(function, "OldMulAdd"),
        other => panic!("expected DoubleBackwardUnsupported, got {other:?}"),
    }
    let text = err.to_string();
    assert!(
        text.contains("OldMulAdd") && text.contains("old-style"),
        "{text}"
    );
    Ok(())
}

// ---------------------------------------------------------------------------------------------
// Variable: Send + Sync, cheap clones
// ---------------------------------------------------------------------------------------------

const _: () = {
    const fn send_sync<T: Send + Sync>() {}
    send_sync::<Variable>();
    send_sync::<Array>();
};

#[test]
fn clones_share_the_node_and_the_grad() -> Result<()> {
    let x = var(&[1.0, 2.0], &[2], DType::F64);
    let x2 = x.clone();
    assert!(x2.same_node(&x));
    assert!(
        x2.array().shares_buffer(x.array()),
        "cloning does not copy the data"
    );
    let other = var(&[1.0, 2.0], &[2], DType::F64);
    assert!(!other.same_node(&x));

    F::sum(&(&x2 * 4.0)?)?.backward()?;
    assert_close(&grad_of(&x), &arr(&[4.0, 4.0], &[2]), 0.0, 0.0);
    x.cleargrad();
    assert!(x2.grad().is_none());
    x2.set_name(Some("weights"));
    assert_eq!(x.name().as_deref(), Some("weights"));
    Ok(())
}

#[test]
fn variables_cross_threads() -> Result<()> {
    let x = var(&[1.0, 2.0], &[2], DType::F64);
    let y = F::sum(&(&x * &x)?)?;
    let y2 = y.clone();
    std::thread::spawn(move || y2.backward())
        .join()
        .expect("thread ran")?;
    assert_close(&grad_of(&x), &arr(&[2.0, 4.0], &[2]), 0.0, 0.0);
    Ok(())
}

// A node is applied by value (`apply(self, ..)`), so applying the same node twice does not
// compile; there is nothing to test at run time.

// ---------------------------------------------------------------------------------------------
// target_input_indexes
// ---------------------------------------------------------------------------------------------

/// x0 + x1 + x2; records the target indexes each backward call saw.
struct Sum3 {
    targets: Arc<Mutex<Vec<Vec<usize>>>>,
}

impl FunctionNode for Sum3 {
    fn forward(&mut self, _: &mut ForwardContext, inputs: &[Array]) -> Result<Vec<Array>> {
        Ok(vec![(&inputs[0] + &inputs[1] + &inputs[2])?])
    }

    fn backward(
        &self,
        _: &BackwardContext<'_>,
        target_input_indexes: &[usize],
        grad_outputs: &[Option<Variable>],
    ) -> Result<Vec<Option<Variable>>> {
        self.targets
            .lock()
            .unwrap_or_else(|e| e.into_inner())
            .push(target_input_indexes.to_vec());
        let g = grad_outputs[0]
            .as_ref()
            .ok_or_else(|| Error::msg("Sum3: no gradient"))?;
        Ok((0..3)
            .map(|i| target_input_indexes.contains(&i).then(|| g.clone()))
            .collect())
    }
}

#[test]
fn backward_receives_only_the_inputs_that_need_gradients() -> Result<()> {
    let targets = Arc::new(Mutex::new(Vec::new()));
    let a = var(&[1.0], &[1], DType::F64);
    let b = Variable::constant(arr(&[2.0], &[1]));
    let c = var(&[3.0], &[1], DType::F64);
    let y = first(
        Sum3 {
            targets: targets.clone(),
        }
        .apply(&[&a, &b, &c])?,
    );
    assert_close(y.array(), &arr(&[6.0], &[1]), 0.0, 0.0);
    y.backward()?;
    assert_eq!(
        targets.lock().unwrap_or_else(|e| e.into_inner()).clone(),
        vec![vec![0, 2]]
    );
    assert_close(&grad_of(&a), &arr(&[1.0], &[1]), 0.0, 0.0);
    assert_close(&grad_of(&c), &arr(&[1.0], &[1]), 0.0, 0.0);
    assert!(b.grad().is_none());

    // grad() w.r.t. a only: c needs no gradient either.
    targets.lock().unwrap_or_else(|e| e.into_inner()).clear();
    let g = grad(&[&y], &[&a], None, GradOptions::default())?;
    assert_close(some(g[0].clone()).array(), &arr(&[1.0], &[1]), 0.0, 0.0);
    assert_eq!(
        targets.lock().unwrap_or_else(|e| e.into_inner()).clone(),
        vec![vec![0]]
    );
    Ok(())
}

/// `KUSARI_DEBUG` sets the debug default, which is read once per process: the test runs itself
/// as a child process with and without the variable and reads what the child reports.
#[test]
fn kusari_debug_environment_variable_turns_debug_on() {
    if kusari_tests::in_child() {
        println!("debug-default={}", kusari::config::debug());
        return;
    }
    let run = |debug: Option<&str>| {
        let (status, text) = kusari_tests::run_test_in_child(
            "graph::kusari_debug_environment_variable_turns_debug_on",
            "",
            |cmd| {
                cmd.env_remove("KUSARI_DEBUG");
                if let Some(v) = debug {
                    cmd.env("KUSARI_DEBUG", v);
                }
            },
        );
        assert!(status.success(), "child failed ({status}): {text}");
        text
    };
    assert!(run(Some("1")).contains("debug-default=true"));
    assert!(run(Some("true")).contains("debug-default=true"));
    assert!(run(None).contains("debug-default=false"));
    assert!(run(Some("0")).contains("debug-default=false"));
}
