//! Sliding windows over an array's spatial axes: `im2col` and its adjoint `col2im`, what
//! convolution and pooling are built from.

use crate::error::{Error, Result};
use crate::layout::{Layout, checked_size};
use crate::window::Window;
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
