//! Shape and type changes: reshape, transpose, broadcast_to, sum_to, squeeze, expand_dims, astype.

use super::{apply1, only};
use crate::error::{Error, Result};
use crate::graph::{BackwardContext, ForwardContext, FunctionNode};
use crate::{Array, DType, InputMeta, Variable, function_node};

/// The same elements in another shape (the node of [`reshape`]).
struct Reshape {
    shape: Vec<usize>,
}

#[function_node(crate = "crate", name = "reshape_node")]
impl Reshape {
    fn new(shape: &[usize]) -> Self {
        Reshape {
            shape: shape.to_vec(),
        }
    }

    #[retain(meta(x))]
    fn forward(&self, x: &Array) -> Result<Array> {
        x.reshape(&self.shape)
    }

    fn backward(&self, x: &InputMeta, gy: &Variable) -> Result<Variable> {
        reshape(gy, x.shape())
    }
}

/// The same elements in `shape`.
pub fn reshape(x: &Variable, shape: &[usize]) -> Result<Variable> {
    if x.shape() == shape {
        return Ok(x.clone());
    }
    reshape_node(x, shape)
}

/// Axes permuted (the node of [`transpose`]).
struct Transpose {
    axes: Vec<usize>,
}

#[function_node(crate = "crate", name = "transpose_node")]
impl Transpose {
    fn new(axes: Vec<usize>) -> Self {
        Transpose { axes }
    }

    fn forward(&self, x: &Array) -> Result<Array> {
        x.transpose(Some(&self.axes))
    }

    fn backward(&self, gy: &Variable) -> Result<Variable> {
        let mut inverse = vec![0; self.axes.len()];
        for (i, &a) in self.axes.iter().enumerate() {
            inverse[a] = i;
        }
        transpose(gy, Some(&inverse))
    }
}

/// Axes permuted (`None` reverses them).
pub fn transpose(x: &Variable, axes: Option<&[usize]>) -> Result<Variable> {
    let axes: Vec<usize> = match axes {
        Some(a) => a.to_vec(),
        None => (0..x.ndim()).rev().collect(),
    };
    // Validates the permutation with the array's own message.
    x.array().transpose(Some(&axes))?;
    transpose_node(x, axes)
}

/// A broadcast view (the node of [`broadcast_to`]).
struct BroadcastTo {
    shape: Vec<usize>,
}

#[function_node(crate = "crate", name = "broadcast_to_node")]
impl BroadcastTo {
    fn new(shape: &[usize]) -> Self {
        BroadcastTo {
            shape: shape.to_vec(),
        }
    }

    #[retain(meta(x))]
    fn forward(&self, x: &Array) -> Result<Array> {
        x.broadcast_to(&self.shape)
    }

    fn backward(&self, x: &InputMeta, gy: &Variable) -> Result<Variable> {
        sum_to(gy, x.shape())
    }
}

/// A broadcast view in `shape`.
pub fn broadcast_to(x: &Variable, shape: &[usize]) -> Result<Variable> {
    if x.shape() == shape {
        return Ok(x.clone());
    }
    broadcast_to_node(x, shape)
}

/// Broadcast axes summed away (the node of [`sum_to`]).
struct SumTo {
    shape: Vec<usize>,
}

#[function_node(crate = "crate", name = "sum_to_node")]
impl SumTo {
    fn new(shape: &[usize]) -> Self {
        SumTo {
            shape: shape.to_vec(),
        }
    }

    #[retain(meta(x))]
    fn forward(&self, x: &Array) -> Result<Array> {
        x.sum_to(&self.shape)
    }

    fn backward(&self, x: &InputMeta, gy: &Variable) -> Result<Variable> {
        broadcast_to(gy, x.shape())
    }
}

/// Sums broadcast axes away so the result has `shape` (the adjoint of `broadcast_to`).
pub fn sum_to(x: &Variable, shape: &[usize]) -> Result<Variable> {
    if x.shape() == shape {
        return Ok(x.clone());
    }
    sum_to_node(x, shape)
}

/// Length-1 axes removed (`None`: all).
pub fn squeeze(x: &Variable, axes: Option<&[isize]>) -> Result<Variable> {
    let shape = x.array().squeeze(axes)?.shape().to_vec();
    reshape(x, &shape)
}

/// A length-1 axis inserted at `axis`.
pub fn expand_dims(x: &Variable, axis: isize) -> Result<Variable> {
    let shape = x.array().expand_dims(axis)?.shape().to_vec();
    reshape(x, &shape)
}

type Grads = Result<Vec<Option<Variable>>>;

// Written against the trait: its label names the target dtype (`AsType(float32)`), and a
// `#[function_node]` label is the type's name.
struct AsType {
    dtype: DType,
}
impl FunctionNode for AsType {
    fn label(&self) -> std::borrow::Cow<'static, str> {
        format!("AsType({})", self.dtype).into()
    }
    fn forward(&mut self, _: &mut ForwardContext, x: &[Array]) -> Result<Vec<Array>> {
        Ok(vec![x[0].astype(self.dtype)?])
    }
    fn backward(&self, ctx: &BackwardContext<'_>, _: &[usize], gys: &[Option<Variable>]) -> Grads {
        let input = ctx.input_dtype(0)?;
        // Only floating-point inputs carry gradients.
        Ok(vec![if input.is_float() {
            Some(astype(only(gys), input)?)
        } else {
            None
        }])
    }
}

/// The elements converted to `dtype`; the gradient is converted back.
pub fn astype(x: &Variable, dtype: DType) -> Result<Variable> {
    if x.dtype() == dtype {
        return Ok(x.clone());
    }
    if !dtype.is_float() && x.requires_grad() && x.dtype().is_float() {
        // Differentiating through a cast to integers is meaningless: the result is a constant.
        return Ok(Variable::constant(x.array().astype(dtype)?));
    }
    apply1(AsType { dtype }, &[x])
}

/// Checks that `x` is a floating-point variable, for functions that only differentiate floats.
pub(crate) fn expect_float(op: &'static str, x: &Variable) -> Result<()> {
    if x.dtype().is_float() {
        Ok(())
    } else {
        Err(Error::UnsupportedDType {
            op,
            dtype: x.dtype(),
            shape: x.shape().to_vec(),
            expected: "a floating-point dtype",
        })
    }
}
