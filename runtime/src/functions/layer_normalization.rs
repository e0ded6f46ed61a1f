//! Layer normalization, composed of differentiable functions (so that its
//! gradient can be differentiated again).

use super::array_ops::expect_float;
use super::{add, add_scalar, mean_axes, mul, pow_scalar, sub};
use crate::Variable;
use crate::error::{Error, Result};

/// Layer normalization (Chainer's `F.layer_normalization(x, gamma, beta, eps=1e-5)`): each
/// sample of `x`, of shape `(N, ...)`, is normalized by the mean and the (biased) variance of
/// its own elements, over every axis but the first, then scaled by `gamma` and shifted by
/// `beta`, both of shape `x.shape()[1..]`:
///
/// `y = (x - mean) / sqrt(var + eps) * gamma + beta`.
///
/// Chainer's common case is `x` of shape `(batch_size, unit_size)` with `gamma` and `beta` of
/// shape `(unit_size,)`. It is built from `mean_axes`, `sub`, `mul`, `pow_scalar` and `add`, so
/// the gradients of `x`, `gamma` and `beta` are differentiable again. An `x` with fewer than 2
/// axes, a `gamma` or `beta` of another shape or dtype, or a negative or NaN `eps` is an error
/// naming `layer_normalization`.
///
/// ```
/// use kusari::prelude::*;
/// # fn main() -> Result<()> {
/// let x = Variable::new(Array::from_vec(vec![1.0f64, 3.0, 10.0, 20.0], &[2, 2])?);
/// let gamma = Variable::new(Array::ones(&[2], DType::F64)?);
/// let beta = Variable::new(Array::zeros(&[2], DType::F64)?);
/// let y = F::layer_normalization(&x, &gamma, &beta, 1e-5)?.array().to_vec::<f64>()?;
/// // Each row becomes (-1, 1) up to eps: (x - mean) / std.
/// let one = 1.0 / (1.0f64 + 1e-5).sqrt();
/// assert!((y[0] + one).abs() < 1e-12 && (y[1] - one).abs() < 1e-12);
/// let one = 5.0 / (25.0f64 + 1e-5).sqrt();
/// assert!((y[2] + one).abs() < 1e-12 && (y[3] - one).abs() < 1e-12);
/// # Ok(()) }
/// ```
pub fn layer_normalization(
    x: &Variable,
    gamma: &Variable,
    beta: &Variable,
    eps: f64,
) -> Result<Variable> {
    const OP: &str = "layer_normalization";
    expect_float(OP, x)?;
    let shape = x.shape();
    if shape.len() < 2 {
        return Err(Error::Shape {
            op: OP,
            msg: format!("x must be (N, ...) with at least 2 axes, got {shape:?}"),
        });
    }
    for (name, p) in [("gamma", gamma), ("beta", beta)] {
        if p.shape() != &shape[1..] {
            return Err(Error::Shape {
                op: OP,
                msg: format!(
                    "{name} {:?} must have the shape of x {shape:?} without its first axis, {:?}",
                    p.shape(),
                    &shape[1..]
                ),
            });
        }
        if p.dtype() != x.dtype() {
            return Err(Error::DTypeMismatch {
                op: OP,
                lhs: x.dtype(),
                lhs_shape: shape.to_vec(),
                rhs: p.dtype(),
                rhs_shape: p.shape().to_vec(),
            });
        }
    }
    if eps.is_nan() || eps < 0.0 {
        return Err(Error::InvalidArgument {
            op: OP.to_string(),
            msg: format!("eps must be >= 0, got {eps}"),
        });
    }
    let axes: Vec<isize> = (1..shape.len() as isize).collect();
    let centered = sub(x, &mean_axes(x, &axes, true)?)?;
    let var = mean_axes(&mul(&centered, &centered)?, &axes, true)?;
    let normalized = mul(&centered, &pow_scalar(&add_scalar(&var, eps)?, -0.5)?)?;
    add(&mul(&normalized, gamma)?, beta)
}
