//! [`ElementwiseKernel`]: a CUDA elementwise kernel as `#[function_node]`'s `#[forward_gpu(..)]`
//! declares it (CuPy's `ElementwiseKernel`), run over arrays. Its definition, its checks and the
//! binding of its type placeholders are the kernel layer's ([`kusari_kernels::ElementwiseDef`]);
//! the launch is the storage layer's.
//!
//! - `kernel.rs`: the kernel as written ([`ElementwiseKernel`]) and the built-in kernels
//!   ([`array_kernels`]);
//! - `call.rs`: one launch with everything CuPy's kernel call takes ([`KernelCall`],
//!   [`KernelArg`]), and the kernel's methods that launch it.

mod call;
mod kernel;

pub use call::{KernelArg, KernelCall};
pub use kernel::{ElementwiseKernel, array_kernels};
