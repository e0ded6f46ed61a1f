//! Pooling over 1, 2 or 3 spatial axes (Chainer's `max_pooling_nd`, `max_pooling_2d`,
//! `average_pooling_nd`, `average_pooling_2d`), built on the windows of `conv.rs`.

use std::borrow::Cow;

use super::conv::{Dims, check_spatial, unwindows, windows};
use super::{apply1, div, mul_scalar, only, reshape, sum_axes, where_};
use crate::error::{Error, Result};
use crate::graph::{BackwardContext, ForwardContext, FunctionNode};
use crate::window::{Window, WindowArgs};
use crate::{Array, Variable};

/// The options of a pooling, with Chainer's defaults: `stride` the window's size, `pad=0`,
/// `cover_all=True` for max pooling (average pooling has no `cover_all`), and for average
/// pooling `pad_value=0` (padding counts as zeros in every window's mean; `None` leaves it out
/// of the count, as `average_pooling_nd(pad_value=None)`).
///
/// ```
/// use kusari::functions::PoolOptions;
/// let o = PoolOptions::new(2).pad(1);
/// assert_eq!((o.ksize.clone(), o.stride.clone(), o.pad.clone()), (vec![2], None, vec![1]));
/// ```
#[derive(Clone, Debug, PartialEq)]
pub struct PoolOptions {
    /// The window's size, one value or one per spatial axis.
    pub ksize: Vec<usize>,
    /// The window's step (`None`: the window's size).
    pub stride: Option<Vec<usize>>,
    /// Padding on both sides of each spatial axis.
    pub pad: Vec<usize>,
    /// Max pooling's `cover_all` (`None`: Chainer's default, `true`).
    pub cover_all: Option<bool>,
    /// Average pooling's `pad_value`: `Some(0.0)` counts padding as zeros, `None` leaves it
    /// out of each window's count.
    pub pad_value: Option<f64>,
}

impl PoolOptions {
    /// A window of `ksize` with the defaults above.
    pub fn new(ksize: impl Dims) -> Self {
        PoolOptions {
            ksize: ksize.dims(),
            stride: None,
            pad: vec![0],
            cover_all: None,
            pad_value: Some(0.0),
        }
    }
    /// Sets `stride`.
    pub fn stride(mut self, stride: impl Dims) -> Self {
        self.stride = Some(stride.dims());
        self
    }
    /// Sets `pad`.
    pub fn pad(mut self, pad: impl Dims) -> Self {
        self.pad = pad.dims();
        self
    }
    /// Sets max pooling's `cover_all`.
    pub fn cover_all(mut self, cover_all: bool) -> Self {
        self.cover_all = Some(cover_all);
        self
    }
    /// Sets average pooling's `pad_value` (`Some(0.0)` or `None`).
    pub fn pad_value(mut self, pad_value: Option<f64>) -> Self {
        self.pad_value = pad_value;
        self
    }

    /// The window over `x`'s spatial axes (`spatial`: the form's fixed count).
    fn window(
        &self,
        op: &'static str,
        x: &Variable,
        spatial: Option<usize>,
        cover_all: bool,
    ) -> Result<Window> {
        if x.ndim() < 3 {
            return Err(Error::Shape {
                op,
                msg: format!("x {:?} must be (N, C, spatial...)", x.shape()),
            });
        }
        check_spatial(op, x, spatial)?;
        if !x.dtype().is_float() {
            return Err(crate::op::unsupported(
                op,
                x.dtype(),
                x.shape(),
                "a float dtype",
            ));
        }
        let stride = self.stride.as_ref().unwrap_or(&self.ksize);
        let args = WindowArgs {
            ksize: &self.ksize,
            stride,
            pad: &self.pad,
            dilate: &[1],
        };
        Window::new(op, &x.shape()[2..], &args, cover_all)
    }
}

/// `(N, C, out...)` from `(N, C, K, L)`.
fn pooled_shape(x: &[usize], w: &Window) -> Vec<usize> {
    let mut shape = x[..2].to_vec();
    shape.extend(&w.output);
    shape
}

/// Max pooling's node: the maximum of each window (padding is `-inf`), the gradient going to
/// the first maximal element of the window, as in Chainer.
struct MaxPool {
    op: &'static str,
    w: Window,
    x_shape: Vec<usize>,
    /// `(N, C, K, L)`: where each window's gradient goes.
    mask: Option<Array>,
}

impl FunctionNode for MaxPool {
    fn label(&self) -> Cow<'static, str> {
        Cow::Borrowed(self.op)
    }

    fn forward(&mut self, _ctx: &mut ForwardContext, x: &[Array]) -> Result<Vec<Array>> {
        let x = &x[0];
        let (n, c) = (x.shape()[0], x.shape()[1]);
        let (k, l) = (self.w.kernel_size(), self.w.output_size());
        let cols = x
            .im2col(self.op, &self.w, f64::NEG_INFINITY)?
            .reshape(&[n, c, k, l])?;
        let y = cols.max_axes(&[2], true)?;
        // The first position in each window holding its maximum.
        let index = Array::arange(0.0, k as f64, 1.0, x.dtype())?
            .to_device(x.device())?
            .reshape(&[1, 1, k, 1])?;
        let beyond = Array::full_on(&[1, 1, 1, 1], k as f64, x.dtype(), x.device())?;
        let first = Array::where_cond(&cols.eq(&y)?, &index, &beyond)?.min_axes(&[2], true)?;
        self.mask = Some(index.eq(&first)?);
        Ok(vec![y.reshape(&pooled_shape(x.shape(), &self.w))?])
    }

    fn backward(
        &self,
        _ctx: &BackwardContext<'_>,
        _targets: &[usize],
        gys: &[Option<Variable>],
    ) -> Result<Vec<Option<Variable>>> {
        let gy = only(gys);
        let mask = self.mask.as_ref().ok_or_else(|| Error::Shape {
            op: self.op,
            msg: "backward before forward".into(),
        })?;
        let (n, c) = (self.x_shape[0], self.x_shape[1]);
        let (k, l) = (self.w.kernel_size(), self.w.output_size());
        let g = super::broadcast_to(&reshape(gy, &[n, c, 1, l])?, &[n, c, k, l])?;
        let zero = Variable::constant(g.array().zeros_like()?);
        let mut cols_shape = vec![n, c];
        cols_shape.extend(&self.w.ksize);
        cols_shape.extend(&self.w.output);
        let gcols = reshape(&where_(mask, &g, &zero)?, &cols_shape)?;
        Ok(vec![Some(unwindows(&gcols, self.op, &self.w)?)])
    }
}

