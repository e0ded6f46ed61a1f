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
mod backward;
pub mod config;
mod cpu;
#[cfg_attr(not(feature = "cuda"), path = "cuda_stub.rs")]
pub mod cuda;
mod device;
mod dtype;
mod error;
mod fallback;
mod function;
mod function_node;
pub mod functions;
pub mod gradient_check;
mod kernel;
mod layout;
pub mod link;
#[doc(hidden)]
pub mod macro_support;
pub mod memory;
mod op;
mod ops_macros;
pub mod prelude;
pub mod random;
mod storage;
mod sync;
pub mod testing;
mod variable;

pub use array::{Array, WeakArray};
pub use backward::{grad, BackwardOptions, GradOptions};
pub use device::{default_device, using_device, Device, DeviceGuard};
pub use dtype::{DType, Element, FloatElement, NumElement};
pub use error::{Error, Result};
pub use function::Function;
pub use function_node::{apply, BackwardContext, ForwardContext, FunctionNode};
pub use kernel::{array_kernels, ElementwiseKernel};
pub use kusari_kernels as kernels;
pub use kusari_macros::function_node;
// The derive and the trait share the name, as serde's do: `#[derive(Link)]` implements `Link`.
pub use kusari_macros::Link;
pub use link::Link;
pub use variable::Variable;
