//! ChainerX's device-agnostic affine transformation, `y = x·W + b`, and its backward: once
//! `using_device` has picked a device for the scope, the code names none. Arrays made with
//! `Array::from_vec` or `Array::arange`, or moved with `to_device(default_device())`, land there,
//! and every function runs where its inputs are.
//!
//! Run with `cargo run --example affine_any_device`. It runs on `cuda:0` when kusari finds a
//! CUDA driver and device, else on the host, and says which.

use kusari::gradient_check::allclose;
use kusari::prelude::*;
use kusari::{default_device, using_device};

fn main() -> Result<()> {
    let device = kusari_examples::gpu_or_host()?;
    let _scope = using_device(device)?;
    println!("default device: {}", default_device());

    // x = ones(784), W = normal(784, 1000), b = normal(1000), all on the default device: x made
    // there by `from_vec`, W and b drawn on the host and moved.
    let mut rng = Rng::seed(0);
    let x = Variable::constant(Array::from_vec(vec![1.0f32; 784], &[784])?);
    let normal = |shape: &[usize], rng: &mut Rng| {
        Array::normal(shape, 0.0, 1.0, DType::F32, rng)?.to_device(default_device())
    };
    let w = Variable::new(normal(&[784, 1000], &mut rng)?);
    let b = Variable::new(normal(&[1000], &mut rng)?);

    let y = (&F::matmul(&x, &w)? + &b)?;
    y.set_grad_array(y.array().ones_like()?)?; // the upstream gradient, on y's device
    y.backward()?;
    let gw = w
        .grad_array()
        .ok_or_else(|| Error::msg("no gradient for W"))?;
    let gb = b
        .grad_array()
        .ok_or_else(|| Error::msg("no gradient for b"))?;
    println!("y: {} {:?} on {}", y.dtype(), y.shape(), y.array().device());

    // Everything stayed on the chosen device.
    for a in [y.array(), &gw, &gb] {
        assert_eq!(a.device(), device);
    }
    // By hand: y[j] = Σ_i x[i] W[i, j] + b[j] = Σ_i W[i, j] + b[j]; dW[i, j] = x[i] = 1, db = 1.
    let expected_y = (w.array().sum_axes(&[0], false)? + b.array())?;
    assert!(allclose(y.array(), &expected_y, 1e-4, 1e-4)?);
    assert!(allclose(&gw, &w.array().ones_like()?, 0.0, 0.0)?);
    assert!(allclose(&gb, &b.array().ones_like()?, 0.0, 0.0)?);
    println!("ok: on {device}, y = x·W + b, dW[i, j] = x[i] = 1 and db = 1");
    Ok(())
}
