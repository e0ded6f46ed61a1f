//! What a user writing an op or a model needs: `use kusari::prelude::*;`.

pub use crate::config::{no_backprop_mode, using_train};
pub use crate::functions as F;
pub use crate::gradient_check;
pub use crate::graph::{
    BackwardContext, BackwardOptions, ForwardContext, Function, FunctionNode, GradOptions,
    GradOutputs, InputMeta, apply, grad,
};
pub use crate::link::{Link, Parameter};
pub use crate::random::Rng;
pub use crate::{Array, DType, Device, Error, Ix, Result, Variable};
pub use kusari_macros::{Link, function_node};
