//! `check_backward` and `check_double_backward`: backward's gradients against finite
//! differences along one random direction.

use std::fmt::Write as _;

use crate::config;
use crate::error::{Error, Result};
use crate::graph::{GradOptions, grad};
use crate::random::Rng;
use crate::{Array, DType, Variable};

use super::IntoOutputs;
use super::numerical::*;

/// Options of [`check_backward`] and [`check_double_backward`], with Chainer's defaults and
/// builder-style setters.
///
/// ```
/// use kusari::gradient_check::CheckOptions;
/// use kusari::DType;
/// let o = CheckOptions::default().atol(1e-4).rtol(1e-3).dtype(DType::F32).seed(7);
/// assert_eq!((o.atol, o.rtol, o.eps, o.dtype, o.seed), (1e-4, 1e-3, 1e-3, Some(DType::F32), 7));
/// assert_eq!(CheckOptions::default().dtype, Some(DType::F64));
/// assert_eq!(CheckOptions::default().dtype(None).dtype, None);
/// ```
#[derive(Clone, Debug)]
pub struct CheckOptions {
    /// Absolute tolerance (default `1e-5`).
    pub atol: f64,
    /// Tolerance relative to backward's projection (default `1e-4`).
    pub rtol: f64,
    /// Finite-difference step along the direction (default `1e-3`).
    pub eps: f64,
    /// The dtype floating-point inputs and parameters are cast to for the finite differences
    /// (default float64, so that a float32 function is checked against f64 arithmetic); `None`
    /// keeps each one's own dtype. Backward always runs on the inputs as given.
    pub dtype: Option<DType>,
    /// One flag per input: `true` for an input that must get no gradient and is not perturbed.
    /// `None` (the default) marks the integer inputs. An integer input must always be marked.
    pub no_grads: Option<Vec<bool>>,
    /// Extra variables (a layer's weights, say) that are perturbed and whose gradients are
    /// checked. A variable's data cannot be changed in place, so `f` receives them after the
    /// inputs: `f(&[inputs.., params..])`.
    pub params: Vec<Variable>,
    /// Seed of the random direction (default 0).
    pub seed: u64,
    /// Sample five points along the direction and report a non-differentiable point as
    /// [`Error::NonDifferentiable`] (default off; see [`NumericalGradOptions`]).
    pub detect_nondifferentiable: bool,
}

impl Default for CheckOptions {
    fn default() -> Self {
        CheckOptions {
            atol: 1e-5,
            rtol: 1e-4,
            eps: 1e-3,
            dtype: Some(DType::F64),
            no_grads: None,
            params: Vec::new(),
            seed: 0,
            detect_nondifferentiable: false,
        }
    }
}

impl CheckOptions {
    /// The defaults.
    pub fn new() -> Self {
        Self::default()
    }

    /// Sets the absolute tolerance.
    pub fn atol(mut self, atol: f64) -> Self {
        self.atol = atol;
        self
    }

    /// Sets the relative tolerance.
    pub fn rtol(mut self, rtol: f64) -> Self {
        self.rtol = rtol;
        self
    }

    /// Sets the finite-difference step.
    pub fn eps(mut self, eps: f64) -> Self {
        self.eps = eps;
        self
    }

    /// Sets the numerical side's dtype (`None`: each input's own).
    pub fn dtype(mut self, dtype: impl Into<Option<DType>>) -> Self {
        self.dtype = dtype.into();
        self
    }

    /// Marks the inputs that must get no gradient, one flag per input.
    pub fn no_grads(mut self, no_grads: &[bool]) -> Self {
        self.no_grads = Some(no_grads.to_vec());
        self
    }

    /// Sets the parameters, passed to `f` after the inputs.
    pub fn params(mut self, params: impl IntoIterator<Item = Variable>) -> Self {
        self.params = params.into_iter().collect();
        self
    }

    /// Sets the direction's seed.
    pub fn seed(mut self, seed: u64) -> Self {
        self.seed = seed;
        self
    }

