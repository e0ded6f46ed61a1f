//! A function with a training and a test mode: the tutorial's hand-written dropout, which reads
//! `config::train()`, and the built-in `F::dropout`, switched to test mode with
//! `config::using_train(false)` for a scope.
//!
//! Run with `cargo run --example dropout_train_test`.

use kusari::prelude::*;
use kusari::{config, random};

/// The tutorial's dropout: drops half the elements and doubles the rest, in training mode only.
fn dropout_half(x: &Variable) -> Result<Variable> {
    if !config::train() {
        return Ok(x.clone());
    }
    let u = random::with_default_rng(|rng| Array::uniform(x.shape(), 0.0, 1.0, x.dtype(), rng));
    let mask = (u.gt_scalar(0.5)?.astype(x.dtype())? * 2.0)?;
    x * Variable::constant(mask)
}

/// Checks that every element of `y` is either 0 or `scale * x` (to `float32` precision), and
/// that both occur.
fn check_dropped(x: &Variable, y: &Variable, scale: f64) -> Result<()> {
    let (xs, ys) = (x.array().to_f64_vec()?, y.array().to_f64_vec()?);
    let dropped = ys.iter().filter(|&&y| y == 0.0).count();
    let close = |(x, y): &(&f64, &f64)| (*y - *x * scale).abs() <= 1e-6 * *y;
    let kept = xs.iter().zip(&ys).filter(close).count();
    println!(
        "  {dropped} of {} dropped, {kept} kept and scaled by {scale}",
        ys.len()
    );
    assert_eq!(dropped + kept, ys.len());
    assert!(dropped > 0 && kept > 0);
    Ok(())
}

fn main() -> Result<()> {
    random::seed(0);
    let ratio = 0.25;
    let x = Variable::new(Array::arange(1.0, 21.0, 1.0, DType::F32)?.reshape(&[4, 5])?);

    // Training mode is the default.
    let y = F::dropout(&x, ratio)?;
    println!("train mode, F::dropout(x, {ratio}) =\n{}", y.array());
    check_dropped(&x, &y, 1.0 / (1.0 - ratio))?;
    let y = dropout_half(&x)?;
    println!("train mode, dropout_half(x) =\n{}", y.array());
    check_dropped(&x, &y, 2.0)?;

    {
        let _test = config::using_train(false);
        // In test mode both return x itself: same data, same graph node, no new function.
        for y in [F::dropout(&x, ratio)?, dropout_half(&x)?] {
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
