//! Kernels launched with the rest of CuPy's call (`ElementwiseKernel::call`): typed scalar
//! parameters, outputs written in place, scalars for array inputs, no array at all, and a pair
//! that differs only in `reduce_dims`. Shared by the emulated-device tests (`emulated/elementwise_calls.rs`)
//! and the NVRTC compile test (`host/kernel_sources.rs`).

use kusari::ElementwiseKernel;

/// `y = x + d` in int64: `d` must reach the kernel with every one of its 64 bits.
pub static SHIFT_I64: ElementwiseKernel =
    ElementwiseKernel::new("shift_i64", "int64 x", "int64 y", "int64 d", "y = x + d;");

/// One SGD step, `out = w - lr * g`, for an `out` the caller gives (`w` itself, in place).
pub static SGD_STEP: ElementwiseKernel =
    ElementwiseKernel::new("sgd_step", "T w, T g", "T out", "T lr", "out = w - lr * g;")
        .with_no_return();

/// `w = a * x + y`, where any input may be a scalar.
pub static AXPY: ElementwiseKernel =
    ElementwiseKernel::new("axpy_args", "T a, T x, T y", "T w", "", "w = a * x + y;");

/// `w = a[i] + x`, with a raw input (which a scalar cannot be, nor an output alias).
pub static RAW_PLUS: ElementwiseKernel =
    ElementwiseKernel::new("raw_plus", "raw T a, T x", "T w", "", "w = a[i] + x;");

/// `s = x + y`, `d = x - y`: two outputs.
pub static SUM_AND_DIFF: ElementwiseKernel = ElementwiseKernel::new(
    "sum_and_diff",
    "T x, T y",
    "T s, T d",
    "",
    "s = x + y;\nd = x - y;",
);

/// `w = base + i` over a size, with no array argument at all.
pub static IOTA: ElementwiseKernel =
    ElementwiseKernel::new("iota_from", "", "int64 w", "int64 base", "w = base + i;");

/// `w = x * y + (T)i`: the loop index shows the order elements are visited in.
pub static MUL_PLUS_INDEX: ElementwiseKernel =
    ElementwiseKernel::new("mul_plus_index", "T x, T y", "T w", "", "w = x * y + (T)i;");

/// [`MUL_PLUS_INDEX`] without `reduce_dims`: its strided launches keep every axis.
pub static MUL_PLUS_INDEX_ALL_AXES: ElementwiseKernel = ElementwiseKernel::new(
    "mul_plus_index_all_axes",
    "T x, T y",
    "T w",
    "",
    "w = x * y + (T)i;",
)
.with_reduce_dims(false);

/// Every kernel of this module.
pub fn all() -> Vec<ElementwiseKernel> {
    vec![
        SHIFT_I64,
        SGD_STEP,
        AXPY,
        RAW_PLUS,
        SUM_AND_DIFF,
        IOTA,
        MUL_PLUS_INDEX,
        MUL_PLUS_INDEX_ALL_AXES,
    ]
}
