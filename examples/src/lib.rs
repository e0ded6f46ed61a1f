//! The tutorial "Define your own function", written with kusari: one example per concept,
//! run with `cargo run --example <name>` (see this package's `Cargo.toml` for the list).
//!
//! This library holds the ops the examples declare, a module per example named after it (the
//! example `muladd`, `01_muladd.rs`, applies the ops of [`muladd`]), so that the examples and
//! the integration tests in `tests/` use the same ops. It also holds what the examples share:
//! comparing arrays within a tolerance, picking the GPU when there is one, and for the training
//! example, the handwritten-digits data set, a progress bar over epochs and a loss plot.
//!
//! | example | module | its ops |
//! |---|---|---|
//! | `01_muladd.rs` | [`muladd`] | `MulAdd` with `forward_cpu` and `forward_gpu` |
//! | `02_muladd_unified.rs` | [`muladd_unified`] | `MulAdd` with one `forward` |
//! | `03_expadd.rs` | [`expadd`] | `ExpAdd`, differentiable twice |
//! | `04_muladd_kernel.rs` | [`muladd_kernel`] | `MulAdd` and `MulAddGrad` with `T` kernels |
//! | `05_dropout_train_test.rs` | [`dropout_train_test`] | `Dropout` and the mode-aware `dropout` |
//! | `06_linear.rs` | [`linear`] | `LinearFunction` |
//! | `07_muladd_by_hand.rs` | [`muladd_by_hand`] | `MulAdd`, a `FunctionNode` by hand |
//! | `08_old_style.rs` | [`old_style`] | `MulAdd` as an old-style `Function` |
//! | `09_affine_any_device.rs` | — | built-in functions only |
//! | `10_muladd_kernel_float32.rs` | [`muladd_kernel_float32`] | the same with `float32` kernels |
//! | `11_mlp_digits.rs` | [`mlp_digits`] | `LeakyRelu`, the `Mlp` model and its training |
//! | `12_softmax.rs` | [`softmax`] | `Softmax`, with `ReductionKernel`s in its `forward_gpu` |

use kusari::{Device, Result};

pub mod classify;
pub mod cnn_digits;
pub mod dropout_train_test;
pub mod expadd;
pub mod linear;
pub mod mlp_digits;
pub mod muladd;
pub mod muladd_by_hand;
pub mod muladd_kernel;
pub mod muladd_kernel_float32;
pub mod muladd_unified;
pub mod old_style;
pub mod softmax;

mod digits;
mod progress;

pub use digits::{Digits, shuffled};
pub use progress::{epoch_bar, save_loss_curve};

/// `cuda:0` when kusari finds a CUDA device (a GPU, or the emulated device under
/// `KUSARI_CUDA_EMULATE=1`), else the host after saying why. Under `KUSARI_REQUIRE_GPU` a
/// missing device is an error, so that CI cannot pass an example's GPU path without running it.
pub fn gpu_or_host() -> Result<Device> {
    Ok(kusari::testing::cuda_or_skip("the example's GPU path")?.unwrap_or(Device::Cpu))
}

/// The README's code blocks, compiled and run as doc tests so that they stay correct.
#[doc = include_str!("../../README.md")]
#[cfg(doctest)]
pub struct ReadmeDoctests;

// The guide's chapters that hold Rust blocks (docs/guide/), compiled and run the same way; a
// new chapter with Rust blocks gets its struct here.

/// The guide's chapter "Arrays and variables".
#[doc = include_str!("../../docs/guide/arrays-and-variables.md")]
#[cfg(doctest)]
pub struct GuideArraysAndVariables;

/// The guide's chapter "Declaring ops".
#[doc = include_str!("../../docs/guide/declaring-ops.md")]
#[cfg(doctest)]
pub struct GuideDeclaringOps;

/// The guide's chapter "One formula: ops whose backward is derived".
#[doc = include_str!("../../docs/guide/one-formula.md")]
#[cfg(doctest)]
pub struct GuideOneFormula;

/// The guide's chapter "Higher-order gradients and configuration".
#[doc = include_str!("../../docs/guide/gradients-and-configuration.md")]
#[cfg(doctest)]
pub struct GuideGradientsAndConfiguration;

/// The guide's chapter "Testing ops".
#[doc = include_str!("../../docs/guide/testing-ops.md")]
#[cfg(doctest)]
pub struct GuideTestingOps;

/// The guide's chapter "Links, optimizers and training".
#[doc = include_str!("../../docs/guide/links-and-training.md")]
#[cfg(doctest)]
pub struct GuideLinksAndTraining;

/// The guide's chapter "Convolutional networks".
#[doc = include_str!("../../docs/guide/convolutional-networks.md")]
#[cfg(doctest)]
pub struct GuideConvolutionalNetworks;

/// The guide's chapter "GPUs".
#[doc = include_str!("../../docs/guide/gpus.md")]
#[cfg(doctest)]
pub struct GuideGpus;
