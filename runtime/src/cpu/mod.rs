//! The CPU backend: buffers as `Vec`s per dtype, computed with loops over slices (vectorized math
//! in `math/`) and ndarray views.
//! Its operations (`ops.rs`) take buffers and layouts and return buffers; they never see `Array`.

mod batch_norm;
mod conv;
mod elementwise;
mod index;
mod linalg;
mod math;
mod ops;
pub(crate) mod pool;
mod reduce;
mod softmax;
mod storage;
pub(crate) mod threads;
mod window;

pub(crate) use elementwise::{PAR_MIN, map_slices, map1, map1_from, zip2, zip3};
pub(crate) use linalg::matmul;
pub(crate) use reduce::{into_c_vec, reduce};
pub(crate) use storage::{CpuRef, CpuStorage};
