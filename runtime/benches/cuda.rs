//! The CUDA backend, timed in six groups:
//!
//! - `cuda_bandwidth`: the fused MulAdd on 16M float32 elements (`Array::mul_add` and the
//!   `#[function_node]` op's kernel launched with `ElementwiseKernel::launch`) against a copy
//!   kernel (`out = a`) over the same elements, as effective bandwidth: MulAdd moves 16 bytes an
//!   element (reads x, y, z, writes w), the copy 8. Each is timed back to back (N launches, then
//!   one wait for the device, divided by N), as the device's throughput: a wait per launch would
//!   add the host's round trip (about 10 µs on an H100, a fifth of a 16M-element sum) to every
//!   kernel. `cuda_peers.py` times its peers the same way.
//! - `cuda_reduction`: the built-in `sum` (a reduction kernel) over the same 16M float32
//!   elements: all of them (split across blocks, then a second pass), each row of a 4096×4096
//!   view (a block per row) and each column (over the leading axis: a block per 8 columns, a
//!   warp reading 8 consecutive columns at 4 rows, no transposed copy), as effective bandwidth
//!   of the 4 bytes an element each reads, timed back to back like the bandwidth; the summary
//!   compares it with the copy's.
//!   `benches/cuda_peers.py` times the same work in PyTorch and CuPy on the same GPU.
//! - `cuda_launch`: host time per launch with every cache warm, for a 3×2 MulAdd: N launches
//!   without waiting, then one `synchronize`, divided by N. A second summary line takes a
//!   launch apart: an empty `RawKernel` launched (the driver's launch and kusari's checks),
//!   MulAdd's kernel into a given output (no allocation), a fresh 3×2 array of zeros on the
//!   device (an allocation, a memset and a free), and a `synchronize` of an idle device.
//! - `cuda_nn`: the neural-network layer of `benches/conv.rs` on the GPU: `convolution_2d` of a
//!   float32 `(32, 64, 32, 32)` input with a `(64, 64, 3, 3)` weight and a bias, pad 1, forward
//!   (backprop off) and forward + `sum` + backward; `batch_normalization` of the same input,
//!   forward + `sum(y · c)` + backward; 2×2 max pooling, forward + `sum` + backward. Each
//!   iteration waits for the device; the forward is checked against the host's first.
//!   `benches/cuda_peers.py` times the same layer in PyTorch (cuDNN).
//! - `cuda_fuse`: the two chains of `benches/fuse.rs` (`arith`, memory-bound arithmetic, and
//!   `tanh`, two transcendental functions an element) on 16M float32 elements on the GPU, fused by
//!   `kusari::fuse` (one kernel forward, one derived kernel backward) and unfused (six functions,
//!   six kernels and temporaries), forward (backprop off) and forward + `grad` for a given output
//!   gradient, timed back to back like the bandwidth. The summary divides each by its
//!   memory-bandwidth bound at the copy kernel's bandwidth: the forward's minimum traffic is 12
//!   bytes an element (read `x` and `a`, write `y`), the forward + backward's 32 (and read `x`,
//!   `a` and `gy`, write the two gradients). The fused chains are checked against the unfused
//!   ones first. `benches/cuda_peers.py` times the same chains in PyTorch (eager and
//!   `torch.compile`) and the forward in `cupy.fuse`.
//! - `nvrtc_compile`: compiling MulAdd's kernel through the binary cache: cold (an empty cache
//!   directory each time), a disk hit (a new cache over a warm directory) and a memory hit. It
//!   needs NVRTC but no GPU, so it runs wherever `libnvrtc` loads.
//!
//! Groups that cannot run say why (`SKIPPED ...`) and the bench still exits 0. Each group ends
//! with a one-line summary from a short measurement of its own.
//!
//! Run: `cargo bench -p kusari --bench cuda` (add `-- --quick` for a short run).

use std::hint::black_box;
use std::path::PathBuf;
use std::sync::Once;
use std::sync::atomic::{AtomicUsize, Ordering};
use std::time::{Duration, Instant};

