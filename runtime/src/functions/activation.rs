//! Activations and elementwise functions with a parameter or a kink: leaky ReLU, ELU, softplus,
//! swish, GELU, the absolute value and clipping (Chainer's `chainer.functions.activation` and
//! `F.absolute`, `F.clip`).
//!
//! Each is one node. Leaky ReLU, ELU, swish, GELU and the absolute value declare a `formula`, and
//! their backward is derived from it: one fused kernel, differentiable again to any order.
//! Leaky ReLU, ELU and GELU run their formula as their forward too (one kernel on CUDA, one pass
//! of the host executor); swish keeps the array operations `x · sigmoid(βx)`, whose far negative
//! tail the formula's `0.5 tanh(0.5 z) + 0.5` rounds to 0.
//! Softplus and clipping keep a backward written with differentiable functions: the derivative
//! of softplus's overflow-free form has a kink at 0 that `σ(βx)` has not, and clipping's passes
//! no gradient at a NaN input, where the formula's would. Each refuses a non-float input with
//! [`Error::UnsupportedDType`] naming it, as Chainer does.

use super::array_ops::expect_float;
use super::{mul, mul_scalar, reshape, sigmoid, where_};
use crate::error::{Error, Result};
use crate::{Array, ElementwiseOp, Scalar, Variable, function_node};

/// The forward of an activation by its formula: one kernel on CUDA, one pass of the host
/// executor (compiled once hot), in place of the three to five array operations it takes
/// otherwise.
fn formula_forward(op: &ElementwiseOp, x: &Array, params: &[f64]) -> Result<Array> {
    let params: Vec<Scalar> = params.iter().map(|&p| Scalar::F64(p)).collect();
    Ok(op.forward(&[x], &params)?.remove(0))
}

/// A constant zero of `x`'s shape, dtype and device.
fn zeros_of(x: &Variable) -> Result<Variable> {
    Ok(Variable::constant(x.array().zeros_like()?))
}

/// An error naming `op` and `param` unless `value` is finite.
fn finite(op: &str, param: &str, value: f64) -> Result<()> {
    if value.is_finite() {
        Ok(())
    } else {
        Err(Error::InvalidArgument {
            op: op.to_string(),
            msg: format!("{param} must be finite, got {value}"),
        })
    }
}

/// Leaky ReLU (Chainer's `F.leaky_relu(x, slope=0.2)`): `x` where `x >= 0`, `slope * x`
/// elsewhere. The gradient at 0 is 1, as in Chainer; the second derivative is 0.
///
/// ```
/// use kusari::prelude::*;
/// # fn main() -> Result<()> {
/// let x = Variable::new(Array::from_vec(vec![-2.0f64, 0.0, 3.0], &[3])?);
/// let y = F::leaky_relu(&x, 0.2)?;
/// assert_eq!(y.array().to_vec::<f64>()?, vec![-0.4, 0.0, 3.0]);
/// # Ok(()) }
/// ```
pub fn leaky_relu(x: &Variable, slope: f64) -> Result<Variable> {
    expect_float("leaky_relu", x)?;
    finite("leaky_relu", "slope", slope)?;
    leaky_relu_node(x, slope)
}

/// The node of [`leaky_relu`]: its forward is its formula run as one pass, its backward derived
/// from it.
struct LeakyRelu {
    slope: f64,
}

#[function_node(
    crate = "crate",
    name = "leaky_relu_node",
    formula = "x >= 0 ? x : x * slope"
)]
impl LeakyRelu {
    fn new(slope: f64) -> Self {
        LeakyRelu { slope }
    }

    fn forward(&self, x: &Array) -> Result<Array> {
        formula_forward(LeakyRelu::elementwise_op(), x, &[self.slope])
    }
}

