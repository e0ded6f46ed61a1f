//! Reductions: sum, mean, max, min.

use super::{broadcast_to, mul, mul_scalar, reshape};
use crate::error::Result;
use crate::layout::normalize_axes;
use crate::{Array, InputMeta, Variable, function_node};

/// The input shape with reduced axes kept as length 1.
fn kept_shape(shape: &[usize], axes: &[usize]) -> Vec<usize> {
    (0..shape.len())
        .map(|a| if axes.contains(&a) { 1 } else { shape[a] })
        .collect()
}

/// Spreads the gradient of a reduction over `axes` back over the input's `shape`.
fn spread(shape: &[usize], axes: &[usize], gy: &Variable) -> Result<Variable> {
    broadcast_to(&reshape(gy, &kept_shape(shape, axes))?, shape)
}

/// The axes as the array reductions take them.
fn signed(axes: &[usize]) -> Vec<isize> {
    axes.iter().map(|&a| a as isize).collect()
}

/// Sum over normalized axes (the node of [`sum_axes`]).
struct Sum {
    axes: Vec<usize>,
    keepdims: bool,
}

#[function_node(crate = "crate", name = "sum_node")]
impl Sum {
    fn new(axes: Vec<usize>, keepdims: bool) -> Self {
        Sum { axes, keepdims }
    }

    #[retain(meta(x))]
    fn forward(&self, x: &Array) -> Result<Array> {
        x.sum_axes(&signed(&self.axes), self.keepdims)
    }

    fn backward(&self, x: &InputMeta, gy: &Variable) -> Result<Variable> {
        spread(x.shape(), &self.axes, gy)
    }
}

/// Sum over `axes` (negative axes count from the end; `&[]` reduces nothing), keeping them as
/// length 1 when `keepdims` (Chainer's `F.sum(x, axis, keepdims)`). [`sum`] sums everything.
pub fn sum_axes(x: &Variable, axes: &[isize], keepdims: bool) -> Result<Variable> {
    sum_node(x, normalize_axes("sum", Some(axes), x.shape())?, keepdims)
}

/// Sum of all elements, a 0-dimensional variable (Chainer's `F.sum(x)`); [`sum_axes`] sums over
/// some axes.
pub fn sum(x: &Variable) -> Result<Variable> {
    sum_node(x, normalize_axes("sum", None, x.shape())?, false)
}

/// Mean over normalized axes (the node of [`mean`] and [`mean_axes`]).
struct Mean {
    axes: Vec<usize>,
    keepdims: bool,
}

#[function_node(crate = "crate", name = "mean_node")]
impl Mean {
    fn new(axes: Vec<usize>, keepdims: bool) -> Self {
        Mean { axes, keepdims }
    }

    #[retain(meta(x))]
    fn forward(&self, x: &Array) -> Result<Array> {
        x.mean_axes(&signed(&self.axes), self.keepdims)
    }

    fn backward(&self, x: &InputMeta, gy: &Variable) -> Result<Variable> {
        let n: usize = self.axes.iter().map(|&a| x.shape()[a]).product();
        mul_scalar(&spread(x.shape(), &self.axes, gy)?, 1.0 / n as f64)
    }
}

/// Mean over `axes` of a floating-point variable, keeping them as length 1 when `keepdims`
/// (Chainer's `F.mean(x, axis, keepdims)`). Half-precision inputs are summed and divided in
/// float32 ([`Array::mean_axes`]), so the mean of many elements neither overflows nor loses the
/// divisor. [`mean`] averages everything.
pub fn mean_axes(x: &Variable, axes: &[isize], keepdims: bool) -> Result<Variable> {
    mean_node(x, normalize_axes("mean", Some(axes), x.shape())?, keepdims)
}

/// Mean of all elements, a 0-dimensional variable (Chainer's `F.mean(x)`).
pub fn mean(x: &Variable) -> Result<Variable> {
    mean_node(x, normalize_axes("mean", None, x.shape())?, false)
}

/// The gradient of a maximum or minimum `y` of `x` over `axes`: it goes to every element equal
/// to the extremum (ties share it, as in Chainer).
fn extremum_grad(x: &Variable, y: &Variable, axes: &[usize], gy: &Variable) -> Result<Variable> {
    let hit = x
        .array()
        .eq(&y.array().reshape(&kept_shape(x.shape(), axes))?)?;
    let mask = Variable::constant(hit.astype(x.dtype())?);
    mul(&spread(x.shape(), axes, gy)?, &mask)
}

/// Maximum over normalized axes (the node of [`max`] and [`max_axes`]).
struct Max {
    axes: Vec<usize>,
    keepdims: bool,
}

#[function_node(crate = "crate", name = "max_node")]
impl Max {
    fn new(axes: Vec<usize>, keepdims: bool) -> Self {
        Max { axes, keepdims }
    }

    #[retain(x, output = 0)]
    fn forward(&self, x: &Array) -> Result<Array> {
        x.max_axes(&signed(&self.axes), self.keepdims)
    }

    fn backward(&self, x: &Variable, y: &Variable, gy: &Variable) -> Result<Variable> {
        extremum_grad(x, y, &self.axes, gy)
    }
}

/// Minimum over normalized axes (the node of [`min`] and [`min_axes`]).
struct Min {
    axes: Vec<usize>,
    keepdims: bool,
}

#[function_node(crate = "crate", name = "min_node")]
impl Min {
    fn new(axes: Vec<usize>, keepdims: bool) -> Self {
        Min { axes, keepdims }
    }

    #[retain(x, output = 0)]
    fn forward(&self, x: &Array) -> Result<Array> {
        x.min_axes(&signed(&self.axes), self.keepdims)
    }

    fn backward(&self, x: &Variable, y: &Variable, gy: &Variable) -> Result<Variable> {
        extremum_grad(x, y, &self.axes, gy)
    }
}

/// Maximum of all elements, a 0-dimensional variable (Chainer's `F.max(x)`).
pub fn max(x: &Variable) -> Result<Variable> {
    max_node(x, normalize_axes("max", None, x.shape())?, false)
}

/// Maximum over `axes`, keeping them as length 1 when `keepdims` (Chainer's
/// `F.max(x, axis, keepdims)`).
pub fn max_axes(x: &Variable, axes: &[isize], keepdims: bool) -> Result<Variable> {
    max_node(x, normalize_axes("max", Some(axes), x.shape())?, keepdims)
}

/// Minimum of all elements, a 0-dimensional variable (Chainer's `F.min(x)`).
pub fn min(x: &Variable) -> Result<Variable> {
    min_node(x, normalize_axes("min", None, x.shape())?, false)
}

/// Minimum over `axes`, keeping them as length 1 when `keepdims` (Chainer's
/// `F.min(x, axis, keepdims)`).
pub fn min_axes(x: &Variable, axes: &[isize], keepdims: bool) -> Result<Variable> {
    min_node(x, normalize_axes("min", Some(axes), x.shape())?, keepdims)
}
