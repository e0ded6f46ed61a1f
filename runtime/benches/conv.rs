//! The neural-network layer beside PyTorch and Chainer (`conv_peers.py` times the same work in
//! both and prints the ratios):
//!
//! - `conv/fwd` and `conv/fwdbwd`: a ResNet-style layer, `convolution_2d` of a float32
//!   `(32, 64, 32, 32)` input with a `(64, 64, 3, 3)` weight and a bias, pad 1; forward with
//!   backprop off, and forward + `sum` + backward (gradients of `x`, `W` and `b`).
//! - `batch_norm/fwdbwd`: `batch_normalization` of a float32 `(32, 64, 32, 32)` input,
//!   forward + `sum` of `y · c` (a fixed array, so that the gradient is not constant) +
//!   backward (as the PyTorch side does); `batch_norm/fwdbwd_alone` is batch normalization's
//!   forward and the gradients for a given output gradient alone; `batch_norm/copy` copies the
//!   same array once (from the L3 cache, which holds it) and `batch_norm/copy_x8` an array 8
//!   times as large (from memory): the bandwidth yardsticks (the bound of batch
//!   normalization's minimum traffic is 2.5 such copies: see the note in `conv_peers.py`).
//! - `max_pooling/fwdbwd`: 2×2 max pooling of the same input, forward + backward.
//!
//! Run: `cargo bench -p kusari --bench conv`, then `python3 runtime/benches/conv_peers.py
//! --no-run` for the table; `conv_peers.py` alone runs both.

use std::hint::black_box;
use std::time::Duration;

use criterion::{Criterion, criterion_group, criterion_main};
use kusari::functions::{ConvOptions, PoolOptions};
use kusari::prelude::*;
use kusari::random::Rng;

fn uniform(shape: &[usize], seed: u64) -> Array {
    let mut rng = Rng::seed(seed);
    Array::uniform(shape, -1.0, 1.0, DType::F32, &mut rng).expect("a bench array")
}

fn conv(c: &mut Criterion) {
    let mut g = c.benchmark_group("conv");
    g.sample_size(10).measurement_time(Duration::from_secs(10));
    let x = uniform(&[32, 64, 32, 32], 1);
    let w = uniform(&[64, 64, 3, 3], 2).mul_scalar(0.05).unwrap();
    let b = uniform(&[64], 3);
    let o = ConvOptions::default().pad(1);
    g.bench_function("fwd", |bench| {
        let _off = kusari::config::no_backprop_mode();
        let (x, w, b) = (
            Variable::constant(x.clone()),
            Variable::constant(w.clone()),
            Variable::constant(b.clone()),
        );
        bench.iter(|| black_box(F::convolution_2d(&x, &w, Some(&b), &o).unwrap()));
    });
    g.bench_function("fwdbwd", |bench| {
        let (x, w, b) = (
            Variable::new(x.clone()),
            Variable::new(w.clone()),
            Variable::new(b.clone()),
        );
        bench.iter(|| {
            for v in [&x, &w, &b] {
                v.cleargrad();
            }
            let y = F::convolution_2d(&x, &w, Some(&b), &o).unwrap();
            F::sum(&y).unwrap().backward().unwrap();
            black_box(w.grad_array());
        });
    });
    g.finish();
}

fn batch_norm(c: &mut Criterion) {
    let mut g = c.benchmark_group("batch_norm");
    g.sample_size(10).measurement_time(Duration::from_secs(5));
    let x = uniform(&[32, 64, 32, 32], 4);
    let cst = Variable::constant(uniform(&[32, 64, 32, 32], 5));
    let gamma = Variable::new(uniform(&[64], 6));
    let beta = Variable::new(uniform(&[64], 7));
    g.bench_function("fwdbwd", |bench| {
        let x = Variable::new(x.clone());
        bench.iter(|| {
            for v in [&x, &gamma, &beta] {
                v.cleargrad();
            }
            let y = F::batch_normalization(&x, &gamma, &beta, 2e-5).unwrap();
            F::sum(&(&y * &cst).unwrap()).unwrap().backward().unwrap();
            black_box(x.grad_array());
        });
    });
    // Batch normalization alone: forward, then the gradients of x, gamma and beta for a given
    // output gradient, nothing else (the traffic the bound counts).
    let gy = Variable::constant(uniform(&[32, 64, 32, 32], 9));
    g.bench_function("fwdbwd_alone", |bench| {
        let x = Variable::new(x.clone());
        bench.iter(|| {
            let y = F::batch_normalization(&x, &gamma, &beta, 2e-5).unwrap();
            let inputs = [&x, &gamma, &beta];
            black_box(grad(&[&y], &inputs, &[&gy], GradOptions::default()).unwrap());
        });
    });
    g.bench_function("copy", |bench| {
        bench.iter(|| black_box(x.mul_scalar(1.0).unwrap()));
    });
    // The same copy from memory rather than from the L3 cache: an array 8 times as large
    // (64 MB, twice the L3 of the machines we measure on), whose time ÷ 8 is the yardstick.
    let large = uniform(&[256, 64, 32, 32], 10);
    g.bench_function("copy_x8", |bench| {
        bench.iter(|| black_box(large.mul_scalar(1.0).unwrap()));
    });
    g.finish();
}

fn max_pooling(c: &mut Criterion) {
    let mut g = c.benchmark_group("max_pooling");
    g.sample_size(10).measurement_time(Duration::from_secs(5));
    let x = Variable::new(uniform(&[32, 64, 32, 32], 8));
    g.bench_function("fwdbwd", |bench| {
        bench.iter(|| {
            x.cleargrad();
            let y = F::max_pooling_2d(&x, &PoolOptions::new(2)).unwrap();
            F::sum(&y).unwrap().backward().unwrap();
            black_box(x.grad_array());
        });
    });
    g.finish();
}

criterion_group!(benches, conv, batch_norm, max_pooling);
criterion_main!(benches);