use criterion::measurement::WallTime;
use criterion::{
    BatchSize, BenchmarkGroup, Criterion, Throughput, criterion_group, criterion_main,
};
use kusari::functions::{ConvOptions, PoolOptions};
use kusari::prelude::*;
use kusari::{ElementwiseKernel, FusedFn, GradOptions, KernelArg, RawKernel, cuda, fuse, grad};
use kusari_kernels::cache::BinaryCache;
use kusari_kernels::compile::{compile_binary_cached, nvrtc_available, nvrtc_version, target_for};

#[path = "common/chains.rs"]
mod chains;

/// f(x, y, z) = x * y + z, with the tutorial's kernel.
struct MulAdd;

#[function_node]
impl MulAdd {
    #[retain(x, y)]
    #[forward_gpu(inputs = "T x, T y, T z", outputs = "T w", body = "w = x * y + z;")]
    fn forward(&self, x: &Array, y: &Array, z: &Array) -> Result<Array> {
        x.mul_add(y, z)
    }

    fn backward(
        &self,
        x: &Variable,
        y: &Variable,
        gw: &Variable,
    ) -> Result<(Variable, Variable, Variable)> {
        Ok(((y * gw)?, (x * gw)?, gw.clone()))
    }
}

/// The bandwidth baseline: one read and one write an element.
static COPY: ElementwiseKernel =
    ElementwiseKernel::new("bench_copy", "T a", "T out", "", "out = a;");

const GPU: Device = Device::Cuda(0);
const ELEMENTS: usize = 16 << 20;

fn uniform_on(shape: &[usize], seed: u64, device: Device) -> Array {
    let a =
        Array::uniform(shape, -1.0, 1.0, DType::F32, &mut Rng::seed(seed)).expect("a small array");
    a.to_device(device).expect("copy to the device")
}

/// The median of `reps` timings of `f`.
fn median(reps: usize, mut f: impl FnMut() -> Duration) -> Duration {
    let mut times: Vec<Duration> = (0..reps).map(|_| f()).collect();
    times.sort();
    times[reps / 2]
}

fn gb_per_s(bytes: usize, t: Duration) -> f64 {
    bytes as f64 / t.as_secs_f64() / 1e9
}

/// Whether there is no GPU for the GPU groups; the first call says why.
fn gpu_missing() -> bool {
    static SAID: Once = Once::new();
    let reason = cuda::unavailable_reason();
    if let Some(reason) = &reason {
        SAID.call_once(|| println!("SKIPPED cuda benchmarks: {reason}"));
    }
    reason.is_some()
}

/// `f`, then a wait for the device: what one timed iteration runs.
fn synced(f: &dyn Fn() -> Array) -> impl Fn() -> Array + '_ {
    move || {
        let out = f();
        cuda::synchronize(GPU).expect("synchronize");
        out
    }
}

