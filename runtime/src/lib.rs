//! kusari: define differentiable operations in Rust.
//!
//! The model is Chainer's: a [`FunctionNode`] computes outputs from input arrays in `forward` and
//! input gradients from output gradients in `backward`; applying it to [`Variable`]s records a
//! graph that [`Variable::backward`] and [`grad`] walk back. Backward passes are written with
//! differentiable functions (the [`functions`] module and the operators on `&Variable`), so
//! gradients can be differentiated again.
//!
//! ```
//! use kusari::prelude::*;
//! # fn main() -> Result<()> {
//! let x = Variable::new(Array::from_vec(vec![1.0f64, 2.0, 3.0], &[3])?);
//! let y = F::sum(&(&x * &x)?)?;          // y = Σ x²
//! y.backward()?;
//! assert_eq!(x.grad().unwrap().array().to_vec::<f64>()?, vec![2.0, 4.0, 6.0]);
//! # Ok(()) }
//! ```

mod array;
mod builtin_kernels;
pub mod config;
mod cpu;
#[cfg_attr(not(feature = "cuda"), path = "cuda_stub.rs")]
pub mod cuda;
mod device;
mod dtype;
mod elementwise_kernel;
pub mod env;
mod error;
pub mod functions;
pub mod gradient_check;
mod graph;
mod launch_plan;
mod layout;
pub mod link;
#[doc(hidden)]
pub mod macro_support;
pub mod memory;
#[cfg(feature = "nccl")]
pub mod nccl;
mod op;
mod ops_macros;
pub mod prelude;
pub mod random;
mod raw_kernel;
mod reduction_kernel;
mod scalar;
mod storage;
mod sync;
pub mod testing;
mod window;

pub use array::{Array, IndicesOrSections, Ix, WeakArray};
pub use config::{DeviceGuard, default_device, using_device};
pub use device::{Device, ParseDeviceError};
pub use dtype::{DType, Element, FloatElement, NumElement};
pub use elementwise_kernel::{ElementwiseKernel, KernelArg, KernelCall, array_kernels};
pub use error::{Error, Result};
pub use functions::{ElementwiseOp, Fused, FusedFn, FusedOutputs, fuse};
pub use graph::{
    BackwardContext, BackwardOptions, Formula, ForwardContext, Function, FunctionNode, GradOptions,
    GradOutputs, GradReadyHook, InputMeta, Variable, apply, grad,
};
pub use kusari_kernels as kernels;
pub use kusari_kernels::{ReductionDef, intern};
pub use kusari_macros::function_node;
pub use launch_plan::{CachedVariant, LaunchPlan};
pub use raw_kernel::{Dim3, RawKernel, RawModule};
pub use reduction_kernel::{ReductionKernel, array_reduction_kernels};
pub use scalar::Scalar;
// The derive and the trait share the name, as serde's do: `#[derive(Link)]` implements `Link`.
pub use kusari_macros::Link;
pub use link::Link;
