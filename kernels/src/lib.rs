//! kusari's elementwise kernels, CuPy's `ElementwiseKernel` in Rust.
//!
//! - [`signature`]: the signature grammar, which the `#[function_node]` macro runs at compile time
//!   and the runtime runs again at launch, so the two never disagree about what a signature means.
//! - [`names`]: the names a kernel and its parameters may have (C identifiers that the generated
//!   code can use), shared by the macro and the runtime like the grammar.
//! - [`body`]: the check that a kernel's body balances its brackets, so that it cannot close the
//!   kernel's function and define code at file scope.
//! - [`codegen`]: CUDA source for a kernel, a pure function of signature, body and types.
//! - [`reduction`](mod@reduction): CUDA source for row reductions (sum, max, min), a pure function of the
//!   reduction and the element type.
//! - [`cache`]: the on-disk and in-memory cache of compiled kernels.
//! - [`grid`]: the grid of an elementwise launch, from the element count and the SM count.
//! - [`upload`]: the per-device upload cache of loaded modules.
//! - `compile` (feature `nvrtc`): NVRTC compilation of that source to PTX or to a device's cubin,
//!   without a GPU.

pub mod body;
pub mod cache;
pub mod codegen;
#[cfg(feature = "nvrtc")]
pub mod compile;
pub mod grid;
pub mod names;
pub mod reduction;
pub mod signature;
pub mod upload;

pub use reduction::{reduction, ReductionKind, REDUCTION_BLOCK};

pub use signature::{
    ElementwiseSignature, Param, ParamType, ScalarType, SignatureError, SignatureList,
};