/// N-dimensional max pooling (Chainer's `max_pooling_nd`): the maximum of each window of `x`
/// `(N, C, d1, ..., dn)`, padding never chosen; `cover_all` (the default) adds windows so that
/// every input element is covered. The gradient goes to each window's first maximum.
///
/// ```
/// use kusari::prelude::*;
/// use kusari::functions::PoolOptions;
/// let x = Variable::new(Array::arange(0.0, 16.0, 1.0, DType::F32)?.reshape(&[1, 1, 4, 4])?);
/// let y = F::max_pooling_nd(&x, &PoolOptions::new(2))?;
/// assert_eq!(y.array().to_vec::<f32>()?, vec![5.0, 7.0, 13.0, 15.0]);
/// # Ok::<(), kusari::Error>(())
/// ```
pub fn max_pooling_nd(x: &Variable, options: &PoolOptions) -> Result<Variable> {
    max_pooling("max_pooling_nd", None, x, options)
}

/// 2-d max pooling (Chainer's `max_pooling_2d`): [`max_pooling_nd`] for `(N, C, H, W)`.
pub fn max_pooling_2d(x: &Variable, options: &PoolOptions) -> Result<Variable> {
    max_pooling("max_pooling_2d", Some(2), x, options)
}

fn max_pooling(
    op: &'static str,
    spatial: Option<usize>,
    x: &Variable,
    options: &PoolOptions,
) -> Result<Variable> {
    let w = options.window(op, x, spatial, options.cover_all.unwrap_or(true))?;
    let node = MaxPool {
        op,
        w,
        x_shape: x.shape().to_vec(),
        mask: None,
    };
    apply1(node, &[x])
}

/// N-dimensional average pooling (Chainer's `average_pooling_nd`): the mean of each window of
/// `x` `(N, C, d1, ..., dn)`; padding counts as zeros (`pad_value=0`, the default) or is left
/// out of each window's count (`pad_value(None)`).
///
/// ```
/// use kusari::prelude::*;
/// use kusari::functions::PoolOptions;
/// let x = Variable::new(Array::arange(0.0, 16.0, 1.0, DType::F32)?.reshape(&[1, 1, 4, 4])?);
/// let y = F::average_pooling_nd(&x, &PoolOptions::new(2))?;
/// assert_eq!(y.array().to_vec::<f32>()?, vec![2.5, 4.5, 10.5, 12.5]);
/// # Ok::<(), kusari::Error>(())
/// ```
pub fn average_pooling_nd(x: &Variable, options: &PoolOptions) -> Result<Variable> {
    average_pooling("average_pooling_nd", None, x, options)
}

/// 2-d average pooling (Chainer's `average_pooling_2d`): [`average_pooling_nd`] for
/// `(N, C, H, W)`, padding counted as zeros.
pub fn average_pooling_2d(x: &Variable, options: &PoolOptions) -> Result<Variable> {
    average_pooling("average_pooling_2d", Some(2), x, options)
}

fn average_pooling(
    op: &'static str,
    spatial: Option<usize>,
    x: &Variable,
    options: &PoolOptions,
) -> Result<Variable> {
    if options.cover_all == Some(true) {
        return Err(Error::InvalidArgument {
            op: op.to_string(),
            msg: "average pooling has no cover_all (Chainer's is always False)".into(),
        });
    }
    let w = options.window(op, x, spatial, false)?;
    let (n, c) = (x.shape()[0], x.shape()[1]);
    let (k, l) = (w.kernel_size(), w.output_size());
    let sums = sum_axes(
        &reshape(&windows(x, op, &w, 0.0)?, &[n, c, k, l])?,
        &[2],
        false,
    )?;
    let mean = match options.pad_value {
        Some(0.0) => mul_scalar(&sums, 1.0 / k as f64)?,
        None => {
            // Each window's count of input elements: the windows of ones, summed.
            let ones = Array::ones(&x.shape()[2..], x.dtype())?
                .to_device(x.device())?
                .reshape(&[[1, 1].as_slice(), &x.shape()[2..]].concat())?;
            let counts = ones
                .im2col(op, &w, 0.0)?
                .reshape(&[1, 1, k, l])?
                .sum_axes(&[2], false)?;
            div(&sums, &Variable::constant(counts))?
        }
        Some(v) => {
            return Err(Error::InvalidArgument {
                op: op.to_string(),
                msg: format!("pad_value must be 0 or None, got {v}"),
            });
        }
    };
    reshape(&mean, &pooled_shape(x.shape(), &w))
}
