//! Convolution links (Chainer's `Convolution2D`, `ConvolutionND`, `Deconvolution2D`): a
//! weight `W` and an optional bias `b`, `W`'s input channels found at the first forward when
//! they are not given.

use super::Parameter;
use super::initializers::{Initializer, LeCunNormal, Zero};
use crate::error::{Error, Result};
use crate::functions::{ConvOptions, Dims, convolution_2d, convolution_nd, deconvolution_2d};
use crate::{DType, Link, Variable};

/// The weight's shape for `in_channels`: `(out, in / groups, k...)` for a convolution,
/// `(in, out / groups, k...)` for a deconvolution.
fn weight_shape(
    op: &'static str,
    transposed: bool,
    (in_c, out_c): (usize, usize),
    ksize: &[usize],
    groups: usize,
) -> Result<Vec<usize>> {
    let divisible = groups > 0 && in_c % groups == 0 && out_c % groups == 0;
    if !divisible {
        return Err(Error::Shape {
            op,
            msg: format!(
                "in_channels ({in_c}) and out_channels ({out_c}) must both be divisible by \
                 groups ({groups})"
            ),
        });
    }
    let mut shape = match transposed {
        false => vec![out_c, in_c / groups],
        true => vec![in_c, out_c / groups],
    };
    shape.extend(ksize);
    Ok(shape)
}

/// A convolution link's parts, shared by the three links.
struct Parts {
    w: Parameter,
    b: Option<Parameter>,
    out_channels: usize,
    ksize: Vec<usize>,
}

fn parts(
    op: &'static str,
    transposed: bool,
    (ndim, in_channels, out_channels): (usize, Option<usize>, usize),
    ksize: Vec<usize>,
    options: &ConvOptions,
    (nobias, dtype): (bool, DType),
    initial_w: impl Initializer + 'static,
) -> Result<Parts> {
    let ksize = match ksize.len() {
        1 => vec![ksize[0]; ndim],
        n if n == ndim => ksize,
        n => {
            return Err(Error::Shape {
                op,
                msg: format!("ksize {ksize:?} has {n} values for {ndim} spatial axes"),
            });
        }
    };
    let w = Parameter::new(initial_w, dtype);
    if let Some(in_c) = in_channels {
        let shape = weight_shape(op, transposed, (in_c, out_channels), &ksize, options.groups)?;
        w.initialize(&shape)?;
    }
    let b = match nobias {
        true => None,
        false => Some(Parameter::with_shape(Zero, &[out_channels], dtype)?),
    };
    Ok(Parts {
        w,
        b,
        out_channels,
        ksize,
    })
}

/// `W` initialised for `x`'s channels if it is not yet, and `b` as a variable.
fn prepare(
    op: &'static str,
    transposed: bool,
    w: &Parameter,
    b: &Option<Parameter>,
    (out_channels, ksize, groups): (usize, &[usize], usize),
    x: &Variable,
) -> Result<(Variable, Option<Variable>)> {
    if !w.is_initialized() {
        let Some(&in_c) = x.shape().get(1) else {
            return Err(Error::Shape {
                op,
                msg: format!("the input must be (N, C, spatial...), got {:?}", x.shape()),
            });
        };
        w.initialize(&weight_shape(
            op,
            transposed,
            (in_c, out_channels),
            ksize,
            groups,
        )?)?;
    }
    let b = b.as_ref().map(Parameter::variable).transpose()?;
    Ok((w.variable()?, b))
}

/// A 2-d convolution layer (Chainer's `Convolution2D`): `convolution_2d(x, W, b, options)`
/// with `W` `(out_channels, in_channels / groups, kh, kw)` drawn from `LeCunNormal` (Chainer's
/// default) and `b` zeros.
///
/// ```
/// use kusari::prelude::*;
/// use kusari::functions::ConvOptions;
/// use kusari::link::Convolution2D;
/// let conv = Convolution2D::new(None, 8, 3, ConvOptions::default().pad(1), false, DType::F32)?;
/// let x = Variable::new(Array::zeros(&[2, 3, 6, 6], DType::F32)?);
/// assert_eq!(conv.forward(&x)?.shape(), &[2, 8, 6, 6]);
/// assert_eq!(conv.W.shape(), Some(vec![8, 3, 3, 3])); // in_channels from the first input
/// # Ok::<(), kusari::Error>(())
/// ```
#[derive(Link)]
#[kusari(crate = "crate")]
#[allow(non_snake_case)] // Chainer's names: the parameters' paths are `/W` and `/b`.
pub struct Convolution2D {
    /// The weight, `(out_channels, in_channels / groups, kh, kw)`.
    pub W: Parameter,
    /// The bias, `(out_channels,)`, unless `nobias`.
    pub b: Option<Parameter>,
    #[kusari(skip)]
    options: ConvOptions,
    #[kusari(skip)]
    out_channels: usize,
    #[kusari(skip)]
    ksize: Vec<usize>,
}

impl Convolution2D {
    /// A layer of `out_channels` filters of `ksize` (one size or `[kh, kw]`); `in_channels`
    /// `None` takes them from the first input.
    pub fn new(
        in_channels: Option<usize>,
        out_channels: usize,
        ksize: impl Dims,
        options: ConvOptions,
        nobias: bool,
        dtype: DType,
    ) -> Result<Self> {
        Self::with_initializer(
            in_channels,
            out_channels,
            ksize,
            options,
            nobias,
            dtype,
            LeCunNormal::default(),
        )
    }

