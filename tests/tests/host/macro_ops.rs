//! Ops declared with `#[function_node]`. The tutorial's ops are the examples' own code, imported
//! from the examples' library (`kusari_examples`, a module per example) so that the tests check
//! what the examples run; small ops below cover the rest of what the macro accepts. Gradients are
//! compared with finite differences in f64: first order for every op, second order for the ops
//! whose backward is differentiable.

use std::sync::{Arc, Mutex};

use kusari::prelude::*;
use kusari::{config, random};
use kusari_examples::{dropout_train_test, expadd, linear, muladd, muladd_kernel, muladd_unified};
use kusari_tests::{assert_close, numerical_grad, uniform};

/// An op under test, from input variables to its outputs.
type Op<'a> = &'a dyn Fn(&[&Variable]) -> Result<Vec<Variable>>;

const EPS: f64 = 1e-6;

/// Leaf variables that receive gradients.
fn variables(arrays: &[Array]) -> Vec<Variable> {
    arrays.iter().cloned().map(Variable::new).collect()
}

/// The arrays flattened and concatenated: one array for `numerical_grad`.
fn flat<'a>(arrays: impl IntoIterator<Item = &'a Array>) -> Result<Array> {
    let mut values = Vec::new();
    for a in arrays {
        values.extend(a.to_f64_vec()?);
    }
    let n = values.len();
    Array::from_vec(values, &[n])
}

/// `op(inputs)` and seeded output gradients, one per output.
fn outputs_and_grads(
    op: Op<'_>,
    inputs: &[&Variable],
    seed: u64,
) -> Result<(Vec<Variable>, Vec<Array>)> {
    let outputs = op(inputs)?;
    let gys = (0..)
        .zip(&outputs)
        .map(|(k, y)| uniform(y.shape(), seed + k))
        .collect();
    Ok((outputs, gys))
}

/// Checks `grad` of `op`'s outputs, weighted by seeded gradients, against finite differences.
/// An input that gets no gradient must have a zero numerical one.
fn check_backward(op: Op<'_>, inputs: &[Array], seed: u64) -> Result<()> {
    let xs = variables(inputs);
    let refs: Vec<&Variable> = xs.iter().collect();
    let (outputs, gys) = outputs_and_grads(op, &refs, seed)?;
    let gy_vars: Vec<Option<Variable>> = gys
        .iter()
        .cloned()
        .map(Variable::constant)
        .map(Some)
        .collect();
    let out_refs: Vec<&Variable> = outputs.iter().collect();
    let analytic = grad(&out_refs, &refs, &gy_vars, GradOptions::default())?;
    let forward = |arrays: &[Array]| -> Result<Array> {
        let xs = variables(arrays);
        let outputs = op(&xs.iter().collect::<Vec<_>>())?;
        flat(outputs.iter().map(Variable::array))
    };
    let numeric = numerical_grad(forward, inputs, &flat(&gys)?, EPS)?;
    for (a, n) in analytic.iter().zip(&numeric) {
        let a = a
            .as_ref()
            .map_or_else(|| n.zeros_like().unwrap(), |g| g.array().clone());
        assert_close(&a, n, 1e-7, 1e-6);
    }
    Ok(())
}

/// Second order: `op`'s first-order gradients, recorded with `enable_double_backprop`, as an op
/// of the same inputs; `check_backward` compares `d(Σ gx·ggx)/dx` with finite differences of
/// the first-order gradients.
fn check_double_backward(op: Op<'_>, inputs: &[Array], seed: u64) -> Result<()> {
    let first_order = |xs: &[&Variable]| -> Result<Vec<Variable>> {
        let (outputs, gys) = outputs_and_grads(op, xs, seed)?;
        let gys: Vec<Option<Variable>> =
            gys.into_iter().map(Variable::constant).map(Some).collect();
        let record = GradOptions {
            enable_double_backprop: true,
            ..Default::default()
        };
        let grads = grad(&outputs.iter().collect::<Vec<_>>(), xs, &gys, record)?;
        let zeros_like = |x: &Variable| Variable::constant(x.array().zeros_like().unwrap());
        Ok(grads
            .into_iter()
            .zip(xs)
            .map(|(g, x)| g.unwrap_or_else(|| zeros_like(x)))
            .collect())
    };
    check_backward(&first_order, inputs, seed + 100)
}

