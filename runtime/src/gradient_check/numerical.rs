//! Gradients by centred finite differences, in f64, with detection of non-differentiable points.

use crate::error::{Error, Result};
use crate::{Array, DType};

use super::IntoOutputs;

/// Options of [`numerical_grad_with`]: detection of non-differentiable points.
///
/// With detection on, each derivative is taken from five samples (at `-2eps`, `-eps`, `0`,
/// `eps`, `2eps`) instead of two, as Chainer does: a quadratic is fitted through each output
/// element's samples, and the point is reported as [`Error::NonDifferentiable`] when the fit is
/// poor or when an element is finite at some samples and not at others. The fit's rms residual
/// divided by `eps` (about a tenth of the change of slope at a kink, in the derivative's units) must
/// stay within `diff_atol + diff_rtol * |dy/dx|`, plus the rounding error of the output's dtype.
/// Chainer scales the tolerance by `|y|` instead, which flags smooth functions such as `x³` or
/// `tanh` at `y = 0`.
///
/// ```
/// use kusari::gradient_check::NumericalGradOptions;
/// let o = NumericalGradOptions::default().detect_nondifferentiable(true);
/// assert!(o.detect_nondifferentiable);
/// assert_eq!((o.diff_atol, o.diff_rtol), (1e-5, 1e-2));
/// ```
#[derive(Clone, Copy, Debug, PartialEq)]
pub struct NumericalGradOptions {
    /// Sample five points and report non-differentiable ones (default off).
    pub detect_nondifferentiable: bool,
    /// Absolute tolerance of the fit, in the derivative's units (default `1e-5`).
    pub diff_atol: f64,
    /// Tolerance of the fit relative to `|dy/dx|` (default `1e-2`).
    pub diff_rtol: f64,
}

impl Default for NumericalGradOptions {
    fn default() -> Self {
        NumericalGradOptions {
            detect_nondifferentiable: false,
            diff_atol: 1e-5,
            diff_rtol: 1e-2,
        }
    }
}

impl NumericalGradOptions {
    /// Turns the detection of non-differentiable points on or off.
    pub fn detect_nondifferentiable(mut self, on: bool) -> Self {
        self.detect_nondifferentiable = on;
        self
    }

    /// Sets the fit's absolute tolerance.
    pub fn diff_atol(mut self, atol: f64) -> Self {
        self.diff_atol = atol;
        self
    }

    /// Sets the fit's relative tolerance.
    pub fn diff_rtol(mut self, rtol: f64) -> Self {
        self.diff_rtol = rtol;
        self
    }
}

/// Numerical gradients of `Σ_i sum(f(inputs)_i * grad_outputs_i)` with respect to each input,
/// by centred differences `(f(x + eps) - f(x - eps)) / 2eps` (Chainer's `numerical_grad`).
///
/// `f` receives the inputs cast to float64 (on their devices) and returns one output array or
/// several ([`IntoOutputs`]); everything is computed in f64, and each gradient comes back in its
/// input's dtype and on its device. `grad_outputs` has one entry per output, of the output's
/// shape (any dtype); `None` leaves that output out of the sum. Only floating-point inputs have a
/// gradient: capture integer data, such as labels, in `f`. See [`numerical_grad_with`] to detect
/// non-differentiable points.
///
/// ```
/// use kusari::gradient_check::numerical_grad;
/// use kusari::{Array, Result};
/// # fn main() -> Result<()> {
/// let x = Array::from_vec(vec![1.0f32, -2.0, 3.0], &[3])?;
/// let gy = Array::from_vec(vec![1.0f32, 1.0, 0.5], &[3])?;
/// let gx = numerical_grad(|v| &v[0] * &v[0], &[x], &[Some(gy)], 1e-3)?; // d(x²) = 2x·gy
/// let expected = Array::from_vec(vec![2.0f32, -4.0, 3.0], &[3])?;
/// kusari::gradient_check::assert_allclose(&gx[0], &expected, 1e-4, 1e-4)?;
/// # Ok(()) }
/// ```
pub fn numerical_grad<F, O>(
    f: F,
    inputs: &[Array],
    grad_outputs: &[Option<Array>],
    eps: f64,
) -> Result<Vec<Array>>
where
    F: Fn(&[Array]) -> Result<O>,
    O: IntoOutputs<Array>,
{
    numerical_grad_with(
        f,
        inputs,
        grad_outputs,
        eps,
        &NumericalGradOptions::default(),
    )
}

