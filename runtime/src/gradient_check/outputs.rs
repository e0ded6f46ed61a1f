//! What a checked function may return ([`IntoOutputs`]): one output or several.

use crate::{Array, Variable};

/// What a checked function may return: one output or several. Implemented for [`Variable`]
/// (for [`check_backward`](super::check_backward)) and [`Array`] (for [`numerical_grad`](super::numerical_grad)), alone, in a `Vec`, in an
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