/// The exponential linear unit (Chainer's `F.elu(x, alpha=1.0)`): `x` where `x >= 0`,
/// `alpha * (eˣ - 1)` elsewhere (`expm1`, accurate near 0). The exponential is only taken of
/// the negative part, so a large positive `x` gives no infinity, in the forward or the backward.
///
/// ```
/// use kusari::prelude::*;
/// # fn main() -> Result<()> {
/// let x = Variable::new(Array::from_vec(vec![-1.0f64, 2.0], &[2])?);
/// let y = F::elu(&x, 1.0)?.array().to_vec::<f64>()?;
/// assert!((y[0] - (-1.0f64).exp_m1()).abs() < 1e-15 && y[1] == 2.0);
/// # Ok(()) }
/// ```
pub fn elu(x: &Variable, alpha: f64) -> Result<Variable> {
    expect_float("elu", x)?;
    finite("elu", "alpha", alpha)?;
    elu_node(x, alpha)
}

/// The node of [`elu`]: its forward is its formula run as one pass, its backward derived from
/// it; the formula's `fmin` keeps the exponential of a large positive `x` (in the branch not
/// taken) from being infinite.
struct Elu {
    alpha: f64,
}

#[function_node(
    crate = "crate",
    name = "elu_node",
    formula = "x >= 0 ? x : alpha * expm1(fmin(x, 0))"
)]
impl Elu {
    fn new(alpha: f64) -> Self {
        Elu { alpha }
    }

    fn forward(&self, x: &Array) -> Result<Array> {
        formula_forward(Elu::elementwise_op(), x, &[self.alpha])
    }
}

/// The node of [`softplus`].
struct Softplus {
    beta: f64,
}

#[function_node(crate = "crate", name = "softplus_node")]
impl Softplus {
    fn new(beta: f64) -> Self {
        Softplus { beta }
    }

    #[retain(x)]
    fn forward(&self, x: &Array) -> Result<Array> {
        // (max(0, βx) + ln(1 + e^(-|βx|))) / β: no exponential of a positive number.
        let bx = x.mul_scalar(self.beta)?;
        let tail = bx.abs()?.neg()?.exp()?.log1p()?;
        bx.maximum_scalar(0.0)?
            .add(&tail)?
            .mul_scalar(1.0 / self.beta)
    }

    fn backward(&self, x: &Variable, gy: &Variable) -> Result<Variable> {
        // d/dx = σ(βx), differentiable again through the sigmoid.
        mul(gy, &sigmoid(&mul_scalar(x, self.beta)?)?)
    }
}

/// Softplus (Chainer's `F.softplus(x, beta=1.0)`): `ln(1 + e^(βx)) / β`, computed without
/// overflow as `(max(0, βx) + ln(1 + e^(-|βx|))) / β`. Its gradient is `σ(βx)`. `beta` must be
/// finite and not 0 ([`Error::InvalidArgument`]).
///
/// ```
/// use kusari::prelude::*;
/// # fn main() -> Result<()> {
/// let x = Variable::new(Array::from_vec(vec![0.0f64, 1000.0], &[2])?);
/// let y = F::softplus(&x, 1.0)?.array().to_vec::<f64>()?;
/// assert!((y[0] - 2f64.ln()).abs() < 1e-15);
/// assert_eq!(y[1], 1000.0); // no overflow
/// # Ok(()) }
/// ```
pub fn softplus(x: &Variable, beta: f64) -> Result<Variable> {
    expect_float("softplus", x)?;
    finite("softplus", "beta", beta)?;
    if beta == 0.0 {
        return Err(Error::InvalidArgument {
            op: "softplus".to_string(),
            msg: "beta must not be 0 (the function divides by it)".to_string(),
        });
    }
    softplus_node(x, beta)
}