fn bench_bandwidth(c: &mut Criterion) {
    if gpu_missing() {
        return;
    }
    let [x, y, z] = [1, 2, 3].map(|seed| uniform_on(&[ELEMENTS], seed, GPU));
    let kernel = &MulAdd::KERNELS[0];
    let muladd = || kernel.launch(&[&x, &y, &z], &[]).expect("launch").remove(0);
    // Checked once against the host before anything is timed (this also compiles the kernels).
    let host = |a: &Array| a.to_vec::<f32>().expect("to host");
    let (hx, hy, hz, hw) = (host(&x), host(&y), host(&z), host(&muladd()));
    assert!((0..ELEMENTS).all(|i| (hx[i] * hy[i] + hz[i] - hw[i]).abs() <= 1e-6));
    assert_eq!(host(&COPY.launch(&[&x], &[]).expect("copy")[0]), hx);

    let array_op = || x.mul_add(&y, &z).expect("mul_add");
    let copy = || COPY.launch(&[&x], &[]).expect("copy").remove(0);
    let mut group = c.benchmark_group("cuda_bandwidth");
    group.throughput(Throughput::Bytes(16 * ELEMENTS as u64));
    back_to_back(&mut group, "array_mul_add_16M_f32", array_op);
    back_to_back(&mut group, "kernel_launch_mul_add_16M_f32", muladd);
    group.throughput(Throughput::Bytes(8 * ELEMENTS as u64));
    back_to_back(&mut group, "copy_kernel_16M_f32", copy);
    group.finish();

    // Back to back: 20 launches, one wait, divided by 20 (the median of 11).
    let time = |f: &dyn Fn() -> Array| median(11, || launches_then_sync(20, f) / 20);
    let (t_muladd, t_copy) = (time(&muladd), time(&copy));
    let name = cuda::properties(0).map(|p| p.0).unwrap_or_default();
    let (bw_muladd, bw_copy) = (
        gb_per_s(16 * ELEMENTS, t_muladd),
        gb_per_s(8 * ELEMENTS, t_copy),
    );
    println!(
        "summary cuda_bandwidth ({name}): MulAdd 16M f32 {t_muladd:?} = {bw_muladd:.0} GB/s, \
         copy {t_copy:?} = {bw_copy:.0} GB/s"
    );

    bench_reductions(c, &x, bw_copy, &time);
}

/// The built-in `sum` over `x` (16M float32) three ways, against the copy's bandwidth.
fn bench_reductions(
    c: &mut Criterion,
    x: &Array,
    bw_copy: f64,
    time: &dyn Fn(&dyn Fn() -> Array) -> Duration,
) {
    let side = 1 << 12;
    let m = x.reshape(&[side, side]).expect("reshape");
    let all = || x.sum().expect("sum");
    let rows = || m.sum_axes(&[1], false).expect("row sums");
    let cols = || m.sum_axes(&[0], false).expect("column sums");
    // Checked once against f64 sums on the host (this also compiles the kernels).
    let h = x.to_vec::<f32>().expect("to host");
    let close = |got: f32, want: f64, n: usize| {
        (f64::from(got) - want).abs() <= 1e-5 * n as f64 + 1e-4 * want.abs()
    };
    let total: f64 = h.iter().map(|&v| f64::from(v)).sum();
    let got = all().to_vec::<f32>().expect("to host")[0];
    assert!(close(got, total, ELEMENTS), "sum {got} vs {total}");
    let got_rows = rows().to_vec::<f32>().expect("to host");
    let got_cols = cols().to_vec::<f32>().expect("to host");
    for i in [0, 1, side / 2, side - 1] {
        let row: f64 = h[i * side..(i + 1) * side]
            .iter()
            .map(|&v| f64::from(v))
            .sum();
        assert!(close(got_rows[i], row, side), "row {i}");
        let col: f64 = (0..side).map(|r| f64::from(h[r * side + i])).sum();
        assert!(close(got_cols[i], col, side), "column {i}");
    }

    let mut group = c.benchmark_group("cuda_reduction");
    group.throughput(Throughput::Bytes(4 * ELEMENTS as u64));
    back_to_back(&mut group, "sum_all_16M_f32", all);
    back_to_back(&mut group, "sum_rows_4096x4096_f32", rows);
    back_to_back(&mut group, "sum_columns_4096x4096_f32", cols);
    group.finish();

    let summary: Vec<String> = [
        ("all", &all as &dyn Fn() -> Array),
        ("rows", &rows),
        ("columns", &cols),
    ]
    .into_iter()
    .map(|(what, f)| {
        let t = time(f);
        let bw = gb_per_s(4 * ELEMENTS, t);
        format!(
            "{what} {t:?} = {bw:.0} GB/s ({:.0} % of copy)",
            100.0 * bw / bw_copy
        )
    })
    .collect();
    println!(
        "summary cuda_reduction: sum of 16M f32: {}",
        summary.join(", ")
    );
}

