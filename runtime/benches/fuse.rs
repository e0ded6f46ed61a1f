//! `kusari::fuse` on the host: two chains of six elementwise functions on 16M float32
//! elements, fused (one pass of the expression executor forward, one derived pass backward;
//! compiled by Cranelift once warm)
//! and unfused (six functions, six temporaries), beside the yardstick of the memory-bandwidth
//! bound:
//!
//! - `arith`: `relu(x·a + 0.5)·a − 0.25·x` (mul, add_scalar, relu, mul, mul_scalar, sub),
//!   arithmetic, so that its fused form is bound by memory;
//! - `tanh`: `tanh(x·a + 0.5)·σ(x) + a` (mul, add_scalar, tanh, sigmoid, mul, add), two
//!   transcendental functions an element, so that on a machine of few cores its fused form is
//!   bound by their arithmetic: the row `tanh_alone` (`tanh` of `x`, on arrays) is that floor's
//!   half.
//!
//! Groups `fuse_f32_16M_fwd` and `fuse_f32_16M_fwdbwd`, rows `<chain>_fused`,
//! `<chain>_unfused`, `add` and (forward) `add_fused` (`x + a` as a fused body: the
//! executor's own cost beside the array op) and `tanh_alone`:
//!
//! - forward: the chain's minimum traffic is three passes over 64 MB (read `x` and `a`, write
//!   `y`), exactly what `add` (`x + a` on arrays, 64 MB written) moves, so `fused ÷ add` is the
//!   fused forward against its bound;
//! - forward + backward for a given output gradient (`grad(&[&y], &[&x, &a], &[&gy])`): at
//!   least eight passes (the forward's three; `x`, `a` and `gy` read and the two gradients
//!   written), so the bound is `add × 8 / 3`.
//!
//! The bench ends with paired ratios (lines `summary fuse ...`): each row and `add` timed
//! alternately, call by call, so that the machine's drift in memory bandwidth cancels out of
//! `row ÷ bound`. `KUSARI_HOST_JIT=0` times the interpreter alone (the host's compiled tier
//! off).
//!
//! Run: `cargo bench -p kusari --bench fuse`, then `python3 runtime/benches/fuse_peers.py
//! --no-run` for the table with the bound and PyTorch (`fuse_peers.py` alone runs both).

use std::hint::black_box;
use std::time::Duration;

use criterion::{Criterion, criterion_group, criterion_main};
use kusari::prelude::*;
use kusari::random::Rng;
use kusari::{FusedFn, GradOptions, fuse, grad};

use chains::{arith, tanh};

#[path = "common/chains.rs"]
mod chains;

const N: usize = 1 << 24;
const COLS: usize = 1024;

fn uniform(seed: u64) -> Array {
    Array::uniform(
        &[N / COLS, COLS],
        -2.0,
        2.0,
        DType::F32,
        &mut Rng::seed(seed),
    )
    .expect("an array")
}

