//! Reductions: sum, mean, max, min.

use super::{apply1, broadcast_to, mul, mul_scalar, only, reshape};
use crate::error::Result;
use crate::graph::{BackwardContext, ForwardContext, FunctionNode};
use crate::layout::normalize_axes;
use crate::{Array, Variable};

type Grads = Result<Vec<Option<Variable>>>;

/// The input shape with reduced axes kept as length 1.
fn kept_shape(shape: &[usize], axes: &[usize]) -> Vec<usize> {
    (0..shape.len())
        .map(|a| if axes.contains(&a) { 1 } else { shape[a] })
        .collect()
}

/// Spreads the gradient of a reduction back over the input's shape.
fn spread(ctx: &BackwardContext<'_>, axes: &[usize], gy: &Variable) -> Result<Variable> {
    let shape = ctx.input_shape(0)?;
    broadcast_to(&reshape(gy, &kept_shape(shape, axes))?, shape)
}

// Sum and Max/Min are written against the trait: their backward spreads the gradient over the
// input's shape, which a `#[function_node]` backward cannot see unless the input is retained
// (Max/Min retain it anyway, but share one node type with a `max` flag and a dynamic label).
struct Sum {
    axes: Vec<usize>,
    keepdims: bool,
}
impl FunctionNode for Sum {
    fn forward(&mut self, _: &mut ForwardContext, x: &[Array]) -> Result<Vec<Array>> {
        let axes: Vec<isize> = self.axes.iter().map(|&a| a as isize).collect();
        Ok(vec![x[0].sum(Some(&axes), self.keepdims)?])
    }
    fn backward(&self, ctx: &BackwardContext<'_>, _: &[usize], gys: &[Option<Variable>]) -> Grads {
        Ok(vec![Some(spread(ctx, &self.axes, only(gys))?)])
    }
}

/// Sum over `axes` (`None`: all), keeping them as length 1 when `keepdims`.
pub fn sum_axes(x: &Variable, axes: Option<&[isize]>, keepdims: bool) -> Result<Variable> {
    let axes = normalize_axes("sum", axes, x.shape())?;
    apply1(Sum { axes, keepdims }, &[x])
}

/// Sum of all elements (a 0-dimensional variable).
pub fn sum(x: &Variable) -> Result<Variable> {
    sum_axes(x, None, false)
}

struct Mean {
    axes: Vec<usize>,
    keepdims: bool,
}
impl FunctionNode for Mean {
    fn forward(&mut self, _: &mut ForwardContext, x: &[Array]) -> Result<Vec<Array>> {
        let axes: Vec<isize> = self.axes.iter().map(|&a| a as isize).collect();
        Ok(vec![x[0].mean(Some(&axes), self.keepdims)?])
    }
    fn backward(&self, ctx: &BackwardContext<'_>, _: &[usize], gys: &[Option<Variable>]) -> Grads {
        let shape = ctx.input_shape(0)?;
        let n: usize = self.axes.iter().map(|&a| shape[a]).product();
        let gx = spread(ctx, &self.axes, only(gys))?;
        Ok(vec![Some(mul_scalar(&gx, 1.0 / n as f64)?)])
    }
}

/// Mean over `axes` (`None`: all) of a floating-point variable. Half-precision inputs are
/// summed and divided in float32 ([`Array::mean`]), so the mean of many elements neither
/// overflows nor loses the divisor.
pub fn mean(x: &Variable, axes: Option<&[isize]>, keepdims: bool) -> Result<Variable> {
    let axes = normalize_axes("mean", axes, x.shape())?;
    apply1(Mean { axes, keepdims }, &[x])
}

struct Extremum {
    axes: Vec<usize>,
    keepdims: bool,
    max: bool,
}
impl FunctionNode for Extremum {
    fn label(&self) -> std::borrow::Cow<'static, str> {
        if self.max { "Max" } else { "Min" }.into()
    }
    fn forward(&mut self, ctx: &mut ForwardContext, x: &[Array]) -> Result<Vec<Array>> {
        ctx.retain_inputs(&[0]);
        ctx.retain_outputs(&[0]);
        let axes: Vec<isize> = self.axes.iter().map(|&a| a as isize).collect();
        Ok(vec![if self.max {
            x[0].max(Some(&axes), self.keepdims)?
        } else {
            x[0].min(Some(&axes), self.keepdims)?
        }])
    }
    fn backward(&self, ctx: &BackwardContext<'_>, _: &[usize], gys: &[Option<Variable>]) -> Grads {
        // The gradient goes to every element equal to the extremum (ties share it, as in Chainer).
        let x = ctx.retained_input(0)?;
        let y = ctx.retained_output(0)?;
        let kept = kept_shape(x.shape(), &self.axes);
        let hit = x.array().eq(&y.array().reshape(&kept)?)?;
        let mask = Variable::constant(hit.astype(x.dtype())?);
        Ok(vec![Some(mul(
            &spread(ctx, &self.axes, only(gys))?,
            &mask,
        )?)])
    }
}

/// Maximum over `axes` (`None`: all).
pub fn max(x: &Variable, axes: Option<&[isize]>, keepdims: bool) -> Result<Variable> {
    let axes = normalize_axes("max", axes, x.shape())?;
    apply1(
        Extremum {
            axes,
            keepdims,
            max: true,
        },
        &[x],
    )
}

/// Minimum over `axes` (`None`: all).
pub fn min(x: &Variable, axes: Option<&[isize]>, keepdims: bool) -> Result<Variable> {
    let axes = normalize_axes("min", axes, x.shape())?;
    apply1(
        Extremum {
            axes,
            keepdims,
            max: false,
        },
        &[x],
    )
}
