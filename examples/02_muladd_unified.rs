//! MulAdd with one unified `forward`: when the CPU and GPU methods are the same array code, one
//! method serves every device, as the tutorial reduces `forward_cpu` and `forward_gpu` to
//! `forward`. Its gradients are checked on the host, then on `cuda:0`.
//!
//! The op is defined in `examples/src/muladd_unified.rs` (`kusari_examples::muladd_unified`).
//!
//! Run with `cargo run --example muladd_unified`. The same `forward` then runs on `cuda:0` when
//! kusari finds a CUDA driver and device; without a GPU the example says so.

use kusari::gradient_check::allclose;
use kusari::prelude::*;
use kusari_examples::muladd_unified::mul_add;

fn main() -> Result<()> {
    let mut rng = Rng::seed(1);
    let mut uniform =
        || Variable::new(Array::uniform(&[2, 3], -1.0, 1.0, DType::F64, &mut rng).unwrap());
    let (x, y, z) = (uniform(), uniform(), uniform());

    let w = mul_add(&x, &y, &z)?;
    let loss = F::sum(&w)?;
    loss.backward()?;
    println!("w = x * y + z =\n{}", w.array());
    println!("recorded by: {:?}", w.creator_label());
    assert_eq!(w.creator_label().as_deref(), Some("MulAdd"));

    let grad_of = |v: &Variable| v.grad_array().ok_or_else(|| Error::msg("no gradient"));
    let (xa, ya, za) = (x.array(), y.array(), z.array());
    assert!(allclose(w.array(), &((xa * ya)? + za)?, 1e-12, 1e-12)?);
    assert!(allclose(&grad_of(&x)?, ya, 0.0, 0.0)?);
    assert!(allclose(&grad_of(&y)?, xa, 0.0, 0.0)?);
    assert!(allclose(&grad_of(&z)?, &za.ones_like()?, 0.0, 0.0)?);
    println!("ok: d loss/dx == y, d loss/dy == x, d loss/dz == 1");

    // The same forward runs on a CUDA device, when this machine has one.
    if kusari::cuda::unavailable_reason().is_some() {
        // Says why, or fails under KUSARI_REQUIRE_GPU.
        kusari_examples::gpu_or_host()?;
        let on_gpu = xa.to_device(Device::Cuda(0));
        assert!(matches!(on_gpu, Err(Error::CudaUnavailable { .. })));
        return Ok(());
    }
    let gpu = |a: &Array| Ok::<_, Error>(Variable::new(a.to_device(Device::Cuda(0))?));
    let (xg, yg, zg) = (gpu(xa)?, gpu(ya)?, gpu(za)?);
    F::sum(&mul_add(&xg, &yg, &zg)?)?.backward()?;
    assert!(
        allclose(&grad_of(&xg)?, ya, 1e-12, 1e-12)? && allclose(&grad_of(&yg)?, xa, 1e-12, 1e-12)?
    );
    println!("ok: the same forward and backward ran on cuda:0");
    Ok(())
}
