//! Convolutions over 1, 2 or 3 spatial axes and their transposes (Chainer's `convolution_nd`,
//! `convolution_2d`, `deconvolution_nd`, `deconvolution_2d`): three nodes, the convolution, its
//! transpose and its weight gradient, each the others' gradients, so that gradients of every
//! order are convolutions again (Chainer's design). Each is `im2col`, a matrix product and
//! `col2im` (fused a sample at a time on the host). The differentiable windows `im2col` and
//! `col2im` themselves serve pooling.

use super::{add, broadcast_to, needed, reshape};
use crate::error::{Error, Result};
use crate::window::{ConvPass, Window, WindowArgs};
use crate::{Array, Variable, function_node};

/// Per-axis sizes of a window option: one value for every spatial axis (`2`), or one per axis
/// (`[2, 3]`, `vec![2, 3]`, `&[2, 3][..]`).
pub trait Dims {
    /// The values, one or one per axis.
    fn dims(&self) -> Vec<usize>;
}

impl Dims for usize {
    fn dims(&self) -> Vec<usize> {
        vec![*self]
    }
}

impl<const N: usize> Dims for [usize; N] {
    fn dims(&self) -> Vec<usize> {
        self.to_vec()
    }
}

impl Dims for &[usize] {
    fn dims(&self) -> Vec<usize> {
        self.to_vec()
    }
}

impl Dims for Vec<usize> {
    fn dims(&self) -> Vec<usize> {
        self.clone()
    }
}

/// The options of a convolution or deconvolution, with Chainer's defaults: `stride=1`,
/// `pad=0`, `dilate=1`, `groups=1`, `cover_all=False`, and for a deconvolution `outsize=None`.
///
/// ```
/// use kusari::functions::ConvOptions;
/// let o = ConvOptions::default().stride(2).pad([1, 0]);
/// assert_eq!((o.stride.clone(), o.pad.clone(), o.groups), (vec![2], vec![1, 0], 1));
/// ```
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct ConvOptions {
    /// The window's step, one value or one per spatial axis.
    pub stride: Vec<usize>,
    /// Zeros added on both sides of each spatial axis.
    pub pad: Vec<usize>,
    /// The spacing of the kernel's elements (1: adjacent).
    pub dilate: Vec<usize>,
    /// Channel groups: each group of output channels sees one group of input channels.
    pub groups: usize,
    /// Whether the last window may extend past the padded input so that every input element
    /// is covered (Chainer's `cover_all`).
    pub cover_all: bool,
    /// A deconvolution's output spatial size (`None`: the smallest that fits); a convolution
    /// refuses it.
    pub outsize: Option<Vec<usize>>,
}

impl Default for ConvOptions {
    fn default() -> Self {
        ConvOptions {
            stride: vec![1],
            pad: vec![0],
            dilate: vec![1],
            groups: 1,
            cover_all: false,
            outsize: None,
        }
    }
}

impl ConvOptions {
    /// Sets `stride`.
    pub fn stride(mut self, stride: impl Dims) -> Self {
        self.stride = stride.dims();
        self
    }
    /// Sets `pad`.
    pub fn pad(mut self, pad: impl Dims) -> Self {
        self.pad = pad.dims();
        self
    }
    /// Sets `dilate`.
    pub fn dilate(mut self, dilate: impl Dims) -> Self {
        self.dilate = dilate.dims();
        self
    }
    /// Sets `groups`.
    pub fn groups(mut self, groups: usize) -> Self {
        self.groups = groups;
        self
    }
    /// Sets `cover_all`.
    pub fn cover_all(mut self, cover_all: bool) -> Self {
        self.cover_all = cover_all;
        self
    }
    /// Sets a deconvolution's `outsize`.
    pub fn outsize(mut self, outsize: impl Dims) -> Self {
        self.outsize = Some(outsize.dims());
        self
    }

    fn args<'a>(&'a self, ksize: &'a [usize]) -> WindowArgs<'a> {
        WindowArgs {
            ksize,
            stride: &self.stride,
            pad: &self.pad,
            dilate: &self.dilate,
        }
    }
}

/// The windows of an `(N, C, spatial...)` variable (the node of [`windows`]): `(N, C, k...,
/// out...)`, `pad_value` outside the input. Linear, with `col2im` as its gradient.
pub(crate) struct Im2Col {
    op: &'static str,
    w: Window,
    pad_value: f64,
}

#[function_node(crate = "crate", name = "im2col_node")]
impl Im2Col {
    fn new(op: &'static str, w: Window, pad_value: f64) -> Self {
        Im2Col { op, w, pad_value }
    }

