//! Batch normalization (Chainer's `batch_normalization` and `fixed_batch_normalization`): fused
//! on the host (float32 and float64), its backward too unless that is itself recorded; composed
//! of differentiable functions elsewhere and for double backprop, so that its gradient can be
//! differentiated again.

use std::borrow::Cow;
use std::sync::{Arc, Mutex, PoisonError};

use super::{
    add, add_scalar, apply1, broadcast_to, mean_axes, mul, mul_scalar, only, pow_scalar, reshape,
    sub, sum_axes,
};
use crate::error::{Error, Result};
use crate::graph::{BackwardContext, ForwardContext, FunctionNode};
use crate::layout::Layout;
use crate::op::BnDims;
use crate::{Array, DType, Device, Variable, config};

/// The axes statistics are taken over for `x` normalized per `gamma`'s elements: axis 0 and
/// every axis after the `gamma.ndim()` axes that follow it (Chainer's default `axis`), and the
/// shape `gamma` broadcasts from.
fn stat_axes(
    op: &'static str,
    x: &Variable,
    params: &[&Variable],
) -> Result<(Vec<isize>, Vec<usize>)> {
    let gamma = params[0];
    let k = gamma.ndim();
    if x.ndim() < k + 1 || x.shape()[1..=k] != *gamma.shape() {
        return Err(Error::Shape {
            op,
            msg: format!(
                "gamma {:?} must match x {:?} on the axes after the batch axis",
                gamma.shape(),
                x.shape()
            ),
        });
    }
    for p in &params[1..] {
        if p.shape() != gamma.shape() {
            return Err(Error::Shape {
                op,
                msg: format!(
                    "gamma {:?}, beta, mean and var must share one shape, got {:?}",
                    gamma.shape(),
                    p.shape()
                ),
            });
        }
    }
    let axes = std::iter::once(0)
        .chain(k + 1..x.ndim())
        .map(|a| a as isize)
        .collect();
    let mut shape = vec![1; x.ndim()];
    shape[1..=k].copy_from_slice(gamma.shape());
    Ok((axes, shape))
}

/// `v` (shaped as gamma) broadcast over `x`.
fn spread(v: &Variable, shape: &[usize], x: &Variable) -> Result<Variable> {
    broadcast_to(&reshape(v, shape)?, x.shape())
}

/// `gamma (x - mean) / sqrt(var + eps) + beta`, each parameter broadcast over `x`.
fn normalize(
    x: &Variable,
    centered: Option<Variable>,
    [gamma, beta, mean, var]: [&Variable; 4],
    shape: &[usize],
    eps: f64,
) -> Result<Variable> {
    let xc = match centered {
        Some(xc) => xc,
        None => sub(x, &spread(mean, shape, x)?)?,
    };
    let inv_std = pow_scalar(&add_scalar(var, eps)?, -0.5)?;
    let scale = mul(gamma, &inv_std)?;
    add(
        &mul(&xc, &spread(&scale, shape, x)?)?,
        &spread(beta, shape, x)?,
    )
}

/// Batch normalization with the batch's own statistics (Chainer's `batch_normalization`): each
/// channel of `x` `(N, C, ...)` (each element of `gamma`'s shape, `x.shape[1:1+gamma.ndim]`)
/// normalized to zero mean and unit variance over the batch and the remaining axes, then
/// scaled by `gamma` and shifted by `beta`. Chainer's default `eps` is `2e-5`.
///
/// ```
/// use kusari::prelude::*;
/// let x = Variable::new(Array::from_vec(vec![1.0f64, 3.0, 5.0, 7.0], &[2, 2])?);
/// let gamma = Variable::new(Array::ones(&[2], DType::F64)?);
/// let beta = Variable::new(Array::zeros(&[2], DType::F64)?);
/// let y = F::batch_normalization(&x, &gamma, &beta, 0.0)?;
/// assert_eq!(y.array().to_vec::<f64>()?, vec![-1.0, -1.0, 1.0, 1.0]);
/// # Ok::<(), kusari::Error>(())
/// ```
pub fn batch_normalization(
    x: &Variable,
    gamma: &Variable,
    beta: &Variable,
    eps: f64,
) -> Result<Variable> {
    Ok(batch_normalization_stats(x, gamma, beta, eps)?.0)
}