fn bench(c: &mut Criterion) {
    let arith_fused: FusedFn = fuse("arith", arith);
    let tanh_fused: FusedFn = fuse("tanh", tanh);
    let x = Variable::new(uniform(1));
    let a = Variable::new(uniform(2));
    let gy = Variable::constant(uniform(3));
    type Run<'a> = Box<dyn Fn() -> Variable + 'a>;
    let xa = || [x.clone(), a.clone()];
    let rows: [(&str, Run<'_>); 4] = [
        (
            "arith_fused",
            Box::new(|| arith_fused.apply(&[&x, &a]).expect("fused")),
        ),
        ("arith_unfused", Box::new(|| arith(&xa()).expect("unfused"))),
        (
            "tanh_fused",
            Box::new(|| tanh_fused.apply(&[&x, &a]).expect("fused")),
        ),
        ("tanh_unfused", Box::new(|| tanh(&xa()).expect("unfused"))),
    ];
    // `x + a` as a one-function body through the same executor: what the executor itself
    // costs beside the array op (the compiled tier, once warm, or the interpreter with
    // `KUSARI_HOST_JIT=0`).
    let add_fused: FusedFn = fuse("add", |v: &[Variable]| &v[0] + &v[1]);
    let add_fused_run: Run<'_> = Box::new(|| add_fused.apply(&[&x, &a]).expect("fused"));
    // One call of each work, which criterion's rows and the paired ratios below both time.
    let add = || black_box(x.array().add(a.array()).expect("add"));
    let fwd_of = |run: &Run<'_>| {
        let _off = no_backprop_mode();
        black_box(run())
    };
    let fwdbwd_of = |run: &Run<'_>| {
        let y = run();
        black_box(grad(&[&y], &[&x, &a], &[&gy], GradOptions::default()).expect("grad"))
    };
    let mut fwd = c.benchmark_group("fuse_f32_16M_fwd");
    fwd.sample_size(10)
        .warm_up_time(Duration::from_millis(500))
        .measurement_time(Duration::from_secs(3));
    for (name, run) in &rows {
        fwd.bench_function(*name, |bench| bench.iter(|| fwd_of(run)));
    }
    fwd.bench_function("add", |bench| bench.iter(add));
    fwd.bench_function("add_fused", |bench| bench.iter(|| fwd_of(&add_fused_run)));
    fwd.bench_function("tanh_alone", |bench| {
        bench.iter(|| black_box(x.array().tanh().expect("tanh")))
    });
    fwd.finish();
    let mut fwdbwd = c.benchmark_group("fuse_f32_16M_fwdbwd");
    fwdbwd
        .sample_size(10)
        .warm_up_time(Duration::from_millis(500))
        .measurement_time(Duration::from_secs(5));
    for (name, run) in &rows {
        fwdbwd.bench_function(*name, |bench| bench.iter(|| fwdbwd_of(run)));
    }
    fwdbwd.bench_function("add", |bench| bench.iter(add));
    fwdbwd.finish();

    // Paired ratios: each row and `add` timed alternately, call by call, so that the machine's
    // drift (this one's memory bandwidth moves by ±20 % from minute to minute) cancels out of
    // the ratio, where criterion's rows, timed seconds apart, do not share it.
    for (name, run) in &rows {
        let (lo, mid, hi) = paired(|| fwd_of(run), add, 1.0);
        println!("summary fuse fwd {name}: ÷ bound {mid:.2} (pairs {lo:.2}–{hi:.2})");
        let (lo, mid, hi) = paired(|| fwdbwd_of(run), add, 8.0 / 3.0);
        println!("summary fuse fwdbwd {name}: ÷ bound {mid:.2} (pairs {lo:.2}–{hi:.2})");
    }
    let (lo, mid, hi) = paired(|| fwd_of(&add_fused_run), add, 1.0);
    println!("summary fuse fwd add_fused: ÷ add {mid:.2} (pairs {lo:.2}–{hi:.2})");
}

/// `f`'s time over `g`'s times `scale`, timed alternately over 15 pairs (after one warm-up
/// pair): the lowest, median and highest ratio.
fn paired<A, B>(mut f: impl FnMut() -> A, mut g: impl FnMut() -> B, scale: f64) -> (f64, f64, f64) {
    let time = |h: &mut dyn FnMut()| {
        let t = std::time::Instant::now();
        h();
        t.elapsed().as_secs_f64()
    };
    let (mut f, mut g) = (|| drop(f()), || drop(g()));
    time(&mut f);
    time(&mut g);
    let mut r: Vec<f64> = (0..15)
        .map(|_| time(&mut f) / (time(&mut g) * scale))
        .collect();
    r.sort_by(f64::total_cmp);
    (r[0], r[r.len() / 2], r[r.len() - 1])
}

criterion_group!(benches, bench);
criterion_main!(benches);
