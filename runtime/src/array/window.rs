//! Sliding windows over an array's spatial axes: `im2col` and its adjoint `col2im`, what
//! convolution and pooling are built from.

use crate::error::{Error, Result};
use crate::layout::{Layout, checked_size};
use crate::window::{ConvDims, ConvPass, Window};
use crate::{Array, DType};

impl Array {
    /// The `(N, C, spatial...)` array's windows: `(N, C, k..., out...)`, element
    /// `(n, c, k, o)` being `x[n, c, o * stride - pad + k * dilate]`, or `pad_value` where that
    /// lies outside `x`.
    pub(crate) fn im2col(&self, op: &'static str, w: &Window, pad_value: f64) -> Result<Array> {
        let (lead, spatial) = split_spatial(op, self, w.ndim())?;
        if spatial != w.input {
            return Err(Error::Shape {
                op,
                msg: format!(
                    "the input {:?} does not have the window's spatial size {:?}",
                    self.shape(),
                    w.input
                ),
            });
        }
        let mut shape = lead.to_vec();
        shape.extend(&w.ksize);
        shape.extend(&w.output);
        checked_size(op, &shape, self.dtype())?;
        if let Some(wide) = widened(self)? {
            return wide.im2col(op, w, pad_value)?.astype(self.dtype());
        }
        let out = self.storage().im2col(op, self.layout(), w, pad_value)?;
        Ok(Array::from_storage(out, Layout::contiguous(&shape)))
    }

    /// The adjoint of [`Array::im2col`]: a `(N, C, k..., out...)` array of windows summed into
    /// `(N, C, in...)`, each element added to the input position it was read from.
    pub(crate) fn col2im(&self, op: &'static str, w: &Window) -> Result<Array> {
        let n = w.ndim();
        let expected: Vec<usize> = w.ksize.iter().chain(&w.output).copied().collect();
        if self.ndim() != 2 + 2 * n || self.shape()[2..] != expected[..] {
            return Err(Error::Shape {
                op,
                msg: format!(
                    "columns {:?} are not (N, C, ksize..., out...) with ksize {:?} and out {:?}",
                    self.shape(),
                    w.ksize,
                    w.output
                ),
            });
        }
        let mut shape = self.shape()[..2].to_vec();
        shape.extend(&w.input);
        checked_size(op, &shape, self.dtype())?;
        if let Some(wide) = widened(self)? {
            return wide.col2im(op, w)?.astype(self.dtype());
        }
        let out = self.storage().col2im(op, self.layout(), w)?;
        Ok(Array::from_storage(out, Layout::contiguous(&shape)))
    }
}

impl Array {
    /// One of a convolution's products with `groups` channel groups over the window `w`:
    /// `Forward` of `x` `(N, C, in...)` and `W` `(OC, C / groups, k...)` gives `(N, OC,
    /// out...)`; `BackwardData` of `gy` `(N, OC, out...)` and `W` gives `(N, C, in...)` (a
    /// transposed convolution); `BackwardFilter` of `x` and `gy` gives `W`'s shape. Shapes are
    /// the caller's to check. Fused on the host, composed of `im2col`, a batched product and
    /// `col2im` elsewhere.
    pub(crate) fn conv(
        &self,
        op: &'static str,
        rhs: &Array,
        w: &Window,
        groups: usize,
        pass: ConvPass,
    ) -> Result<Array> {
        let (a, b) = (self.shape(), rhs.shape());
        let (n, c, oc) = match pass {
            ConvPass::Forward => (a[0], a[1], b[0]),
            ConvPass::BackwardData => (a[0], b[1] * groups, b[0]),
            ConvPass::BackwardFilter => (a[0], a[1], b[1]),
        };
        let d = ConvDims::new(n, c, oc, groups, w);
        let shape: Vec<usize> = match pass {
            ConvPass::Forward => [&[n, oc][..], &w.output].concat(),
            ConvPass::BackwardData => [&[n, c][..], &w.input].concat(),
            ConvPass::BackwardFilter => [&[oc, c / groups][..], &w.ksize].concat(),
        };
        checked_size(op, &shape, self.dtype())?;
        let fused =
            self.storage()
                .conv(op, self.layout(), (rhs.storage(), rhs.layout()), w, d, pass)?;
        if let Some(out) = fused {
            return Ok(Array::from_storage(out, Layout::contiguous(&shape)));
        }
        let g = groups;
        let ckg = d.cg * d.k;
        let weight = |wt: &Array| wt.reshape(&[1, g, d.ocg, ckg]);
        let cols = |x: &Array| x.im2col(op, w, 0.0)?.reshape(&[n, g, ckg, d.l_out]);
        match pass {
            ConvPass::Forward => weight(rhs)?.matmul(&cols(self)?)?.reshape(&shape),
            ConvPass::BackwardData => {
                let gy = self.reshape(&[n, g, d.ocg, d.l_out])?;
                let gcols = weight(rhs)?.transpose(Some(&[0, 1, 3, 2]))?.matmul(&gy)?;
                let cols_shape = [&[n, c][..], &w.ksize, &w.output].concat();
                gcols.reshape(&cols_shape)?.col2im(op, w)
            }
            ConvPass::BackwardFilter => {
                let gy = rhs.reshape(&[n, g, d.ocg, d.l_out])?;
                let per_sample = gy.matmul(&cols(self)?.transpose(Some(&[0, 1, 3, 2]))?)?;
                per_sample.sum_axes(&[0], false)?.reshape(&shape)
            }
        }
    }
}

/// `x` in float32 when it is a half type (windows are computed in float32 or float64).
fn widened(x: &Array) -> Result<Option<Array>> {
    match x.dtype() {
        DType::F16 | DType::BF16 => Ok(Some(x.astype(DType::F32)?)),
        _ => Ok(None),
    }
}

/// An `(N, C, spatial...)` array's `(N, C)` and spatial sizes, checked to have `n` spatial axes.
pub(crate) fn split_spatial<'a>(
    op: &'static str,
    x: &'a Array,
    n: usize,
) -> Result<(&'a [usize], &'a [usize])> {
    if x.ndim() != n + 2 {
        return Err(Error::Shape {
            op,
            msg: format!(
                "the input {:?} must be (N, C) and {n} spatial axes ({} axes), got {} axes",
                x.shape(),
                n + 2,
                x.ndim()
            ),
        });
    }
    Ok(x.shape().split_at(2))
}