    /// Turns the detection of non-differentiable points on or off.
    pub fn detect_nondifferentiable(mut self, on: bool) -> Self {
        self.detect_nondifferentiable = on;
        self
    }
}

/// Checks `f`'s backward against finite differences (Chainer's `check_backward`).
///
/// `f` receives the inputs as variables (followed by `options.params`) and returns one output
/// variable or several ([`IntoOutputs`]). With `L = Σ_j <y_j, grad_outputs_j>`, one random
/// unit direction `d` is drawn over every differentiated input and parameter (seeded by
/// `options.seed`), and backward's projection `Σ <∂L/∂x, d>` (from [`grad`], on the inputs as
/// given) is compared with `(L(x + eps d) - L(x - eps d)) / 2eps`, evaluated with the inputs cast
/// to `options.dtype` (float64 by default): they must agree within
/// `atol + rtol * |projection|`, or the result is [`Error::GradientCheck`], showing both numbers,
/// the inputs' shapes and dtypes and the direction.
///
/// `grad_outputs` has one array per output, like it in shape, dtype and device; `None` is allowed
/// when every output has one element (ones are used). Integer inputs, and those marked in
/// `options.no_grads`, are neither perturbed nor differentiated: backward giving one of them a
/// gradient is [`Error::UnexpectedGradient`]. A differentiated input that gets no gradient counts
/// as a zero gradient. `f` must be deterministic.
///
/// ```
/// use kusari::prelude::*;
/// use kusari::gradient_check::{check_backward, CheckOptions};
/// # fn main() -> Result<()> {
/// let mut rng = Rng::seed(0);
/// let x = Array::uniform(&[4, 3], -1.0, 1.0, DType::F32, &mut rng).unwrap();
/// let t = Array::from_vec(vec![0i64, 2, 1, 2], &[4])?;
/// // A scalar loss: grad_outputs may be omitted. The int64 labels get no gradient.
/// let loss = |v: &[Variable]| F::softmax_cross_entropy(&v[0], v[1].array());
/// check_backward(loss, &[x, t], None, &CheckOptions::default())?;
/// # Ok(()) }
/// ```
pub fn check_backward<F, O>(
    f: F,
    inputs: &[Array],
    grad_outputs: Option<&[Array]>,
    options: &CheckOptions,
) -> Result<()>
where
    F: Fn(&[Variable]) -> Result<O>,
    O: IntoOutputs<Variable>,
{
    let f = |v: &[Variable]| f(v).map(IntoOutputs::into_outputs);
    check("check_backward", &f, inputs, grad_outputs, options)
}