/// Swish (Chainer's `F.swish(x, beta)`): `x · σ(β x)`, with `beta` a variable (differentiable,
/// as a learned parameter) of shape `(s₁, …, s_M)` for `x` of shape `(s_B, s₁, …, s_N)`,
/// `0 ≤ M ≤ N`: it is reshaped to `(1, s₁, …, s_M, 1, …, 1)` and broadcast, so it runs along
/// axis 1 (a `beta` of shape `(C,)` is one value per channel). A `beta` whose shape is not a
/// prefix of `x.shape()[1..]`, or of another dtype, is an error naming both shapes.
///
/// ```
/// use kusari::prelude::*;
/// # fn main() -> Result<()> {
/// let x = Variable::new(Array::from_vec(vec![1.0f64, 2.0, -1.0, 0.5], &[2, 2])?);
/// let beta = Variable::new(Array::from_vec(vec![0.0f64, 1.0], &[2])?); // one per column
/// let y = F::swish(&x, &beta)?.array().to_vec::<f64>()?;
/// let sigmoid = |v: f64| 1.0 / (1.0 + (-v).exp());
/// let want = [1.0 * 0.5, 2.0 * sigmoid(2.0), -1.0 * 0.5, 0.5 * sigmoid(0.5)];
/// for (a, b) in y.iter().zip(want) {
///     assert!((a - b).abs() < 1e-15);
/// }
/// # Ok(()) }
/// ```
pub fn swish(x: &Variable, beta: &Variable) -> Result<Variable> {
    expect_float("swish", x)?;
    let (xs, bs) = (x.shape(), beta.shape());
    if xs.is_empty() || bs.len() >= xs.len() || xs[1..1 + bs.len()] != *bs {
        return Err(Error::Shape {
            op: "swish",
            msg: format!(
                "beta {bs:?} must match the axes after the first of x {xs:?} (beta of shape (s1, ..., sM) for x of shape (sB, s1, ..., sN), M <= N)"
            ),
        });
    }
    if beta.dtype() != x.dtype() {
        return Err(Error::DTypeMismatch {
            op: "swish",
            lhs: x.dtype(),
            lhs_shape: xs.to_vec(),
            rhs: beta.dtype(),
            rhs_shape: bs.to_vec(),
        });
    }
    let mut extended = vec![1];
    extended.extend_from_slice(bs);
    extended.resize(xs.len(), 1);
    let b = reshape(beta, &extended)?;
    swish_node(x, &b)
}

/// The node of [`swish`] (`beta` reshaped to broadcast against `x`); its backward is derived
/// from the formula, the sigmoid written as `0.5 tanh(0.5 z) + 0.5`, whose derivative is finite
/// everywhere.
struct Swish;

#[function_node(
    crate = "crate",
    name = "swish_node",
    formula = "x * (0.5 * tanh(0.5 * (beta * x)) + 0.5)"
)]
impl Swish {
    fn forward(&self, x: &Array, beta: &Array) -> Result<Array> {
        x.mul(&beta.mul(x)?.sigmoid()?)
    }
}

/// The Gaussian error linear unit (Chainer's `F.gelu(x)`), in its exact form:
/// `x Φ(x) = x (1 + erf(x / √2)) / 2`. Its derivative, `Φ(x) + x φ(x)`, comes from `erf`'s.
///
/// ```
/// use kusari::prelude::*;
/// # fn main() -> Result<()> {
/// let x = Variable::new(Array::from_vec(vec![0.0f64, 1.0], &[2])?);
/// let y = F::gelu(&x)?.array().to_vec::<f64>()?;
/// assert_eq!(y[0], 0.0);
/// assert!((y[1] - 0.841_344_746_068_542_9).abs() < 1e-15); // Φ(1)
/// # Ok(()) }
/// ```
pub fn gelu(x: &Variable) -> Result<Variable> {
    expect_float("gelu", x)?;
    gelu_node(x)
}

/// The node of [`gelu`]: its forward is its formula run as one pass, its backward derived from
/// it.
struct Gelu;

#[function_node(
    crate = "crate",
    name = "gelu_node",
    formula = "x * (erf(x * 0.7071067811865476) + 1) * 0.5"
)]
impl Gelu {
    fn forward(&self, x: &Array) -> Result<Array> {
        formula_forward(Gelu::elementwise_op(), x, &[])
    }
}

/// `|x|` (the node of [`absolute`]).
pub struct Absolute;

#[function_node(crate = "crate", name = "absolute_node", formula = "fabs(x)")]
impl Absolute {
    fn forward(&self, x: &Array) -> Result<Array> {
        x.abs()
    }
}

