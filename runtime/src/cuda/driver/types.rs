//! The types the drivers share: a device address, a driver call's result and a GEMM's
//! description. A leaf: the switch (`driver/mod.rs`) and both drivers below it (`real.rs`,
//! `emulated/`) import it, and it imports neither.

use crate::DType;

/// A device address (a host address on the emulated device).
pub(crate) type DevicePtr = u64;

/// The element type of a GEMM.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) enum GemmType {
    F32,
    F64,
}

impl GemmType {
    pub(crate) fn of(dtype: DType) -> Option<GemmType> {
        match dtype {
            DType::F32 => Some(GemmType::F32),
            DType::F64 => Some(GemmType::F64),
            _ => None,
        }
    }
}

/// cuBLAS's `{s,d}gemmStridedBatched`, column-major:
/// `C[p] = alpha op(A[p]) op(B[p]) + beta C[p]` for `p < batch`, where `op(A)` is `m × k`,
/// `op(B)` is `k × n`, matrix `p` of X starts `p * stride_x` elements after `x`, and element
/// `(i, j)` of a matrix with leading dimension `ld` is at `i + j * ld`.
#[derive(Clone, Copy, Debug)]
pub(crate) struct Gemm {
    pub(crate) dtype: GemmType,
    pub(crate) trans_a: bool,
    pub(crate) trans_b: bool,
    pub(crate) m: i32,
    pub(crate) n: i32,
    pub(crate) k: i32,
    pub(crate) alpha: f64,
    pub(crate) a: DevicePtr,
    pub(crate) lda: i32,
    pub(crate) stride_a: i64,
    pub(crate) b: DevicePtr,
    pub(crate) ldb: i32,
    pub(crate) stride_b: i64,
    pub(crate) beta: f64,
    pub(crate) c: DevicePtr,
    pub(crate) ldc: i32,
    pub(crate) stride_c: i64,
    pub(crate) batch: i32,
}

/// A driver call's failure: the driver's message.
pub(crate) type DriverResult<T> = std::result::Result<T, String>;