/// Checks the gradient of `f`'s gradient (Chainer's `check_double_backward`).
///
/// The first-order gradient `(x, gy) -> grad(f(x), x, gy)`, recorded with
/// `enable_double_backprop`, is checked with [`check_backward`]: its inputs are `f`'s inputs
/// followed by the output gradients (perturbed too, as the gradient is linear in them), and
/// `grad_grad_inputs` are its output gradients: one per differentiated input (those not in
/// `no_grads`) and then one per parameter. When `grad_outputs` is `None` (one-element outputs)
/// the output gradients are fixed ones. The first order is assumed right: check it with
/// [`check_backward`] first. Chainer loosens the tolerances for this check (atol `1e-4`, rtol
/// `1e-3`); pass them in `options` as needed.
///
/// ```
/// use kusari::prelude::*;
/// use kusari::gradient_check::{check_double_backward, CheckOptions};
/// # fn main() -> Result<()> {
/// let x = Array::from_vec(vec![0.5f64, -1.5, 2.0], &[3])?;
/// let gy = Array::from_vec(vec![1.0f64, -1.0, 0.5], &[3])?;
/// let ggx = Array::from_vec(vec![0.3f64, 0.2, -0.7], &[3])?;
/// let cube = |v: &[Variable]| &(&v[0] * &v[0])? * &v[0];
/// check_double_backward(cube, &[x], Some(&[gy]), &[ggx], &CheckOptions::default())?;
/// # Ok(()) }
/// ```
pub fn check_double_backward<F, O>(
    f: F,
    inputs: &[Array],
    grad_outputs: Option<&[Array]>,
    grad_grad_inputs: &[Array],
    options: &CheckOptions,
) -> Result<()>
where
    F: Fn(&[Variable]) -> Result<O>,
    O: IntoOutputs<Variable>,
{
    const OP: &str = "check_double_backward";
    let no_grads = resolve_no_grads(OP, inputs, options)?;
    let n_x = inputs.len();
    let n_gy = grad_outputs.map_or(0, <[Array]>::len);
    let n_params = options.params.len();
    let first_order = |v: &[Variable]| -> Result<Vec<Variable>> {
        let (xs, rest) = v.split_at(n_x);
        let (gys, params) = rest.split_at(n_gy);
        let args: Vec<Variable> = xs.iter().chain(params).cloned().collect();
        let ys = f(&args)?.into_outputs();
        let gys: Vec<Option<Variable>> = if grad_outputs.is_some() {
            if ys.len() != gys.len() {
                return Err(Error::CheckArguments {
                    op: OP,
                    msg: format!("{} grad_outputs for {} output(s)", gys.len(), ys.len()),
                });
            }
            gys.iter().cloned().map(Some).collect()
        } else {
            ys.iter()
                .enumerate()
                .map(|(j, y)| ones_for_scalar(OP, j, y).map(|g| Some(Variable::constant(g))))
                .collect::<Result<_>>()?
        };
        let targets: Vec<&Variable> = args.iter().collect();
        let record = GradOptions {
            enable_double_backprop: true,
            ..Default::default()
        };
        let grads = grad(&ys.iter().collect::<Vec<_>>(), &targets, &gys, record)?;
        let mut gxs = Vec::with_capacity(grads.len());
        for (i, (g, v)) in grads.into_iter().zip(&args).enumerate() {
            let skip = i < n_x && no_grads[i];
            match g {
                Some(_) if skip => return Err(unexpected_gradient(OP, i, v)),
                _ if skip => {}
                Some(g) => gxs.push(g),
                None => gxs.push(Variable::constant(v.array().zeros_like()?)),
            }
        }
        Ok(gxs)
    };
    let n_diff = no_grads.iter().filter(|&&skip| !skip).count() + n_params;
    if grad_grad_inputs.len() != n_diff {
        return Err(Error::CheckArguments {
            op: OP,
            msg: format!(
                "{} grad_grad_inputs, but there are {n_diff} differentiated inputs and parameters (one per input not in no_grads, then one per parameter)",
                grad_grad_inputs.len()
            ),
        });
    }
    let mut all_inputs = inputs.to_vec();
    all_inputs.extend(grad_outputs.unwrap_or_default().iter().cloned());
    let mut flags = no_grads.clone();
    flags.extend(std::iter::repeat_n(false, n_gy));
    let inner = CheckOptions {
        no_grads: Some(flags),
        ..options.clone()
    };
    check(
        OP,
        &first_order,
        &all_inputs,
        Some(grad_grad_inputs),
        &inner,
    )
}

type Func<'a> = &'a dyn Fn(&[Variable]) -> Result<Vec<Variable>>;

/// One no-grad flag per input, checked against the inputs' dtypes.
fn resolve_no_grads(
    op: &'static str,
    inputs: &[Array],
    options: &CheckOptions,
) -> Result<Vec<bool>> {
    let flags = match &options.no_grads {
        None => inputs.iter().map(|x| !x.dtype().is_float()).collect(),
        Some(flags) if flags.len() != inputs.len() => {
            return Err(Error::CheckArguments {
                op,
                msg: format!(
                    "no_grads has {} flag(s) for {} input(s); give one per input",
                    flags.len(),
                    inputs.len()
                ),
            });
        }
        Some(flags) => flags.clone(),
    };
    for (i, (x, &skip)) in inputs.iter().zip(&flags).enumerate() {
        if !skip && !x.dtype().is_float() {
            return Err(Error::CheckArguments {
                op,
                msg: format!(
                    "inputs[{i}] is {}{:?} and cannot be differentiated; mark it true in no_grads",
                    x.dtype(),
                    x.shape()
                ),
            });
        }
    }
    Ok(flags)
}

