//! Ops written once as a body (`ElementwiseOp`), their host forward run by the expression
//! executor and their backward derived, beside the built-in functions that compute the same
//! (`F::swish`, `F::gelu`, a chain of array operations each) and, in `derived_peers.py`,
//! PyTorch's.
//!
//! Groups `derived_f32_fwd` and `derived_f32_fwdbwd`, at 64K, 1M and 16M elements (a
//! `[n / 1024, 1024]` array, swish's `beta` one row of 1024 broadcast):
//!
//! - `swish_derived` / `swish_builtin`: `x / (1 + exp(-beta * x))`;
//! - `gelu_derived` / `gelu_builtin`: `0.5 x (1 + erf(x / √2))`.
//!
//! Run: `cargo bench -p kusari --bench derived`, then `python3 runtime/benches/derived_peers.py
//! --no-run` for the table (`derived_peers.py` alone runs both).

use std::hint::black_box;
use std::time::Duration;

use criterion::{BenchmarkId, Criterion, criterion_group, criterion_main};
use kusari::ElementwiseOp;
use kusari::prelude::*;
use kusari::random::Rng;

const SIZES: [(&str, usize); 3] = [("64K", 1 << 16), ("1M", 1 << 20), ("16M", 1 << 24)];
const COLS: usize = 1024;

static SWISH: ElementwiseOp = ElementwiseOp::new(
    "swish",
    "T x, T beta",
    "T y",
    "",
    "y = x / (1 + exp(-beta * x))",
);
static GELU: ElementwiseOp = ElementwiseOp::new(
    "gelu",
    "T x",
    "T y",
    "",
    "y = 0.5 * x * (1 + erf(x * 0.7071067811865476))",
);

type Fun = fn(&Variable, &Variable) -> Result<Variable>;

const ROWS: [(&str, Fun); 4] = [
    ("swish_derived", |x, b| {
        Ok(SWISH.apply(&[x, b], &[])?.remove(0))
    }),
    ("swish_builtin", |x, b| F::swish(x, b)),
    ("gelu_derived", |x, _| Ok(GELU.apply(&[x], &[])?.remove(0))),
    ("gelu_builtin", |x, _| F::gelu(x)),
];

fn uniform(shape: &[usize], seed: u64) -> Array {
    Array::uniform(shape, -3.0, 3.0, DType::F32, &mut Rng::seed(seed)).expect("an array")
}

fn configure(group: &mut criterion::BenchmarkGroup<'_, criterion::measurement::WallTime>) {
    group
        .sample_size(10)
        .warm_up_time(Duration::from_millis(300))
        .measurement_time(Duration::from_secs(1));
}

fn bench(c: &mut Criterion) {
    let mut fwd = c.benchmark_group("derived_f32_fwd");
    configure(&mut fwd);
    for (name, f) in ROWS {
        for (label, n) in SIZES {
            let x = Variable::new(uniform(&[n / COLS, COLS], 1));
            let b = Variable::new(uniform(&[COLS], 2));
            fwd.bench_function(BenchmarkId::new(name, label), |bench| {
                bench.iter(|| {
                    let _off = no_backprop_mode();
                    black_box(f(&x, &b).expect(name))
                })
            });
        }
    }
    fwd.finish();
    let mut fwdbwd = c.benchmark_group("derived_f32_fwdbwd");
    configure(&mut fwdbwd);
    for (name, f) in ROWS {
        for (label, n) in SIZES {
            let x = Variable::new(uniform(&[n / COLS, COLS], 1));
            let b = Variable::new(uniform(&[COLS], 2));
            fwdbwd.bench_function(BenchmarkId::new(name, label), |bench| {
                bench.iter(|| {
                    x.cleargrad();
                    b.cleargrad();
                    let y = f(&x, &b).expect(name);
                    F::sum(&y).and_then(|s| s.backward()).expect("backward");
                    black_box(x.grad());
                })
            });
        }
    }
    fwdbwd.finish();
}

criterion_group!(benches, bench);
criterion_main!(benches);