    /// [`Convolution2D::new`] with `W` drawn from `initial_w` (Chainer's `initialW`).
    pub fn with_initializer(
        in_channels: Option<usize>,
        out_channels: usize,
        ksize: impl Dims,
        options: ConvOptions,
        nobias: bool,
        dtype: DType,
        initial_w: impl Initializer + 'static,
    ) -> Result<Self> {
        let p = parts(
            "Convolution2D",
            false,
            (2, in_channels, out_channels),
            ksize.dims(),
            &options,
            (nobias, dtype),
            initial_w,
        )?;
        Ok(Convolution2D {
            W: p.w,
            b: p.b,
            options,
            out_channels: p.out_channels,
            ksize: p.ksize,
        })
    }

    /// The convolution of `x` `(N, C, H, W)`.
    pub fn forward(&self, x: &Variable) -> Result<Variable> {
        let dims = (self.out_channels, &self.ksize[..], self.options.groups);
        let (w, b) = prepare("Convolution2D", false, &self.W, &self.b, dims, x)?;
        convolution_2d(x, &w, b.as_ref(), &self.options)
    }
}

/// An N-dimensional convolution layer (Chainer's `ConvolutionND`) over `ndim` (1 to 3)
/// spatial axes: `convolution_nd(x, W, b, options)`, `W` `(out_channels, in_channels / groups,
/// k...)` from `LeCunNormal`, `b` zeros.
///
/// ```
/// use kusari::prelude::*;
/// use kusari::functions::ConvOptions;
/// use kusari::link::ConvolutionND;
/// let conv = ConvolutionND::new(1, Some(2), 4, 3, ConvOptions::default(), true, DType::F64)?;
/// let x = Variable::new(Array::zeros(&[5, 2, 10], DType::F64)?);
/// assert_eq!(conv.forward(&x)?.shape(), &[5, 4, 8]);
/// # Ok::<(), kusari::Error>(())
/// ```
#[derive(Link)]
#[kusari(crate = "crate")]
#[allow(non_snake_case)]
pub struct ConvolutionND {
    /// The weight, `(out_channels, in_channels / groups, k...)`.
    pub W: Parameter,
    /// The bias, `(out_channels,)`, unless `nobias`.
    pub b: Option<Parameter>,
    #[kusari(skip)]
    options: ConvOptions,
    #[kusari(skip)]
    out_channels: usize,
    #[kusari(skip)]
    ksize: Vec<usize>,
}

impl ConvolutionND {
    /// A layer over `ndim` spatial axes of `out_channels` filters of `ksize`.
    pub fn new(
        ndim: usize,
        in_channels: Option<usize>,
        out_channels: usize,
        ksize: impl Dims,
        options: ConvOptions,
        nobias: bool,
        dtype: DType,
    ) -> Result<Self> {
        let p = parts(
            "ConvolutionND",
            false,
            (ndim, in_channels, out_channels),
            ksize.dims(),
            &options,
            (nobias, dtype),
            LeCunNormal::default(),
        )?;
        Ok(ConvolutionND {
            W: p.w,
            b: p.b,
            options,
            out_channels: p.out_channels,
            ksize: p.ksize,
        })
    }

    /// The convolution of `x` `(N, C, spatial...)`.
    pub fn forward(&self, x: &Variable) -> Result<Variable> {
        let dims = (self.out_channels, &self.ksize[..], self.options.groups);
        let (w, b) = prepare("ConvolutionND", false, &self.W, &self.b, dims, x)?;
        convolution_nd(x, &w, b.as_ref(), &self.options)
    }
}

/// A 2-d transposed convolution layer (Chainer's `Deconvolution2D`):
/// `deconvolution_2d(x, W, b, options)` with `W` `(in_channels, out_channels / groups, kh, kw)`
/// from `LeCunNormal` and `b` zeros; `options.outsize` fixes the output size.
///
/// ```
/// use kusari::prelude::*;
/// use kusari::functions::ConvOptions;
/// use kusari::link::Deconvolution2D;
/// let up = Deconvolution2D::new(Some(4), 2, 2, ConvOptions::default().stride(2), false, DType::F32)?;
/// let x = Variable::new(Array::zeros(&[1, 4, 3, 3], DType::F32)?);
/// assert_eq!(up.forward(&x)?.shape(), &[1, 2, 6, 6]);
/// # Ok::<(), kusari::Error>(())
/// ```
#[derive(Link)]
#[kusari(crate = "crate")]
#[allow(non_snake_case)]
pub struct Deconvolution2D {
    /// The weight, `(in_channels, out_channels / groups, kh, kw)`.
    pub W: Parameter,
    /// The bias, `(out_channels,)`, unless `nobias`.
    pub b: Option<Parameter>,
    #[kusari(skip)]
    options: ConvOptions,
    #[kusari(skip)]
    out_channels: usize,
    #[kusari(skip)]
    ksize: Vec<usize>,
}

impl Deconvolution2D {
    /// A layer giving `out_channels` channels through windows of `ksize`; `in_channels` `None`
    /// takes them from the first input.
    pub fn new(
        in_channels: Option<usize>,
        out_channels: usize,
        ksize: impl Dims,
        options: ConvOptions,
        nobias: bool,
        dtype: DType,
    ) -> Result<Self> {
        let p = parts(
            "Deconvolution2D",
            true,
            (2, in_channels, out_channels),
            ksize.dims(),
            &options,
            (nobias, dtype),
            LeCunNormal::default(),
        )?;
        Ok(Deconvolution2D {
            W: p.w,
            b: p.b,
            options,
            out_channels: p.out_channels,
            ksize: p.ksize,
        })
    }

    /// The transposed convolution of `x` `(N, C, H, W)`.
    pub fn forward(&self, x: &Variable) -> Result<Variable> {
        let dims = (self.out_channels, &self.ksize[..], self.options.groups);
        let (w, b) = prepare("Deconvolution2D", true, &self.W, &self.b, dims, x)?;
        deconvolution_2d(x, &w, b.as_ref(), &self.options)
    }
}
