//! Shape and type changes: reshape, transpose, broadcast_to, sum_to, squeeze, expand_dims, astype.

use super::{apply1, only};
use crate::error::{Error, Result};
use crate::graph::{BackwardContext, ForwardContext, FunctionNode};
use crate::{Array, DType, Variable};

type Grads = Result<Vec<Option<Variable>>>;

// These shape and type changes are written against the trait: each backward needs the input's
// shape or dtype but not its values, and a `#[function_node]` backward only sees retained
// values. Retaining the input for its shape alone would keep its buffer alive; the macro has no
// way yet to pass input shapes and dtypes to backward (a gap to close).
struct Reshape {
    shape: Vec<usize>,
}
impl FunctionNode for Reshape {
    fn forward(&mut self, _: &mut ForwardContext, x: &[Array]) -> Result<Vec<Array>> {
        Ok(vec![x[0].reshape(&self.shape)?])
    }
    fn backward(&self, ctx: &BackwardContext<'_>, _: &[usize], gys: &[Option<Variable>]) -> Grads {
        Ok(vec![Some(reshape(only(gys), ctx.input_shape(0)?)?)])
    }
}

/// The same elements in `shape`.
pub fn reshape(x: &Variable, shape: &[usize]) -> Result<Variable> {
    if x.shape() == shape {
        return Ok(x.clone());
    }
    apply1(
        Reshape {
            shape: shape.to_vec(),
        },
        &[x],
    )
}

struct Transpose {
    axes: Vec<usize>,
}
impl FunctionNode for Transpose {
    fn forward(&mut self, _: &mut ForwardContext, x: &[Array]) -> Result<Vec<Array>> {
        Ok(vec![x[0].transpose(Some(&self.axes))?])
    }
    fn backward(&self, _: &BackwardContext<'_>, _: &[usize], gys: &[Option<Variable>]) -> Grads {
        let mut inverse = vec![0; self.axes.len()];
        for (i, &a) in self.axes.iter().enumerate() {
            inverse[a] = i;
        }
        Ok(vec![Some(transpose(only(gys), Some(&inverse))?)])
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
    apply1(Transpose { axes }, &[x])
}

struct BroadcastTo {
    shape: Vec<usize>,
}
impl FunctionNode for BroadcastTo {
    fn forward(&mut self, _: &mut ForwardContext, x: &[Array]) -> Result<Vec<Array>> {
        Ok(vec![x[0].broadcast_to(&self.shape)?])
    }
    fn backward(&self, ctx: &BackwardContext<'_>, _: &[usize], gys: &[Option<Variable>]) -> Grads {
        Ok(vec![Some(sum_to(only(gys), ctx.input_shape(0)?)?)])
    }
}

/// A broadcast view in `shape`.
pub fn broadcast_to(x: &Variable, shape: &[usize]) -> Result<Variable> {
    if x.shape() == shape {
        return Ok(x.clone());
    }
    apply1(
        BroadcastTo {
            shape: shape.to_vec(),
        },
        &[x],
    )
}

struct SumTo {
    shape: Vec<usize>,
}
impl FunctionNode for SumTo {
    fn forward(&mut self, _: &mut ForwardContext, x: &[Array]) -> Result<Vec<Array>> {
        Ok(vec![x[0].sum_to(&self.shape)?])
    }
    fn backward(&self, ctx: &BackwardContext<'_>, _: &[usize], gys: &[Option<Variable>]) -> Grads {
        Ok(vec![Some(broadcast_to(only(gys), ctx.input_shape(0)?)?)])
    }
}

/// Sums broadcast axes away so the result has `shape` (the adjoint of `broadcast_to`).
pub fn sum_to(x: &Variable, shape: &[usize]) -> Result<Variable> {
    if x.shape() == shape {
        return Ok(x.clone());
    }
    apply1(
        SumTo {
            shape: shape.to_vec(),
        },
        &[x],
    )
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