/// `n` seeded uniform f64 arrays of one shape.
fn inputs(n: usize, shape: &[usize], seed: u64) -> Vec<Array> {
    (0..n as u64).map(|k| uniform(shape, seed + k)).collect()
}

#[test]
fn muladd_in_every_form_matches_finite_differences_to_second_order() -> Result<()> {
    let forms: [(&str, Op<'_>); 3] = [
        ("forward_cpu + forward_gpu", &|v| {
            Ok(vec![muladd::mul_add(v[0], v[1], v[2])?])
        }),
        ("forward", &|v| {
            Ok(vec![muladd_unified::mul_add(v[0], v[1], v[2])?])
        }),
        ("#[forward_gpu(..)] kernel", &|v| {
            Ok(vec![muladd_kernel::mul_add(v[0], v[1], v[2])?])
        }),
    ];
    let xs = inputs(3, &[3, 2], 1);
    for (form, op) in forms {
        println!("MulAdd with {form}");
        check_backward(op, &xs, 10)?;
        check_double_backward(op, &xs, 20)?;
    }
    Ok(())
}

#[test]
fn muladd_grad_has_two_outputs_and_its_own_gradients() -> Result<()> {
    use muladd_kernel::{MulAddGrad, mul_add_grad};
    let op: Op<'_> = &|v| {
        let (gx, gy) = mul_add_grad(v[0], v[1], v[2])?;
        Ok(vec![gx, gy])
    };
    let xs = inputs(3, &[2, 3], 2);
    check_backward(op, &xs, 30)?;
    check_double_backward(op, &xs, 40)?;

    // The typed apply returns a tuple too, the same values as the wrapper's.
    let vs = variables(&xs);
    let (gx, gy) = MulAddGrad.apply((&vs[0], &vs[1], &vs[2]))?;
    assert_close(gx.array(), &(&xs[1] * &xs[2])?, 0.0, 0.0);
    assert_close(gy.array(), &(&xs[0] * &xs[2])?, 0.0, 0.0);
    Ok(())
}

#[test]
fn option_gradient_parameter_gets_none_for_an_output_without_gradient() -> Result<()> {
    let xs = inputs(3, &[4], 3);
    let vs = variables(&xs);
    let (gx, _gy) = muladd_kernel::mul_add_grad(&vs[0], &vs[1], &vs[2])?;
    // Only gx = y * gw is used: MulAddGrad's backward gets ggy = None, so x (reached only through
    // gy = x * gw) gets no gradient at all; zeros in place of None would give it one.
    F::sum(&gx)?.backward()?;
    assert!(vs[0].grad().is_none());
    assert_close(&vs[1].grad_array().expect("y"), &xs[2], 0.0, 0.0);
    assert_close(&vs[2].grad_array().expect("gw"), &xs[1], 0.0, 0.0);
    Ok(())
}

#[test]
fn expadd_matches_finite_differences_to_second_order() -> Result<()> {
    let op: Op<'_> = &|v| Ok(vec![expadd::exp_add(v[0], v[1])?]);
    let xs = inputs(2, &[2, 3], 4);
    check_backward(op, &xs, 50)?;
    check_double_backward(op, &xs, 60)
}

