//! CUDA source for row reductions: `out[r]` is the sum, maximum or minimum of row `r` of a
//! C-contiguous `[rows, len]` array. A pure function of the reduction and the element type.
//!
//! Two kernels per reduction and type: [`reduction`], one block per row, and
//! [`reduction_chunks`], one block per chunk of a row, writing partial results that
//! [`reduction`] then reduces. The runtime uses the second as a first pass when there are too
//! few rows to fill the device (a full sum is one row), so that a reduction of everything runs
//! on every SM rather than one.
//!
//! The kernel's signature is
//!
//! ```text
//! extern "C" __global__ void kusari_reduce_{sum|max|min}_{dtype}(
//!     const T* __restrict__ in, T* __restrict__ out, const long long rows, const long long len)
//! ```
//!
//! - One block per row, in a grid-stride loop over rows (any grid size works; `rows` blocks is
//!   the natural one, capped as the caller likes). Launch it with exactly [`REDUCTION_BLOCK`]
//!   threads per block: the shared buffer and the tree are sized for that.
//! - Each thread folds a strided slice of the row, then a shared-memory tree combines the 256
//!   partial results; `__syncthreads()` separates the tree's steps and consecutive rows.
//! - `Sum` starts at zero, so an empty row (`len == 0`) sums to 0. Integer sums wrap on overflow
//!   (computed in the unsigned type, so the wrap is defined behaviour), float sums are in the
//!   element type.
//! - `Max` and `Min` start from the row's first element: the caller must not launch them with
//!   `len == 0`. They propagate NaN like NumPy: one NaN in a row makes its result NaN, in the
//!   per-thread fold and in the tree alike.
//! - Element types: `int32`, `int64`, `float32`, `float64`. Half types are converted to `float32`
//!   by the caller first; `bool` is not reducible.
//!
//! ```
//! use kusari_kernels::reduction::{reduction, ReductionKind};
//! use kusari_kernels::ScalarType;
//! let src = reduction(ReductionKind::Max, ScalarType::Float32).unwrap();
//! assert_eq!(src.entry, "kusari_reduce_max_float32");
//! assert!(reduction(ReductionKind::Sum, ScalarType::Bool).is_err());
//! ```

use std::fmt::{self, Write};

use crate::codegen::{c_type, CodegenError, KernelSource};
use crate::signature::ScalarType;

/// Threads per block of every reduction launch (and the size of its shared buffer).
pub const REDUCTION_BLOCK: u32 = 256;

/// What a reduction computes per row.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub enum ReductionKind {
    /// The sum (0 for an empty row).
    Sum,
    /// The maximum, NaN if the row has a NaN.
    Max,
    /// The minimum, NaN if the row has a NaN.
    Min,
}

impl ReductionKind {
    /// Every kind.
    pub const ALL: [ReductionKind; 3] =
        [ReductionKind::Sum, ReductionKind::Max, ReductionKind::Min];

    /// `sum`, `max` or `min`, as in the entry point's name.
    pub fn name(self) -> &'static str {
        match self {
            ReductionKind::Sum => "sum",
            ReductionKind::Max => "max",
            ReductionKind::Min => "min",
        }
    }
}

impl fmt::Display for ReductionKind {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(self.name())
    }
}

/// The element types [`reduction`] accepts.
pub const REDUCIBLE_TYPES: [ScalarType; 4] = [
    ScalarType::Int32,
    ScalarType::Int64,
    ScalarType::Float32,
    ScalarType::Float64,
];

/// The entry point's name: `kusari_reduce_{kind}_{dtype}`, e.g. `kusari_reduce_sum_float32`.
pub fn reduction_entry(kind: ReductionKind, t: ScalarType) -> String {
    format!("kusari_reduce_{}_{}", kind.name(), t.name())
}

/// The CUDA source of the `kind` reduction over rows of `t` elements (see the module docs for the
/// kernel's signature and launch shape). An error, naming the type, for `bool`, `float16` and
/// `bfloat16`.
pub fn reduction(kind: ReductionKind, t: ScalarType) -> Result<KernelSource, CodegenError> {
    source(kind, t, Split::Rows)
}

