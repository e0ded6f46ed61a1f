//! Batch normalization (Chainer's `batch_normalization` and `fixed_batch_normalization`),
//! composed of differentiable functions, so that its gradient can be differentiated again.

use super::{add, add_scalar, broadcast_to, mean_axes, mul, pow_scalar, reshape, sub};
use crate::error::{Error, Result};
use crate::{Array, Variable};

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
    let mean = mean_axes(x, &axes, false)?;
    let xc = sub(x, &spread(&mean, &shape, x)?)?;
    let var = mean_axes(&mul(&xc, &xc)?, &axes, false)?;
    let y = normalize(x, Some(xc), [gamma, beta, &mean, &var], &shape, eps)?;
    Ok((y, mean.array().clone(), var.array().clone()))
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