#[test]
fn dropout_with_a_fixed_seed_matches_finite_differences() -> Result<()> {
    // Reseeding before every forward draws the same mask each time.
    let op: Op<'_> = &|v| {
        random::seed(7);
        Ok(vec![dropout_train_test::dropout(v[0], 0.4)?])
    };
    let xs = inputs(1, &[5, 4], 5);
    check_backward(op, &xs, 70)?;

    // The mask stored by forward is the gradient; it matches F::dropout's with the same seed.
    let x = Variable::new(xs[0].clone());
    let y = op(&[&x])?.remove(0);
    F::sum(&y)?.backward()?;
    random::seed(7);
    let builtin = F::dropout(&x, 0.4)?;
    let mask = (builtin.array() / &xs[0])?;
    assert_close(&x.grad_array().expect("x.grad"), &mask, 1e-12, 1e-12);

    let _test = config::using_train(false);
    assert!(dropout_train_test::dropout(&x, 0.4)?.same_node(&x));
    Ok(())
}

#[test]
fn linear_function_matches_finite_differences_and_f_linear() -> Result<()> {
    let op: Op<'_> = &|v| Ok(vec![linear::linear(v[0], v[1], v[2])?]);
    let xs = vec![uniform(&[4, 3], 6), uniform(&[2, 3], 7), uniform(&[2], 8)];
    check_backward(op, &xs, 80)?;
    check_double_backward(op, &xs, 90)?;
    let vs = variables(&xs);
    let builtin = F::linear(&vs[0], &vs[1], Some(&vs[2]))?;
    assert_close(
        op(&[&vs[0], &vs[1], &vs[2]])?[0].array(),
        builtin.array(),
        1e-12,
        1e-12,
    );
    Ok(())
}

#[test]
fn kernel_forward_gpu_checks_its_signature_then_reports_no_cuda() {
    let f32a = Array::zeros(&[2], DType::F32).unwrap();
    let f64a = Array::zeros(&[2], DType::F64).unwrap();
    let mut ctx = ForwardContext::default();
    let mut op = muladd_kernel::MulAdd;
    assert_eq!(op.label(), "MulAdd");
    let err = op
        .forward_gpu(&mut ctx, &[f32a.clone(), f64a, f32a.clone()])
        .unwrap_err()
        .to_string();
    assert!(
        err.contains("kernel muladd_fwd") && err.contains("`T` was bound to float32 by `x`"),
        "{err}"
    );
    let err = op
        .forward_gpu(&mut ctx, &[f32a.clone(), f32a.clone(), f32a])
        .unwrap_err();
    assert!(matches!(err, Error::CudaUnavailable { op, .. } if op == "kernel muladd_fwd"));
}

#[test]
fn untyped_apply_with_the_wrong_input_count_names_the_op() {
    let x = Variable::new(uniform(&[2], 9));
    let err = apply(muladd::MulAdd, &[&x, &x]).unwrap_err();
    assert!(matches!(
        err.root_cause(),
        Error::InputCount { function, expected: 3, actual: 2 } if function == "MulAdd"
    ));
}

/// (exp x, tanh x): two outputs, both retained; backward reads them instead of x.
struct ExpTanh;

#[function_node]
impl ExpTanh {
    #[retain(output = 0, output = 1)]
    fn forward(&self, x: &Array) -> Result<(Array, Array)> {
        Ok((x.exp()?, x.tanh()?))
    }

    fn backward(
        &self,
        e: &Variable,
        t: &Variable,
        ge: Option<&Variable>,
        gt: Option<&Variable>,
    ) -> Result<Option<Variable>> {
        let from_e = ge.map(|g| g * e).transpose()?;
        let from_t = gt.map(|g| g * (1.0 - (t * t)?)?).transpose()?;
        Ok(match (from_e, from_t) {
            (Some(a), Some(b)) => Some((a + b)?),
            (a, b) => a.or(b),
        })
    }
}

#[test]
fn retained_outputs_give_first_and_second_order_gradients() -> Result<()> {
    let both: Op<'_> = &|v| {
        let (e, t) = exp_tanh(v[0])?;
        Ok(vec![e, t])
    };
    // One output only: the other's gradient parameter gets None.
    let tanh_only: Op<'_> = &|v| Ok(vec![ExpTanh.apply((v[0],))?.1]);
    let xs = inputs(1, &[3, 2], 10);
    for op in [both, tanh_only] {
        check_backward(op, &xs, 100)?;
        check_double_backward(op, &xs, 110)?;
    }
    Ok(())
}