/// The entry point of the chunked reduction: `kusari_reduce_{kind}_{dtype}_chunks`.
pub fn chunked_entry(kind: ReductionKind, t: ScalarType) -> String {
    format!("{}_chunks", reduction_entry(kind, t))
}

/// The first pass of a reduction of few, long rows: one block per `chunk` consecutive elements
/// of a row, so that a full sum spreads over the whole device instead of one block.
///
/// ```text
/// extern "C" __global__ void kusari_reduce_{sum|max|min}_{dtype}_chunks(
///     const T* __restrict__ in, T* __restrict__ out, const long long rows,
///     const long long len, const long long chunk)
/// ```
///
/// With `chunks = ceil(len / chunk)`, block `b` (grid-stride, any grid) reduces elements
/// `[c * chunk, min(len, (c + 1) * chunk))` of row `r`, where `b = r * chunks + c`, into
/// `out[b]`: `out` is the `[rows, chunks]` array of partial results, which [`reduction`]'s row
/// kernel then reduces. `chunk` must be at least 1, and Max/Min need `len >= 1` (every chunk is
/// then non-empty). Launch with [`REDUCTION_BLOCK`] threads per block.
pub fn reduction_chunks(kind: ReductionKind, t: ScalarType) -> Result<KernelSource, CodegenError> {
    source(kind, t, Split::Chunks)
}

/// How a reduction kernel divides its work among blocks.
#[derive(Clone, Copy, PartialEq, Eq)]
enum Split {
    /// One block per row.
    Rows,
    /// One block per chunk of a row.
    Chunks,
}