fn unexpected_gradient(op: &'static str, input: usize, x: &Variable) -> Error {
    Error::UnexpectedGradient {
        op,
        input,
        dtype: x.dtype(),
        shape: x.shape().to_vec(),
    }
}

/// Ones for output `j` when no output gradient was given, which needs a one-element output.
fn ones_for_scalar(op: &'static str, j: usize, y: &Variable) -> Result<Array> {
    if y.size() != 1 {
        return Err(Error::CheckArguments {
            op,
            msg: format!(
                "grad_outputs omitted, but output {j} is {}{:?}; omit them only for one-element outputs",
                y.dtype(),
                y.shape()
            ),
        });
    }
    y.array().ones_like()
}

/// The output gradients as constants, checked against the outputs (or ones for one-element
/// outputs when none are given).
fn grad_output_variables(
    op: &'static str,
    ys: &[Variable],
    grad_outputs: Option<&[Array]>,
) -> Result<Vec<Array>> {
    let Some(gys) = grad_outputs else {
        return ys
            .iter()
            .enumerate()
            .map(|(j, y)| ones_for_scalar(op, j, y))
            .collect();
    };
    if gys.len() != ys.len() {
        return Err(Error::CheckArguments {
            op,
            msg: format!(
                "{} grad_outputs for {} output(s) ({})",
                gys.len(),
                ys.len(),
                describe_variables(ys)
            ),
        });
    }
    for (j, (y, gy)) in ys.iter().zip(gys).enumerate() {
        if y.shape() != gy.shape() || y.dtype() != gy.dtype() || y.device() != gy.device() {
            return Err(Error::CheckArguments {
                op,
                msg: format!(
                    "grad_outputs[{j}] is {}{:?} on {}, but output {j} is {}{:?} on {}; they must match",
                    gy.dtype(),
                    gy.shape(),
                    gy.device(),
                    y.dtype(),
                    y.shape(),
                    y.device()
                ),
            });
        }
    }
    Ok(gys.to_vec())
}

fn describe_variables(vs: &[Variable]) -> String {
    vs.iter()
        .map(|v| format!("{}{:?}", v.dtype(), v.shape()))
        .collect::<Vec<_>>()
        .join(", ")
}

/// `inputs[k]`, or `params[k - n_inputs]` for the parameters that follow the inputs.
fn arg_name(k: usize, n_inputs: usize) -> String {
    if k < n_inputs {
        format!("inputs[{k}]")
    } else {
        format!("params[{}]", k - n_inputs)
    }
}

/// Checks the options shared by [`check_backward`] and [`check_double_backward`], and returns
/// the no-grad flags of the inputs.
fn validate(op: &'static str, inputs: &[Array], options: &CheckOptions) -> Result<Vec<bool>> {
    check_eps(op, options.eps)?;
    check_tolerance(op, "atol", options.atol)?;
    check_tolerance(op, "rtol", options.rtol)?;
    if let Some(dtype) = options.dtype.filter(|d| !d.is_float()) {
        return Err(Error::CheckArguments {
            op,
            msg: format!("the numerical side's dtype must be a floating-point dtype, not {dtype}"),
        });
    }
    let params = &options.params;
    if let Some((p, v)) = params
        .iter()
        .enumerate()
        .find(|(_, v)| !v.dtype().is_float())
    {
        return Err(Error::CheckArguments {
            op,
            msg: format!(
                "params[{p}] is {}{:?}; only floating-point parameters can be checked",
                v.dtype(),
                v.shape()
            ),
        });
    }
    resolve_no_grads(op, inputs, options)
}

/// One random direction over the variables of the given sizes, of norm 1 (Chainer's: normal
/// entries, normalised together).
fn random_direction(seed: u64, sizes: impl Iterator<Item = usize>) -> Vec<Vec<f64>> {
    let mut rng = Rng::seed(seed);
    let mut direction: Vec<Vec<f64>> = sizes
        .map(|n| (0..n).map(|_| rng.next_normal()).collect())
        .collect();
    let norm = direction
        .iter()
        .flatten()
        .map(|d| d * d)
        .sum::<f64>()
        .sqrt();
    if norm > 0.0 {
        direction.iter_mut().flatten().for_each(|d| *d /= norm);
    }
    direction
}