/// Registers `f` in `group`, timed by [`launches_then_sync`]: criterion's iterations launched
/// back to back, then one wait.
fn back_to_back<T>(group: &mut BenchmarkGroup<'_, WallTime>, name: &str, f: impl Fn() -> T + Copy) {
    group.bench_function(name, |b| b.iter_custom(|n| launches_then_sync(n, f)));
}

/// `iters` calls of `f` without waiting, then one wait for the device: the host's time per call
/// once the device queue is kept busy.
fn launches_then_sync<T>(iters: u64, mut f: impl FnMut() -> T) -> Duration {
    let start = Instant::now();
    for _ in 0..iters {
        black_box(f());
    }
    cuda::synchronize(GPU).expect("synchronize");
    start.elapsed()
}

fn bench_launch(c: &mut Criterion) {
    if gpu_missing() {
        return;
    }
    let [x, y, z] = [1, 2, 3].map(|seed| uniform_on(&[3, 2], seed, GPU));
    let [vx, vy, vz] = [&x, &y, &z].map(|a| Variable::new(a.clone()));
    let kernel = &MulAdd::KERNELS[0];
    let array_op = || x.mul_add(&y, &z).expect("mul_add");
    let launch = || kernel.launch(&[&x, &y, &z], &[]).expect("launch");
    let apply = || MulAdd.apply((&vx, &vy, &vz)).expect("apply");
    launches_then_sync(10, || (array_op(), launch(), apply())); // every cache warm
    let before = cuda::kernel_stats();

    let mut group = c.benchmark_group("cuda_launch");
    back_to_back(&mut group, "array_mul_add_3x2", array_op);
    back_to_back(&mut group, "kernel_launch_3x2", launch);
    back_to_back(&mut group, "function_node_apply_3x2", apply);
    group.finish();

    let after = cuda::kernel_stats();
    assert_eq!(
        after.compiles, before.compiles,
        "a warm launch compiles nothing"
    );
    assert_eq!(
        after.module_loads, before.module_loads,
        "nor loads a module"
    );
    let per_call = |f: &dyn Fn()| median(11, || launches_then_sync(10_000, f) / 10_000);
    println!(
        "summary cuda_launch: host time per 3x2 MulAdd, warm: Array::mul_add {:?}, \
         ElementwiseKernel::launch {:?}, FunctionNode apply {:?}",
        per_call(&|| drop(array_op())),
        per_call(&|| drop(launch())),
        per_call(&|| drop(apply())),
    );

    // Where a launch's time goes.
    let nop = RawKernel::new("extern \"C\" __global__ void nop(float* p) {}", "nop")
        .expect("the empty kernel");
    let raw = || nop.launch(1, 32, &[KernelArg::Array(&x)]).expect("nop");
    let w = Array::zeros_on(&[3, 2], DType::F32, GPU).expect("an output");
    let into = || {
        kernel
            .call()
            .args(&[&x, &y, &z])
            .out(&w)
            .run()
            .expect("launch into w")
    };
    let zeros = || Array::zeros_on(&[3, 2], DType::F32, GPU).expect("zeros");
    launches_then_sync(10, || (raw(), into(), zeros()));
    let sync = median(11, || {
        let t = Instant::now();
        for _ in 0..1000 {
            cuda::synchronize(GPU).expect("synchronize");
        }
        t.elapsed() / 1000
    });
    println!(
        "summary cuda_launch_parts: host time per call, warm: empty RawKernel {:?}, \
         MulAdd kernel into a given output {:?}, Array::zeros_on 3x2 (allocate, memset, free) \
         {:?}, synchronize when idle {sync:?}",
        per_call(&|| raw()),
        per_call(&|| drop(into())),
        per_call(&|| drop(zeros())),
    );
}

