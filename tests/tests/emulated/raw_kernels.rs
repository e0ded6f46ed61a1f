//! Raw kernels (CuPy's `RawKernel` and `RawModule`) on the emulated CUDA device, against host
//! results: a saxpy with a scalar, a tiled transpose on a 2-D grid with static shared memory
//! and `__syncthreads`, a 3-D grid, dynamic shared memory, atomicAdd histograms and sums, a
//! module of two kernels and a `__device__` helper, a module where some blocks wait at barriers
//! and each waiting thread keeps its locals, both caches on second use; sources read as
//! the compiler reads them (CuPy's continued parameter lists, types chosen by `#if` on an
//! option, macros in declarations, and a declaration that depends on `__CUDA_ARCH__`, which is
//! not trusted); and every argument and launch mistake as an error naming the kernel and the
//! parameter. Every kernel here also compiles with NVRTC, whose PTX has the parameters kusari
//! read.

use kusari::cuda::KernelStats;
use kusari::kernels::compile::{Target, compile_binary};
use kusari::prelude::*;
use kusari::{Error, RawKernel, RawModule, Scalar, cuda};
use kusari_tests::run_test_in_child;

use super::emulated;

fn on_gpu(a: &Array) -> Array {
    a.to_device(Device::Cuda(0)).unwrap()
}

const SAXPY: &str = r#"
extern "C" __global__ void saxpy(float a, const float* __restrict__ x, float* y, int n) {
    int i = blockIdx.x * blockDim.x + threadIdx.x;
    if (i < n) {
        y[i] = a * x[i] + y[i];
    }
}
"#;

/// A tiled transpose: each block reads a TILE x TILE tile into static shared memory (padded
/// against bank conflicts), waits, and writes it transposed. TILE comes from the options.
const TRANSPOSE: &str = r#"
extern "C" __global__ void transpose(const double* in, double* out, int rows, int cols) {
    __shared__ double tile[TILE][TILE + 1];
    int x = blockIdx.x * TILE + threadIdx.x;
    int y = blockIdx.y * TILE + threadIdx.y;
    if (x < cols && y < rows) {
        tile[threadIdx.y][threadIdx.x] = in[y * cols + x];
    }
    __syncthreads();
    x = blockIdx.y * TILE + threadIdx.x;
    y = blockIdx.x * TILE + threadIdx.y;
    if (x < rows && y < cols) {
        out[y * rows + x] = tile[threadIdx.x][threadIdx.y];
    }
}
"#;

/// Every thread of a 3-D grid writes its global 3-D index into a (z, y, x) array.
const INDEX_3D: &str = r#"
extern "C" __global__ void index_3d(long long* out) {
    const unsigned int x = blockIdx.x * blockDim.x + threadIdx.x;
    const unsigned int y = blockIdx.y * blockDim.y + threadIdx.y;
    const unsigned int z = blockIdx.z * blockDim.z + threadIdx.z;
    const unsigned int nx = gridDim.x * blockDim.x, ny = gridDim.y * blockDim.y;
    out[((size_t)z * ny + y) * nx + x] = x + 1000LL * y + 1000000LL * z;
}
"#;

/// Each block reverses its chunk through dynamic shared memory, and writes the chunk's sum,
/// reduced in the same buffer's second half.
const BLOCK_REVERSE: &str = r#"
extern "C" __global__ void block_reverse(const float* in, float* out, float* sums) {
    extern __shared__ float buf[];
    float* partial = buf + blockDim.x;
    const unsigned int t = threadIdx.x;
    const unsigned int base = blockIdx.x * blockDim.x;
    buf[t] = in[base + t];
    partial[t] = in[base + t];
    __syncthreads();
    out[base + t] = buf[blockDim.x - 1 - t];
    for (unsigned int s = blockDim.x / 2; s > 0; s >>= 1) {
        if (t < s) partial[t] += partial[t + s];
        __syncthreads();
    }
    if (t == 0) sums[blockIdx.x] = partial[0];
}
"#;

/// A histogram and a total with atomicAdd, from every block at once.
const HISTOGRAM: &str = r#"
extern "C" __global__ void histogram(const int* values, unsigned int* counts, double* total,
                                     long long n) {
    for (long long i = blockIdx.x * (long long)blockDim.x + threadIdx.x; i < n;
         i += (long long)gridDim.x * blockDim.x) {
        atomicAdd(&counts[values[i]], 1);
        atomicAdd(total, (double)values[i]);
    }
}
"#;

/// Two kernels sharing a `__device__` helper and a `__constant__`.
const MODULE: &str = r#"
__constant__ float OFFSET = 0.25f;

__device__ float shifted_square(float v) {
    return v * v + OFFSET;
}

extern "C" __global__ void square_all(const float* x, float* y, int n) {
    int i = blockIdx.x * blockDim.x + threadIdx.x;
    if (i < n) y[i] = shifted_square(x[i]);
}

extern "C" __global__ void scale_all(float* y, float by, int n) {
    int i = blockIdx.x * blockDim.x + threadIdx.x;
    if (i < n) y[i] = by * shifted_square(y[i]) - OFFSET;
}
"#;

/// A module where one kernel waits at barriers in some blocks only, beside one that never does:
/// the emulated device starts a block's threads one after another on a shared stack until one
/// waits, so each waiting thread must keep its own stack (its locals) until it finishes.
const SOME_WAIT: &str = r#"
extern "C" __global__ void add_one(const float* x, float* y, int n) {
    int i = blockIdx.x * blockDim.x + threadIdx.x;
    if (i < n) y[i] = x[i] + 1.0f;
}

