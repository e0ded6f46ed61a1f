//! Hooks: functions of the gradients run before the update rule (Chainer's optimizer hooks).

use crate::error::{Error, Result};
use crate::{Array, DType};

/// One parameter as a [`Hook`] sees it: its path, its values and the gradient the update rule
/// will use. Replacing `grad` changes what the rule uses, not the parameter's stored gradient.
///
/// ```
/// use kusari::link::optimizers::ParamGrad;
/// use kusari::{Array, Result};
/// # fn main() -> Result<()> {
/// let mut p = ParamGrad {
///     path: "/w".to_string(),
///     value: Array::from_vec(vec![1.0f32, 2.0], &[2])?,
///     grad: Array::from_vec(vec![0.5f32, 0.5], &[2])?,
/// };
/// p.grad = p.grad.mul_scalar(2.0)?;
/// assert_eq!(p.grad.to_vec::<f32>()?, vec![1.0, 1.0]);
/// # Ok(()) }
/// ```
#[derive(Clone, Debug)]
pub struct ParamGrad {
    /// The parameter's path in the link, e.g. `/l1/W`.
    pub path: String,
    /// The parameter's current values.
    pub value: Array,
    /// The gradient the update rule will use; a hook replaces it with a new array of the same
    /// shape, dtype and device.
    pub grad: Array,
}

/// Rewrites the gradients of one step before the update rule runs (Chainer's optimizer hooks,
/// at the `pre` timing). It sees every parameter that is updated in this step, so it can work
/// per parameter ([`WeightDecay`]) or on all of them at once ([`GradientClipping`]).
///
/// A closure `FnMut(&mut [ParamGrad]) -> Result<()>` is a hook:
///
/// ```
/// use kusari::link::optimizers::{Hook, Optimizer, ParamGrad, SGD};
/// use kusari::Result;
/// // Flip the sign of every gradient: gradient ascent.
/// let ascent = |grads: &mut [ParamGrad]| -> Result<()> {
///     for p in grads {
///         p.grad = p.grad.neg()?;
///     }
///     Ok(())
/// };
/// let opt = SGD::new().with_hook(ascent);
/// # let _ = opt;
/// ```
pub trait Hook: Send {
    /// The hook's name, for messages.
    fn name(&self) -> &str {
        std::any::type_name::<Self>()
    }

    /// Rewrites `params[i].grad` for the parameters of this step. The gradients it leaves must
    /// keep their parameter's shape, dtype and device.
    fn apply(&mut self, params: &mut [ParamGrad]) -> Result<()>;
}

impl<F: FnMut(&mut [ParamGrad]) -> Result<()> + Send> Hook for F {
    fn apply(&mut self, params: &mut [ParamGrad]) -> Result<()> {
        self(params)
    }
}

/// L2 regularisation (Chainer's `WeightDecay`): `g += rate * w` for every parameter.
///
/// ```
/// use kusari::link::optimizers::{Hook, ParamGrad, WeightDecay};
/// use kusari::{Array, Result};
/// # fn main() -> Result<()> {
/// let mut grads = [ParamGrad {
///     path: "/w".to_string(),
///     value: Array::from_vec(vec![2.0f64, -4.0], &[2])?,
///     grad: Array::from_vec(vec![1.0f64, 1.0], &[2])?,
/// }];
/// WeightDecay::new(0.25).apply(&mut grads)?;
/// assert_eq!(grads[0].grad.to_vec::<f64>()?, vec![1.5, 0.0]);
/// # Ok(()) }
/// ```
#[derive(Clone, Copy, Debug, PartialEq)]
pub struct WeightDecay {
    /// The coefficient of the weights added to the gradients.
    pub rate: f64,
}

impl WeightDecay {
    /// Weight decay with coefficient `rate`.
    pub fn new(rate: f64) -> Self {
        WeightDecay { rate }
    }
}

impl Hook for WeightDecay {
    fn name(&self) -> &str {
        "WeightDecay"
    }

    fn apply(&mut self, params: &mut [ParamGrad]) -> Result<()> {
        for p in params {
            p.grad = p.grad.add(&p.value.mul_scalar(self.rate)?)?;
        }
        Ok(())
    }
}

/// Clips the gradients by their global L2 norm (Chainer's `GradientClipping`): when the norm of
/// all the gradients of the step together exceeds `threshold`, every gradient is multiplied by
/// `threshold / norm`; otherwise they are left as they are. The norm is computed in float64.
///
/// ```
/// use kusari::link::optimizers::{GradientClipping, Hook, ParamGrad};
/// use kusari::{Array, Result};
/// # fn main() -> Result<()> {
/// let entry = |g: Vec<f64>| -> Result<ParamGrad> {
///     let n = g.len();
///     Ok(ParamGrad {
///         path: format!("/p{n}"),
///         value: Array::zeros(&[n], kusari::DType::F64).unwrap(),
///         grad: Array::from_vec(g, &[n])?,
///     })
/// };
/// let mut grads = [entry(vec![3.0, 0.0])?, entry(vec![4.0])?]; // norm 5
/// GradientClipping::new(2.5).apply(&mut grads)?; // scaled by 2.5 / 5
/// assert_eq!(grads[0].grad.to_vec::<f64>()?, vec![1.5, 0.0]);
/// assert_eq!(grads[1].grad.to_vec::<f64>()?, vec![2.0]);
/// # Ok(()) }
/// ```
#[derive(Clone, Copy, Debug, PartialEq)]
pub struct GradientClipping {
    /// The largest global L2 norm the gradients are left with.
    pub threshold: f64,
}

impl GradientClipping {
    /// Clipping to a global L2 norm of at most `threshold`.
    pub fn new(threshold: f64) -> Self {
        GradientClipping { threshold }
    }
}

impl Hook for GradientClipping {
    fn name(&self) -> &str {
        "GradientClipping"
    }

    fn apply(&mut self, params: &mut [ParamGrad]) -> Result<()> {
        if self.threshold.is_nan() || self.threshold < 0.0 {
            return Err(Error::InvalidArgument {
                op: "GradientClipping".to_string(),
                msg: format!(
                    "the threshold must be a non-negative number, not {}",
                    self.threshold
                ),
            });
        }
        let mut sqnorm = 0.0;
        for p in params.iter() {
            let g = p.grad.astype(DType::F64)?;
            sqnorm += g.mul(&g)?.sum()?.item::<f64>()?;
        }
        let norm = sqnorm.sqrt();
        if norm > self.threshold {
            let rate = self.threshold / norm;
            for p in params {
                p.grad = p.grad.mul_scalar(rate)?;
            }
        }
        Ok(())
    }
}
