//! The emulated CUDA device's speed, in nanoseconds per element of a kernel's grid, with the
//! sanitizer's checks off and on:
//!
//! - `muladd`: the fused MulAdd elementwise kernel (`w = x * y + z`) over 1M float32 elements,
//!   into a new output (allocated, poisoned and freed each time) and into a given one;
//! - `fill`: a kernel that only writes a given output (`w = 1`), beside the MulAdd into it;
//! - `reads`: a thread a float32 read of an input, through a pointer to `const` (which checked
//!   launches do not track: the issue's budget is that such reads cost nothing extra) and
//!   through a plain pointer (tracked for races), beside the same kernel reading nothing, alone
//!   in its module and in a module with barrier and warp kernels (whose threads start on a
//!   runner that goes on without switching until one waits);
//! - `block_sum`: a shared-memory tree reduction of 256-thread blocks (eight `__syncthreads`,
//!   so its threads run as fibers);
//! - `warp_sum`: the same sums with warp shuffles (`__shfl_down_sync`, five meetings a warp).
//!
//! It asks for the emulated device itself (`cuda::emulate(1)`), so it runs on any machine with
//! a C++ compiler, and prints a summary line per kernel. There are no peers: the figure to
//! compare is the host's own elementwise speed (`benches/muladd.rs`) and the budget of the
//! issue that asked for it (2 ns an element without checks, for kernels without barriers).
//!
//! Run: `cargo bench -p kusari --bench emulated --features cuda` (`-- --quick`).

use std::time::{Duration, Instant};

use criterion::{Criterion, criterion_group, criterion_main};
use kusari::cuda::sanitizer::{self, Checks};
use kusari::prelude::*;
use kusari::{ElementwiseKernel, RawKernel, cuda};

const N: usize = 1 << 20;

static MULADD: ElementwiseKernel = ElementwiseKernel::new(
    "bench_emu_muladd",
    "T x, T y, T z",
    "T w",
    "",
    "w = x * y + z;",
);

static FILL: ElementwiseKernel =
    ElementwiseKernel::new("bench_emu_fill", "", "float32 w", "", "w = 1.0f;");

const SUMS: &str = r#"
extern "C" __global__ void block_sum(const float* x, float* out) {
    __shared__ float partial[256];
    const unsigned int t = threadIdx.x;
    partial[t] = x[blockIdx.x * 256 + t];
    __syncthreads();
    for (unsigned int half = 128; half > 0; half /= 2) {
        if (t < half) partial[t] += partial[t + half];
        __syncthreads();
    }
    if (t == 0) out[blockIdx.x] = partial[0];
}
extern "C" __global__ void warp_sum(const float* x, float* out) {
    float v = x[blockIdx.x * 32 + threadIdx.x];
    for (int offset = 16; offset > 0; offset /= 2) v += __shfl_down_sync(0xffffffffu, v, offset);
    if (threadIdx.x == 0) out[blockIdx.x] = v;
}
"#;

// A module of their own; `reads beside barriers` measures the same kernels in a module with the
// barrier and warp kernels above.
const READS: &str = r#"
extern "C" __global__ void read_const(const float* x, float* out) {
    const unsigned int i = blockIdx.x * 256 + threadIdx.x;
    if (x[i] > 2.0f) out[0] = x[i];  // never: x lies in [-1, 1)
}
extern "C" __global__ void read_plain(float* x, float* out) {
    const unsigned int i = blockIdx.x * 256 + threadIdx.x;
    if (x[i] > 2.0f) out[0] = x[i];
}
extern "C" __global__ void read_nothing(const float* x, float* out) {
    const unsigned int i = blockIdx.x * 256 + threadIdx.x;
    if (i > 0xfffffffu) out[0] = 1.0f;  // never
}
"#;

fn on_device(seed: u64) -> Array {
    Array::uniform(&[N], -1.0, 1.0, DType::F32, &mut Rng::seed(seed))
        .and_then(|a| a.to_device(Device::Cuda(0)))
        .expect("an array on the emulated device")
}

