//! The tutorial's MulAdd, timed as `shared/reference/chainer_bench.py` times Chainer: forward
//! alone, and cleargrad + forward + backward with the output gradient set to ones.
//!
//! `fused_loop` is the budget's reference: one scalar loop over preallocated buffers, what a C
//! compiler makes of `w[i] = x[i] * y[i] + z[i]`.
//!
//! Run: `cargo bench -p kusari --bench muladd`.

use std::hint::black_box;
use std::time::Duration;

use criterion::{criterion_group, criterion_main, BenchmarkId, Criterion};
use kusari::prelude::*;

/// f(x, y, z) = x * y + z, as in the tutorial.
struct MulAdd;

impl FunctionNode for MulAdd {
    fn forward(&mut self, ctx: &mut ForwardContext, inputs: &[Array]) -> Result<Vec<Array>> {
        ctx.retain_inputs(&[0, 1]);
        Ok(vec![inputs[0].mul_add(&inputs[1], &inputs[2])?])
    }

    fn backward(
        &self,
        ctx: &BackwardContext<'_>,
        _: &[usize],
        gys: &[Option<Variable>],
    ) -> Result<Vec<Option<Variable>>> {
        let (x, y) = (ctx.retained_input(0)?, ctx.retained_input(1)?);
        let gw = gys[0].as_ref().expect("one output");
        Ok(vec![Some((&y * gw)?), Some((&x * gw)?), Some(gw.clone())])
    }
}

fn muladd(x: &Variable, y: &Variable, z: &Variable) -> Result<Variable> {
    Ok(MulAdd.apply(&[x, y, z])?.remove(0))
}

fn inputs(shape: &[usize]) -> (Variable, Variable, Variable) {
    let mut rng = Rng::seed(0);
    let mut v = || Variable::new(Array::uniform(shape, -1.0, 1.0, DType::F32, &mut rng).unwrap());
    (v(), v(), v())
}

fn bench_muladd(c: &mut Criterion) {
    for shape in [[3usize, 2], [1024, 1024], [4096, 4096]] {
        let label = format!("{}x{}", shape[0], shape[1]);
        let mut group = c.benchmark_group("muladd");
        if shape[0] >= 1024 {
            group
                .sample_size(10)
                .measurement_time(Duration::from_secs(4));
        }
        let (x, y, z) = inputs(&shape);
        let g = Array::ones(&shape, DType::F32).unwrap();
        group.bench_function(BenchmarkId::new("forward", &label), |b| {
            b.iter(|| muladd(black_box(&x), black_box(&y), black_box(&z)).expect("forward"))
        });
        group.bench_function(BenchmarkId::new("forward_backward", &label), |b| {
            b.iter(|| {
                for v in [&x, &y, &z] {
                    v.cleargrad();
                }
                let w = muladd(&x, &y, &z).expect("forward");
                w.set_grad_array(g.clone()).expect("grad");
                w.backward().expect("backward");
            })
        });
        group.finish();
    }
}

/// The reference: a fused loop over preallocated buffers (single thread, as compiled C).
fn bench_fused_loop(c: &mut Criterion) {
    let n = 4096 * 4096;
    let (x, y, z) = inputs(&[n]);
    let (x, y, z) = (
        x.array().to_vec::<f32>().expect("f32"),
        y.array().to_vec::<f32>().expect("f32"),
        z.array().to_vec::<f32>().expect("f32"),
    );
    let mut w = vec![0f32; n];
    let mut group = c.benchmark_group("fused_loop");
    group
        .sample_size(10)
        .measurement_time(Duration::from_secs(4));
    group.bench_function("4096x4096", |b| {
        b.iter(|| {
            for (((w, &x), &y), &z) in w.iter_mut().zip(&x).zip(&y).zip(&z) {
                *w = x * y + z;
            }
            black_box(&mut w);
        })
    });
    group.finish();
}

criterion_group!(benches, bench_muladd, bench_fused_loop);
criterion_main!(benches);