/// The layer of `benches/conv.rs` on the GPU; see the module's doc.
fn bench_nn(c: &mut Criterion) {
    if gpu_missing() {
        return;
    }
    let shape = [32, 64, 32, 32];
    let host_x = uniform_on(&shape, 1, Device::Cpu);
    let host_w = uniform_on(&[64, 64, 3, 3], 2, Device::Cpu)
        .mul_scalar(0.05)
        .expect("W");
    let host_b = uniform_on(&[64], 3, Device::Cpu);
    let on_gpu = |a: &Array| a.to_device(GPU).expect("copy to the device");
    let (x, w, b) = (on_gpu(&host_x), on_gpu(&host_w), on_gpu(&host_b));
    let o = ConvOptions::default().pad(1);

    // The GPU's forward against the host's before anything is timed.
    {
        let _off = kusari::config::no_backprop_mode();
        let conv = |x: &Array, w: &Array, b: &Array| {
            let [x, w, b] = [x, w, b].map(|a| Variable::constant(a.clone()));
            let y = F::convolution_2d(&x, &w, Some(&b), &o).expect("convolution_2d");
            y.array().to_vec::<f32>().expect("to host")
        };
        let (gpu, host) = (conv(&x, &w, &b), conv(&host_x, &host_w, &host_b));
        let worst = gpu
            .iter()
            .zip(&host)
            .map(|(g, h)| (g - h).abs())
            .fold(0.0, f32::max);
        assert!(worst <= 1e-4, "convolution_2d on the GPU is off by {worst}");
    }

    let fwd = || {
        let _off = kusari::config::no_backprop_mode();
        let [x, w, b] = [&x, &w, &b].map(|a| Variable::constant(a.clone()));
        let y = F::convolution_2d(&x, &w, Some(&b), &o).expect("convolution_2d");
        y.array().clone()
    };
    let [vx, vw, vb] = [&x, &w, &b].map(|a| Variable::new(a.clone()));
    let fwdbwd = || {
        for v in [&vx, &vw, &vb] {
            v.cleargrad();
        }
        let y = F::convolution_2d(&vx, &vw, Some(&vb), &o).expect("convolution_2d");
        F::sum(&y).expect("sum").backward().expect("backward");
        vw.grad_array().expect("W's gradient")
    };
    let cst = Variable::constant(uniform_on(&shape, 5, GPU));
    let gamma = Variable::new(uniform_on(&[64], 6, GPU));
    let beta = Variable::new(uniform_on(&[64], 7, GPU));
    let bn = || {
        for v in [&vx, &gamma, &beta] {
            v.cleargrad();
        }
        let y = F::batch_normalization(&vx, &gamma, &beta, 2e-5).expect("batch_normalization");
        let y = (&y * &cst).expect("y * c");
        F::sum(&y).expect("sum").backward().expect("backward");
        vx.grad_array().expect("x's gradient")
    };
    let pool = || {
        vx.cleargrad();
        let y = F::max_pooling_2d(&vx, &PoolOptions::new(2)).expect("max_pooling_2d");
        F::sum(&y).expect("sum").backward().expect("backward");
        vx.grad_array().expect("x's gradient")
    };

    let mut group = c.benchmark_group("cuda_nn");
    group.bench_function("conv_fwd", |b| b.iter(synced(&fwd)));
    group.bench_function("conv_fwdbwd", |b| b.iter(synced(&fwdbwd)));
    group.bench_function("batch_norm_fwdbwd", |b| b.iter(synced(&bn)));
    group.bench_function("max_pooling_fwdbwd", |b| b.iter(synced(&pool)));
    group.finish();

    let time = |f: &dyn Fn() -> Array| {
        synced(f)();
        median(21, || {
            let t = Instant::now();
            synced(f)();
            t.elapsed()
        })
    };
    println!(
        "summary cuda_nn (float32 32x64x32x32; conv 64->64 3x3 pad 1 with bias): conv fwd {:?}, \
         conv fwdbwd {:?}, batch_norm fwdbwd {:?}, max_pooling fwdbwd {:?}",
        time(&fwd),
        time(&fwdbwd),
        time(&bn),
        time(&pool),
    );
}