type Log = Arc<Mutex<Vec<Vec<usize>>>>;

/// z = x * y, logging the inputs whose gradients each backward is asked for.
struct MulLogged {
    log: Log,
}

#[function_node]
impl MulLogged {
    fn new(log: Log) -> Self {
        MulLogged { log }
    }

    #[retain(x, y)]
    fn forward(&self, x: &Array, y: &Array) -> Result<Array> {
        x * y
    }

    fn backward(
        &self,
        x: &Variable,
        y: &Variable,
        gz: &Variable,
        needs: &[usize],
    ) -> Result<(Option<Variable>, Option<Variable>)> {
        self.log.lock().expect("log").push(needs.to_vec());
        let grad = |i: usize, other: &Variable| needs.contains(&i).then(|| gz * other).transpose();
        Ok((grad(0, y)?, grad(1, x)?))
    }
}

#[test]
fn needs_grad_parameter_lists_the_wanted_inputs() -> Result<()> {
    let log = Log::default();
    let (x, y) = (
        Variable::new(uniform(&[3], 11)),
        Variable::new(uniform(&[3], 12)),
    );
    let c = Variable::constant(uniform(&[3], 13));
    // grad() for y alone; then x a constant; then a backward to both.
    let z = F::sum(&mul_logged(&x, &y, log.clone())?)?;
    let gy = grad(&[&z], &[&y], None, GradOptions::default())?
        .remove(0)
        .expect("y");
    assert_close(gy.array(), x.array(), 0.0, 0.0);
    F::sum(&mul_logged(&c, &y, log.clone())?)?.backward()?;
    F::sum(&mul_logged(&x, &y, log.clone())?)?.backward()?;
    let log = log.lock().expect("log").clone();
    assert_eq!(log, vec![vec![1], vec![1], vec![0, 1]]);
    Ok(())
}

/// a * x + b, with `a` and `b` given to the wrapper after the input: `axpb(&x, a, b)`.
struct Axpb {
    a: f64,
    b: f64,
}

#[function_node]
impl Axpb {
    fn new(a: f64, b: f64) -> Result<Self> {
        if !(a.is_finite() && b.is_finite()) {
            return Err(Error::msg(format!(
                "axpb: a and b must be finite, got {a} and {b}"
            )));
        }
        Ok(Axpb { a, b })
    }

    #[forward_gpu(
        inputs = "T x",
        outputs = "T y",
        params = "T a, T b",
        body = "y = a * x + b;"
    )]
    fn forward(&self, x: &Array) -> Result<Array> {
        (x * self.a)? + self.b
    }

    fn backward(&self, gy: &Variable) -> Result<Variable> {
        gy * self.a
    }
}

#[test]
fn constructor_parameters_follow_the_inputs_in_the_wrapper() -> Result<()> {
    let xs = inputs(1, &[4], 14);
    let y = axpb(&Variable::new(xs[0].clone()), 3.0, -1.0)?;
    assert_close(y.array(), &((&xs[0] * 3.0)? - 1.0)?, 1e-15, 0.0);
    check_backward(&|v| Ok(vec![axpb(v[0], 3.0, -1.0)?]), &xs, 120)?;

    // A failing `new` is the wrapper's error. The kernel, whose scalars come from the fields,
    // checks its arguments and then reports that this build cannot launch it.
    let err = axpb(&Variable::new(xs[0].clone()), f64::NAN, 0.0).unwrap_err();
    assert!(err.to_string().contains("must be finite"), "{err}");
    let mut op = Axpb::new(2.0, 1.0)?;
    let launch = op.forward_gpu(&mut ForwardContext::default(), &xs);
    assert!(matches!(launch, Err(Error::CudaUnavailable { .. })));
    Ok(())
}

