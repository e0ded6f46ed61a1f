//! The tutorial's LinearFunction, `y = x Wᵀ + b`, declared with `#[function_node]`: its backward
//! takes the optional needs-grad list (`target_input_indexes`) and computes only the gradients
//! asked for. The generated wrapper is named `linear`; it is checked against the built-in
//! `F::linear`, then trained by plain gradient descent on a small synthetic regression problem.
//!
//! Run with `cargo run --example linear`. `tests/macro_ops.rs` includes this file to check the
//! op's gradients (hence the `pub`).

use kusari::prelude::*;
use kusari_examples::allclose;

/// y = x Wᵀ + b for x: (N, in), W: (out, in), b: (out,).
pub struct LinearFunction;

#[function_node(name = "linear")]
impl LinearFunction {
    #[retain(x, w)]
    fn forward(&self, x: &Array, w: &Array, b: &Array) -> Result<Array> {
        x.matmul(&w.t())? + b
    }

    /// `needs` lists the inputs whose gradients are wanted: in training, x is data and needs none.
    fn backward(
        &self,
        x: &Variable,
        w: &Variable,
        gy: &Variable,
        needs: &[usize],
    ) -> Result<(Option<Variable>, Option<Variable>, Option<Variable>)> {
        let wanted = |i: usize| needs.contains(&i);
        let gx = wanted(0).then(|| F::matmul(gy, w)).transpose()?;
        let gw = wanted(1)
            .then(|| F::matmul(&F::transpose(gy, None)?, x))
            .transpose()?;
        let gb = wanted(2)
            .then(|| F::sum_axes(gy, Some(&[0]), false))
            .transpose()?;
        Ok((gx, gw, gb))
    }
}

/// Mean squared error.
fn mse(y: &Variable, t: &Variable) -> Result<Variable> {
    let d = (y - t)?;
    F::mean(&(&d * &d)?, None, false)
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
    assert!(allclose(ours.array(), builtin.array(), 1e-6)?);
    let grads = |y: &Variable| grad(&[&mse(y, &t)?], &[&w, &b], None, Default::default());
    for (a, e) in grads(&ours)?.into_iter().zip(grads(&builtin)?) {
        let missing = || Error::msg("missing gradient");
        let (a, e) = (a.ok_or_else(missing)?, e.ok_or_else(missing)?);
        assert!(allclose(a.array(), e.array(), 1e-5)?);
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
