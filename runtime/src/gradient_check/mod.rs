//! Proving a backward right: Chainer's `gradient_check` and `testing.assert_allclose`.
//!
//! - [`numerical_grad`] computes gradients by centred finite differences, in f64, and can detect
//!   that it sampled a point where the function is not differentiable.
//! - [`check_backward`] compares backward's gradients with finite differences along one random
//!   direction over every differentiated input and parameter (Chainer's directional-derivative
//!   method: one backward and four forward passes, whatever the inputs' sizes).
//! - [`check_double_backward`] does the same for the gradient of the gradient.
//! - [`assert_allclose`] compares two arrays of any dtypes on any devices and names the worst
//!   elements.
//!
//! Every check returns a [`Result`] instead of panicking, so a test ends with `?` and a failure
//! prints the numbers involved:
//!
//! ```
//! use kusari::prelude::*;
//! use kusari::gradient_check::{check_backward, CheckOptions};
//! # fn main() -> Result<()> {
//! let x = Array::from_vec(vec![0.5f32, -1.0, 2.0], &[3])?;
//! let gy = Array::from_vec(vec![1.0f32, 0.5, -2.0], &[3])?;
//! check_backward(|v| F::tanh(&v[0]), &[x], Some(&[gy]), &CheckOptions::default())?;
//! # Ok(()) }
//! ```

mod allclose;
mod check;
mod numerical;
mod outputs;

pub use allclose::{allclose, assert_allclose};
pub use check::{CheckOptions, check_backward, check_double_backward};
pub use numerical::{NumericalGradOptions, numerical_grad, numerical_grad_with};
pub use outputs::IntoOutputs;