// Odd blocks reverse their stretch of x through shared memory (every thread of such a block
// waits three times); even blocks copy it without waiting. Every thread keeps a local array
// across the barriers and sums it at the end.
extern "C" __global__ void reverse_odd_blocks(const float* x, float* y, float* sums, int n) {
    __shared__ float tile[128];
    const int t = threadIdx.x, base = blockIdx.x * blockDim.x;
    volatile float mine[40];
    for (int k = 0; k < 40; ++k) mine[k] = (float)(t * 40 + k);
    if (blockIdx.x % 2 == 1) {
        tile[t] = base + t < n ? x[base + t] : 0.0f;
        __syncthreads();
        const float v = tile[blockDim.x - 1 - t];
        __syncthreads();
        tile[t] = v;
        __syncthreads();
        if (base + t < n) y[base + t] = tile[t];
    } else if (base + t < n) {
        y[base + t] = x[base + t];
    }
    float sum = 0.0f;
    for (int k = 0; k < 40; ++k) sum += mine[k];
    if (base + t < n) sums[base + t] = sum;
}
"#;

/// A kernel declared through a macro: read as the compiler reads it, after expansion.
const BY_MACRO: &str = r#"
#define FILL_KERNEL(name, T) \
    extern "C" __global__ void name(T* out, T v, int n) { \
        int i = blockIdx.x * blockDim.x + threadIdx.x; \
        if (i < n) out[i] = v; \
    }
FILL_KERNEL(fill_by_macro, float)
"#;

/// CuPy's `RawModule` example as its documentation writes it: an `extern "C"` block whose
/// parameter lists continue on the next line after a backslash, and an `unsigned int` size.
const CUPY_SUMS: &str = r#"
extern "C"{

__global__ void test_sum(const float* x1, const float* x2, float* y, \
                         unsigned int N)
{
    unsigned int tid = blockDim.x * blockIdx.x + threadIdx.x;
    if (tid < N)
    {
        y[tid] = x1[tid] + x2[tid];
    }
}

__global__ void test_multiply(const float* x1, const float* x2, float* y, \
                              unsigned int N)
{
    unsigned int tid = blockDim.x * blockIdx.x + threadIdx.x;
    if (tid < N)
    {
        y[tid] = x1[tid] * x2[tid];
    }
}

}
"#;

/// The element type chosen by `#if` on a `-D` option, as the compiler chooses it.
const BY_PRECISION: &str = r#"
#if PRECISION == 2
typedef double real;
#define REAL_ONE 1.0
#else
typedef float real;
#define REAL_ONE 1.0f
#endif
extern "C" __global__ void scale_add_one(real* x, real by, int n) {
    int i = blockIdx.x * blockDim.x + threadIdx.x;
    if (i < n) x[i] = x[i] * by + REAL_ONE;
}
"#;

/// Macros in the declaration itself: the kernel's head and an `unsigned int` parameter type.
const BY_MACRO_TYPES: &str = r#"
#define INDEX unsigned int
#define KERNEL(name) extern "C" __global__ void name
KERNEL(iota_from)(long long* out, INDEX start, INDEX n) {
    INDEX i = blockIdx.x * blockDim.x + threadIdx.x;
    if (i < n) out[i] = (long long)start + i;
}
"#;

/// A parameter type that depends on the device's architecture, which kusari cannot know when
/// it reads the source (the emulated device, like a host compiler, leaves `__CUDA_ARCH__`
/// undefined and takes the float branch).
const BY_ARCH: &str = r#"
#if defined(__CUDA_ARCH__) && __CUDA_ARCH__ >= 800
#define ACC double
#else
#define ACC float
#endif
extern "C" __global__ void arch_scale(ACC* x, ACC by, int n) {
    int i = blockIdx.x * blockDim.x + threadIdx.x;
    if (i < n) x[i] = x[i] * by;
}
"#;

/// The README's module (its `RawKernel` section), as it is there.
const README_MODULE: &str = "__device__ T twice(T v) { return v + v; }\n\
     extern \"C\" __global__ void twice_all(T* x, int n) {\n\
         int i = blockIdx.x * blockDim.x + threadIdx.x;\n\
         if (i < n) x[i] = twice(x[i]);\n\
     }";

/// Every kernel source of this file with its options, and the README's: each compiles with
/// NVRTC too.
pub(super) const ALL: [(&str, &[&str]); 15] = [
    (CUPY_SUMS, &[]),
    (BY_PRECISION, &["-DPRECISION=2"]),
    (BY_PRECISION, &[]),
    (BY_MACRO_TYPES, &[]),
    (BY_ARCH, &[]),
    (SHARED_SLOTS, &[]),
    (README_MODULE, &["-DT=double"]),
    (SAXPY, &[]),
    (TRANSPOSE, &["-DTILE=16"]),
    (INDEX_3D, &[]),
    (BLOCK_REVERSE, &[]),
    (HISTOGRAM, &[]),
    (MODULE, &[]),
    (SOME_WAIT, &[]),
    (BY_MACRO, &[]),
];

fn f32s(v: &[f64]) -> Array {
    Array::from_vec(v.iter().map(|&x| x as f32).collect(), &[v.len()]).unwrap()
}

#[test]
fn saxpy_with_a_scalar_matches_the_host() {
    if !emulated("saxpy_with_a_scalar_matches_the_host") {
        return;
    }
    let k = RawKernel::new(SAXPY, "saxpy").unwrap();
    let n = 1000usize;
    let hx: Vec<f64> = (0..n).map(|i| (i as f64) * 0.5 - 100.0).collect();
    let hy: Vec<f64> = (0..n).map(|i| 3.0 - (i % 7) as f64).collect();
    let (x, y) = (on_gpu(&f32s(&hx)), on_gpu(&f32s(&hy)));
    let block = 128u32;
    let grid = (n as u32).div_ceil(block);
    k.launch(
        grid,
        block,
        &[1.5f32.into(), (&x).into(), (&y).into(), (n as i32).into()],
    )
    .unwrap();
    let got = y.to_vec::<f32>().unwrap();
    for i in 0..n {
        // Exact: every value is a small multiple of 0.25, which float holds exactly.
        assert_eq!(f64::from(got[i]), 1.5 * hx[i] + hy[i], "y[{i}]");
    }
    // x was read, not written.
    assert_eq!(
        x.to_vec::<f32>().unwrap(),
        f32s(&hx).to_vec::<f32>().unwrap()
    );
    // An int64 count converts to the `int` parameter when it fits; a float64 scale too.
    k.launch(
        grid,
        block,
        &[
            Scalar::from(-1.0f64).into(),
            (&x).into(),
            (&y).into(),
            Scalar::from(n as i64).into(),
        ],
    )
    .unwrap();
    let again = y.to_vec::<f32>().unwrap();
    for i in 0..n {
        assert_eq!(
            f64::from(again[i]),
            0.5 * hx[i] + hy[i],
            "y[{i}] after the second launch"
        );
    }
}