/// The common body of [`check_backward`] and [`check_double_backward`]: `f` gets the inputs
/// followed by `options.params`.
fn check(
    op: &'static str,
    f: Func<'_>,
    inputs: &[Array],
    grad_outputs: Option<&[Array]>,
    options: &CheckOptions,
) -> Result<()> {
    let no_grads = validate(op, inputs, options)?;
    // Backward needs the graph even when the caller is in no_backprop_mode.
    let _record = config::force_backprop_mode();

    // Backward's side, on the inputs as given.
    let xs = inputs.iter().cloned().map(Variable::new);
    let args: Vec<Variable> = xs.chain(options.params.iter().cloned()).collect();
    let ys = f(&args)?;
    if ys.is_empty() {
        return Err(Error::CheckArguments {
            op,
            msg: "f returned no output".to_string(),
        });
    }
    let gys = grad_output_variables(op, &ys, grad_outputs)?;
    if args.is_empty() {
        return Ok(());
    }
    let gy_vars: Vec<Option<Variable>> = gys
        .iter()
        .cloned()
        .map(Variable::constant)
        .map(Some)
        .collect();
    let grads = grad(
        &ys.iter().collect::<Vec<_>>(),
        &args.iter().collect::<Vec<_>>(),
        &gy_vars,
        GradOptions::default(),
    )?;
    if let Some(i) = (0..inputs.len()).find(|&i| no_grads[i] && grads[i].is_some()) {
        return Err(unexpected_gradient(op, i, &args[i]));
    }
    // The differentiated variables, as indexes into `args`.
    let checked: Vec<usize> = (0..args.len())
        .filter(|&k| k >= inputs.len() || !no_grads[k])
        .collect();
    if checked.is_empty() {
        return Ok(());
    }
    let direction = random_direction(options.seed, checked.iter().map(|&k| args[k].size()));
    let mut backward = 0.0;
    for (&k, d) in checked.iter().zip(&direction) {
        if let Some(g) = &grads[k] {
            let g = g.array().to_f64_vec()?;
            backward += g.iter().zip(d).map(|(g, d)| g * d).sum::<f64>();
        }
    }

    // The finite differences' side.
    let mut points = args
        .iter()
        .map(|v| NumericalArg::new(v.array(), options.dtype))
        .collect::<Result<Vec<_>>>()?;
    for (&k, d) in checked.iter().zip(&direction) {
        let v = &args[k];
        points[k].direction =
            Some(Array::from_cpu_vec(d.clone(), v.shape()).to_device(v.device())?);
    }
    let original = ys
        .iter()
        .map(|y| Sampled::of(y.array()))
        .collect::<Result<Vec<_>>>()?;
    let numerical = directional_derivative(op, f, &points, &original, &gys, options)?;

    if (backward - numerical).abs() <= options.atol + options.rtol * backward.abs() {
        return Ok(());
    }
    Err(Error::GradientCheck {
        op,
        backward,
        numerical,
        atol: options.atol,
        rtol: options.rtol,
        eps: options.eps,
        numerical_dtype: options.dtype,
        inputs: describe_inputs(inputs, &no_grads, &options.params),
        direction: describe_direction(&checked, inputs.len(), &direction),
    })
}

