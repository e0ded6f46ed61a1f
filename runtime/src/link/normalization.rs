//! [`BatchNormalization`]: batch normalization with a learned scale and shift, and the running
//! averages of the batch statistics that a network uses once it is trained.

use super::Parameter;
use super::initializers::{One, Zero};
use crate::error::{Error, Result};
use crate::functions::{batch_normalization_stats, fixed_batch_normalization};
use crate::{Array, DType, Link, Variable, config};

/// A batch normalization layer (Chainer's `BatchNormalization`) for `size` channels (axis 1 of
/// an `(N, C, ...)` input; `size` may also be a shape, the axes after the batch axis).
///
/// While training ([`config::train`]), `forward` normalizes with the batch's statistics and
/// updates the running averages `avg_mean ← decay · avg_mean + (1 − decay) · mean` and
/// `avg_var ← decay · avg_var + (1 − decay) · m / (m − 1) · var` (`m` the elements per channel:
/// the unbiased variance, as Chainer); otherwise it normalizes with the running averages.
/// `gamma` starts at ones, `beta` at zeros, `avg_mean` at zeros and `avg_var` at ones; the
/// averages are persistent values ([`Parameter::persistent`]), saved and loaded with the
/// parameters and never touched by an optimizer.
///
/// ```
/// use kusari::prelude::*;
/// use kusari::link::BatchNormalization;
/// let bn = BatchNormalization::new(&[2], 0.9, 2e-5, DType::F64)?;
/// let x = Variable::new(Array::from_vec(vec![1.0, 10.0, 3.0, 30.0], &[2, 2])?);
/// let y = bn.forward(&x)?; // training: the batch's statistics
/// assert!((y.array().to_vec::<f64>()?[0] + 1.0).abs() < 1e-4);
/// // avg_mean moved a tenth of the way to the batch's mean (2, 20).
/// let m = bn.avg_mean.array()?.to_vec::<f64>()?;
/// assert!((m[0] - 0.2).abs() < 1e-12 && (m[1] - 2.0).abs() < 1e-12);
/// # Ok::<(), kusari::Error>(())
/// ```
#[derive(Link)]
#[kusari(crate = "crate")]
pub struct BatchNormalization {
    /// The scale, shaped `size`.
    pub gamma: Parameter,
    /// The shift, shaped `size`.
    pub beta: Parameter,
    /// The running mean (persistent).
    pub avg_mean: Parameter,
    /// The running variance (persistent).
    pub avg_var: Parameter,
    #[kusari(skip)]
    decay: f64,
    #[kusari(skip)]
    eps: f64,
}

impl BatchNormalization {
    /// A layer for inputs whose axes after the batch axis start with `size`, with Chainer's
    /// `decay` (0.9) and `eps` (2e-5) given.
    pub fn new(size: &[usize], decay: f64, eps: f64, dtype: DType) -> Result<Self> {
        if !(0.0..=1.0).contains(&decay) {
            return Err(Error::InvalidArgument {
                op: "BatchNormalization".into(),
                msg: format!("decay must be in [0, 1], got {decay}"),
            });
        }
        if !(eps.is_finite() && eps >= 0.0) {
            return Err(Error::InvalidArgument {
                op: "BatchNormalization".into(),
                msg: format!("eps must be finite and not negative, got {eps}"),
            });
        }
        Ok(BatchNormalization {
            gamma: Parameter::with_shape(One, size, dtype)?,
            beta: Parameter::with_shape(Zero, size, dtype)?,
            avg_mean: Parameter::persistent(Array::zeros(size, dtype)?),
            avg_var: Parameter::persistent(Array::ones(size, dtype)?),
            decay,
            eps,
        })
    }

    /// Normalizes `x`: with the batch's statistics, updating the running averages, while
    /// training; with the running averages otherwise.
    pub fn forward(&self, x: &Variable) -> Result<Variable> {
        let (gamma, beta) = (self.gamma.variable()?, self.beta.variable()?);
        if !config::train() {
            let mean = Variable::constant(self.avg_mean.array()?);
            let var = Variable::constant(self.avg_var.array()?);
            return fixed_batch_normalization(x, &gamma, &beta, &mean, &var, self.eps);
        }
        let (y, mean, var) = batch_normalization_stats(x, &gamma, &beta, self.eps)?;
        let m = x.size() / gamma.size().max(1);
        let adjust = m as f64 / (m.max(2) - 1) as f64;
        let d = self.decay;
        let blend = |avg: &Parameter, batch: &Array, scale: f64| -> Result<()> {
            let moved = avg
                .array()?
                .mul_scalar(d)?
                .add(&batch.mul_scalar((1.0 - d) * scale)?)?;
            avg.set_array(moved)
        };
        blend(&self.avg_mean, &mean, 1.0)?;
        blend(&self.avg_var, &var, adjust)?;
        Ok(y)
    }
}