/// [`numerical_grad`] with options: detection of non-differentiable points, reported as
/// [`Error::NonDifferentiable`] with the input element, its value, the output element and the
/// five samples.
///
/// ```
/// use kusari::gradient_check::{numerical_grad_with, NumericalGradOptions};
/// use kusari::{Array, DType, Error, Result};
/// # fn main() -> Result<()> {
/// let x = Array::from_vec(vec![0.5f64, 0.0], &[2])?;
/// let gy = Array::ones(&[2], DType::F64).unwrap();
/// let detect = NumericalGradOptions::default().detect_nondifferentiable(true);
/// let err = numerical_grad_with(|v| v[0].abs(), &[x], &[Some(gy)], 1e-3, &detect)
///     .expect_err("|x| has a kink at 0");
/// assert!(matches!(err, Error::NonDifferentiable { .. }));
/// assert!(err.to_string().contains("inputs[0][1] = 0"));
/// # Ok(()) }
/// ```
pub fn numerical_grad_with<F, O>(
    f: F,
    inputs: &[Array],
    grad_outputs: &[Option<Array>],
    eps: f64,
    options: &NumericalGradOptions,
) -> Result<Vec<Array>>
where
    F: Fn(&[Array]) -> Result<O>,
    O: IntoOutputs<Array>,
{
    const OP: &str = "numerical_grad";
    check_eps(OP, eps)?;
    let detect = detection(OP, options)?;
    for (i, x) in inputs.iter().enumerate() {
        if !x.dtype().is_float() {
            return Err(Error::CheckArguments {
                op: OP,
                msg: format!(
                    "inputs[{i}] is {}{:?}: only floating-point inputs have a gradient (capture integer data such as labels in f)",
                    x.dtype(),
                    x.shape()
                ),
            });
        }
    }
    let base = inputs
        .iter()
        .map(|x| x.astype(DType::F64))
        .collect::<Result<Vec<_>>>()?;
    let host = inputs
        .iter()
        .map(Array::to_f64_vec)
        .collect::<Result<Vec<_>>>()?;
    let call = |args: &[Array]| -> Result<Vec<Sampled>> {
        f(args)?.into_outputs().iter().map(Sampled::of).collect()
    };
    let center = call(&base)?;
    let gys = grad_outputs_f64(OP, &center, grad_outputs)?;
    let mut grads = Vec::with_capacity(inputs.len());
    for (i, x) in inputs.iter().enumerate() {
        let mut g = vec![0.0; x.size()];
        for (k, gk) in g.iter_mut().enumerate() {
            let mut eval = |delta: f64| -> Result<Vec<Sampled>> {
                let mut values = host[i].clone();
                values[k] += delta;
                let mut args = base.clone();
                args[i] = Array::from_cpu_vec(values, x.shape()).to_device(x.device())?;
                let ys = call(&args)?;
                same_outputs(OP, &center, &ys)?;
                Ok(ys)
            };
            let point = || format!("inputs[{i}]{:?} = {}", unravel(k, x.shape()), host[i][k]);
            *gk = derivative(OP, &mut eval, &center, &gys, eps, detect, &point)?;
        }
        grads.push(
            Array::from_cpu_vec(g, x.shape())
                .astype(x.dtype())?
                .to_device(x.device())?,
        );
    }
    Ok(grads)
}

/// One output of a checked function, in f64 on the host.
pub(super) struct Sampled {
    dtype: DType,
    shape: Vec<usize>,
    values: Vec<f64>,
}

impl Sampled {
    pub(super) fn of(a: &Array) -> Result<Self> {
        Ok(Sampled {
            dtype: a.dtype(),
            shape: a.shape().to_vec(),
            values: a.to_f64_vec()?,
        })
    }
}

