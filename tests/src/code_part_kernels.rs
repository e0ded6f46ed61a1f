//! Kernels with a preamble, `loop_prep` and `after_loop` (CuPy's `ElementwiseKernel` arguments
//! besides the body) and one whose array inputs are all `raw` (launched with a size), shared by the emulated-device tests (`emulated/elementwise_code.rs`) and the NVRTC
//! compile test (`host/kernel_sources.rs`): as `ElementwiseKernel` values and in a `#[function_node]` op.

use kusari::ElementwiseKernel;
use kusari::prelude::*;

/// y = cube(x) + c, with `cube` a device function from the preamble.
pub static CUBE_PLUS: ElementwiseKernel =
    ElementwiseKernel::new("cube_plus", "T x", "T y", "T c", "y = cube(x) + c;")
        .with_preamble("__device__ T cube(T v) {\n  return v * v * v;\n}");

/// y = x / n with `1 / n` computed once per thread before the loop; `count` (raw, one slot per
/// thread that ran) records in `after_loop` how many elements the thread's loop visited.
pub static MEAN_SHARE: ElementwiseKernel = ElementwiseKernel::new(
    "mean_share",
    "T x",
    "T y, raw int32 count",
    "",
    "y = x * inv_n;\n++seen;",
)
.with_loop_prep(
    "const long long first = (long long)blockIdx.x * blockDim.x + threadIdx.x;\n\
     const T inv_n = (T)1 / (T)n;\n\
     int seen = 0;",
)
.with_after_loop("if (first < (long long)n) count[first] = seen;");

/// `y[i] = a[2 i] + a[2 i + 1]`, for `i` in `0..n`, with `n` written to
/// `sizes[i]`: a kernel whose only array input is raw, launched with a size.
pub static PAIR_SUMS: ElementwiseKernel = ElementwiseKernel::new(
    "pair_sums",
    "raw T a",
    "T y, raw int64 sizes",
    "",
    "y = a[2 * i] + a[2 * i + 1];\nsizes[i] = (long long)n;",
);

/// f(x) = alpha * x^3 through `#[forward_gpu(.., preamble = "..", loop_prep = "..")]`.
pub struct ScaledCube {
    alpha: f64,
}

#[function_node]
impl ScaledCube {
    fn new(alpha: f64) -> Self {
        ScaledCube { alpha }
    }

    #[retain(x)]
    #[forward_gpu(
        inputs = "T x",
        outputs = "T y",
        params = "T alpha",
        preamble = "__device__ T cube(T v) { return v * v * v; }",
        loop_prep = "const T a = alpha;",
        body = "y = a * cube(x);",
        after_loop = "(void)a;",
        name = "scaled_cube_fwd"
    )]
    fn forward(&self, x: &Array) -> Result<Array> {
        (&(x * x)? * x)?.mul_scalar(self.alpha)
    }

    fn backward(&self, x: &Variable, gy: &Variable) -> Result<Variable> {
        let dy_dx = (x.array() * x.array())?.mul_scalar(3.0 * self.alpha)?;
        gy * Variable::constant(dy_dx)
    }
}

/// Every kernel of this module.
pub fn all() -> Vec<ElementwiseKernel> {
    let mut all = vec![CUBE_PLUS, MEAN_SHARE, PAIR_SUMS];
    all.extend_from_slice(ScaledCube::KERNELS);
    all
}