#[test]
fn a_tiled_transpose_on_a_2d_grid_with_shared_memory_and_barriers() {
    if !emulated("a_tiled_transpose_on_a_2d_grid_with_shared_memory_and_barriers") {
        return;
    }
    let k = RawKernel::with_options(TRANSPOSE, "transpose", &["-DTILE=16"]).unwrap();
    // Neither side a multiple of the tile: the edge blocks are partial.
    let (rows, cols) = (37usize, 53usize);
    let host: Vec<f64> = (0..rows * cols).map(|i| i as f64 * 1.25 - 7.0).collect();
    let a = on_gpu(&Array::from_vec(host.clone(), &[rows, cols]).unwrap());
    let out = on_gpu(&Array::zeros(&[cols, rows], DType::F64).unwrap());
    let grid = ((cols as u32).div_ceil(16), (rows as u32).div_ceil(16));
    k.launch(
        grid,
        (16, 16),
        &[
            (&a).into(),
            (&out).into(),
            (rows as i32).into(),
            (cols as i32).into(),
        ],
    )
    .unwrap();
    let got = out.to_vec::<f64>().unwrap();
    for r in 0..rows {
        for c in 0..cols {
            assert_eq!(got[c * rows + r], host[r * cols + c], "out[{c}][{r}]");
        }
    }
}

#[test]
fn every_thread_of_a_3d_grid_of_3d_blocks_runs_once() {
    if !emulated("every_thread_of_a_3d_grid_of_3d_blocks_runs_once") {
        return;
    }
    let k = RawKernel::new(INDEX_3D, "index_3d").unwrap();
    let (grid, block) = ([2u32, 3, 4], [4u32, 2, 2]);
    let (nx, ny, nz) = (8usize, 6usize, 8usize);
    let out = on_gpu(&Array::zeros(&[nz, ny, nx], DType::I64).unwrap());
    k.launch(grid, block, &[(&out).into()]).unwrap();
    let got = out.to_vec::<i64>().unwrap();
    for z in 0..nz {
        for y in 0..ny {
            for x in 0..nx {
                let expected = (x + 1000 * y + 1_000_000 * z) as i64;
                assert_eq!(got[(z * ny + y) * nx + x], expected, "({z}, {y}, {x})");
            }
        }
    }
}

#[test]
fn dynamic_shared_memory_is_sized_by_the_launch() {
    if !emulated("dynamic_shared_memory_is_sized_by_the_launch") {
        return;
    }
    let k = RawKernel::new(BLOCK_REVERSE, "block_reverse").unwrap();
    for block in [32usize, 256] {
        let blocks = 5usize;
        let n = block * blocks;
        let host: Vec<f64> = (0..n).map(|i| ((i * 37) % 101) as f64 - 50.0).collect();
        let x = on_gpu(&f32s(&host));
        let out = on_gpu(&Array::zeros(&[n], DType::F32).unwrap());
        let sums = on_gpu(&Array::zeros(&[blocks], DType::F32).unwrap());
        // Two floats per thread: the chunk and the partial sums.
        k.launch_with_shared_mem(
            blocks as u32,
            block as u32,
            2 * block * 4,
            &[(&x).into(), (&out).into(), (&sums).into()],
        )
        .unwrap();
        let got = out.to_vec::<f32>().unwrap();
        let got_sums = sums.to_vec::<f32>().unwrap();
        for b in 0..blocks {
            let chunk = &host[b * block..(b + 1) * block];
            for t in 0..block {
                assert_eq!(
                    f64::from(got[b * block + t]),
                    chunk[block - 1 - t],
                    "block {b}"
                );
            }
            // Small integers: the float sum is exact in any order.
            assert_eq!(f64::from(got_sums[b]), chunk.iter().sum::<f64>(), "sum {b}");
        }
    }
    // More than a block has by default is refused before the launch.
    let x = on_gpu(&Array::zeros(&[32], DType::F32).unwrap());
    let e = k
        .launch_with_shared_mem(1, 32, 64 * 1024, &[(&x).into(), (&x).into(), (&x).into()])
        .unwrap_err();
    assert!(matches!(e, Error::KernelArguments { .. }), "{e:?}");
    assert!(
        e.to_string().contains("block_reverse")
            && e.to_string()
                .contains("65536 bytes of dynamic shared memory"),
        "{e}"
    );
}

#[test]
fn atomic_adds_from_parallel_blocks_make_a_histogram_and_a_sum() {
    if !emulated("atomic_adds_from_parallel_blocks_make_a_histogram_and_a_sum") {
        return;
    }
    let k = RawKernel::new(HISTOGRAM, "histogram").unwrap();
    let n = 20_000usize;
    let values: Vec<i32> = (0..n).map(|i| ((i * 7919 + i / 3) % 16) as i32).collect();
    let mut expected = vec![0i32; 16];
    for &v in &values {
        expected[v as usize] += 1;
    }
    let total_expected: f64 = values.iter().map(|&v| f64::from(v)).sum();
    let v = on_gpu(&Array::from_vec(values, &[n]).unwrap());
    // kusari has no uint32 dtype: an int32 array is what an `unsigned int*` addresses.
    let counts = on_gpu(&Array::zeros(&[16], DType::I32).unwrap());
    let total = on_gpu(&Array::zeros(&[1], DType::F64).unwrap());
    // Many blocks of a grid-stride loop: they run on several host threads at once.
    k.launch(
        64,
        64,
        &[
            (&v).into(),
            (&counts).into(),
            (&total).into(),
            (n as i64).into(),
        ],
    )
    .unwrap();
    assert_eq!(counts.to_vec::<i32>().unwrap(), expected);
    assert_eq!(total.to_vec::<f64>().unwrap(), vec![total_expected]);
}

