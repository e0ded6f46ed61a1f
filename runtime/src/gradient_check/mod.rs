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

pub use allclose::{allclose, assert_allclose};
pub use check::{check_backward, check_double_backward, CheckOptions};
pub use numerical::{numerical_grad, numerical_grad_with, NumericalGradOptions};

use crate::{Array, Variable};

/// What a checked function may return: one output or several. Implemented for [`Variable`]
/// (for [`check_backward`]) and [`Array`] (for [`numerical_grad`]), alone, in a `Vec`, in an
/// array or in a pair.
///
/// ```
/// use kusari::gradient_check::IntoOutputs;
/// use kusari::{Array, DType};
/// let a = Array::zeros(&[2], DType::F32).unwrap();
/// assert_eq!(a.clone().into_outputs().len(), 1);
/// assert_eq!((a.clone(), a).into_outputs().len(), 2);
/// ```
pub trait IntoOutputs<T> {
    /// The outputs, in order.
    fn into_outputs(self) -> Vec<T>;
}

macro_rules! impl_into_outputs {
    ($t:ty) => {
        impl IntoOutputs<$t> for $t {
            fn into_outputs(self) -> Vec<$t> {
                vec![self]
            }
        }
        impl IntoOutputs<$t> for Vec<$t> {
            fn into_outputs(self) -> Vec<$t> {
                self
            }
        }
        impl<const N: usize> IntoOutputs<$t> for [$t; N] {
            fn into_outputs(self) -> Vec<$t> {
                self.into()
            }
        }
        impl IntoOutputs<$t> for ($t, $t) {
            fn into_outputs(self) -> Vec<$t> {
                vec![self.0, self.1]
            }
        }
    };
}

impl_into_outputs!(Variable);
impl_into_outputs!(Array);
