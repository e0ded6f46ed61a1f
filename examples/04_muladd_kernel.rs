//! MulAdd with elementwise CUDA kernels, the tutorial's `cuda.elementwise`: the forward's kernel
//! is declared with `#[forward_gpu(..)]` in CuPy's signature grammar with the type placeholder
//! `T`, so one kernel serves float32 and float64; backward applies `MulAddGrad`, whose kernel
//! computes both `gx` and `gy` in one pass. Here both run forward and backward, in float32 and
//! float64, checked against the CPU.
//!
//! The ops are defined in `examples/src/muladd_kernel.rs` (`kusari_examples::muladd_kernel`);
//! `10_muladd_kernel_float32.rs` applies the same kernels written with concrete `float32` types.
//!
//! Run with `cargo run --example muladd_kernel`. It needs a CUDA driver and device for the
//! kernels to run (NVRTC compiles them on first use), and then checks them against the CPU;
//! without a GPU it says so and runs the CPU path.

use kusari::gradient_check::allclose;
use kusari::prelude::*;
use kusari_examples::muladd_kernel::mul_add;

/// `[w, gx, gy, gz]` for gw = 1, computed on `device` from host `inputs`, copied to the host.
fn forward_backward(inputs: &[Array], device: Device) -> Result<Vec<Array>> {
    let v: Vec<Variable> = inputs
        .iter()
        .map(|a| Ok(Variable::new(a.to_device(device)?)))
        .collect::<Result<_>>()?;
    let w = mul_add(&v[0], &v[1], &v[2])?;
    let record = GradOptions {
        enable_double_backprop: true,
        ..Default::default()
    };
    let gw = Variable::new(w.array().ones_like()?);
    let grads = grad(&[&w], &[&v[0], &v[1], &v[2]], &[gw], record)?;
    let [Some(gx), Some(gy), Some(gz)] = grads.as_slice() else {
        return Err(Error::msg("expected gradients for x, y and z"));
    };
    // Backward applied MulAddGrad: gx and gy are its outputs.
    assert_eq!(gx.creator_label().as_deref(), Some("MulAddGrad"));
    [w.array(), gx.array(), gy.array(), gz.array()]
        .map(|a| a.to_device(Device::Cpu))
        .into_iter()
        .collect()
}

fn main() -> Result<()> {
    let device = kusari_examples::gpu_or_host()?;
    let mut rng = Rng::seed(0);
    let xyz: Vec<Array> = (0..3)
        .map(|_| Array::uniform(&[3, 2], -1.0, 1.0, DType::F32, &mut rng).unwrap())
        .collect();
    for dtype in [DType::F32, DType::F64] {
        let xyz: Vec<Array> = xyz.iter().map(|a| a.astype(dtype)).collect::<Result<_>>()?;
        let (x, y, z) = (&xyz[0], &xyz[1], &xyz[2]);
        // On the CPU, against the hand formula: w = x*y + z; with gw = 1, gx = y, gy = x, gz = 1.
        let cpu = forward_backward(&xyz, Device::Cpu)?;
        assert!(allclose(&cpu[0], &((x * y)? + z)?, 1e-6, 1e-6)?);
        assert!(allclose(&cpu[1], y, 0.0, 0.0)? && allclose(&cpu[2], x, 0.0, 0.0)?);
        assert!(allclose(&cpu[3], &z.ones_like()?, 0.0, 0.0)?);
        // On `device` (the GPU when there is one): the kernels, within rounding of the CPU.
        let out = forward_backward(&xyz, device)?;
        for (got, want) in out.iter().zip(&cpu) {
            assert!(allclose(got, want, 1e-6, 1e-6)?);
        }
        println!("{dtype} on {device}: w =\n{}\ngx =\n{}", out[0], out[1]);
    }
    // No forward ran on host copies of CUDA arrays: both ops have kernels.
    assert_eq!(kusari::cuda::host_fallback_count(), 0);
    println!("ok: on {device} for float32 and float64, gx == y, gy == x, gz == 1");
    Ok(())
}
