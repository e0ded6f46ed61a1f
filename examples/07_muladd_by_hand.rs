//! MulAdd written by hand against the `FunctionNode` trait, without the macro: what
//! `#[function_node]` writes for you (`01_muladd.rs` to `04_muladd_kernel.rs`). Applied to random
//! 3x2 `float32` inputs and differentiated.
//!
//! The op and its hand-written wrapper `muladd` are defined in `examples/src/muladd_by_hand.rs`
//! (`kusari_examples::muladd_by_hand`).
//!
//! Run with `cargo run --example muladd_by_hand`.

use kusari::gradient_check::allclose;
use kusari::prelude::*;
use kusari_examples::muladd_by_hand::muladd;

fn main() -> Result<()> {
    let mut rng = Rng::seed(0);
    let mut uniform =
        || Variable::new(Array::uniform(&[3, 2], -1.0, 1.0, DType::F32, &mut rng).unwrap());
    let (x, y, z) = (uniform(), uniform(), uniform());

    let w = muladd(&x, &y, &z)?;
    // w has 6 elements, so backward needs its gradient set first: gw = ones.
    w.set_grad_array(w.array().ones_like()?)?;
    w.backward()?;

    let grad_of = |v: &Variable| v.grad_array().ok_or_else(|| Error::msg("no gradient"));
    let (gx, gy, gz) = (grad_of(&x)?, grad_of(&y)?, grad_of(&z)?);
    println!("w = x * y + z =\n{}", w.array());
    println!("gx =\n{gx}\ngy =\n{gy}\ngz =\n{gz}");

    // The hand formula, from the arrays: w = x*y + z, and with gw = 1: gx = y, gy = x, gz = 1.
    let (xa, ya, za) = (x.array(), y.array(), z.array());
    assert!(allclose(w.array(), &((xa * ya)? + za)?, 1e-6, 1e-6)?);
    assert_eq!(gx.to_vec::<f32>()?, ya.to_vec::<f32>()?);
    assert_eq!(gy.to_vec::<f32>()?, xa.to_vec::<f32>()?);
    assert_eq!(gz.to_vec::<f32>()?, vec![1.0; 6]);
    println!("ok: gx == y, gy == x, gz == 1");
    Ok(())
}
