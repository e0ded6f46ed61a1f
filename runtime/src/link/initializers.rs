//! Initializers: how a [`Parameter`](super::Parameter) gets its first values (Chainer's
//! `chainer.initializers`). Random ones draw from this thread's default generator
//! ([`crate::random::seed`]).
//!
//! Fans follow Chainer: for a shape `(out, in, k...)`, `fan_in = in * Π k` and
//! `fan_out = out * Π k`; shapes of fewer than two dimensions have no fans, and the initializers
//! that need them return an error.

use crate::error::{Error, Result};
use crate::random::{Rng, with_default_rng};
use crate::{Array, DType};

/// Produces a parameter's initial values for a shape and dtype (on the host).
pub trait Initializer: Send + Sync {
    /// The initial values, drawing from `rng` if random.
    fn generate(&self, shape: &[usize], dtype: DType, rng: &mut Rng) -> Result<Array>;

    /// The initial values, drawn from this thread's default generator.
    fn initial(&self, shape: &[usize], dtype: DType) -> Result<Array> {
        with_default_rng(|rng| self.generate(shape, dtype, rng))
    }
}

/// `(fan_in, fan_out)` of a weight of `shape`, as Chainer defines them.
///
/// ```
/// use kusari::link::initializers::fans;
/// assert_eq!(fans("HeNormal", &[4, 3]).unwrap(), (3, 4));
/// assert_eq!(fans("HeNormal", &[8, 3, 5, 5]).unwrap(), (75, 200));
/// assert!(fans("HeNormal", &[4]).is_err());
/// ```
pub fn fans(initializer: &str, shape: &[usize]) -> Result<(usize, usize)> {
    if shape.len() < 2 {
        return Err(Error::Shape {
            op: "initializer fans",
            msg: format!(
                "{initializer} needs a shape of at least two dimensions (out, in, ...) to know its fans, got {shape:?}"
            ),
        });
    }
    let receptive: usize = shape[2..].iter().product();
    Ok((shape[1] * receptive, shape[0] * receptive))
}

/// Every element `value`.
#[derive(Clone, Copy, Debug, PartialEq)]
pub struct Constant(pub f64);

impl Initializer for Constant {
    fn generate(&self, shape: &[usize], dtype: DType, _rng: &mut Rng) -> Result<Array> {
        Array::full(shape, self.0, dtype)
    }
}

/// Zeros (Chainer's default for biases).
#[derive(Clone, Copy, Debug, Default, PartialEq)]
pub struct Zero;

impl Initializer for Zero {
    fn generate(&self, shape: &[usize], dtype: DType, _rng: &mut Rng) -> Result<Array> {
        Array::zeros(shape, dtype)
    }
}

/// Ones.
#[derive(Clone, Copy, Debug, Default, PartialEq)]
pub struct One;

impl Initializer for One {
    fn generate(&self, shape: &[usize], dtype: DType, _rng: &mut Rng) -> Result<Array> {
        Array::ones(shape, dtype)
    }
}

/// `N(0, scale²)` (Chainer's default scale 0.05).
#[derive(Clone, Copy, Debug, PartialEq)]
pub struct Normal {
    /// The standard deviation.
    pub scale: f64,
}

impl Default for Normal {
    fn default() -> Self {
        Normal { scale: 0.05 }
    }
}

impl Initializer for Normal {
    fn generate(&self, shape: &[usize], dtype: DType, rng: &mut Rng) -> Result<Array> {
        Array::normal(shape, 0.0, self.scale, dtype, rng)
    }
}

/// `U(-scale, scale)` (Chainer's default scale 0.05).
#[derive(Clone, Copy, Debug, PartialEq)]
pub struct Uniform {
    /// The half-width of the interval.
    pub scale: f64,
}

impl Default for Uniform {
    fn default() -> Self {
        Uniform { scale: 0.05 }
    }
}

impl Initializer for Uniform {
    fn generate(&self, shape: &[usize], dtype: DType, rng: &mut Rng) -> Result<Array> {
        Array::uniform(shape, -self.scale, self.scale, dtype, rng)
    }
}

/// `N(0, scale² / fan_in)` (LeCun).
#[derive(Clone, Copy, Debug, PartialEq)]
pub struct LeCunNormal {
    /// Multiplies the standard deviation (default 1).
    pub scale: f64,
}

impl Default for LeCunNormal {
    fn default() -> Self {
        LeCunNormal { scale: 1.0 }
    }
}

impl Initializer for LeCunNormal {
    fn generate(&self, shape: &[usize], dtype: DType, rng: &mut Rng) -> Result<Array> {
        let (fan_in, _) = fans("LeCunNormal", shape)?;
        let std = self.scale * (1.0 / fan_in.max(1) as f64).sqrt();
        Array::normal(shape, 0.0, std, dtype, rng)
    }
}

/// `U(-s, s)` with `s = scale * sqrt(6 / (fan_in + fan_out))` (Glorot, or Xavier).
#[derive(Clone, Copy, Debug, PartialEq)]
pub struct GlorotUniform {
    /// Multiplies the half-width (default 1).
    pub scale: f64,
}

impl Default for GlorotUniform {
    fn default() -> Self {
        GlorotUniform { scale: 1.0 }
    }
}

impl Initializer for GlorotUniform {
    fn generate(&self, shape: &[usize], dtype: DType, rng: &mut Rng) -> Result<Array> {
        let (fan_in, fan_out) = fans("GlorotUniform", shape)?;
        let s = self.scale * (6.0 / (fan_in + fan_out).max(1) as f64).sqrt();
        Array::uniform(shape, -s, s, dtype, rng)
    }
}

/// `N(0, 2 scale² / fan_in)` (He).
#[derive(Clone, Copy, Debug, PartialEq)]
pub struct HeNormal {
    /// Multiplies the standard deviation (default 1).
    pub scale: f64,
}

impl Default for HeNormal {
    fn default() -> Self {
        HeNormal { scale: 1.0 }
    }
}

impl Initializer for HeNormal {
    fn generate(&self, shape: &[usize], dtype: DType, rng: &mut Rng) -> Result<Array> {
        let (fan_in, _) = fans("HeNormal", shape)?;
        let std = self.scale * (2.0 / fan_in.max(1) as f64).sqrt();
        Array::normal(shape, 0.0, std, dtype, rng)
    }
}