pub(super) fn check_eps(op: &'static str, eps: f64) -> Result<()> {
    if eps > 0.0 && eps.is_finite() {
        Ok(())
    } else {
        Err(Error::CheckArguments {
            op,
            msg: format!("eps must be positive and finite, got {eps}"),
        })
    }
}

pub(super) fn check_tolerance(op: &'static str, name: &str, value: f64) -> Result<()> {
    if value >= 0.0 && value.is_finite() {
        Ok(())
    } else {
        Err(Error::CheckArguments {
            op,
            msg: format!("{name} must be non-negative and finite, got {value}"),
        })
    }
}

/// The fit's tolerances when detection is on.
pub(super) fn detection(
    op: &'static str,
    options: &NumericalGradOptions,
) -> Result<Option<(f64, f64)>> {
    if !options.detect_nondifferentiable {
        return Ok(None);
    }
    check_tolerance(op, "diff_atol", options.diff_atol)?;
    check_tolerance(op, "diff_rtol", options.diff_rtol)?;
    Ok(Some((options.diff_atol, options.diff_rtol)))
}

/// The output gradients as f64 values, checked against the outputs: one per output (`None`
/// skips one), each of its output's shape.
pub(super) fn grad_outputs_f64(
    op: &'static str,
    outputs: &[Sampled],
    grad_outputs: &[Option<Array>],
) -> Result<Vec<Option<Vec<f64>>>> {
    if grad_outputs.len() != outputs.len() {
        return Err(Error::CheckArguments {
            op,
            msg: format!(
                "{} grad_outputs for {} output(s) (shapes {})",
                grad_outputs.len(),
                outputs.len(),
                shapes(outputs)
            ),
        });
    }
    outputs
        .iter()
        .zip(grad_outputs)
        .enumerate()
        .map(|(j, (y, gy))| {
            let Some(gy) = gy else { return Ok(None) };
            if gy.shape() != y.shape.as_slice() {
                return Err(Error::CheckArguments {
                    op,
                    msg: format!(
                        "grad_outputs[{j}] has shape {:?}, but output {j} has shape {:?}",
                        gy.shape(),
                        y.shape
                    ),
                });
            }
            gy.to_f64_vec().map(Some)
        })
        .collect()
}

pub(super) fn shapes(outputs: &[Sampled]) -> String {
    outputs
        .iter()
        .map(|y| format!("{}{:?}", y.dtype, y.shape))
        .collect::<Vec<_>>()
        .join(", ")
}

/// Checks that a perturbed evaluation returned outputs like the first one.
pub(super) fn same_outputs(op: &'static str, center: &[Sampled], ys: &[Sampled]) -> Result<()> {
    let differs =
        ys.len() != center.len() || ys.iter().zip(center).any(|(a, b)| a.shape != b.shape);
    if differs {
        return Err(Error::CheckArguments {
            op,
            msg: format!(
                "f returned outputs {} at a perturbed point but {} at the original one; it must return the same outputs every time",
                shapes(ys),
                shapes(center)
            ),
        });
    }
    Ok(())
}

/// `Σ_j <y_j, gy_j>` in f64.
pub(super) fn weighted(ys: &[Sampled], gys: &[Option<Vec<f64>>]) -> f64 {
    ys.iter()
        .zip(gys)
        .filter_map(|(y, gy)| gy.as_ref().map(|gy| (y, gy)))
        .map(|(y, gy)| y.values.iter().zip(gy).map(|(a, b)| a * b).sum::<f64>())
        .sum()
}