#[test]
fn a_module_with_two_kernels_and_a_device_helper() {
    if !emulated("a_module_with_two_kernels_and_a_device_helper") {
        return;
    }
    let module = RawModule::new(MODULE).unwrap();
    assert_eq!(module.kernel_names(), ["square_all", "scale_all"]);
    let (square, scale) = (
        module.get_function("square_all").unwrap(),
        module.get_function("scale_all").unwrap(),
    );
    let host = [-2.0, -0.5, 0.0, 1.5, 3.0];
    let n = host.len();
    let x = on_gpu(&f32s(&host));
    let y = on_gpu(&Array::zeros(&[n], DType::F32).unwrap());
    square
        .launch(1, 32, &[(&x).into(), (&y).into(), (n as i32).into()])
        .unwrap();
    let expected: Vec<f64> = host.iter().map(|v| v * v + 0.25).collect();
    let got: Vec<f64> = y
        .to_vec::<f32>()
        .unwrap()
        .into_iter()
        .map(f64::from)
        .collect();
    assert_eq!(got, expected);
    scale
        .launch(1, 32, &[(&y).into(), 2.0f32.into(), (n as i32).into()])
        .unwrap();
    let expected: Vec<f64> = expected
        .iter()
        .map(|v| 2.0 * (v * v + 0.25) - 0.25)
        .collect();
    let got: Vec<f64> = y
        .to_vec::<f32>()
        .unwrap()
        .into_iter()
        .map(f64::from)
        .collect();
    for (g, e) in got.iter().zip(&expected) {
        assert!(
            (g - e).abs() <= 1e-5 * e.abs().max(1.0),
            "{got:?} vs {expected:?}"
        );
    }
}

#[test]
fn threads_that_wait_keep_their_own_stacks_beside_threads_that_never_wait() {
    if !emulated("threads_that_wait_keep_their_own_stacks_beside_threads_that_never_wait") {
        return;
    }
    let module = RawModule::new(SOME_WAIT).unwrap();
    let (plain, reverse) = (
        module.get_function("add_one").unwrap(),
        module.get_function("reverse_odd_blocks").unwrap(),
    );
    // Six blocks of 128, the last partial.
    let n = 5 * 128 + 37;
    let host: Vec<f64> = (0..n).map(|i| i as f64 * 0.5 - 3.0).collect();
    let x = on_gpu(&f32s(&host));
    let y = on_gpu(&Array::zeros(&[n], DType::F32).unwrap());
    let sums = on_gpu(&Array::zeros(&[n], DType::F32).unwrap());
    let grid = (n as u32).div_ceil(128);
    plain
        .launch(grid, 128, &[(&x).into(), (&y).into(), (n as i32).into()])
        .unwrap();
    let got = y.to_vec::<f32>().unwrap();
    for (i, h) in host.iter().enumerate() {
        assert_eq!(f64::from(got[i]), h + 1.0, "add_one: y[{i}]");
    }
    reverse
        .launch(
            grid,
            128,
            &[(&x).into(), (&y).into(), (&sums).into(), (n as i32).into()],
        )
        .unwrap();
    let (got, got_sums) = (y.to_vec::<f32>().unwrap(), sums.to_vec::<f32>().unwrap());
    for i in 0..n {
        let (block, t) = (i / 128, i % 128);
        let expected = if block % 2 == 1 {
            // The element at the mirrored place in the block, or 0 past the end.
            let j = block * 128 + 127 - t;
            if j < n { host[j] } else { 0.0 }
        } else {
            host[i]
        };
        assert_eq!(f64::from(got[i]), expected, "reverse_odd_blocks: y[{i}]");
        // sum over k < 40 of (t * 40 + k): what the thread's own locals held.
        let own = (t * 40 * 40 + 40 * 39 / 2) as f64;
        assert_eq!(
            f64::from(got_sums[i]),
            own,
            "the locals of thread {t} of block {block}"
        );
    }
}

#[test]
fn a_kernel_declared_by_a_macro_is_read_through_the_macro() {
    if !emulated("a_kernel_declared_by_a_macro_is_read_through_the_macro") {
        return;
    }
    let k = RawKernel::new(BY_MACRO, "fill_by_macro").unwrap();
    assert_eq!(k.params().unwrap().len(), 3);
    assert_eq!(k.unchecked_reason(), None);
    let out = on_gpu(&Array::zeros(&[5], DType::F32).unwrap());
    // The float64 scalar is converted to the declared `float`, exactly.
    k.launch(1, 8, &[(&out).into(), 2.5f64.into(), 5i64.into()])
        .unwrap();
    assert_eq!(out.to_vec::<f32>().unwrap(), vec![2.5; 5]);
    let e = launch_error(&k, &[(&out).into(), 2.5f32.into(), 2.5f32.into()]);
    assert!(
        e.contains("parameter 2 `n` (declared `int n`) cannot hold argument 2"),
        "{e}"
    );
}

