//! MulAdd as an old-style `Function`: forward and backward both on arrays. First-order gradients
//! work as with a FunctionNode; differentiating such a gradient again is a clear error, because
//! an array-level backward leaves no graph to walk. This example shows both.
//!
//! The function and its wrapper `muladd` are defined in `examples/src/old_style.rs`
//! (`kusari_examples::old_style`).
//!
//! Run with `cargo run --example old_style`.

use kusari::prelude::*;
use kusari_examples::old_style::muladd;

fn main() -> Result<()> {
    let mut rng = Rng::seed(0);
    let mut uniform =
        || Variable::new(Array::uniform(&[3, 2], -1.0, 1.0, DType::F32, &mut rng).unwrap());
    let (x, y, z) = (uniform(), uniform(), uniform());

    // First order: as with the FunctionNode version.
    let loss = F::sum(&muladd(&x, &y, &z)?)?;
    loss.backward()?;
    let gx = x.grad_array().ok_or_else(|| Error::msg("no gradient"))?;
    println!("gx =\n{gx}");
    assert_eq!(gx.to_vec::<f32>()?, y.array().to_vec::<f32>()?);

    // Second order: record the first backward, then differentiate gx = y * gw with respect to y.
    let record = GradOptions {
        enable_double_backprop: true,
        ..Default::default()
    };
    let gx = grad(&[&loss], &[&x], None, record)?.remove(0);
    let gx = gx.ok_or_else(|| Error::msg("no gradient"))?;
    let err = match grad(&[&F::sum(&gx)?], &[&y], None, GradOptions::default()) {
        Ok(_) => return Err(Error::msg("an old-style gradient was differentiated again")),
        Err(err) => err,
    };
    println!("differentiating again fails:\n  {err}");
    assert!(matches!(
        err.root_cause(),
        Error::DoubleBackwardUnsupported { function } if function == "MulAdd"
    ));
    println!("ok: first order works, second order is refused by name");
    Ok(())
}
