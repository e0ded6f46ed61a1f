//! Built-in differentiable functions (Chainer's `chainer.functions`), conventionally imported as
//! `F` (`use kusari::prelude::*` does this).
//!
//! Every backward here is written with these same functions, so gradients of gradients work.
//! The elementwise ones are declared with `#[function_node]` (their node types, such as [`Exp`],
//! are exported too, with a typed `apply`); the others say in a comment why the macro does not
//! fit them yet.
//! Broadcasting binary functions sum their gradients back to each input's shape.

mod arithmetic;
mod array_ops;
mod dropout;
mod linear;
mod loss;
mod math;
mod operators;
mod reduction;

pub use arithmetic::{
    add, add_scalar, div, div_scalar, maximum, mul, mul_scalar, neg, pow, pow_scalar, rdiv_scalar,
    rsub_scalar, sub, sub_scalar, where_,
};
pub use arithmetic::{
    AddConstant, Div, DivFromConstant, Maximum, Mul, MulConstant, Neg, Pow, PowConstant,
    SubFromConstant,
};
pub use array_ops::{astype, broadcast_to, expand_dims, reshape, squeeze, sum_to, transpose};
pub use dropout::dropout;
pub use linear::{linear, matmul};
pub use loss::{log_softmax, select_item, softmax, softmax_cross_entropy};
pub use math::{exp, log, relu, sigmoid, sqrt, tanh, Exp, Log, Relu, Sigmoid, Sqrt, Tanh};
pub use reduction::{max, mean, min, sum, sum_axes};

use crate::error::Result;
use crate::kernel::ElementwiseKernel;

/// Every CUDA kernel of the built-in functions (those declared with `#[function_node]` and a
/// `#[forward_gpu(..)]` kernel), so that a test can compile each one with NVRTC.
pub fn kernels() -> Vec<ElementwiseKernel> {
    [
        Exp::KERNELS,
        Log::KERNELS,
        Sqrt::KERNELS,
        Tanh::KERNELS,
        Sigmoid::KERNELS,
        Relu::KERNELS,
        Neg::KERNELS,
        Mul::KERNELS,
        Div::KERNELS,
        Pow::KERNELS,
        Maximum::KERNELS,
        AddConstant::KERNELS,
        MulConstant::KERNELS,
        SubFromConstant::KERNELS,
        DivFromConstant::KERNELS,
        PowConstant::KERNELS,
    ]
    .concat()
}
use crate::graph::{apply, FunctionNode};
use crate::Variable;

/// Applies a single-output function and returns its output.
pub(crate) fn apply1(f: impl FunctionNode, inputs: &[&Variable]) -> Result<Variable> {
    Ok(apply(f, inputs)?.swap_remove(0))
}

/// The gradient of the only output of a single-output function (backward only runs when at
/// least one output gradient is present).
pub(crate) fn only(gys: &[Option<Variable>]) -> &Variable {
    gys[0]
        .as_ref()
        .expect("backward runs only with a gradient present")
}