/// `kusari::fuse` on the GPU; see the module's doc.
fn bench_fuse(c: &mut Criterion) {
    if gpu_missing() {
        return;
    }
    let (arith_fused, tanh_fused): (FusedFn, FusedFn) =
        (fuse("arith", chains::arith), fuse("tanh", chains::tanh));
    let shape = [ELEMENTS / 1024, 1024];
    let x = Variable::new(uniform_on(&shape, 1, GPU).mul_scalar(2.0).expect("x"));
    let a = Variable::new(uniform_on(&shape, 2, GPU).mul_scalar(2.0).expect("a"));
    let gy = Variable::constant(uniform_on(&shape, 3, GPU));
    type Chain = fn(&[Variable]) -> Result<Variable>;
    let cases: [(&str, &FusedFn, Chain); 2] = [
        ("arith", &arith_fused, chains::arith),
        ("tanh", &tanh_fused, chains::tanh),
    ];
    let fwdbwd = |y: Variable| {
        let g = grad(&[&y], &[&x, &a], &[&gy], GradOptions::default()).expect("grad");
        g.into_iter()
            .map(|g| g.expect("a gradient").array().clone())
            .collect::<Vec<_>>()
    };
    let host = |a: &Array| a.to_vec::<f32>().expect("to host");
    let worst = |p: &Array, q: &Array| {
        host(p)
            .iter()
            .zip(host(q))
            .map(|(p, q)| (p - q).abs())
            .fold(0.0, f32::max)
    };
    // The fused chains against the unfused ones (this also compiles their kernels).
    for (name, fused, chain) in cases {
        let f = fused.apply(&[&x, &a]).expect("fused");
        let u = chain(&[x.clone(), a.clone()]).expect("unfused");
        let e = worst(f.array(), u.array());
        assert!(e <= 1e-5, "{name}: the fused forward is off by {e}");
        for (gf, gu) in fwdbwd(f).iter().zip(fwdbwd(u)) {
            let e = worst(gf, &gu);
            assert!(e <= 1e-4, "{name}: a fused gradient is off by {e}");
        }
    }
    let copy = || COPY.launch(&[x.array()], &[]).expect("copy").remove(0);

    let mut group = c.benchmark_group("cuda_fuse");
    for (name, fused, chain) in cases {
        let xa = [x.clone(), a.clone()];
        back_to_back(&mut group, &format!("{name}_fused_fwd"), || {
            let _off = no_backprop_mode();
            fused.apply(&[&x, &a]).expect("fused")
        });
        back_to_back(&mut group, &format!("{name}_unfused_fwd"), || {
            let _off = no_backprop_mode();
            chain(&xa).expect("unfused")
        });
        back_to_back(&mut group, &format!("{name}_fused_fwdbwd"), || {
            fwdbwd(fused.apply(&[&x, &a]).expect("fused"))
        });
        back_to_back(&mut group, &format!("{name}_unfused_fwdbwd"), || {
            fwdbwd(chain(&xa).expect("unfused"))
        });
    }
    group.finish();

    // Back to back: 20 runs, one wait, divided by 20 (the median of 11).
    let time = |f: &dyn Fn()| median(11, || launches_then_sync(20, f) / 20);
    let t_copy = time(&|| drop(copy()));
    let bound = |bytes: usize| t_copy.as_secs_f64() * bytes as f64 / 8.0;
    let mut parts = Vec::new();
    for (name, fused, chain) in cases {
        let xa = [x.clone(), a.clone()];
        let runs: [(&str, usize, &dyn Fn()); 4] = [
            ("fused fwd", 12, &|| {
                let _off = no_backprop_mode();
                drop(fused.apply(&[&x, &a]).expect("fused"))
            }),
            ("unfused fwd", 12, &|| {
                let _off = no_backprop_mode();
                drop(chain(&xa).expect("unfused"))
            }),
            ("fused fwdbwd", 32, &|| {
                drop(fwdbwd(fused.apply(&[&x, &a]).expect("fused")))
            }),
            ("unfused fwdbwd", 32, &|| {
                drop(fwdbwd(chain(&xa).expect("unfused")))
            }),
        ];
        for (what, bytes, f) in runs {
            let t = time(f);
            parts.push(format!(
                "{name} {what} {t:?} = {:.2}x bound",
                t.as_secs_f64() / bound(bytes)
            ));
        }
    }
    println!(
        "summary cuda_fuse (16M f32; bound at copy's {:.0} GB/s: 12 bytes an element forward, 32 \
         forward + backward): {}",
        gb_per_s(8 * ELEMENTS, t_copy),
        parts.join(", ")
    );
}