#[test]
fn cupys_module_with_continued_parameter_lists_runs_checked() {
    if !emulated("cupys_module_with_continued_parameter_lists_runs_checked") {
        return;
    }
    use kusari::kernels::raw::{CType, RawParamType};
    let module = RawModule::new(CUPY_SUMS).unwrap();
    assert_eq!(module.kernel_names(), ["test_sum", "test_multiply"]);
    let (x1, x2) = ([1.5, -2.0, 3.0, 0.25], [2.0, 4.0, -1.0, 8.0]);
    for (name, op) in [("test_sum", 0), ("test_multiply", 1)] {
        let k = module.get_function(name).unwrap();
        assert_eq!(k.unchecked_reason(), None);
        let last = k.params().unwrap()[3].clone();
        assert_eq!(
            (last.ty, last.decl.as_str()),
            (RawParamType::Scalar(CType::UInt(4)), "unsigned int N")
        );
        let (a, b) = (on_gpu(&f32s(&x1)), on_gpu(&f32s(&x2)));
        let y = on_gpu(&Array::zeros(&[4], DType::F32).unwrap());
        // An int64 size arrives as the declared 4-byte unsigned int.
        k.launch(1, 32, &[(&a).into(), (&b).into(), (&y).into(), 4i64.into()])
            .unwrap();
        let expected: Vec<f32> = (0..4)
            .map(|i| match op {
                0 => (x1[i] + x2[i]) as f32,
                _ => (x1[i] * x2[i]) as f32,
            })
            .collect();
        assert_eq!(y.to_vec::<f32>().unwrap(), expected);
        let e = launch_error(&k, &[(&a).into(), (&b).into(), (&y).into(), (-1i64).into()]);
        assert!(
            e.contains("parameter 3 `N` (declared `unsigned int N`) cannot hold argument 3, -1"),
            "{e}"
        );
    }
}

#[test]
fn a_type_chosen_by_an_option_is_the_one_compiled() {
    if !emulated("a_type_chosen_by_an_option_is_the_one_compiled") {
        return;
    }
    let xs = [1.0, -0.5, 3.25];
    let double =
        RawKernel::with_options(BY_PRECISION, "scale_add_one", &["-DPRECISION=2"]).unwrap();
    let x = on_gpu(&Array::from_vec(xs.to_vec(), &[3]).unwrap());
    double
        .launch(1, 32, &[(&x).into(), 3.0.into(), 3.into()])
        .unwrap();
    let expected: Vec<f64> = xs.iter().map(|v| v * 3.0 + 1.0).collect();
    assert_eq!(x.to_vec::<f64>().unwrap(), expected);
    let e = launch_error(
        &double,
        &[(&on_gpu(&f32s(&xs))).into(), 3.0.into(), 3.into()],
    );
    assert!(e.contains("parameter 0 `x` (declared `real* x`) points to double, but argument 0 is a float32 array"), "{e}");
    // Without the option, float.
    let single = RawKernel::new(BY_PRECISION, "scale_add_one").unwrap();
    let x = on_gpu(&f32s(&xs));
    single
        .launch(1, 32, &[(&x).into(), 3.0.into(), 3.into()])
        .unwrap();
    let expected: Vec<f32> = xs.iter().map(|v| (v * 3.0 + 1.0) as f32).collect();
    assert_eq!(x.to_vec::<f32>().unwrap(), expected);
}

#[test]
fn macros_in_a_declaration_give_its_types_and_scalars_their_width() {
    if !emulated("macros_in_a_declaration_give_its_types_and_scalars_their_width") {
        return;
    }
    let k = RawKernel::new(BY_MACRO_TYPES, "iota_from").unwrap();
    let out = on_gpu(&Array::zeros(&[4], DType::I64).unwrap());
    // 3e9 fits the declared unsigned int, not an int.
    let start = 3_000_000_000i64;
    k.launch(1, 32, &[(&out).into(), start.into(), 4.into()])
        .unwrap();
    let expected: Vec<i64> = (0..4).map(|i| start + i).collect();
    assert_eq!(out.to_vec::<i64>().unwrap(), expected);
    let e = launch_error(&k, &[(&out).into(), (1i64 << 32).into(), 4.into()]);
    assert!(
        e.contains("parameter 1 `start` (declared `unsigned int start`) cannot hold argument 1"),
        "{e}"
    );
}

#[test]
fn a_declaration_that_depends_on_the_device_is_not_trusted_and_says_so() {
    if !emulated("a_declaration_that_depends_on_the_device_is_not_trusted") {
        return;
    }
    let k = RawKernel::new(BY_ARCH, "arch_scale").unwrap();
    assert!(k.params().is_none());
    let why = k.unchecked_reason().unwrap().to_string();
    assert!(
        why.contains("`__CUDA_ARCH__` depends on the device") && why.contains("not checked"),
        "{why}"
    );
    let x = on_gpu(&f32s(&[1.0, 2.0]));
    k.launch(1, 32, &[(&x).into(), 2.0f32.into(), 2i32.into()])
        .unwrap();
    assert_eq!(x.to_vec::<f32>().unwrap(), vec![2.0, 4.0]);
    // The emulated device still checks the widths the compiled kernel reads, and the error
    // says why kusari did not.
    let e = k
        .launch(1, 32, &[(&x).into(), 2.0f64.into(), 2i32.into()])
        .unwrap_err()
        .to_string();
    assert!(
        e.contains("wrong width") && e.contains(&format!("(note: {why})")),
        "{e}"
    );
}

/// Each thread writes its slot of dynamic shared memory.
const SHARED_SLOTS: &str = r#"
extern "C" __global__ void shared_slots(float* out) {
    extern __shared__ float slots[];
    slots[threadIdx.x] = (float)threadIdx.x;
    __syncthreads();
    out[threadIdx.x] = slots[blockDim.x - 1 - threadIdx.x];
}
"#;

/// A kernel using dynamic shared memory launched without any: on the emulated device the
/// access is an error naming the kernel (the fault of an inaccessible page, or, with the bounds
/// check, the bytes the launch gave), where a GPU would read and write out of bounds.
#[test]
fn dynamic_shared_memory_the_launch_did_not_ask_for_is_an_error() {
    if !emulated("dynamic_shared_memory_the_launch_did_not_ask_for_is_an_error") {
        return;
    }
    let k = RawKernel::new(SHARED_SLOTS, "shared_slots").unwrap();
    let out = on_gpu(&Array::zeros(&[256], DType::F32).unwrap());
    // With the bytes it needs, it runs.
    k.launch_with_shared_mem(1, 256, 256 * 4, &[(&out).into()])
        .unwrap();
    let expected: Vec<f32> = (0..256).rev().map(|t| t as f32).collect();
    assert_eq!(out.to_vec::<f32>().unwrap(), expected);
    let e = k.launch(1, 256, &[(&out).into()]).unwrap_err().to_string();
    assert!(e.contains("kernel shared_slots: "), "{e}");
    assert!(
        e.contains("0 bytes of dynamic shared memory"),
        "the message names the launch's bytes: {e}"
    );
}

