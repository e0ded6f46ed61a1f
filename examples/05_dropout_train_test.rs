//! A function with a training and a test mode. `Dropout` is an op whose forward draws a mask and
//! keeps it in the struct for backward (`forward` takes `&mut self`); the wrapper `dropout` reads
//! `config::train()` and returns `x` itself in test mode. It is compared with the built-in
//! `F::dropout`, and test mode is switched on for a scope with `config::using_train(false)`.
//!
//! Run with `cargo run --example dropout_train_test`. `tests/macro_ops.rs` includes this file to
//! check the op's gradients with a fixed seed (hence the `pub`).

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

fn main() -> Result<()> {
    let (ratio, scale) = (0.25, 4.0 / 3.0);
    let x = Variable::new(Array::arange(1.0, 21.0, 1.0, DType::F32)?.reshape(&[4, 5])?);

    // Training mode is the default. With one seed, both draw the same mask.
    random::seed(0);
    let ours = dropout(&x, ratio)?;
    random::seed(0);
    let builtin = F::dropout(&x, ratio)?;
    println!("train mode, dropout(x, {ratio}) =\n{}", ours.array());
    let values = ours.array().to_vec::<f32>()?;
    assert_eq!(values, builtin.array().to_vec::<f32>()?);
    let dropped = values.iter().filter(|&&v| v == 0.0).count();
    println!(
        "  {dropped} of {} dropped, the rest scaled by {scale}",
        values.len()
    );
    assert!(dropped > 0 && dropped < values.len());

    // The gradient is the stored mask: 0 where dropped, the scale where kept.
    F::sum(&ours)?.backward()?;
    let gx = x.grad_array().ok_or_else(|| Error::msg("no gradient"))?;
    println!("d Σ dropout(x) / dx =\n{gx}");
    let kept = |v: &f32| if *v == 0.0 { 0.0 } else { scale };
    assert_eq!(
        gx.to_vec::<f32>()?,
        values.iter().map(kept).collect::<Vec<f32>>()
    );
    println!("ok: same values as F::dropout; gradient is the mask");

    {
        let _test = config::using_train(false);
        // In test mode both return x itself: same data, same graph node, no new function.
        for y in [dropout(&x, ratio)?, F::dropout(&x, ratio)?] {
            assert!(y.same_node(&x) && !y.has_creator());
        }
        println!("test mode: both return x unchanged");
    }
    assert!(
        config::train(),
        "the guard restores training mode when dropped"
    );
    Ok(())
}
