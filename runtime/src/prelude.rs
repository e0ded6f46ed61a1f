//! What a user writing an op or a model needs: `use kusari::prelude::*;`.

pub use crate::backward::{grad, BackwardOptions, GradOptions};
pub use crate::config::{no_backprop_mode, using_train};
pub use crate::function::Function;
pub use crate::function_node::{apply, BackwardContext, ForwardContext, FunctionNode, InputMeta};
pub use crate::functions as F;
pub use crate::gradient_check;
pub use crate::link::{Link, Parameter};
pub use crate::random::Rng;
pub use crate::{Array, DType, Device, Error, Result, Variable};
pub use kusari_macros::{function_node, Link};
