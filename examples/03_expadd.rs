//! ExpAdd, `z = exp(x) + exp(y)`: an op whose backward is written with a built-in
//! differentiable function (`F::exp`), so its gradient can be differentiated again with `grad`.
//! The unified `forward` is the tutorial's `xp.exp(x) + xp.exp(y)`: array code that runs on any
//! device.
//!
//! Run with `cargo run --example expadd`. `tests/macro_ops.rs` includes this file to check the
//! op's first- and second-order gradients (hence the `pub`).

use kusari::prelude::*;
use kusari_examples::allclose;

/// f(x, y) = exp(x) + exp(y), elementwise.
pub struct ExpAdd;

#[function_node]
impl ExpAdd {
    #[retain(x, y)]
    fn forward(&self, x: &Array, y: &Array) -> Result<Array> {
        x.exp()? + y.exp()?
    }

    fn backward(&self, x: &Variable, y: &Variable, gz: &Variable) -> Result<(Variable, Variable)> {
        // F::exp, not Array::exp: the gradient stays in the graph and can be differentiated.
        Ok(((gz * F::exp(x)?)?, (gz * F::exp(y)?)?))
    }
}

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
    assert!(allclose(gx.array(), &x.array().exp()?, 1e-12)?);
    assert!(allclose(gy.array(), &y.array().exp()?, 1e-12)?);

    // Second order: d/dx Σ_i (d loss/dx_i) = d/dx Σ exp(x) = exp(x) again.
    let ggx = grad(&[&F::sum(&gx)?], &[&x], None, GradOptions::default())?.remove(0);
    let ggx = ggx.ok_or_else(|| Error::msg("expected a second-order gradient"))?;
    println!("d²loss/dx² (diagonal) = {}", ggx.array());
    assert!(allclose(ggx.array(), &x.array().exp()?, 1e-12)?);
    println!("ok: gradients are exp(x), exp(y); second order is exp(x)");
    Ok(())
}