fn delta(before: KernelStats, after: KernelStats) -> [usize; 4] {
    [
        after.compiles - before.compiles,
        after.disk_hits - before.disk_hits,
        after.module_loads - before.module_loads,
        after.launches - before.launches,
    ]
}

/// Run in a child process of its own (so no other test's kernels are counted), with a fresh
/// cache directory: prints what each step compiled, read from disk, loaded and launched.
#[test]
#[ignore = "run by raw_kernels_use_both_caches in a child process"]
fn raw_cache_child() {
    cuda::emulate(1).unwrap();
    let code = format!(
        "{MODULE}\n// cache probe {}\n",
        std::env::var("PROBE").unwrap()
    );
    let x = on_gpu(&f32s(&[1.0, 2.0]));
    let y = on_gpu(&Array::zeros(&[2], DType::F32).unwrap());
    let args = [(&x).into(), (&y).into(), 2i32.into()];
    let module = RawModule::new(&code).unwrap();
    let square = module.get_function("square_all").unwrap();
    let mut steps = Vec::new();
    let mut step = |f: &dyn Fn()| {
        let s = cuda::kernel_stats();
        f();
        steps.push(delta(s, cuda::kernel_stats()));
    };
    step(&|| square.launch(1, 32, &args).unwrap());
    step(&|| square.launch(1, 32, &args).unwrap());
    // The module's other kernel: the module is loaded already.
    let scale = module.get_function("scale_all").unwrap();
    step(&|| {
        scale
            .launch(1, 32, &[(&y).into(), 1.0f32.into(), 2i32.into()])
            .unwrap()
    });
    // The same source in a new module object: nothing compiled or loaded.
    let again = RawModule::new(&code)
        .unwrap()
        .get_function("square_all")
        .unwrap();
    step(&|| again.launch(1, 32, &args).unwrap());
    // A module compiled up front (CuPy's `RawModule.compile()`): its first launch compiles and
    // loads nothing.
    let ahead = RawModule::new(&format!("{code}// compiled up front\n")).unwrap();
    step(&|| ahead.compile(Device::Cuda(0)).unwrap());
    let first = ahead.get_function("square_all").unwrap();
    step(&|| first.launch(1, 32, &args).unwrap());
    println!("STEPS {steps:?}");
}

#[test]
fn raw_kernels_use_both_caches() {
    if !emulated("raw_kernels_use_both_caches") {
        return;
    }
    let dir = std::env::temp_dir().join(format!("kusari-raw-cache-{}", std::process::id()));
    let _ = std::fs::remove_dir_all(&dir);
    let run = || {
        let (status, out) = run_test_in_child("raw_kernels::raw_cache_child", "", |cmd| {
            // The counts are the plain build's: the sanitizer's checked builds would add theirs.
            cmd.env("KUSARI_KERNEL_CACHE_DIR", &dir)
                .env("KUSARI_CUDA_EMULATE", "1")
                .env("KUSARI_CUDA_SANITIZE", "0")
                .env("PROBE", std::process::id().to_string());
        });
        assert!(status.success(), "{out}");
        let steps = out.split("STEPS ").nth(1).expect(&out);
        steps.lines().next().unwrap_or_default().to_string()
    };
    // [compiles, disk hits, module loads, launches] per step. First process: compiled once,
    // loaded once, then warm; the second kernel and a second module object of the same source
    // load nothing more; a module compiled up front compiles and loads there, not at its launch.
    assert_eq!(
        run(),
        "[[1, 0, 1, 1], [0, 0, 0, 1], [0, 0, 0, 1], [0, 0, 0, 1], [1, 0, 1, 0], [0, 0, 0, 1]]"
    );
    // Second process: the binaries come from the disk cache.
    assert_eq!(
        run(),
        "[[0, 1, 1, 1], [0, 0, 0, 1], [0, 0, 0, 1], [0, 0, 0, 1], [0, 1, 1, 0], [0, 0, 0, 1]]"
    );
    let _ = std::fs::remove_dir_all(&dir);
}

