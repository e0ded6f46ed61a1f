//! kusari's elementwise kernels, CuPy's `ElementwiseKernel` in Rust.
//!
//! - [`signature`]: the signature grammar, which the `#[function_node]` macro runs at compile time
//!   and the runtime runs again at launch, so the two never disagree about what a signature means.
//! - [`names`]: the names a kernel and its parameters may have (C identifiers that the generated
//!   code can use), shared by the macro and the runtime like the grammar.
//! - [`body`]: the check that a kernel's body balances its brackets, so that it cannot close the
//!   kernel's function and define code at file scope.
//! - [`expr`]: the expression language of elementwise bodies, in which a body can be
//!   differentiated (reverse mode, into a backward body), evaluated and written back as CUDA.
//! - [`elementwise`]: a kernel's definition (name, signature lists, body), the check of all of it,
//!   and the binding of its type placeholders to the element types of a launch's arrays.
//! - [`loop_plan`]: the loop a launch runs (its shape and the contiguous or strided variant), a
//!   pure function of the inputs' shapes and contiguity.
//! - [`codegen`]: CUDA source for a kernel, a pure function of signature, body and types.
//! - [`reduction`]: a reduction kernel (CuPy's `ReductionKernel`; the runtime's own
//!   `sum`, `max`, `min` and `mean` are ones too): its definition and checks, the plan of a
//!   launch from the shape, and its CUDA source.
//! - [`raw`]: raw kernels (CuPy's `RawKernel`/`RawModule`): a user's own CUDA source with its
//!   compile options, and the parser of its kernels' parameter lists that launches check against.
//! - [`cache`]: the on-disk and in-memory cache of compiled kernels.
//! - [`grid`]: the grid of an elementwise launch, from the element count and the SM count.
//! - [`atomic_file`]: files written atomically beside their target, and the cleanup of the
//!   temporary files a killed writer left (the kernel cache's and kusari's checkpoints).
//! - [`interner`]: strings kept for the life of the process, one copy per text, for
//!   definitions built at run time.
//! - [`stats`]: the counters of compiles, cache hits, module loads and launches.
//! - [`upload`]: the per-device upload cache of loaded modules.
//! - [`compile_error`](mod@compile_error): why a kernel did not compile (in every build, so errors can carry it).
//! - `compile` (feature `nvrtc`): NVRTC compilation of that source to PTX or to a device's cubin,
//!   without a GPU.

pub mod atomic_file;
pub mod body;
pub mod cache;
pub mod codegen;
#[cfg(feature = "nvrtc")]
pub mod compile;
pub mod compile_error;
pub mod elementwise;
pub mod env;
pub mod expr;
pub mod grid;
pub mod interner;
pub mod launch_limits;
pub mod loop_plan;
pub mod names;
pub mod raw;
pub mod reduction;
pub mod signature;
pub mod stats;
pub mod upload;

pub use compile_error::CompileError;
pub use elementwise::{ArgumentError, ElementwiseDef, InputArg, InvalidKernel};
pub use interner::intern;
pub use reduction::ReductionDef;

/// The module [`reduction`] under its former name.
#[deprecated(since = "0.2.0", note = "renamed `kusari_kernels::reduction`")]
pub mod reduction_kernel {
    pub use crate::reduction::*;
}

pub use stats::KernelStats;

pub use signature::{
    ElementwiseSignature, Param, ParamType, ScalarType, SignatureError, SignatureList,
};
