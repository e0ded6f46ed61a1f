//! ExpAdd, `z = exp(x) + exp(y)`: its backward is written with a built-in differentiable function
//! (`F::exp`), so its gradient can be differentiated again with `grad`. Here its first- and
//! second-order gradients are taken and checked against `exp`.
//!
//! The op is defined in `examples/src/expadd.rs` (`kusari_examples::expadd`).
//!
//! Run with `cargo run --example expadd`.

use kusari::gradient_check::allclose;
use kusari::prelude::*;
use kusari_examples::expadd::exp_add;

fn main() -> Result<()> {
    let x = Variable::new(Array::from_vec(vec![-1.0f64, 0.0, 0.5, 2.0], &[4])?);
    let y = Variable::new(Array::from_vec(vec![1.0f64, -2.0, 0.0, 0.25], &[4])?);
    let loss = F::sum(&exp_add(&x, &y)?)?;

    // First order, recorded so that it can be differentiated again.
    let record = GradOptions {
        enable_double_backprop: true,
        ..Default::default()
    };
    let grads = grad(&[&loss], &[&x, &y], None, record)?;
    let (gx, gy) = match grads.as_slice() {
        [Some(gx), Some(gy)] => (gx.clone(), gy.clone()),
        _ => return Err(Error::msg("expected gradients for x and y")),
    };
    println!("loss = Σ exp(x) + exp(y) = {}", loss.array());
    println!("d loss/dx = {}\nd loss/dy = {}", gx.array(), gy.array());
    assert!(allclose(gx.array(), &x.array().exp()?, 1e-12, 1e-12)?);
    assert!(allclose(gy.array(), &y.array().exp()?, 1e-12, 1e-12)?);

    // Second order: d/dx Σ_i (d loss/dx_i) = d/dx Σ exp(x) = exp(x) again.
    let ggx = grad(&[&F::sum(&gx)?], &[&x], None, GradOptions::default())?.remove(0);
    let ggx = ggx.ok_or_else(|| Error::msg("expected a second-order gradient"))?;
    println!("d²loss/dx² (diagonal) = {}", ggx.array());
    assert!(allclose(ggx.array(), &x.array().exp()?, 1e-12, 1e-12)?);
    println!("ok: gradients are exp(x), exp(y); second order is exp(x)");
    Ok(())
}
