//! [`LayerNormalization`]: layer normalization with a learnt scale and shift.

use super::Parameter;
use super::initializers::{One, Zero};
use crate::error::{Error, Result};
use crate::functions::{layer_normalization, reshape};
use crate::{DType, Link, Variable};

/// Layer normalization with learnt `gamma` (scale, ones at first) and `beta` (shift, zeros at
/// first), both of shape `(size,)` (Chainer's `links.LayerNormalization(size=None, eps=1e-6)`):
/// each sample of `x`, of shape `(N, ...)` with `size` elements after the first axis, is
/// normalized over those elements ([`layer_normalization`]), scaled and shifted.
///
/// With `size = None` the parameters stay uninitialised until the first
/// [`forward`](Self::forward), which takes the size from the input, as Chainer does; it is then
/// fixed, and an input with another size is an error. Chainer's default `eps` is `1e-6` (the
/// function's is `1e-5`).
///
/// ```
/// use kusari::link::LayerNormalization;
/// use kusari::prelude::*;
/// # fn main() -> Result<()> {
/// let ln = LayerNormalization::new(None, 1e-6, DType::F64)?;
/// let x = Variable::new(Array::from_vec(vec![1.0f64, 2.0, 3.0, -1.0, 0.0, 1.0], &[2, 3])?);
/// let y = ln.forward(&x)?.array().to_vec::<f64>()?;
/// assert_eq!(ln.gamma.shape(), Some(vec![3]));
/// // Both rows are (-1, 0, 1) up to their scale: normalized, they are the same.
/// for i in 0..3 {
///     assert!((y[i] - y[3 + i]).abs() < 1e-5);
/// }
/// # Ok(()) }
/// ```
#[derive(Link)]
#[kusari(crate = "crate")]
pub struct LayerNormalization {
    /// The scale, `(size,)`, ones at first.
    pub gamma: Parameter,
    /// The shift, `(size,)`, zeros at first.
    pub beta: Parameter,
    #[kusari(skip)]
    eps: f64,
}

impl LayerNormalization {
    /// A layer in `dtype` normalizing `size` units per sample (`None`: found at the first
    /// forward), with `eps` added to the variance (Chainer's default `1e-6`). A negative or NaN
    /// `eps` is an error.
    pub fn new(size: Option<usize>, eps: f64, dtype: DType) -> Result<Self> {
        if eps.is_nan() || eps < 0.0 {
            return Err(Error::InvalidArgument {
                op: "LayerNormalization".to_string(),
                msg: format!("eps must be >= 0, got {eps}"),
            });
        }
        let gamma = Parameter::new(One, dtype);
        let beta = Parameter::new(Zero, dtype);
        if let Some(size) = size {
            gamma.initialize(&[size])?;
            beta.initialize(&[size])?;
        }
        Ok(LayerNormalization { gamma, beta, eps })
    }

    /// The number of units per sample, once known.
    pub fn size(&self) -> Option<usize> {
        self.gamma.shape().map(|s| s[0])
    }

    /// The `eps` added to the variance.
    pub fn eps(&self) -> f64 {
        self.eps
    }

    /// `x` of shape `(N, ...)` normalized per sample over its `size` elements after the first
    /// axis, then `* gamma + beta`; an `x` of more than 2 axes is flattened to `(N, size)` for
    /// this and its shape restored. Initialises `gamma` and `beta` on the first call when `size`
    /// was not given.
    pub fn forward(&self, x: &Variable) -> Result<Variable> {
        let shape = x.shape().to_vec();
        if shape.len() < 2 {
            return Err(Error::Shape {
                op: "LayerNormalization",
                msg: format!("the input must be (N, ...) with at least 2 axes, got {shape:?}"),
            });
        }
        let size: usize = shape[1..].iter().product();
        match self.size() {
            Some(expected) if expected != size => {
                return Err(Error::Shape {
                    op: "LayerNormalization",
                    msg: format!(
                        "the input {shape:?} has {size} units per sample, but gamma and beta are ({expected},) (the size is fixed by the first input or the constructor)"
                    ),
                });
            }
            Some(_) => {}
            None => {
                self.gamma.initialize(&[size])?;
                self.beta.initialize(&[size])?;
            }
        }
        let flat = match shape.len() {
            2 => x.clone(),
            _ => reshape(x, &[shape[0], size])?,
        };
        let y = layer_normalization(
            &flat,
            &self.gamma.variable()?,
            &self.beta.variable()?,
            self.eps,
        )?;
        match shape.len() {
            2 => Ok(y),
            _ => reshape(&y, &shape),
        }
    }
}
