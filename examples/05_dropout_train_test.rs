//! A function with a training and a test mode: the tutorial's dropout, an op that keeps its mask
//! for backward, compared with the built-in `F::dropout` in training mode, then in test mode,
//! switched on for a scope with `config::using_train(false)`.
//!
//! The op `Dropout` and the mode-aware wrapper `dropout` are defined in
//! `examples/src/dropout_train_test.rs` (`kusari_examples::dropout_train_test`).
//!
//! Run with `cargo run --example dropout_train_test`.

use kusari::prelude::*;
use kusari::{config, random};
use kusari_examples::dropout_train_test::dropout;

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