/// The derivative at 0 of `δ -> Σ <eval(δ), gy>`: centred differences over `±eps`, or with
/// detection the five-point stencil over `±eps, ±2eps` after checking every output element for
/// non-differentiability.
pub(super) fn derivative(
    op: &'static str,
    eval: &mut dyn FnMut(f64) -> Result<Vec<Sampled>>,
    center: &[Sampled],
    gys: &[Option<Vec<f64>>],
    eps: f64,
    detect: Option<(f64, f64)>,
    point: &dyn Fn() -> String,
) -> Result<f64> {
    let Some((diff_atol, diff_rtol)) = detect else {
        let plus = weighted(&eval(eps)?, gys);
        let minus = weighted(&eval(-eps)?, gys);
        return Ok((plus - minus) / (2.0 * eps));
    };
    let (m2, m1, p1, p2) = (eval(-2.0 * eps)?, eval(-eps)?, eval(eps)?, eval(2.0 * eps)?);
    let samples = [
        m2.as_slice(),
        m1.as_slice(),
        center,
        p1.as_slice(),
        p2.as_slice(),
    ];
    check_differentiable(op, &samples, eps, diff_atol, diff_rtol, point)?;
    let w = samples.map(|ys| weighted(ys, gys));
    Ok((w[0] - 8.0 * w[1] + 8.0 * w[3] - w[4]) / (12.0 * eps))
}

/// The machine epsilon of a float dtype (rounding of the sampled values).
pub(super) fn dtype_epsilon(dtype: DType) -> f64 {
    match dtype {
        DType::F16 => 9.77e-4,
        DType::BF16 => 7.82e-3,
        DType::F32 => f64::from(f32::EPSILON),
        _ => f64::EPSILON,
    }
}

/// Chainer's test for non-differentiable points: every float output element must be finite at
/// all five samples or at none, and a quadratic through its samples must fit them.
pub(super) fn check_differentiable(
    op: &'static str,
    samples: &[&[Sampled]; 5],
    eps: f64,
    diff_atol: f64,
    diff_rtol: f64,
    point: &dyn Fn() -> String,
) -> Result<()> {
    for (j, y) in samples[2].iter().enumerate() {
        if !y.dtype.is_float() {
            continue;
        }
        for k in 0..y.values.len() {
            let s = samples.map(|ys| ys[j].values[k]);
            let fail = |reason: String| Error::NonDifferentiable {
                op,
                point: point(),
                output: j,
                output_index: unravel(k, &y.shape),
                reason,
                samples: s.to_vec(),
            };
            let finite = s.map(f64::is_finite);
            if finite.iter().any(|&f| f != finite[0]) {
                return Err(fail(
                    "is finite at some of the five samples and not at others".to_string(),
                ));
            }
            if !finite[0] {
                continue;
            }
            // Residual of the least-squares quadratic through t = -2..2: the components along the
            // discrete orthogonal polynomials of degree 3 and 4.
            let p3 = -s[0] + 2.0 * s[1] - 2.0 * s[3] + s[4];
            let p4 = s[0] - 4.0 * s[1] + 6.0 * s[2] - 4.0 * s[3] + s[4];
            let rms = ((p3 * p3 / 10.0 + p4 * p4 / 70.0) / 5.0).sqrt();
            let slope = (s[0] - 8.0 * s[1] + 8.0 * s[3] - s[4]) / (12.0 * eps);
            let scale = s.iter().fold(0.0f64, |m, v| m.max(v.abs()));
            let rounding = 16.0 * dtype_epsilon(y.dtype) * scale / eps;
            let tolerance = diff_atol + diff_rtol * slope.abs() + rounding;
            if rms / eps > tolerance {
                return Err(fail(format!(
                    "is not smooth: a quadratic through its samples leaves an rms residual of {rms:e}, {:e} in the derivative's units, above the tolerance {tolerance:e} (diff_atol {diff_atol:e} + diff_rtol {diff_rtol:e} * |dy/dx| {:e} + rounding)",
                    rms / eps,
                    slope.abs()
                )));
            }
        }
    }
    Ok(())
}

/// The multi-index of C-order position `flat` in `shape`.
pub(super) fn unravel(mut flat: usize, shape: &[usize]) -> Vec<usize> {
    let mut index = vec![0; shape.len()];
    for (i, &d) in shape.iter().enumerate().rev() {
        if d > 0 {
            index[i] = flat % d;
            flat /= d;
        }
    }
    index
}
