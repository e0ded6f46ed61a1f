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

mod activation;
mod apply;
mod arithmetic;
mod array_ops;
mod conv;
mod dropout;
mod elementwise_op;
mod fuse;
mod indexing;
mod layer_normalization;
mod linear;
mod loss;
mod math;
mod normalization;
mod operators;
mod pooling;
mod reduction;

pub use activation::{Absolute, absolute, clip, elu, gelu, leaky_relu, softplus, swish};
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
pub use conv::{
    ConvOptions, Dims, convolution_2d, convolution_nd, deconvolution_2d, deconvolution_nd,
};
pub use dropout::dropout;
pub use elementwise_op::ElementwiseOp;
pub use fuse::{Fused, FusedFn, FusedOutputs, fuse};
pub use indexing::{concat, embed_id, get_item, pad, split_axis, stack};
pub use layer_normalization::layer_normalization;
pub use linear::{linear, matmul};
pub use loss::{log_softmax, select_item, softmax, softmax_cross_entropy};
pub use math::{
    Cos, Erf, Exp, ExpM1, Log, Log1p, Pow, Relu, Sigmoid, Sin, Sqrt, Tanh, cos, erf, exp, expm1,
    log, log1p, pow, relu, sigmoid, sin, sqrt, tanh,
};
pub use normalization::{
    batch_normalization, batch_normalization_stats, fixed_batch_normalization,
};
pub use pooling::{
    PoolOptions, average_pooling_2d, average_pooling_nd, max_pooling_2d, max_pooling_nd,
};
pub use reduction::{max, max_axes, mean, mean_axes, min, min_axes, sum, sum_axes};