    fn forward(&self, x: &Array) -> Result<Array> {
        x.im2col(self.op, &self.w, self.pad_value)
    }

    fn backward(&self, gy: &Variable) -> Result<Variable> {
        col2im_node(gy, self.op, self.w.clone())
    }
}

/// Windows `(N, C, k..., out...)` summed back into `(N, C, in...)` (im2col's adjoint), with
/// `im2col` as its gradient.
pub(crate) struct Col2Im {
    op: &'static str,
    w: Window,
}

#[function_node(crate = "crate", name = "col2im_node")]
impl Col2Im {
    fn new(op: &'static str, w: Window) -> Self {
        Col2Im { op, w }
    }

    fn forward(&self, x: &Array) -> Result<Array> {
        x.col2im(self.op, &self.w)
    }

    fn backward(&self, gy: &Variable) -> Result<Variable> {
        im2col_node(gy, self.op, self.w.clone(), 0.0)
    }
}

/// The windows of `x` as a differentiable `(N, C, k..., out...)` variable.
pub(crate) fn windows(
    x: &Variable,
    op: &'static str,
    w: &Window,
    pad_value: f64,
) -> Result<Variable> {
    im2col_node(x, op, w.clone(), pad_value)
}

/// The adjoint of [`windows`]: `(N, C, k..., out...)` summed into `(N, C, in...)`.
pub(crate) fn unwindows(cols: &Variable, op: &'static str, w: &Window) -> Result<Variable> {
    col2im_node(cols, op, w.clone())
}

/// A convolution without bias, `(x, W)` → `y` (Chainer's `Convolution2DFunction`): its input
/// gradient is a transposed convolution and its weight gradient a [`ConvFilter`], so every
/// order of gradient is made of these three nodes.
struct Conv {
    op: &'static str,
    win: Window,
    groups: usize,
}

#[function_node(crate = "crate", name = "conv_node")]
impl Conv {
    fn new(op: &'static str, win: Window, groups: usize) -> Self {
        Conv { op, win, groups }
    }

    #[retain(x, w)]
    fn forward(&self, x: &Array, w: &Array) -> Result<Array> {
        x.conv(self.op, w, &self.win, self.groups, ConvPass::Forward)
    }

    fn backward(
        &self,
        x: &Variable,
        w: &Variable,
        gy: &Variable,
        needs: &[usize],
    ) -> Result<(Option<Variable>, Option<Variable>)> {
        let (op, win, g) = (self.op, &self.win, self.groups);
        Ok((
            needed(needs, 0, || conv_transpose_node(gy, w, op, win.clone(), g))?,
            needed(needs, 1, || conv_filter_node(x, gy, op, win.clone(), g))?,
        ))
    }
}

/// A transposed convolution without bias, `(x, W)` → `y` with `x` in the convolution's output
/// space and `y` in its input space (Chainer's `Deconvolution2DFunction`, and a convolution's
/// input gradient).
struct ConvTranspose {
    op: &'static str,
    win: Window,
    groups: usize,
}

#[function_node(crate = "crate", name = "conv_transpose_node")]
impl ConvTranspose {
    fn new(op: &'static str, win: Window, groups: usize) -> Self {
        ConvTranspose { op, win, groups }
    }

    #[retain(x, w)]
    fn forward(&self, x: &Array, w: &Array) -> Result<Array> {
        x.conv(self.op, w, &self.win, self.groups, ConvPass::BackwardData)
    }

    fn backward(
        &self,
        x: &Variable,
        w: &Variable,
        gy: &Variable,
        needs: &[usize],
    ) -> Result<(Option<Variable>, Option<Variable>)> {
        let (op, win, g) = (self.op, &self.win, self.groups);
        Ok((
            needed(needs, 0, || conv_node(gy, w, op, win.clone(), g))?,
            needed(needs, 1, || conv_filter_node(gy, x, op, win.clone(), g))?,
        ))
    }
}

/// A convolution's weight gradient, `(x, gy)` → `gW`: the products of each sample's windows and
/// output gradient, summed (Chainer's `Convolution2DGradW`).
struct ConvFilter {
    op: &'static str,
    win: Window,
    groups: usize,
}

#[function_node(crate = "crate", name = "conv_filter_node")]
impl ConvFilter {
    fn new(op: &'static str, win: Window, groups: usize) -> Self {
        ConvFilter { op, win, groups }
    }

    #[retain(x, gy)]
    fn forward(&self, x: &Array, gy: &Array) -> Result<Array> {
        x.conv(
            self.op,
            gy,
            &self.win,
            self.groups,
            ConvPass::BackwardFilter,
        )
    }

