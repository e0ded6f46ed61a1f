//! Softmax over the last axis, an op whose GPU forward runs CuPy-style kernels: a
//! `ReductionKernel` for each row's max and sum and an `ElementwiseKernel` for the rest. Its
//! `forward_cpu` is checked against a hand computation, its `forward_gpu` against `forward_cpu`,
//! and its `backward` with kusari's gradient check.
//!
//! The op is defined in `examples/src/softmax.rs` (`kusari_examples::softmax`).
//!
//! Run with `cargo run --example softmax`. `forward_gpu` runs when kusari finds a CUDA device
//! (a GPU, or the emulated one under `KUSARI_CUDA_EMULATE=1`); without one the example says so.

use kusari::gradient_check::allclose;
use kusari::gradient_check::{CheckOptions, check_backward};
use kusari::prelude::*;
use kusari_examples::softmax::softmax;

fn main() -> Result<()> {
    let mut rng = Rng::seed(0);
    // Rows of different scales; shifting by the row's max keeps exp from overflowing however
    // large x is.
    let x = Array::uniform(&[4, 7], -3.0, 3.0, DType::F64, &mut rng)?;
    let scale = Array::from_vec(vec![1.0f64, 2.0, 5.0, 0.1], &[4, 1])?;
    let x = (&x * &scale)?;

    let y = softmax(&Variable::new(x.clone()))?;
    println!("softmax(x) =\n{}", y.array());
    // By hand, row by row in f64.
    let (xs, ys) = (x.to_vec::<f64>()?, y.array().to_vec::<f64>()?);
    for (row, got) in xs.chunks(7).zip(ys.chunks(7)) {
        let max = row.iter().copied().fold(f64::NEG_INFINITY, f64::max);
        let total: f64 = row.iter().map(|v| (v - max).exp()).sum();
        for (v, g) in row.iter().zip(got) {
            let want = (v - max).exp() / total;
            assert!((g - want).abs() <= 1e-12, "{g} != {want}");
        }
    }
    println!("ok: forward_cpu matches the hand computation; every row sums to 1");

    let gy = Array::uniform(&[4, 7], -1.0, 1.0, DType::F64, &mut rng)?;
    let f = |v: &[Variable]| softmax(&v[0]);
    check_backward(
        f,
        std::slice::from_ref(&x),
        Some(std::slice::from_ref(&gy)),
        &CheckOptions::default(),
    )?;
    println!("ok: backward passes the gradient check on the host");

    let device = kusari_examples::gpu_or_host()?;
    if device == Device::Cpu {
        return Ok(());
    }
    for dtype in [DType::F32, DType::F64] {
        let xd = x.astype(dtype)?;
        let on_gpu = softmax(&Variable::new(xd.to_device(device)?))?;
        assert_eq!(on_gpu.array().device(), device);
        let on_host = softmax(&Variable::new(xd))?;
        assert!(allclose(on_gpu.array(), on_host.array(), 1e-6, 1e-6)?);
    }
    println!(
        "ok: forward_gpu (ReductionKernel + ElementwiseKernel) on {device} matches forward_cpu"
    );
    let (xg, gyg) = (x.to_device(device)?, gy.to_device(device)?);
    check_backward(f, &[xg], Some(&[gyg]), &CheckOptions::default())?;
    println!("ok: backward passes the gradient check on {device}, through forward_gpu");
    Ok(())
}