/// The absolute value elementwise (Chainer's `F.absolute(x)`, and `abs(x)` of a variable:
/// [`Variable::abs`]). The gradient is `sign(x)`, 0 at 0.
///
/// ```
/// use kusari::prelude::*;
/// # fn main() -> Result<()> {
/// let x = Variable::new(Array::from_vec(vec![-1.5f32, 0.0, 2.0], &[3])?);
/// assert_eq!(F::absolute(&x)?.array().to_vec::<f32>()?, vec![1.5, 0.0, 2.0]);
/// # Ok(()) }
/// ```
pub fn absolute(x: &Variable) -> Result<Variable> {
    expect_float("absolute", x)?;
    absolute_node(x)
}

/// Clipping to `[x_min, x_max]` (the node of [`clip`]; an absent bound is an infinite one).
struct Clip {
    x_min: f64,
    x_max: f64,
}

#[function_node(
    crate = "crate",
    name = "clip_node",
    formula = "x < x_min ? x_min : (x > x_max ? x_max : x)"
)]
impl Clip {
    fn new(x_min: f64, x_max: f64) -> Self {
        Clip { x_min, x_max }
    }

    #[retain(x, output = 0)]
    fn forward(&self, x: &Array) -> Result<Array> {
        let mut y = x.clone();
        if self.x_min > f64::NEG_INFINITY {
            y = y.maximum_scalar(self.x_min)?;
        }
        if self.x_max < f64::INFINITY {
            // min(y, hi) = -max(-y, -hi); NaN stays NaN.
            y = y.neg()?.maximum_scalar(-self.x_max)?.neg()?;
        }
        Ok(y)
    }

    fn backward(&self, x: &Variable, y: &Variable, gy: &Variable) -> Result<Variable> {
        // The gradient passes where x_min <= x <= x_max, that is where the clip kept x (as
        // Chainer's `ClipGrad`); the mask is a constant, so this is differentiable again.
        let inside = x.array().eq(y.array())?;
        where_(&inside, gy, &zeros_of(gy)?)
    }
}

/// Clips every element to `[x_min, x_max]` (Chainer's `F.clip(x, x_min, x_max)`; `None` is no
/// bound on that side, as Chainer's `None`). The gradient is 1 where `x_min <= x <= x_max`
/// (bounds included, as in Chainer) and 0 elsewhere. Both bounds `None`, a NaN bound, or
/// `x_min > x_max` is [`Error::InvalidArgument`].
///
/// ```
/// use kusari::prelude::*;
/// # fn main() -> Result<()> {
/// let x = Variable::new(Array::from_vec(vec![-2.0f64, 0.5, 3.0], &[3])?);
/// let y = F::clip(&x, Some(-1.0), Some(1.0))?;
/// assert_eq!(y.array().to_vec::<f64>()?, vec![-1.0, 0.5, 1.0]);
/// assert_eq!(F::clip(&x, None, Some(0.0))?.array().to_vec::<f64>()?, vec![-2.0, 0.0, 0.0]);
/// # Ok(()) }
/// ```
pub fn clip(x: &Variable, x_min: Option<f64>, x_max: Option<f64>) -> Result<Variable> {
    expect_float("clip", x)?;
    let invalid = |msg: String| {
        Err(Error::InvalidArgument {
            op: "clip".to_string(),
            msg,
        })
    };
    if x_min.is_none() && x_max.is_none() {
        return invalid("x_min and x_max are both None: give at least one bound".to_string());
    }
    let (lo, hi) = (
        x_min.unwrap_or(f64::NEG_INFINITY),
        x_max.unwrap_or(f64::INFINITY),
    );
    if lo.is_nan() || hi.is_nan() {
        return invalid(format!("a bound is NaN (x_min {x_min:?}, x_max {x_max:?})"));
    }
    if lo > hi {
        return invalid(format!("x_min {lo} is greater than x_max {hi}"));
    }
    clip_node(x, lo, hi)
}