/// [`batch_normalization`] also returning the batch's mean and (biased) variance per channel,
/// shaped as `gamma`, for running averages ([`crate::link::BatchNormalization`] keeps them).
pub fn batch_normalization_stats(
    x: &Variable,
    gamma: &Variable,
    beta: &Variable,
    eps: f64,
) -> Result<(Variable, Array, Array)> {
    const OP: &str = "batch_normalization";
    check_eps(OP, eps)?;
    let (axes, shape) = stat_axes(OP, x, &[gamma, beta])?;
    let host_float =
        |v: &Variable| v.device() == Device::Cpu && matches!(v.dtype(), DType::F32 | DType::F64);
    let same_dtype = gamma.dtype() == x.dtype() && beta.dtype() == x.dtype();
    if [x, gamma, beta].into_iter().all(host_float) && same_dtype {
        let n = x.shape()[0];
        let p = gamma.size();
        let d = BnDims {
            n,
            p,
            s: x.size() / (n * p).max(1),
        };
        let stats = Arc::new(Mutex::new(None));
        let node = BatchNorm {
            eps,
            d,
            axes,
            shape,
            saved: None,
            stats: stats.clone(),
        };
        let y = apply1(node, &[x, gamma, beta])?;
        let taken = stats.lock().unwrap_or_else(PoisonError::into_inner).take();
        let (mean, var) = taken.ok_or_else(|| Error::InvalidArgument {
            op: OP.into(),
            msg: "the fused forward kept no statistics".into(),
        })?;
        return Ok((y, mean, var));
    }
    let mean = mean_axes(x, &axes, false)?;
    let xc = sub(x, &spread(&mean, &shape, x)?)?;
    let var = mean_axes(&mul(&xc, &xc)?, &axes, false)?;
    let y = normalize(x, Some(xc), [gamma, beta, &mean, &var], &shape, eps)?;
    Ok((y, mean.array().clone(), var.array().clone()))
}

/// Batch normalization fused on the host (float32 and float64): one pass for each channel's
/// statistics and one for the output, and a fused backward — unless the backward is itself
/// recorded (double backprop), which composes it of differentiable functions.
struct BatchNorm {
    eps: f64,
    d: BnDims,
    axes: Vec<isize>,
    shape: Vec<usize>,
    /// The forward's mean and `1 / sqrt(var + eps)`, for the fused backward.
    saved: Option<(Array, Array)>,
    /// The batch's mean and variance, for the caller's running averages.
    stats: Arc<Mutex<Option<(Array, Array)>>>,
}

impl FunctionNode for BatchNorm {
    fn label(&self) -> Cow<'static, str> {
        Cow::Borrowed("batch_normalization")
    }

    fn forward(&mut self, ctx: &mut ForwardContext, inputs: &[Array]) -> Result<Vec<Array>> {
        ctx.retain_inputs(&[0, 1]);
        let (x, gamma, beta) = (&inputs[0], &inputs[1], &inputs[2]);
        let fused = x.storage().batch_norm(
            x.layout(),
            (gamma.storage(), gamma.layout()),
            (beta.storage(), beta.layout()),
            self.d,
            self.eps,
        )?;
        let Some([y, mean, var, inv]) = fused else {
            return Err(Error::InvalidArgument {
                op: "batch_normalization".into(),
                msg: format!("no fused form for {} on {}", x.dtype(), x.device()),
            });
        };
        let stat = |s| Array::from_storage(s, Layout::contiguous(gamma.shape()));
        let (mean, var, inv) = (stat(mean), stat(var), stat(inv));
        self.saved = Some((mean.clone(), inv));
        *self.stats.lock().unwrap_or_else(PoisonError::into_inner) = Some((mean, var));
        Ok(vec![Array::from_storage(y, Layout::contiguous(x.shape()))])
    }

    fn backward(
        &self,
        ctx: &BackwardContext<'_>,
        targets: &[usize],
        gys: &[Option<Variable>],
    ) -> Result<Vec<Option<Variable>>> {
        let gy = only(gys);
        let (x, gamma) = (ctx.retained_input(0)?, ctx.retained_input(1)?);
        let [gx, ggamma, gbeta] = match (config::enable_backprop(), &self.saved) {
            (false, Some((mean, inv))) => {
                let (xa, ga, gya) = (x.array(), gamma.array(), gy.array());
                let fused = xa.storage().batch_norm_grad(
                    xa.layout(),
                    [
                        (ga.storage(), ga.layout()),
                        (gya.storage(), gya.layout()),
                        (mean.storage(), mean.layout()),
                        (inv.storage(), inv.layout()),
                    ],
                    self.d,
                )?;
                match fused {
                    Some([gx, gg, gb]) => {
                        let c = |s, shape: &[usize]| {
                            Variable::constant(Array::from_storage(s, Layout::contiguous(shape)))
                        };
                        [c(gx, x.shape()), c(gg, gamma.shape()), c(gb, gamma.shape())]
                    }
                    None => composed_grads(&x, &gamma, gy, &self.axes, &self.shape, self.eps)?,
                }
            }
            _ => composed_grads(&x, &gamma, gy, &self.axes, &self.shape, self.eps)?,
        };
        let pick = |i: usize, g: Variable| targets.contains(&i).then_some(g);
        Ok(vec![pick(0, gx), pick(1, ggamma), pick(2, gbeta)])
    }
}

