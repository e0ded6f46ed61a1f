//! Dropout, active in training mode only.

use super::mul;
use crate::error::{Error, Result};
use crate::random::with_default_rng;
use crate::{Array, DType, Variable, config, function_node};

/// Multiplies by a fixed mask (already scaled by `1 / (1 - ratio)`).
struct Dropout {
    mask: Array,
}

#[function_node(crate = "crate", name = "apply_mask")]
impl Dropout {
    fn new(mask: Array) -> Self {
        Dropout { mask }
    }

    fn forward(&self, x: &Array) -> Result<Array> {
        x.mul(&self.mask)
    }

    fn backward(&self, gy: &Variable) -> Result<Variable> {
        mul(gy, &Variable::constant(self.mask.clone()))
    }
}

/// Zeroes each element with probability `ratio` and scales the rest by `1 / (1 - ratio)`, in
/// training mode ([`config::train`]); in test mode returns `x` itself. The mask comes from this
/// thread's default generator ([`crate::random::seed`]).
pub fn dropout(x: &Variable, ratio: f64) -> Result<Variable> {
    if !(0.0..1.0).contains(&ratio) {
        return Err(Error::InvalidArgument {
            op: "dropout".to_string(),
            msg: format!("ratio must be in [0, 1), got {ratio}"),
        });
    }
    if !config::train() {
        return Ok(x.clone());
    }
    super::array_ops::expect_float("dropout", x)?;
    let scale = 1.0 / (1.0 - ratio);
    let u = with_default_rng(|rng| Array::uniform(x.shape(), 0.0, 1.0, DType::F64, rng))?;
    let mask = u
        .map(|u: f64| if u >= ratio { scale } else { 0.0 })?
        .astype(x.dtype())?
        // Drawn on the host from one generator, so a seed gives the same mask on every device.
        .to_device(x.device())?;
    apply_mask(x, mask)
}