    fn backward(
        &self,
        x: &Variable,
        gy: &Variable,
        ggw: &Variable,
        needs: &[usize],
    ) -> Result<(Option<Variable>, Option<Variable>)> {
        let (op, win, g) = (self.op, &self.win, self.groups);
        Ok((
            needed(needs, 0, || {
                conv_transpose_node(gy, ggw, op, win.clone(), g)
            })?,
            needed(needs, 1, || conv_node(x, ggw, op, win.clone(), g))?,
        ))
    }
}

fn shape_error(op: &'static str, msg: String) -> Error {
    Error::Shape { op, msg }
}

/// The spatial axes of `x` (`(N, C, spatial...)`, at least 3 axes), checked to be `spatial`
/// when a form fixes their count (the `_2d` functions).
pub(super) fn check_spatial(
    op: &'static str,
    x: &Variable,
    spatial: Option<usize>,
) -> Result<usize> {
    let n = x.ndim() - 2;
    match spatial {
        Some(s) if s != n => Err(shape_error(
            op,
            format!(
                "x {:?} has {n} spatial axes; {op} takes {s} (use the _nd form)",
                x.shape()
            ),
        )),
        _ => Ok(n),
    }
}

/// The spatial axes of `x` (`(N, C, spatial...)`), checked against the weight's.
fn check_operands(
    op: &'static str,
    x: &Variable,
    w: &Variable,
    spatial: Option<usize>,
) -> Result<usize> {
    if x.ndim() < 3 || w.ndim() != x.ndim() {
        return Err(shape_error(
            op,
            format!(
                "x {:?} must be (N, C, spatial...) and W {:?} (channels, channels, k...) with as \
                 many axes",
                x.shape(),
                w.shape()
            ),
        ));
    }
    let n = check_spatial(op, x, spatial)?;
    if x.dtype() != w.dtype() {
        return Err(Error::DTypeMismatch {
            op,
            lhs: x.dtype(),
            lhs_shape: x.shape().to_vec(),
            rhs: w.dtype(),
            rhs_shape: w.shape().to_vec(),
        });
    }
    Ok(n)
}

/// Adds a bias of one value per channel (`(C,)`) to `(N, C, spatial...)`.
fn add_bias(op: &'static str, y: Variable, b: Option<&Variable>) -> Result<Variable> {
    let Some(b) = b else { return Ok(y) };
    let c = y.shape()[1];
    if b.shape() != [c] {
        return Err(shape_error(
            op,
            format!(
                "b must be ({c},) for {c} output channels, got {:?}",
                b.shape()
            ),
        ));
    }
    let mut shape = vec![1; y.ndim()];
    shape[1] = c;
    add(&y, &broadcast_to(&reshape(b, &shape)?, y.shape())?)
}

/// `groups` checked to divide both channel counts.
fn check_groups(op: &'static str, groups: usize, what: [(&str, usize); 2]) -> Result<()> {
    if groups == 0 {
        return Err(shape_error(op, "groups must be at least 1".into()));
    }
    for (name, c) in what {
        if c % groups != 0 {
            return Err(shape_error(
                op,
                format!("{name} ({c}) is not divisible by groups ({groups})"),
            ));
        }
    }
    Ok(())
}

/// N-dimensional convolution (Chainer's `convolution_nd`): `x` `(N, C, d1, ..., dn)` with
/// `W` `(out_c, C / groups, k1, ..., kn)` and an optional bias `b` `(out_c,)` gives
/// `(N, out_c, o1, ..., on)`, `oi = (di + 2 pad - dilate (ki - 1) - 1) / stride + 1` (rounded
/// up with `cover_all`). 1, 2 and 3 spatial axes; float dtypes.
///
/// ```
/// use kusari::prelude::*;
/// use kusari::functions::ConvOptions;
/// let x = Variable::new(Array::ones(&[1, 1, 4, 4], DType::F64)?);
/// let w = Variable::new(Array::ones(&[2, 1, 3, 3], DType::F64)?);
/// let y = F::convolution_nd(&x, &w, None, &ConvOptions::default().pad(1))?;
/// assert_eq!(y.shape(), &[1, 2, 4, 4]);
/// // A corner sees 4 of the 9 kernel elements, an inner position all 9.
/// assert_eq!(y.array().to_vec::<f64>()?[..6], [4.0, 6.0, 6.0, 4.0, 6.0, 9.0]);
/// # Ok::<(), kusari::Error>(())
/// ```
pub fn convolution_nd(
    x: &Variable,
    w: &Variable,
    b: Option<&Variable>,
    options: &ConvOptions,
) -> Result<Variable> {
    convolution("convolution_nd", None, x, w, b, options)
}

