//! Reductions over axes: sum, mean, max, min.

use crate::error::{Error, Result};
use crate::layout::{Layout, normalize_axes};
use crate::op::{FLOATING, Reduction, SoftmaxForm};
use crate::{Array, DType};

use super::elementwise::unsupported;

impl Array {
    fn reduce(
        &self,
        op: &'static str,
        axes: Option<&[isize]>,
        keepdims: bool,
        kind: Reduction,
    ) -> Result<Array> {
        let axes = normalize_axes(op, axes, self.shape())?;
        if kind != Reduction::Sum && axes.iter().any(|&a| self.shape()[a] == 0) {
            return Err(Error::Shape {
                op,
                msg: format!("zero-size axis in shape {:?} has no {op}", self.shape()),
            });
        }
        // Half-precision sums accumulate in f32: summing many f16 values in f16 loses the result.
        if kind == Reduction::Sum && matches!(self.dtype(), DType::F16 | DType::BF16) {
            return self
                .astype(DType::F32)?
                .reduce(
                    op,
                    Some(&axes.iter().map(|&a| a as isize).collect::<Vec<_>>()),
                    keepdims,
                    kind,
                )?
                .astype(self.dtype());
        }
        let reduced: Vec<usize> = (0..self.ndim())
            .filter(|a| !axes.contains(a))
            .map(|a| self.shape()[a])
            .collect();
        // Reducing a zero-size axis can leave more elements than the input had (none).
        crate::layout::checked_size(op, &reduced, self.dtype())?;
        let out = self.storage().reduce(op, self.layout(), &axes, kind)?;
        let out = Array::from_storage(out, Layout::contiguous(&reduced));
        if keepdims {
            let kept: Vec<usize> = (0..self.ndim())
                .map(|a| {
                    if axes.contains(&a) {
                        1
                    } else {
                        self.shape()[a]
                    }
                })
                .collect();
            return out.reshape(&kept);
        }
        Ok(out)
    }

    /// Sum of all elements, a 0-dimensional array; [`sum_axes`](Self::sum_axes) sums over
    /// some axes. Half-precision sums accumulate in float32.
    ///
    /// ```
    /// let a = kusari::Array::from_vec(vec![1.0f32, 2.0, 3.0, 4.0], &[2, 2]).unwrap();
    /// assert_eq!(a.sum().unwrap().to_vec::<f32>().unwrap(), vec![10.0]);
    /// assert_eq!(a.sum_axes(&[0], false).unwrap().to_vec::<f32>().unwrap(), vec![4.0, 6.0]);
    /// assert_eq!(a.sum_axes(&[0, 1], true).unwrap().shape(), &[1, 1]);
    /// ```
    pub fn sum(&self) -> Result<Array> {
        self.reduce("sum", None, false, Reduction::Sum)
    }

    /// Sum over `axes` (negative axes count from the end; `&[]` reduces nothing), keeping them
    /// as length 1 when `keepdims` (NumPy's `a.sum(axis, keepdims=..)`).
    pub fn sum_axes(&self, axes: &[isize], keepdims: bool) -> Result<Array> {
        self.reduce("sum", Some(axes), keepdims, Reduction::Sum)
    }

    /// Mean of all elements of a floating-point array, 0-dimensional.
    ///
    /// float16 and bfloat16 are summed and divided in float32, then rounded once (as NumPy does):
    /// neither the sum of many elements nor the element count need fit the half type.
    pub fn mean(&self) -> Result<Array> {
        self.mean_over(None, false)
    }

    /// Mean over `axes`, keeping them as length 1 when `keepdims` (half types as in
    /// [`mean`](Self::mean)).
    pub fn mean_axes(&self, axes: &[isize], keepdims: bool) -> Result<Array> {
        self.mean_over(Some(axes), keepdims)
    }

    fn mean_over(&self, axes: Option<&[isize]>, keepdims: bool) -> Result<Array> {
        if !self.dtype().is_float() {
            return Err(unsupported("mean", self, FLOATING));
        }
        if matches!(self.dtype(), DType::F16 | DType::BF16) {
            return self
                .astype(DType::F32)?
                .mean_over(axes, keepdims)?
                .astype(self.dtype());
        }
        let axes_n = normalize_axes("mean", axes, self.shape())?;
        let count: usize = axes_n.iter().map(|&a| self.shape()[a]).product();
        self.reduce("sum", axes, keepdims, Reduction::Sum)?
            .div_scalar(count as f64)
    }

    /// Maximum of all elements, 0-dimensional; NaN propagates.
    pub fn max(&self) -> Result<Array> {
        self.reduce("max", None, false, Reduction::Max)
    }

    /// Maximum over `axes`, keeping them as length 1 when `keepdims`; NaN propagates.
    pub fn max_axes(&self, axes: &[isize], keepdims: bool) -> Result<Array> {
        self.reduce("max", Some(axes), keepdims, Reduction::Max)
    }

    /// Minimum of all elements, 0-dimensional; NaN propagates.
    pub fn min(&self) -> Result<Array> {
        self.reduce("min", None, false, Reduction::Min)
    }

    /// Minimum over `axes`, keeping them as length 1 when `keepdims`; NaN propagates.
    pub fn min_axes(&self, axes: &[isize], keepdims: bool) -> Result<Array> {
        self.reduce("min", Some(axes), keepdims, Reduction::Min)
    }

    /// Softmax along `axis`, `exp(x - max) / Σ exp(x - max)` (stable for any magnitude).
    ///
    /// ```
    /// let x = kusari::Array::from_vec(vec![0.0f64, 2f64.ln(), 1000.0, 1000.0], &[2, 2])?;
    /// let y = x.softmax(-1)?.to_vec::<f64>()?;
    /// assert!((y[0] - 1.0 / 3.0).abs() < 1e-15 && (y[1] - 2.0 / 3.0).abs() < 1e-15);
    /// assert_eq!(&y[2..], &[0.5, 0.5]);
    /// # Ok::<(), kusari::Error>(())
    /// ```
    pub fn softmax(&self, axis: isize) -> Result<Array> {
        self.softmax_form(axis, SoftmaxForm::Softmax)
    }

    /// `ln softmax(x)` along `axis`, `x - max - ln Σ exp(x - max)`.
    pub fn log_softmax(&self, axis: isize) -> Result<Array> {
        self.softmax_form(axis, SoftmaxForm::LogSoftmax)
    }

    /// One fused pass per row where the storage has it (the host, float32 and float64, along
    /// the last axis), else composed of array operations.
    fn softmax_form(&self, axis: isize, form: SoftmaxForm) -> Result<Array> {
        let op = form.name();
        crate::op::require_float(op, self.dtype(), self.shape())?;
        let a = crate::layout::normalize_axis(op, axis, self.shape())?;
        if a + 1 == self.ndim()
            && let Some(out) = self.storage().softmax_last(self.layout(), form)?
        {
            return Ok(Array::from_storage(out, Layout::contiguous(self.shape())));
        }
        let axes = [a as isize];
        let m = self.max_axes(&axes, true)?;
        let shifted = self.sub(&m)?;
        let e = shifted.exp()?;
        let total = e.sum_axes(&axes, true)?;
        match form {
            SoftmaxForm::Softmax => e.div(&total),
            SoftmaxForm::LogSoftmax => shifted.sub(&total.log()?),
        }
    }
}