/// `(L(x + eps d) - L(x - eps d)) / 2eps` with `L = Σ <f(..), gy>` in f64, or the five-point
/// stencil after checking for non-differentiable points.
fn directional_derivative(
    op: &'static str,
    f: Func<'_>,
    points: &[NumericalArg],
    original: &[Sampled],
    gys: &[Array],
    options: &CheckOptions,
) -> Result<f64> {
    let cast = match options.dtype {
        Some(d) => format!("inputs cast to {d}"),
        None => "inputs in their own dtypes".to_string(),
    };
    let eval = |delta: f64| -> Result<Vec<Sampled>> {
        let run = || -> Result<Vec<Sampled>> {
            let vars = points
                .iter()
                .map(|p| p.at(delta).map(Variable::new))
                .collect::<Result<Vec<_>>>()?;
            f(&vars)?.iter().map(|y| Sampled::of(y.array())).collect()
        };
        run().map_err(|e| Error::CheckFunction {
            op,
            stage: format!(
                "at x + {delta:e} * direction, a point of the finite differences ({cast}; options.dtype(None) keeps each input's dtype)"
            ),
            source: Box::new(e),
        })
    };
    let center = eval(0.0)?;
    same_outputs(op, original, &center)?;
    let gys = gys
        .iter()
        .map(|g| g.to_f64_vec().map(Some))
        .collect::<Result<Vec<_>>>()?;
    let defaults = NumericalGradOptions::default();
    let detect = options
        .detect_nondifferentiable
        .then_some((defaults.diff_atol, defaults.diff_rtol));
    let mut eval_same = |delta: f64| -> Result<Vec<Sampled>> {
        let ys = eval(delta)?;
        same_outputs(op, &center, &ys)?;
        Ok(ys)
    };
    let point = || "x + δ * direction with δ in [-2eps, 2eps]".to_string();
    derivative(
        op,
        &mut eval_same,
        &center,
        &gys,
        options.eps,
        detect,
        &point,
    )
}

/// A variable as the finite differences see it: its data in f64 (floats) or as is, the
/// direction it moves along (if differentiated) and the dtype `f` gets it in.
struct NumericalArg {
    base: Array,
    direction: Option<Array>,
    dtype: DType,
}

impl NumericalArg {
    /// Float data moves in f64 and is cast to `dtype` (`None`: its own); other data stays.
    fn new(a: &Array, dtype: Option<DType>) -> Result<Self> {
        Ok(if a.dtype().is_float() {
            NumericalArg {
                base: a.astype(DType::F64)?,
                direction: None,
                dtype: dtype.unwrap_or(a.dtype()),
            }
        } else {
            NumericalArg {
                base: a.clone(),
                direction: None,
                dtype: a.dtype(),
            }
        })
    }

    /// The data at `base + delta * direction`, cast to the numerical dtype.
    fn at(&self, delta: f64) -> Result<Array> {
        match &self.direction {
            Some(d) if delta != 0.0 => self.base.add(&d.mul_scalar(delta)?)?.astype(self.dtype),
            _ => self.base.astype(self.dtype),
        }
    }
}

/// `inputs[0] float32[3, 2], inputs[1] int64[3] (no gradient), params[0] float32[2]`.
fn describe_inputs(inputs: &[Array], no_grads: &[bool], params: &[Variable]) -> String {
    let inputs = inputs
        .iter()
        .zip(no_grads)
        .enumerate()
        .map(|(i, (x, &skip))| {
            let note = if skip { " (no gradient)" } else { "" };
            format!("inputs[{i}] {}{:?}{note}", x.dtype(), x.shape())
        });
    let params = params
        .iter()
        .enumerate()
        .map(|(p, v)| format!("params[{p}] {}{:?}", v.dtype(), v.shape()));
    inputs.chain(params).collect::<Vec<_>>().join(", ")
}

/// The first entries of the direction of each differentiated variable.
fn describe_direction(checked: &[usize], n_inputs: usize, direction: &[Vec<f64>]) -> String {
    const SHOWN: usize = 4;
    let mut out = String::new();
    for (&k, d) in checked.iter().zip(direction) {
        if !out.is_empty() {
            out.push_str("; ");
        }
        let head: Vec<String> = d.iter().take(SHOWN).map(|v| format!("{v:.4}")).collect();
        let more = if d.len() > SHOWN {
            format!(", ... ({} entries)", d.len())
        } else {
            String::new()
        };
        let _ = write!(out, "{} [{}{more}]", arg_name(k, n_inputs), head.join(", "));
    }
    out
}