/// 2-d convolution (Chainer's `convolution_2d`): [`convolution_nd`] for `(N, C, H, W)`.
pub fn convolution_2d(
    x: &Variable,
    w: &Variable,
    b: Option<&Variable>,
    options: &ConvOptions,
) -> Result<Variable> {
    convolution("convolution_2d", Some(2), x, w, b, options)
}

fn convolution(
    op: &'static str,
    spatial: Option<usize>,
    x: &Variable,
    w: &Variable,
    b: Option<&Variable>,
    options: &ConvOptions,
) -> Result<Variable> {
    check_operands(op, x, w, spatial)?;
    if options.outsize.is_some() {
        return Err(shape_error(
            op,
            "outsize is a deconvolution's option; a convolution's output size follows from its \
             input"
                .into(),
        ));
    }
    let c = x.shape()[1];
    let (oc, cg) = (w.shape()[0], w.shape()[1]);
    let g = options.groups;
    check_groups(
        op,
        g,
        [("the input's channels", c), ("W's output channels", oc)],
    )?;
    if cg * g != c {
        return Err(shape_error(
            op,
            format!(
                "W {:?} takes {cg} channels per group ({} with groups={g}), but x {:?} has {c}",
                w.shape(),
                cg * g,
                x.shape()
            ),
        ));
    }
    let ksize = &w.shape()[2..];
    let win = Window::new(op, &x.shape()[2..], &options.args(ksize), options.cover_all)?;
    add_bias(op, conv_node(x, w, op, win, g)?, b)
}

/// N-dimensional transposed convolution (Chainer's `deconvolution_nd`), the gradient of
/// [`convolution_nd`] with respect to its input: `x` `(N, C, d1, ..., dn)` with `W`
/// `(C, out_c / groups, k1, ..., kn)` and an optional bias `(out_c,)` gives `(N, out_c,
/// o1, ..., on)`, `oi = stride (di - 1) + dilate (ki - 1) + 1 - 2 pad` unless
/// `options.outsize` says otherwise (any size whose convolution gives back `di`).
///
/// ```
/// use kusari::prelude::*;
/// use kusari::functions::ConvOptions;
/// let x = Variable::new(Array::ones(&[1, 1, 2, 2], DType::F64)?);
/// let w = Variable::new(Array::ones(&[1, 1, 3, 3], DType::F64)?);
/// let y = F::deconvolution_nd(&x, &w, None, &ConvOptions::default().stride(2))?;
/// assert_eq!(y.shape(), &[1, 1, 5, 5]); // 2 (2 - 1) + 3
/// // The middle row and column are where the two windows overlap.
/// assert_eq!(y.array().to_vec::<f64>()?[..5], [1.0, 1.0, 2.0, 1.0, 1.0]);
/// # Ok::<(), kusari::Error>(())
/// ```
pub fn deconvolution_nd(
    x: &Variable,
    w: &Variable,
    b: Option<&Variable>,
    options: &ConvOptions,
) -> Result<Variable> {
    deconvolution("deconvolution_nd", None, x, w, b, options)
}

/// 2-d transposed convolution (Chainer's `deconvolution_2d`): [`deconvolution_nd`] for
/// `(N, C, H, W)`.
pub fn deconvolution_2d(
    x: &Variable,
    w: &Variable,
    b: Option<&Variable>,
    options: &ConvOptions,
) -> Result<Variable> {
    deconvolution("deconvolution_2d", Some(2), x, w, b, options)
}

fn deconvolution(
    op: &'static str,
    spatial: Option<usize>,
    x: &Variable,
    w: &Variable,
    b: Option<&Variable>,
    options: &ConvOptions,
) -> Result<Variable> {
    check_operands(op, x, w, spatial)?;
    let c = x.shape()[1];
    let wc = w.shape()[0];
    let g = options.groups;
    check_groups(
        op,
        g,
        [("the input's channels", c), ("W's input channels", wc)],
    )?;
    if wc != c {
        return Err(shape_error(
            op,
            format!(
                "W {:?} takes {wc} input channels, but x {:?} has {c}",
                w.shape(),
                x.shape()
            ),
        ));
    }
    let ksize = &w.shape()[2..];
    let win = Window::transposed(
        op,
        &x.shape()[2..],
        &options.args(ksize),
        options.cover_all,
        options.outsize.as_deref(),
    )?;
    add_bias(op, conv_transpose_node(x, w, op, win, g)?, b)
}