fn source(kind: ReductionKind, t: ScalarType, split: Split) -> Result<KernelSource, CodegenError> {
    // The unsigned type integer sums are computed in, so that overflow wraps.
    let wrap = match t {
        ScalarType::Int32 => Some("unsigned int"),
        ScalarType::Int64 => Some("unsigned long long"),
        ScalarType::Float32 | ScalarType::Float64 => None,
        ScalarType::Bool => {
            return Err(CodegenError::UnsupportedType {
                what: format!("reduction {kind}"),
                ty: t,
                hint: "convert it to int32 or int64 first",
            })
        }
        ScalarType::Float16 | ScalarType::BFloat16 => {
            return Err(CodegenError::UnsupportedType {
                what: format!("reduction {kind}"),
                ty: t,
                hint: "convert it to float32 first",
            })
        }
    };
    let entry = match split {
        Split::Rows => reduction_entry(kind, t),
        Split::Chunks => chunked_entry(kind, t),
    };
    // `combine(a, v)`: the accumulator `a` folded with the value `v`.
    let combine = |a: &str, v: &str| match (kind, wrap) {
        (ReductionKind::Sum, Some(u)) => format!("(T)(({u}){a} + ({u}){v})"),
        (ReductionKind::Sum, None) => format!("{a} + {v}"),
        // `v != v`: v is NaN (always false for integers); a NaN `a` stays, as `v > NaN` is false.
        (ReductionKind::Max, _) => format!("({v} != {v} || {v} > {a}) ? {v} : {a}"),
        (ReductionKind::Min, _) => format!("({v} != {v} || {v} < {a}) ? {v} : {a}"),
    };
    let block = REDUCTION_BLOCK;
    // The loop over a block's work items, the first and end index of the elements of `row` its
    // thread `t` folds, and the element Max/Min start from.
    let (params, items, range, first) = match split {
        Split::Rows => (
            "const long long rows, const long long len",
            "  for (long long r = blockIdx.x; r < rows; r += gridDim.x) {\n    const T* row = in + r * len;\n".to_string(),
            ("t", "len"),
            "row[0]",
        ),
        Split::Chunks => (
            "const long long rows, const long long len, const long long chunk",
            "  const long long chunks = (len + chunk - 1) / chunk;\n  \
             for (long long r = blockIdx.x; r < rows * chunks; r += gridDim.x) {\n    \
             const T* row = in + (r / chunks) * len;\n    \
             const long long begin = (r % chunks) * chunk;\n    \
             const long long end = begin + chunk < len ? begin + chunk : len;\n"
                .to_string(),
            ("begin + t", "end"),
            "row[begin]",
        ),
    };
    let init = match kind {
        ReductionKind::Sum => "(T)0",
        ReductionKind::Max | ReductionKind::Min => first,
    };

    let mut src = String::new();
    let what = match split {
        Split::Rows => "row reduction",
        Split::Chunks => "chunked row reduction (first pass)",
    };
    let _ = writeln!(src, "// kusari {what}: {kind} over {t} ({entry})");
    let _ = writeln!(
        src,
        "// launch with {block} threads per block; any number of blocks"
    );
    let _ = writeln!(src, "typedef {} T;", c_type(t));
    let _ = writeln!(src, "extern \"C\" __global__ void {entry}(const T* __restrict__ in, T* __restrict__ out, {params}) {{");
    let _ = writeln!(src, "  __shared__ T buf[{block}];");
    let _ = writeln!(src, "  const unsigned int t = threadIdx.x;");
    src.push_str(&items);
    let _ = writeln!(src, "    T acc = {init};");
    let _ = writeln!(
        src,
        "    for (long long j = {}; j < {}; j += {block}) {{",
        range.0, range.1
    );
    let _ = writeln!(src, "      const T v = row[j];");
    let _ = writeln!(src, "      acc = {};", combine("acc", "v"));
    let _ = writeln!(src, "    }}");
    let _ = writeln!(src, "    buf[t] = acc;");
    let _ = writeln!(src, "    __syncthreads();");
    let _ = writeln!(
        src,
        "    for (unsigned int s = {}; s > 0; s >>= 1) {{",
        block / 2
    );
    let _ = writeln!(src, "      if (t < s) {{");
    let _ = writeln!(src, "        const T a = buf[t];");
    let _ = writeln!(src, "        const T v = buf[t + s];");
    let _ = writeln!(src, "        buf[t] = {};", combine("a", "v"));
    let _ = writeln!(src, "      }}");
    let _ = writeln!(src, "      __syncthreads();");
    let _ = writeln!(src, "    }}");
    let _ = writeln!(src, "    if (t == 0) out[r] = buf[0];");
    let _ = writeln!(
        src,
        "    __syncthreads();  // buf[0] is read before the next row overwrites buf"
    );
    let _ = writeln!(src, "  }}");
    let _ = writeln!(src, "}}");
    Ok(KernelSource { entry, source: src })
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn entry_names_and_signature() {
        for kind in ReductionKind::ALL {
            for t in REDUCIBLE_TYPES {
                let src = reduction(kind, t).unwrap();
                assert_eq!(src.entry, format!("kusari_reduce_{kind}_{t}"));
                assert!(src.source.contains(&format!(
                    "extern \"C\" __global__ void {}(const T* __restrict__ in, T* __restrict__ out, const long long rows, const long long len) {{",
                    src.entry
                )), "{}", src.source);
                assert!(src.source.contains(&format!("typedef {} T;", c_type(t))));
                assert!(src.source.contains("__shared__ T buf[256];"));
                assert!(src
                    .source
                    .contains("for (long long r = blockIdx.x; r < rows; r += gridDim.x)"));
            }
        }
        assert_eq!(
            reduction(ReductionKind::Sum, ScalarType::Float64)
                .unwrap()
                .entry,
            "kusari_reduce_sum_float64"
        );
        assert_eq!(
            reduction(ReductionKind::Min, ScalarType::Int64)
                .unwrap()
                .entry,
            "kusari_reduce_min_int64"
        );
        assert_eq!(REDUCTION_BLOCK, 256);
    }

    #[test]
    fn sum_starts_at_zero_and_integer_sums_wrap_in_unsigned() {
        let f = reduction(ReductionKind::Sum, ScalarType::Float32).unwrap();
        assert!(f.source.contains("T acc = (T)0;"));
        assert!(f.source.contains("acc = acc + v;"));
        let i = reduction(ReductionKind::Sum, ScalarType::Int32).unwrap();
        assert!(i
            .source
            .contains("acc = (T)((unsigned int)acc + (unsigned int)v);"));
        let l = reduction(ReductionKind::Sum, ScalarType::Int64).unwrap();
        assert!(l.source.contains("(unsigned long long)acc"));
    }

    #[test]
    fn max_and_min_start_at_the_first_element_and_propagate_nan_in_the_tree_too() {
        let max = reduction(ReductionKind::Max, ScalarType::Float64).unwrap();
        assert!(max.source.contains("T acc = row[0];"));
        assert!(max.source.contains("acc = (v != v || v > acc) ? v : acc;"));
        assert!(max.source.contains("buf[t] = (v != v || v > a) ? v : a;"));
        let min = reduction(ReductionKind::Min, ScalarType::Float32).unwrap();
        assert!(min.source.contains("acc = (v != v || v < acc) ? v : acc;"));
        assert!(min.source.contains("buf[t] = (v != v || v < a) ? v : a;"));
    }

    #[test]
    fn every_step_is_separated_by_a_barrier_including_between_rows() {
        let src = reduction(ReductionKind::Sum, ScalarType::Float32)
            .unwrap()
            .source;
        assert_eq!(src.matches("__syncthreads();").count(), 3, "{src}");
        let after_write = src.find("out[r] = buf[0];").unwrap();
        assert!(src[after_write..].contains("__syncthreads();"));
    }

    #[test]
    fn the_chunked_pass_reduces_one_chunk_of_a_row_per_block_into_the_partials() {
        for kind in ReductionKind::ALL {
            for t in REDUCIBLE_TYPES {
                let src = reduction_chunks(kind, t).unwrap();
                assert_eq!(src.entry, format!("kusari_reduce_{kind}_{t}_chunks"));
                let s = &src.source;
                assert!(s.contains(&format!(
                    "void {}(const T* __restrict__ in, T* __restrict__ out, const long long rows, const long long len, const long long chunk) {{",
                    src.entry
                )), "{s}");
                assert!(s.contains("const long long chunks = (len + chunk - 1) / chunk;"));
                assert!(
                    s.contains("for (long long r = blockIdx.x; r < rows * chunks; r += gridDim.x)")
                );
                assert!(s.contains("const T* row = in + (r / chunks) * len;"));
                assert!(s.contains("const long long begin = (r % chunks) * chunk;"));
                assert!(
                    s.contains("const long long end = begin + chunk < len ? begin + chunk : len;")
                );
                assert!(s.contains("for (long long j = begin + t; j < end; j += 256)"));
                // Block r writes partial r: row r / chunks, chunk r % chunks.
                assert!(s.contains("if (t == 0) out[r] = buf[0];"));
                assert_eq!(s.matches("__syncthreads();").count(), 3, "{s}");
                let init = match kind {
                    ReductionKind::Sum => "T acc = (T)0;",
                    _ => "T acc = row[begin];",
                };
                assert!(s.contains(init), "{s}");
            }
        }
        assert!(reduction_chunks(ReductionKind::Sum, ScalarType::Float16).is_err());
    }

    #[test]
    fn unsupported_types_are_errors_naming_the_type() {
        for kind in ReductionKind::ALL {
            let e = reduction(kind, ScalarType::Float16)
                .unwrap_err()
                .to_string();
            assert!(e.contains("float16") && e.contains("float32"), "{e}");
            let e = reduction(kind, ScalarType::BFloat16)
                .unwrap_err()
                .to_string();
            assert!(e.contains("bfloat16"), "{e}");
            let e = reduction(kind, ScalarType::Bool).unwrap_err().to_string();
            assert!(e.contains("bool") && e.contains("int32 or int64"), "{e}");
        }
    }
}
