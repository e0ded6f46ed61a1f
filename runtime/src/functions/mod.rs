//! Built-in differentiable functions (Chainer's `chainer.functions`), conventionally imported as
//! `F` (`use kusari::prelude::*` does this).
//!
//! Every backward here is written with these same functions, so gradients of gradients work.
//! The functions are declared with `#[function_node]` (the elementwise ones' node types, such
//! as [`Exp`], are exported too, with a typed `apply`); the two that are not, `LinearFunction`
//! and `AsType`, say in a comment why the macro does not fit them. A forward calls the array
//! operations, which pick the device (and on CUDA run their own kernels), so no function here
//! declares a kernel of its own. Broadcasting binary functions sum their gradients back to
//! each input's shape, which they retain as `meta(..)` (shape and dtype, no data).

mod apply;
mod arithmetic;
mod array_ops;
mod dropout;
mod indexing;
mod linear;
mod loss;
mod math;
mod operators;
mod reduction;

pub(crate) use apply::{apply1, needed, only};
pub use arithmetic::{
    Add, AddConstant, Div, DivFromConstant, Maximum, Mul, MulConstant, Neg, PowConstant, Sub,
    SubFromConstant,
};
pub use arithmetic::{
    add, add_scalar, div, div_scalar, maximum, mul, mul_scalar, neg, pow_scalar, rdiv_scalar,
    rsub_scalar, sub, sub_scalar, where_,
};
pub use array_ops::{astype, broadcast_to, expand_dims, reshape, squeeze, sum_to, transpose};
pub use dropout::dropout;
pub use indexing::{concat, embed_id, get_item, pad, split_axis, stack};
pub use linear::{linear, matmul};
pub use loss::{log_softmax, select_item, softmax, softmax_cross_entropy};
pub use math::{
    Erf, Exp, ExpM1, Log, Log1p, Pow, Relu, Sigmoid, Sqrt, Tanh, erf, exp, expm1, log, log1p, pow,
    relu, sigmoid, sqrt, tanh,
};
pub use reduction::{max, max_axes, mean, mean_axes, min, min_axes, sum, sum_axes};