/// y = b + exp(x), `b` broadcast along the rows of `x`: backward needs `b`'s shape (to sum its
/// gradient back) but not its values, and `x`'s value.
struct BiasExp;

#[function_node]
impl BiasExp {
    #[retain(meta(b), x)]
    fn forward(&self, b: &Array, x: &Array) -> Result<Array> {
        b + &x.exp()?
    }

    fn backward(&self, b: &InputMeta, x: &Variable, gy: &Variable) -> Result<(Variable, Variable)> {
        assert_eq!((b.dtype(), b.device()), (x.dtype(), x.device()));
        assert_eq!(b.ndim(), b.shape().len());
        Ok((F::sum_to(gy, b.shape())?, (gy * &F::exp(x)?)?))
    }
}

#[test]
fn a_meta_retained_input_gives_first_and_second_order_gradients() -> Result<()> {
    let op: Op<'_> = &|v| Ok(vec![bias_exp(v[0], v[1])?]);
    let xs = [uniform(&[3], 40), uniform(&[2, 3], 41)];
    check_backward(op, &xs, 42)?;
    check_double_backward(op, &xs, 43)?;

    // By hand: b's gradient is the column sums of gy, x's is gy * exp(x).
    let (b, x) = (Variable::new(xs[0].clone()), Variable::new(xs[1].clone()));
    let y = bias_exp(&b, &x)?;
    y.set_grad_array(Array::from_vec(
        vec![1.0, 2.0, 3.0, 4.0, 5.0, 6.0],
        &[2, 3],
    )?)?;
    y.backward()?;
    assert_eq!(
        b.grad_array().expect("b.grad").to_vec::<f64>()?,
        [5.0, 7.0, 9.0]
    );
    let want: Vec<f64> = (xs[1].to_vec::<f64>()?.iter().zip(1..))
        .map(|(x, g)| f64::from(g) * x.exp())
        .collect();
    let want = Array::from_vec(want, &[2, 3])?;
    assert_close(&x.grad_array().expect("x.grad"), &want, 1e-12, 1e-12);
    Ok(())
}

/// `meta(b)` keeps `b`'s shape and dtype, not its buffer: an intermediate `b` is freed once its
/// variable is dropped, and backward still reaches what `b` came from. A retained value (as
/// `F::mul` retains both operands) keeps the buffer until the graph goes.
#[test]
fn a_meta_retained_input_does_not_keep_its_data_alive() -> Result<()> {
    let leaf = Variable::new(uniform(&[3], 50));
    let x = Variable::new(uniform(&[2, 3], 51));

    let b = F::mul_scalar(&leaf, 2.0)?;
    let data = b.array().downgrade();
    let y = bias_exp(&b, &x)?;
    drop(b);
    assert!(!data.is_alive(), "meta(b) kept b's buffer alive");
    F::sum(&y)?.backward()?;
    assert_eq!(
        leaf.grad_array().expect("leaf.grad").to_vec::<f64>()?,
        [4.0; 3]
    );

    // The built-ins that need only shapes retain them the same way (those whose output is a
    // view, as reshape's, share the buffer by design).
    let b = F::mul_scalar(&leaf, 2.0)?;
    let data = b.array().downgrade();
    let sums = [
        F::add(&b, &x)?,
        F::sub(&x, &b)?,
        F::sum(&b)?,
        F::mean(&b)?,
        F::where_(&x.array().gt_scalar(0.0)?, &x, &b)?,
    ];
    drop(b);
    assert!(
        !data.is_alive(),
        "a shape-only built-in kept its input alive"
    );
    drop(sums);

    let b = F::mul_scalar(&leaf, 2.0)?;
    let data = b.array().downgrade();
    let y = F::mul(&b, &x)?;
    drop(b);
    assert!(data.is_alive(), "F::mul retains its operands");
    drop(y);
    assert!(!data.is_alive());
    Ok(())
}
