//! The tutorial's linear layer: the op [`LinearFunction`] (`y = x Wᵀ + b`) and the link
//! [`Linear`] that owns `W` and `b`, with `W`'s input size found at the first forward when it is
//! not given.

use super::Parameter;
use super::initializers::{LeCunNormal, Zero};
use crate::error::{Error, Result};
use crate::functions::{linear, matmul, reshape, sum_axes, transpose};
use crate::{Array, DType, Link, Variable, function_node};

/// `y = x Wᵀ + b` for `x: (N, in)`, `W: (out, in)`, `b: (out,)`: the tutorial's
/// `LinearFunction`, declared with `#[function_node]`. Its wrapper is [`linear_function`].
///
/// ```
/// use kusari::link::linear_function;
/// use kusari::prelude::*;
/// # fn main() -> Result<()> {
/// let x = Variable::new(Array::from_vec(vec![1.0f32, 2.0], &[1, 2])?);
/// let w = Variable::new(Array::from_vec(vec![1.0f32, 1.0, 0.0, 1.0], &[2, 2])?);
/// let b = Variable::new(Array::from_vec(vec![0.5f32, -0.5], &[2])?);
/// let y = linear_function(&x, &w, &b)?;
/// assert_eq!(y.array().to_vec::<f32>()?, vec![3.5, 1.5]);
/// # Ok(()) }
/// ```
pub struct LinearFunction;

#[function_node(crate = "crate")]
impl LinearFunction {
    #[retain(x, w)]
    fn forward(&self, x: &Array, w: &Array, b: &Array) -> Result<Array> {
        x.matmul(&w.t())? + b
    }

    /// Only the gradients asked for: in training, `x` is data and needs none.
    fn backward(
        &self,
        x: &Variable,
        w: &Variable,
        gy: &Variable,
        needs: &[usize],
    ) -> Result<(Option<Variable>, Option<Variable>, Option<Variable>)> {
        let wanted = |i: usize| needs.contains(&i);
        let gx = wanted(0).then(|| matmul(gy, w)).transpose()?;
        let gw = wanted(1)
            .then(|| matmul(&transpose(gy, None)?, x))
            .transpose()?;
        let gb = wanted(2).then(|| sum_axes(gy, &[0], false)).transpose()?;
        Ok((gx, gw, gb))
    }
}

/// A fully connected layer, `y = x Wᵀ + b` (Chainer's `links.Linear`).
///
/// `W` is `(out_size, in_size)`, drawn from [`LeCunNormal`] (`N(0, 1/in_size)`, the tutorial's
/// `Normal(1/sqrt(in_size))`); `b` is `(out_size,)`, zeros, or absent with `nobias`. With
/// `in_size = None`, `W` stays uninitialised until the first [`forward`](Self::forward), which
/// takes the input size from the input: `x` of shape `(N, ...)` is flattened to `(N, in_size)`.
/// The input size is then fixed: an input with another one is an error.
///
/// ```
/// use kusari::link::Linear;
/// use kusari::prelude::*;
/// # fn main() -> Result<()> {
/// let l = Linear::new(None, 2, false, DType::F32)?;
/// assert_eq!(l.count_params(), 2); // only b so far
/// let y = l.forward(&Variable::new(Array::ones(&[4, 3], DType::F32).unwrap()))?;
/// assert_eq!((y.shape(), l.W.shape()), (&[4, 2][..], Some(vec![2, 3])));
/// assert_eq!(l.count_params(), 2 * 3 + 2);
/// # Ok(()) }
/// ```
#[derive(Link)]
#[kusari(crate = "crate")]
#[allow(non_snake_case)] // Chainer's names: the parameters' paths are `/W` and `/b`.
pub struct Linear {
    /// The weight, `(out_size, in_size)`.
    pub W: Parameter,
    /// The bias, `(out_size,)`; `None` without one.
    pub b: Option<Parameter>,
    #[kusari(skip)]
    out_size: usize,
}

impl Linear {
    /// A layer of `out_size` outputs in `dtype`; `W` is initialised now when `in_size` is given,
    /// else at the first forward.
    pub fn new(
        in_size: Option<usize>,
        out_size: usize,
        nobias: bool,
        dtype: DType,
    ) -> Result<Self> {
        let w = Parameter::new(LeCunNormal::default(), dtype);
        if let Some(in_size) = in_size {
            w.initialize(&[out_size, in_size])?;
        }
        let b = match nobias {
            true => None,
            false => Some(Parameter::with_shape(Zero, &[out_size], dtype)?),
        };
        Ok(Linear { W: w, b, out_size })
    }

    /// The number of outputs.
    pub fn out_size(&self) -> usize {
        self.out_size
    }

    /// The number of inputs, once known.
    pub fn in_size(&self) -> Option<usize> {
        self.W.shape().map(|s| s[1])
    }

    /// `x Wᵀ + b` for `x` of shape `(N, ...)`, flattened to `(N, in_size)`; initialises `W` from
    /// the input on the first call when `in_size` was not given.
    pub fn forward(&self, x: &Variable) -> Result<Variable> {
        let shape_error = |msg: String| Error::Shape { op: "Linear", msg };
        let Some((&n, features)) = x.shape().split_first() else {
            return Err(shape_error(format!(
                "the input must be (N, ...), got a scalar {:?}",
                x.shape()
            )));
        };
        let in_size: usize = features.iter().product();
        match self.in_size() {
            Some(expected) if expected != in_size => {
                return Err(shape_error(format!(
                    "the input {:?} has {in_size} features per sample, but W {:?} was initialised for {expected} (a Linear's input size is fixed by its first input)",
                    x.shape(),
                    [self.out_size, expected]
                )));
            }
            Some(_) => {}
            None => self.W.initialize(&[self.out_size, in_size])?,
        }
        let x = match x.ndim() {
            2 => x.clone(),
            _ => reshape(x, &[n, in_size])?,
        };
        let w = self.W.variable()?;
        match &self.b {
            Some(b) => linear_function(&x, &w, &b.variable()?),
            // The op takes exactly three inputs; without a bias, the built-in takes two.
            None => linear(&x, &w, None),
        }
    }
}