/// A fresh directory under the system's temporary directory, removed when dropped.
struct ScratchDir(PathBuf);

impl ScratchDir {
    fn new() -> Self {
        static NEXT: AtomicUsize = AtomicUsize::new(0);
        let name = format!(
            "kusari-bench-cuda-{}-{}",
            std::process::id(),
            NEXT.fetch_add(1, Ordering::Relaxed)
        );
        ScratchDir(std::env::temp_dir().join(name))
    }

    fn cache(&self) -> BinaryCache {
        BinaryCache::new(Some(self.0.clone()))
    }
}

impl Drop for ScratchDir {
    fn drop(&mut self) {
        let _ = std::fs::remove_dir_all(&self.0);
    }
}

fn bench_compile(c: &mut Criterion) {
    if !nvrtc_available() {
        println!(
            "SKIPPED nvrtc_compile: NVRTC cannot be loaded (pip install nvidia-cuda-nvrtc; \
             put nvidia/cu13/lib on LD_LIBRARY_PATH)"
        );
        return;
    }
    // The device's architecture when there is one, else Hopper's (sm_90).
    let (major, minor) = cuda::properties(0).map_or((9, 0), |p| p.1);
    let target = target_for(major, minor);
    let host = Array::zeros(&[3, 2], DType::F32).expect("a small array");
    let src = MulAdd::KERNELS[0]
        .source_for(&[&host, &host, &host])
        .expect("the kernel's source");
    let compile = |cache: &BinaryCache| compile_binary_cached(&src, &target, cache).expect("NVRTC");

    // The three paths, checked by the cache's counters before they are timed.
    let warm = ScratchDir::new();
    let cold_cache = warm.cache();
    let (used, binary) = compile(&cold_cache);
    let disk_cache = warm.cache();
    compile(&disk_cache);
    compile(&disk_cache);
    assert_eq!(cold_cache.stats().compiles, 1);
    assert_eq!(
        (disk_cache.stats().disk_hits, disk_cache.stats().memory_hits),
        (1, 1)
    );

    let mut group = c.benchmark_group("nvrtc_compile");
    group.bench_function("cold", |b| {
        b.iter_batched_ref(
            || {
                let dir = ScratchDir::new();
                let cache = dir.cache();
                (dir, cache)
            },
            |(_, cache)| compile(cache),
            BatchSize::PerIteration,
        )
    });
    group.bench_function("disk_hit", |b| {
        b.iter_batched_ref(
            || warm.cache(),
            |cache| compile(cache),
            BatchSize::PerIteration,
        )
    });
    group.bench_function("memory_hit", |b| b.iter(|| compile(&disk_cache)));
    group.finish();

    let cold = median(5, || {
        let dir = ScratchDir::new();
        let cache = dir.cache();
        let t = Instant::now();
        compile(&cache);
        t.elapsed()
    });
    let disk = median(51, || {
        let cache = warm.cache();
        let t = Instant::now();
        compile(&cache);
        t.elapsed()
    });
    let memory = median(51, || {
        let t = Instant::now();
        compile(&disk_cache);
        t.elapsed()
    });
    let (v_major, v_minor) = nvrtc_version().expect("NVRTC version");
    println!(
        "summary nvrtc_compile (NVRTC {v_major}.{v_minor}, {used}, {} bytes): cold {cold:?}, \
         disk hit {disk:?}, memory hit {memory:?}",
        binary.len()
    );
}

criterion_group!(
    benches,
    bench_bandwidth,
    bench_launch,
    bench_nn,
    bench_fuse,
    bench_compile
);
criterion_main!(benches);