/// The median of `reps` timings of `f`, in nanoseconds per element of `N`.
fn ns_per_element(reps: usize, mut f: impl FnMut()) -> f64 {
    f();
    let mut t: Vec<Duration> = (0..reps)
        .map(|_| {
            let start = Instant::now();
            f();
            start.elapsed()
        })
        .collect();
    t.sort();
    t[reps / 2].as_secs_f64() * 1e9 / N as f64
}

fn bench_emulated(c: &mut Criterion) {
    if let Err(e) = cuda::emulate(1) {
        println!("SKIPPED emulated benchmarks: {e}");
        return;
    }
    if let Some(why) = cuda::unavailable_reason() {
        println!("SKIPPED emulated benchmarks: {why}");
        return;
    }
    let [x, y, z] = [1, 2, 3].map(on_device);
    let out = Array::zeros(&[N / 32], DType::F32)
        .and_then(|a| a.to_device(Device::Cuda(0)))
        .expect("out");
    let sums = RawKernel::new(SUMS, "block_sum").expect("block_sum");
    let warps = RawKernel::new(SUMS, "warp_sum").expect("warp_sum");
    let w = on_device(4);
    let beside = format!("{READS}{SUMS}");
    let reader = |source: &str, name: &str| {
        let k = RawKernel::new(source, name).expect(name);
        let (x, out) = (&x, &out);
        move || {
            k.launch((N / 256) as u32, 256u32, &[x.into(), out.into()])
                .expect("read");
        }
    };
    let (read_const, read_plain, read_nothing, read_nothing_beside) = (
        reader(READS, "read_const"),
        reader(READS, "read_plain"),
        reader(READS, "read_nothing"),
        reader(&beside, "read_nothing"),
    );
    let muladd = || {
        MULADD.launch(&[&x, &y, &z], &[]).expect("muladd");
    };
    let muladd_into = || {
        MULADD
            .call()
            .arg(&x)
            .arg(&y)
            .arg(&z)
            .out(&w)
            .run()
            .expect("muladd into w");
    };
    let fill = || {
        FILL.call().out(&w).run().expect("fill w");
    };
    let block_sum = || {
        sums.launch((N / 256) as u32, 256u32, &[(&x).into(), (&out).into()])
            .expect("block_sum");
    };
    let warp_sum = || {
        warps
            .launch((N / 32) as u32, 32u32, &[(&x).into(), (&out).into()])
            .expect("warp_sum");
    };
    let mut group = c.benchmark_group("emulated");
    group.sample_size(10);
    group.bench_function("muladd_1M_f32", |b| b.iter(muladd));
    group.bench_function("muladd_into_1M_f32", |b| b.iter(muladd_into));
    group.bench_function("block_sum_1M_f32", |b| b.iter(block_sum));
    group.bench_function("warp_sum_1M_f32", |b| b.iter(warp_sum));
    group.finish();

    for (name, f) in [
        ("muladd", &muladd as &dyn Fn()),
        ("muladd into a given output", &muladd_into),
        ("fill a given output", &fill),
        ("read a const input", &read_const),
        ("read a plain pointer's input", &read_plain),
        ("read nothing", &read_nothing),
        (
            "read nothing, in a module with barriers",
            &read_nothing_beside,
        ),
        ("block_sum", &block_sum),
        ("warp_sum", &warp_sum),
    ] {
        let plain = ns_per_element(7, f);
        let checked = {
            let _checks = sanitizer::scoped(Checks::ALL);
            ns_per_element(7, f)
        };
        println!(
            "summary emulated {name} 1M f32: {plain:.2} ns/element without checks, \
             {checked:.1} ns/element with every check ({} host threads)",
            rayon::current_num_threads()
        );
    }
}

criterion_group!(benches, bench_emulated);
criterion_main!(benches);
