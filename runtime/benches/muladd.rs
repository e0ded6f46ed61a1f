//! The tutorial's MulAdd, timed as `shared/reference/chainer_bench.py` times Chainer: forward
//! alone, and cleargrad + forward + backward with the output gradient set to ones.
//!
//! `fused_loop` is the budget's reference: one scalar loop over preallocated buffers, what a C
//! compiler makes of `w[i] = x[i] * y[i] + z[i]`.
//!
//! `many_inputs` applies and differentiates one node of 10³, 10⁴ and 10⁵ inputs: recording and
//! backward are linear in the number of inputs, so the time per input stays flat.
//!
//! Run: `cargo bench -p kusari --bench muladd`.

use std::hint::black_box;
use std::time::Duration;

use criterion::{BenchmarkId, Criterion, criterion_group, criterion_main};
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

/// Sums its inputs (each of shape [1]), retaining all of them: a node of many inputs.
struct SumMany;

impl FunctionNode for SumMany {
    fn forward(&mut self, ctx: &mut ForwardContext, inputs: &[Array]) -> Result<Vec<Array>> {
        let all: Vec<usize> = (0..inputs.len()).collect();
        ctx.retain_inputs(&all);
        let total: f64 = inputs.iter().map(|a| a.item::<f64>().unwrap_or(0.0)).sum();
        Ok(vec![Array::from_vec(vec![total], &[1])?])
    }

    fn backward(
        &self,
        ctx: &BackwardContext<'_>,
        targets: &[usize],
        gys: &[Option<Variable>],
    ) -> Result<Vec<Option<Variable>>> {
        let gy = gys[0].clone().expect("one output");
        let mut out = vec![None; ctx.n_inputs()];
        for &i in targets {
            out[i] = Some(gy.clone());
        }
        Ok(out)
    }
}

/// Apply + backward of one node of n inputs: time per input should not grow with n.
fn bench_many_inputs(c: &mut Criterion) {
    let mut group = c.benchmark_group("many_inputs");
    group
        .sample_size(10)
        .measurement_time(Duration::from_secs(4));
    for n in [1_000usize, 10_000, 100_000] {
        let xs: Vec<Variable> = (0..n)
            .map(|i| Variable::new(Array::from_vec(vec![i as f64], &[1]).unwrap()))
            .collect();
        let refs: Vec<&Variable> = xs.iter().collect();
        group.bench_function(BenchmarkId::new("apply_backward", n), |b| {
            b.iter(|| {
                for x in &xs {
                    x.cleargrad();
                }
                let y = SumMany.apply(&refs).unwrap().remove(0);
                y.backward().unwrap();
                black_box(y)
            })
        });
    }
    group.finish();
}

criterion_group!(benches, bench_muladd, bench_fused_loop, bench_many_inputs);
criterion_main!(benches);
