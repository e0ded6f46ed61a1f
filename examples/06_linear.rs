//! The tutorial's LinearFunction, `y = x Wᵀ + b`, whose backward computes only the gradients
//! asked for: checked against the built-in `F::linear`, then trained by plain gradient descent on
//! a small synthetic regression problem.
//!
//! The op is defined in `examples/src/linear.rs` (`kusari_examples::linear`); its generated
//! wrapper is named `linear`.
//!
//! Run with `cargo run --example linear`.

use kusari::gradient_check::allclose;
use kusari::prelude::*;
use kusari_examples::linear::linear;

/// Mean squared error.
fn mse(y: &Variable, t: &Variable) -> Result<Variable> {
    let d = (y - t)?;
    F::mean(&(&d * &d)?)
}

fn main() -> Result<()> {
    let mut rng = Rng::seed(42);
    let mut normal = |shape: &[usize], std| Array::normal(shape, 0.0, std, DType::F32, &mut rng);
    let (n, n_in, n_out) = (64, 3, 2);
    // Data: t = x W_trueᵀ + b_true + a little noise.
    let x = Variable::constant(normal(&[n, n_in], 1.0)?);
    let w_true = Variable::constant(normal(&[n_out, n_in], 1.0)?);
    let b_true = Variable::constant(Array::from_vec(vec![0.5f32, -1.0], &[n_out])?);
    let noise = normal(&[n, n_out], 0.01)?;
    let t = Variable::constant((linear(&x, &w_true, &b_true)?.array() + noise)?);

    // Parameters: small random weights, zero bias.
    let mut w = Variable::new(normal(&[n_out, n_in], 0.1)?);
    let mut b = Variable::new(Array::zeros(&[n_out], DType::F32)?);

    // Same values and gradients as the built-in.
    let (ours, builtin) = (linear(&x, &w, &b)?, F::linear(&x, &w, Some(&b))?);
    assert!(allclose(ours.array(), builtin.array(), 1e-6, 1e-6)?);
    let grads = |y: &Variable| grad(&[&mse(y, &t)?], &[&w, &b], None, Default::default());
    for (a, e) in grads(&ours)?.into_iter().zip(grads(&builtin)?) {
        let missing = || Error::msg("missing gradient");
        let (a, e) = (a.ok_or_else(missing)?, e.ok_or_else(missing)?);
        assert!(allclose(a.array(), e.array(), 1e-5, 1e-5)?);
    }
    println!("LinearFunction matches F::linear (values and gradients)");

    let lr = 0.1;
    let mut losses = Vec::new();
    for step in 0..50 {
        let loss = mse(&linear(&x, &w, &b)?, &t)?;
        losses.push(loss.array().item::<f32>()?);
        if step % 10 == 0 {
            println!("step {step:2}: loss {}", loss.array());
        }
        loss.backward()?;
        // Arrays are immutable: each step makes new leaf parameters from p - lr * ∂loss/∂p.
        let step_down = |p: &Variable| -> Result<Variable> {
            let g = p.grad_array().ok_or_else(|| Error::msg("no gradient"))?;
            Ok(Variable::new((p.array() - (g * lr)?)?))
        };
        (w, b) = (step_down(&w)?, step_down(&b)?);
    }
    println!("W = {}\nW_true = {}", w.array(), w_true.array());
    let (first, last) = (losses[0], losses[losses.len() - 1]);
    println!("ok: loss fell from {first} to {last}");
    assert!(last < first / 100.0);
    Ok(())
}