/// The error message of a launch of `k` with `args`, checked to name the kernel.
fn launch_error(k: &RawKernel, args: &[kusari::KernelArg<'_>]) -> String {
    let e = k.launch(1, 32, args).unwrap_err();
    assert!(matches!(e, Error::KernelArguments { .. }), "{e:?}");
    let msg = e.to_string();
    assert!(msg.starts_with(&format!("kernel {}:", k.name())), "{msg}");
    msg
}

#[test]
fn wrong_arguments_are_errors_naming_the_parameter() {
    if !emulated("wrong_arguments_are_errors_naming_the_parameter") {
        return;
    }
    let k = RawKernel::new(SAXPY, "saxpy").unwrap();
    let x = on_gpu(&Array::zeros(&[4], DType::F32).unwrap());
    let x64 = on_gpu(&Array::zeros(&[4], DType::F64).unwrap());
    let host = Array::zeros(&[4], DType::F32).unwrap();

    let msg = launch_error(&k, &[1.0f32.into(), (&x).into(), (&x).into()]);
    assert!(
        msg.contains("takes 4 parameter(s)")
            && msg.contains("float a, const float* __restrict__ x, float* y, int n")
            && msg.contains("3 argument(s) were given"),
        "{msg}"
    );
    let msg = launch_error(&k, &[1.0f32.into(), 2.0f32.into(), (&x).into(), 4.into()]);
    assert!(
        msg.contains("parameter 1 `x` (declared `const float* __restrict__ x`) is a pointer")
            && msg.contains("argument 1 is the scalar 2 (float32)"),
        "{msg}"
    );
    let msg = launch_error(&k, &[(&x).into(), (&x).into(), (&x).into(), 4.into()]);
    assert!(
        msg.contains("parameter 0 `a` (declared `float a`) is a float value")
            && msg.contains("argument 0 is a float32 array of shape [4]"),
        "{msg}"
    );
    let msg = launch_error(&k, &[1.0f32.into(), (&x64).into(), (&x).into(), 4.into()]);
    assert!(
        msg.contains("parameter 1 `x`")
            && msg.contains("points to float, but argument 1 is a float64 array"),
        "{msg}"
    );
    let big = Scalar::from(1i64 << 40);
    let msg = launch_error(&k, &[1.0f32.into(), (&x).into(), (&x).into(), big.into()]);
    assert!(
        msg.contains(
            "parameter 3 `n` (declared `int n`) cannot hold argument 3, 1099511627776 (int64)"
        ),
        "{msg}"
    );
    let msg = launch_error(
        &k,
        &[1.0f32.into(), (&x).into(), (&x).into(), 2.5f64.into()],
    );
    assert!(
        msg.contains("cannot hold argument 3, 2.5 (float64)"),
        "{msg}"
    );
    let msg = launch_error(&k, &[1.0f32.into(), (&host).into(), (&x).into(), 4.into()]);
    assert!(
        msg.contains("argument 1 is an array on the host (float32 [4])")
            && msg.contains("to_device"),
        "{msg}"
    );
}

#[test]
fn bad_launch_dimensions_are_errors_naming_the_limit() {
    if !emulated("bad_launch_dimensions_are_errors_naming_the_limit") {
        return;
    }
    let k = RawKernel::new(SAXPY, "saxpy").unwrap();
    let x = on_gpu(&Array::zeros(&[4], DType::F32).unwrap());
    let args = [1.0f32.into(), (&x).into(), (&x).into(), 4.into()];
    for (grid, block, expected) in [
        (
            [1, 1, 1],
            [2048, 1, 1],
            "block (2048, 1, 1) has 2048 threads",
        ),
        (
            [1, 1, 1],
            [32, 32, 2],
            "has 2048 threads; a block has at most 1024",
        ),
        ([0, 1, 1], [32, 1, 1], "must have no zero dimension"),
        (
            [1, 1, 1],
            [1, 1, 65],
            "block (1, 1, 65) exceeds the largest block (1024, 1024, 64) in z",
        ),
        ([1, 65536, 1], [32, 1, 1], "grid (1, 65536, 1) exceeds"),
    ] {
        let e = k.launch(grid, block, &args).unwrap_err();
        assert!(matches!(e, Error::KernelArguments { .. }), "{e:?}");
        assert!(e.to_string().contains(expected), "{e}");
    }
}

#[test]
fn source_and_name_mistakes_are_errors() {
    if !emulated("source_and_name_mistakes_are_errors") {
        return;
    }
    // A name the module does not have, listing those it has.
    let e = RawModule::new(MODULE)
        .unwrap()
        .get_function("cube_all")
        .unwrap_err();
    assert!(matches!(e, Error::InvalidKernel { .. }), "{e:?}");
    assert!(
        e.to_string().contains(
            "has no kernel `cube_all`; its `extern \"C\" __global__` kernels: square_all, scale_all"
        ),
        "{e}"
    );
    // A kernel without C linkage cannot be found by name in the compiled module.
    let e = RawKernel::new("__global__ void k(float* x) {}", "k").unwrap_err();
    assert!(e.to_string().contains("not declared `extern \"C\"`"), "{e}");
    assert!(RawKernel::new(SAXPY, "sax-py").is_err());
    let e = RawKernel::with_options(SAXPY, "saxpy", &["-DTILE=1\n#include <x>"]).unwrap_err();
    assert!(e.to_string().contains("line break"), "{e}");
    let e = RawKernel::with_options(SAXPY, "saxpy", &["--use_fast_math"]).unwrap_err();
    assert!(
        e.to_string().contains("`--use_fast_math` is not supported"),
        "{e}"
    );

    // Code that does not compile: the log and the numbered source give the user's lines, the
    // option's `#define` before them unnumbered.
    let bad = "extern \"C\" __global__ void broken(float* x) {\n    x[0] = 1.0f;\n    x[1] = undefined_thing * SCALE;\n}\n";
    let k = RawKernel::with_options(bad, "broken", &["-DSCALE=2"]).unwrap();
    let x = on_gpu(&Array::zeros(&[2], DType::F32).unwrap());
    let e = k.launch(1, 1, &[(&x).into()]).unwrap_err();
    assert!(matches!(e, Error::KernelCompile { .. }), "{e:?}");
    let msg = format!(
        "{e}: {:?}",
        std::error::Error::source(&e).map(ToString::to_string)
    );
    assert!(
        msg.contains(&kusari_tests::compiler_line("broken", 3)),
        "{msg}"
    );
    assert!(msg.contains("undefined_thing"), "{msg}");
    let msg = e.to_string();
    assert!(
        msg.contains("     | #define SCALE 2\n")
            && msg.contains("   3 |     x[1] = undefined_thing * SCALE;"),
        "{msg}"
    );
}

#[test]
fn scalars_only_launch_on_the_default_device_or_say_there_is_none() {
    if !emulated("scalars_only_launch_on_the_default_device_or_say_there_is_none") {
        return;
    }
    let k = RawKernel::new("extern \"C\" __global__ void nothing(int n) {}", "nothing").unwrap();
    let e = k.launch(1, 1, &[3.into()]).unwrap_err();
    assert!(e.to_string().contains("default device is the host"), "{e}");
    let _on = kusari::using_device(Device::Cuda(0));
    k.launch(1, 1, &[3.into()]).unwrap();
}

/// NVRTC compiles every kernel of this file (for Ampere and Hopper), as it compiles the
/// project's other kernels; `KUSARI_REQUIRE_NVRTC` makes a missing NVRTC a failure. The
/// parameters kusari read from each source are the ones NVRTC compiled, as its PTX and its
/// cubins record them (read back by `kusari_kernels::raw::binary_kernels`, which
/// `RawModule::from_binary` uses).
#[test]
fn every_raw_kernel_here_compiles_with_nvrtc() {
    if !kusari_tests::nvrtc_or_skip("every_raw_kernel_here_compiles_with_nvrtc") {
        return;
    }
    let mut compiled = 0;
    for (code, options) in ALL {
        let module = RawModule::with_options(code, options).unwrap();
        let names = module.kernel_names();
        assert!(!names.is_empty(), "every kernel here is read: {code}");
        for name in names {
            let k = module.get_function(name).unwrap();
            for (major, minor) in [(8, 0), (9, 0)] {
                let (_, ptx) = compile_binary(k.source(), &Target::Ptx { major, minor })
                    .unwrap_or_else(|e| panic!("{name} for {major}.{minor}: {e}"));
                let (_, cubin) = compile_binary(k.source(), &Target::Cubin { major, minor })
                    .unwrap_or_else(|e| panic!("{name} for sm_{major}{minor}: {e}"));
                assert!(cubin.starts_with(b"\x7fELF"), "{name}: a cubin");
                for (what, image) in [("PTX", &ptx), ("cubin", &cubin)] {
                    let read = RawModule::from_binary(image).unwrap();
                    assert!(read.kernel_names().contains(&name), "{name} in the {what}");
                    let compiled_params = read.get_function(name).unwrap();
                    let compiled_params = compiled_params.params().unwrap();
                    if let Some(declared) = k.params() {
                        assert_eq!(declared.len(), compiled_params.len(), "{name} {what}");
                        for (d, c) in declared.iter().zip(compiled_params) {
                            assert!(
                                compiled_as(d, c),
                                "{name} {options:?} ({what}): `{}` compiled as `{}`",
                                d.decl,
                                c.decl
                            );
                        }
                    }
                }
                compiled += 1;
            }
        }
    }
    assert_eq!(compiled, 2 * 18);
}

/// Whether the parameter `declared` in a source is what a compiled module records as
/// `compiled`: the same width, a float where PTX says `.f32`/`.f64`, an integer or a pointer
/// where it says `.u64`, an integer (or `bool`) where it says `.u32`, `.u16`, `.u8`.
pub(super) fn compiled_as(
    declared: &kusari::kernels::raw::RawParam,
    compiled: &kusari::kernels::raw::RawParam,
) -> bool {
    use kusari::kernels::raw::{CType, CompiledClass, RawParamType as T};
    let width = match declared.ty {
        T::Pointer(_) => 8,
        T::Scalar(t) => t.size(),
        T::Unknown | T::Compiled { .. } => return false,
    };
    let integer = matches!(
        declared.ty,
        T::Scalar(CType::Int(_) | CType::UInt(_) | CType::Bool)
    );
    match compiled.ty {
        T::Scalar(t) => declared.ty == T::Scalar(t),
        T::Compiled { bytes, class } => {
            bytes == width
                && match class {
                    CompiledClass::Integer => integer,
                    CompiledClass::IntegerOrPointer => {
                        integer || matches!(declared.ty, T::Pointer(_))
                    }
                    CompiledClass::Bytes => true,
                }
        }
        T::Pointer(_) => matches!(declared.ty, T::Pointer(_)),
        T::Unknown => false,
    }
}

#[test]
fn a_module_compiled_up_front_reports_its_compile_error_there() {
    if !emulated("a_module_compiled_up_front_reports_its_compile_error_there") {
        return;
    }
    let bad = RawModule::new(
        "extern \"C\" __global__ void k(float* x) {\n  x[0] = not_declared_here;\n}\n",
    )
    .unwrap();
    let e = bad.compile(Device::Cuda(0)).unwrap_err();
    assert!(matches!(e, Error::KernelCompile { .. }), "{e:?}");
    let text = format!("{e}");
    assert!(text.contains("not_declared_here"), "{text}");
    // The host is no device to compile for.
    let e = bad.compile(Device::Cpu).unwrap_err();
    assert!(
        matches!(&e, Error::KernelArguments { kernel, .. } if kernel == "raw_module"),
        "{e:?}"
    );
    // A good module compiles, and then runs.
    let good = RawModule::new(MODULE).unwrap();
    good.compile(Device::Cuda(0)).unwrap();
    let x = on_gpu(&f32s(&[1.5, -2.0]));
    let y = on_gpu(&Array::zeros(&[2], DType::F32).unwrap());
    let square = good.get_function("square_all").unwrap();
    square
        .launch(1, 32, &[(&x).into(), (&y).into(), 2i32.into()])
        .unwrap();
    assert_eq!(y.to_vec::<f32>().unwrap(), [2.5, 4.25]);
}

/// Where NVRTC loads, the emulated device compiles each kernel with it first: a kernel a GPU's
/// compiler refuses (here a standard header NVRTC lacks, which the host compiler has) is
/// refused with NVRTC's log, not run; `<cstdint>`, which kusari gives NVRTC, runs on both.
#[test]
fn a_kernel_nvrtc_refuses_is_refused_on_the_emulated_device_too() {
    let test = "a_kernel_nvrtc_refuses_is_refused_on_the_emulated_device_too";
    if !emulated(test) || !kusari_tests::nvrtc_or_skip(test) {
        return;
    }
    let out = on_gpu(&Array::zeros(&[4], DType::I64).unwrap());
    let k = RawKernel::new(
        "#include <vector>\n\
         extern \"C\" __global__ void host_header(long* out) { out[threadIdx.x] = 1; }\n",
        "host_header",
    )
    .unwrap();
    let e = k.launch(1, 4, &[(&out).into()]).unwrap_err().to_string();
    assert!(
        e.contains("host_header") && e.contains("sm_90") && e.contains("vector"),
        "{e}"
    );
    let k = RawKernel::new(
        "#include <cstdint>\n\
         extern \"C\" __global__ void widths(int64_t* out) { out[threadIdx.x] = INT64_MAX - threadIdx.x; }\n",
        "widths",
    )
    .unwrap();
    k.launch(1, 4, &[(&out).into()]).unwrap();
    let got = out.to_vec::<i64>().unwrap();
    assert_eq!(got, (0..4).map(|i| i64::MAX - i).collect::<Vec<_>>());
}
