//! The tutorial's first elementwise kernels, written with concrete types: MulAdd's forward and
//! MulAddGrad's `(gx, gy)` each run as one CUDA kernel whose signature names `float32`, so they
//! take float32 arrays only (`04_muladd_kernel.rs` applies them written with the placeholder `T`,
//! for any dtype). Here MulAdd is differentiated once, and a float64 argument is rejected.
//!
//! The ops are defined in `examples/src/muladd_kernel_float32.rs`
//! (`kusari_examples::muladd_kernel_float32`).
//!
//! Run with `cargo run --example muladd_kernel_float32`. It needs a CUDA driver and device for
//! the kernels to run (NVRTC compiles them on first use); without a GPU it says so and runs the
//! CPU path, the same forward methods on host arrays.

use kusari::gradient_check::allclose;
use kusari::prelude::*;
use kusari_examples::muladd_kernel_float32::{MulAdd, mul_add};

fn main() -> Result<()> {
    let device = kusari_examples::gpu_or_host()?;
    let mut rng = Rng::seed(0);
    let host: Vec<Array> = (0..3)
        .map(|_| Array::uniform(&[3, 2], -1.0, 1.0, DType::F32, &mut rng).unwrap())
        .collect();
    let v: Vec<Variable> = host
        .iter()
        .map(|a| Ok(Variable::new(a.to_device(device)?)))
        .collect::<Result<_>>()?;

    let w = mul_add(&v[0], &v[1], &v[2])?;
    w.set_grad_array(w.array().ones_like()?)?;
    w.backward()?;
    let grad_of = |v: &Variable| v.grad_array().ok_or_else(|| Error::msg("no gradient"));
    let (gx, gy, gz) = (grad_of(&v[0])?, grad_of(&v[1])?, grad_of(&v[2])?);
    println!("on {device}: w =\n{}\ngx =\n{gx}", w.array());

    // The hand formula, computed on the host: w = x*y + z; with gw = 1, gx = y, gy = x, gz = 1.
    let (x, y, z) = (&host[0], &host[1], &host[2]);
    assert!(allclose(w.array(), &((x * y)? + z)?, 1e-6, 1e-6)?);
    assert!(allclose(&gx, y, 0.0, 0.0)? && allclose(&gy, x, 0.0, 0.0)?);
    assert!(allclose(&gz, &z.ones_like()?, 0.0, 0.0)?);
    assert_eq!(gx.device(), device);
    println!("ok: on {device}, gx == y, gy == x, gz == 1");

    // A float64 argument does not match the signature: the generated `forward_gpu` (what
    // `apply` calls for CUDA arrays) rejects it before compiling or launching anything.
    let f64s: Vec<Array> = host
        .iter()
        .map(|a| a.astype(DType::F64))
        .collect::<Result<_>>()?;
    let err = FunctionNode::forward_gpu(&mut MulAdd, &mut ForwardContext::default(), &f64s)
        .expect_err("float64 arrays for a float32 kernel");
    println!("float64 inputs: {err}");
    assert!(err.to_string().contains("declares float32"));
    Ok(())
}
