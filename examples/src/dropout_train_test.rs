//! A function with a training and a test mode. [`Dropout`] is an op whose forward draws a mask
//! and keeps it in the struct for backward (`forward` takes `&mut self`); the wrapper
//! [`dropout`] reads `config::train()` and returns `x` itself in test mode.
//!
//! `05_dropout_train_test.rs` (`cargo run --example dropout_train_test`) compares it with the
//! built-in `F::dropout`, in training mode and in test mode.

use kusari::prelude::*;
use kusari::{config, random};

/// Zeroes each element with probability `ratio` and scales the rest by `1 / (1 - ratio)`.
pub struct Dropout {
    ratio: f64,
    /// Drawn by forward, read by backward.
    mask: Option<Array>,
}

// `name`: the generated wrapper always drops; `dropout` below is the mode-aware function.
#[function_node(name = "dropout_always")]
impl Dropout {
    fn new(ratio: f64) -> Self {
        Dropout { ratio, mask: None }
    }

    fn forward(&mut self, x: &Array) -> Result<Array> {
        // The same draws as F::dropout: one uniform f64 per element from the default generator.
        let u = random::with_default_rng(|rng| {
            Array::uniform(x.shape(), 0.0, 1.0, DType::F64, rng).unwrap()
        });
        let (ratio, scale) = (self.ratio, 1.0 / (1.0 - self.ratio));
        let mask = u
            .map(|u: f64| if u >= ratio { scale } else { 0.0 })?
            .astype(x.dtype())?
            .to_device(x.device())?;
        let y = (x * &mask)?;
        self.mask = Some(mask);
        Ok(y)
    }

    fn backward(&self, gy: &Variable) -> Result<Variable> {
        let mask = self
            .mask
            .clone()
            .ok_or_else(|| Error::msg("backward ran before forward"))?;
        gy * Variable::constant(mask)
    }
}

/// The tutorial's dropout: the op in training mode, `x` itself in test mode.
pub fn dropout(x: &Variable, ratio: f64) -> Result<Variable> {
    if !config::train() {
        return Ok(x.clone());
    }
    dropout_always(x, ratio)
}