/// Batch normalization's gradients composed of differentiable functions (so that they can be
/// differentiated again): `gbeta = Σ gy`, `ggamma = Σ gy · x̂`,
/// `gx = gamma · inv_std · (gy - gbeta / m - x̂ · ggamma / m)`.
fn composed_grads(
    x: &Variable,
    gamma: &Variable,
    gy: &Variable,
    axes: &[isize],
    shape: &[usize],
    eps: f64,
) -> Result<[Variable; 3]> {
    let m = (x.size() / gamma.size().max(1)).max(1) as f64;
    let mean = mean_axes(x, axes, false)?;
    let xc = sub(x, &spread(&mean, shape, x)?)?;
    let var = mean_axes(&mul(&xc, &xc)?, axes, false)?;
    let inv = pow_scalar(&add_scalar(&var, eps)?, -0.5)?;
    let xhat = mul(&xc, &spread(&inv, shape, x)?)?;
    let gbeta = sum_axes(gy, axes, false)?;
    let ggamma = sum_axes(&mul(gy, &xhat)?, axes, false)?;
    let centered = sub(
        &sub(gy, &spread(&mul_scalar(&gbeta, 1.0 / m)?, shape, x)?)?,
        &mul(&xhat, &spread(&mul_scalar(&ggamma, 1.0 / m)?, shape, x)?)?,
    )?;
    let gx = mul(&spread(&mul(gamma, &inv)?, shape, x)?, &centered)?;
    Ok([gx, ggamma, gbeta])
}

/// Batch normalization with given statistics (Chainer's `fixed_batch_normalization`, what a
/// trained network uses at inference): `gamma (x - mean) / sqrt(var + eps) + beta`, `gamma`,
/// `beta`, `mean` and `var` shaped as `x.shape[1:1+gamma.ndim]`. Differentiable in all five.
///
/// ```
/// use kusari::prelude::*;
/// let v = |d: Vec<f64>, s: &[usize]| Variable::new(Array::from_vec(d, s).unwrap());
/// let x = v(vec![1.0, 2.0], &[1, 2]);
/// let (gamma, beta) = (v(vec![2.0, 2.0], &[2]), v(vec![0.5, 0.5], &[2]));
/// let (mean, var) = (v(vec![1.0, 0.0], &[2]), v(vec![4.0, 1.0], &[2]));
/// let y = F::fixed_batch_normalization(&x, &gamma, &beta, &mean, &var, 0.0)?;
/// assert_eq!(y.array().to_vec::<f64>()?, vec![0.5, 4.5]);
/// # Ok::<(), kusari::Error>(())
/// ```
pub fn fixed_batch_normalization(
    x: &Variable,
    gamma: &Variable,
    beta: &Variable,
    mean: &Variable,
    var: &Variable,
    eps: f64,
) -> Result<Variable> {
    const OP: &str = "fixed_batch_normalization";
    check_eps(OP, eps)?;
    let (_, shape) = stat_axes(OP, x, &[gamma, beta, mean, var])?;
    normalize(x, None, [gamma, beta, mean, var], &shape, eps)
}

fn check_eps(op: &'static str, eps: f64) -> Result<()> {
    if eps.is_finite() && eps >= 0.0 {
        Ok(())
    } else {
        Err(Error::InvalidArgument {
            op: op.to_string(),
            msg: format!("eps must be finite and not negative, got {eps}"),
        })
    }
}
