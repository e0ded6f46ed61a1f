//! MulAdd, the tutorial's first new-style function, `w = x * y + z`: applied with its typed
//! `apply` and its wrapper `mul_add`, differentiated, and its `forward_gpu` checked against its
//! `forward_cpu`.
//!
//! The op is defined in `examples/src/muladd.rs` (`kusari_examples::muladd`): a `forward_cpu` and
//! a `forward_gpu` method on arrays and a `backward` on variables, declared with
//! `#[function_node]`.
//!
//! Run with `cargo run --example muladd`. `forward_gpu` runs when kusari finds a CUDA driver and
//! device, and is checked against `forward_cpu`; without a GPU the example says so.

use kusari::gradient_check::allclose;
use kusari::prelude::*;
use kusari_examples::muladd::{MulAdd, mul_add};

fn main() -> Result<()> {
    let mut rng = Rng::seed(0);
    let mut uniform =
        || Variable::new(Array::uniform(&[3, 2], -1.0, 1.0, DType::F32, &mut rng).unwrap());
    let (x, y, z) = (uniform(), uniform(), uniform());

    // Chainer's `w, = MulAdd().apply((x, y, z))`: the node is consumed, so it cannot be reused.
    let (w,) = MulAdd.apply((&x, &y, &z))?;
    // Chainer's `muladd(x, y, z)`: the generated wrapper hides the node.
    assert_eq!(
        mul_add(&x, &y, &z)?.array().to_vec::<f32>()?,
        w.array().to_vec::<f32>()?
    );

    // w has 6 elements, so backward needs its gradient set first: gw = ones.
    w.set_grad_array(w.array().ones_like()?)?;
    w.backward()?;
    let grad_of = |v: &Variable| v.grad_array().ok_or_else(|| Error::msg("no gradient"));
    let (gx, gy, gz) = (grad_of(&x)?, grad_of(&y)?, grad_of(&z)?);
    println!("w = x * y + z =\n{}", w.array());
    println!("gx =\n{gx}\ngy =\n{gy}\ngz =\n{gz}");

    // The hand formula: w = x*y + z, and with gw = 1: gx = y, gy = x, gz = 1.
    let (xa, ya, za) = (x.array(), y.array(), z.array());
    assert!(allclose(w.array(), &((xa * ya)? + za)?, 1e-6, 1e-6)?);
    assert_eq!(gx.to_vec::<f32>()?, ya.to_vec::<f32>()?);
    assert_eq!(gy.to_vec::<f32>()?, xa.to_vec::<f32>()?);
    assert_eq!(gz.to_vec::<f32>()?, vec![1.0; 6]);
    println!("ok: forward_cpu ran; gx == y, gy == x, gz == 1");

    // forward_gpu runs for inputs on a CUDA device, when this machine has one.
    if kusari::cuda::unavailable_reason().is_some() {
        // Says why, or fails under KUSARI_REQUIRE_GPU.
        kusari_examples::gpu_or_host()?;
        let on_gpu = xa.to_device(Device::Cuda(0));
        assert!(matches!(on_gpu, Err(Error::CudaUnavailable { .. })));
        return Ok(());
    }
    let gpu = |a: &Array| Ok::<_, Error>(Variable::new(a.to_device(Device::Cuda(0))?));
    let w_gpu = mul_add(&gpu(xa)?, &gpu(ya)?, &gpu(za)?)?;
    assert_eq!(w_gpu.array().device(), Device::Cuda(0));
    assert!(allclose(w_gpu.array(), w.array(), 1e-6, 1e-6)?);
    println!("ok: forward_gpu ran on cuda:0 and matches forward_cpu");
    Ok(())
}
