//! The tutorial's first link: an elementwise product with a learnt array.

use super::Parameter;
use super::initializers::{Initializer, Normal};
use crate::error::Result;
use crate::{DType, Link, Variable};

/// `y = x * W`, elementwise (broadcasting), with `W` a parameter of a given shape (the
/// tutorial's `EltwiseParamProduct`). `W` is drawn from `N(0, 1)` unless another initializer
/// is given.
///
/// ```
/// use kusari::link::{initializers::Constant, EltwiseParamProduct};
/// use kusari::prelude::*;
/// # fn main() -> Result<()> {
/// let l = EltwiseParamProduct::with_initializer(&[3], Constant(2.0), DType::F32)?;
/// let y = l.forward(&Variable::new(Array::from_vec(vec![1.0f32, 2.0, 3.0], &[3])?))?;
/// assert_eq!(y.array().to_vec::<f32>()?, vec![2.0, 4.0, 6.0]);
/// assert_eq!(l.named_params()[0].0, "/W");
/// # Ok(()) }
/// ```
#[derive(Link)]
#[kusari(crate = "crate")]
#[allow(non_snake_case)] // Chainer's name: the parameter's path is `/W`.
pub struct EltwiseParamProduct {
    /// The factor, of the shape given at construction.
    pub W: Parameter,
}

impl EltwiseParamProduct {
    /// `W` of `shape` in `dtype`, drawn from `N(0, 1)` (the tutorial's `Normal(scale=1.)`).
    pub fn new(shape: &[usize], dtype: DType) -> Result<Self> {
        Self::with_initializer(shape, Normal { scale: 1.0 }, dtype)
    }

    /// `W` of `shape` in `dtype`, from `initializer`.
    pub fn with_initializer(
        shape: &[usize],
        initializer: impl Initializer + 'static,
        dtype: DType,
    ) -> Result<Self> {
        Ok(EltwiseParamProduct {
            W: Parameter::with_shape(initializer, shape, dtype)?,
        })
    }

    /// `x * W`.
    pub fn forward(&self, x: &Variable) -> Result<Variable> {
        x * &self.W.variable()?
    }
}
