//! The operations on host buffers: each takes buffers with their layouts, dispatches on the
//! dtype once, and returns a new C-contiguous buffer.

use ndarray::LinalgScalar;
use num_traits::Float as _;

use super::{CpuRef, CpuStorage, map_slices, map1, map1_from, matmul, reduce, zip2, zip3};
use crate::DType;
use crate::dtype::{Element, NumElement as _, with_dtype, with_float_dtype, with_num_dtype};
use crate::error::{Error, Result};
use crate::layout::Layout;
use crate::op::{
    BinaryOp, CmpOp, FLOATING, FloatBinaryOp, FloatUnaryOp, NUMERIC, Reduction, SoftmaxForm,
    UnaryOp, unsupported,
};

/// The dtypes the host multiplies matrices of (convert others with `astype`).
pub(crate) const MATMUL_DTYPES: &str = "int32, int64, float32 or float64";

impl CpuStorage {
    /// A typed reference to the buffer with `layout`, or an error naming `op` when `T` is not
    /// its element type.
    #[inline]
    pub(crate) fn typed<'a, T: Element>(
        &'a self,
        op: &'static str,
        layout: &'a Layout,
    ) -> Result<CpuRef<'a, T>> {
        match self.as_slice::<T>() {
            Some(data) => Ok(CpuRef { data, layout }),
            None => Err(Error::ElementType {
                op,
                requested: T::DTYPE,
                actual: self.dtype(),
            }),
        }
    }

    /// `size` elements of `value` (cast to `dtype`).
    pub(crate) fn full(op: &'static str, size: usize, value: f64, dtype: DType) -> Result<Self> {
        with_dtype!(dtype, T => {
            let mut data = super::pool::alloc::<T>(op, size)?;
            data.resize(size, <T as Element>::from_f64(value));
            Ok(Self::from_vec(data))
        })
    }

    pub(crate) fn unary<O: UnaryOp>(&self, l: &Layout) -> Result<Self> {
        with_num_dtype!(self.dtype(), T => {
            Ok(Self::from_vec(map1(O::NAME, self.typed::<T>(O::NAME, l)?, O::f::<T>)?))
        }, bool => Err(unsupported(O::NAME, self.dtype(), l.shape(), NUMERIC)))
    }

    /// `O` elementwise: float32 and float64 through the vectorized math of `cpu::math` where `O`
    /// has a form there; the half types, and the ops without one, one element at a time (half
    /// types through float32).
    pub(crate) fn float_unary<O: FloatUnaryOp>(&self, l: &Layout) -> Result<Self> {
        match (self.dtype(), O::MATH) {
            (DType::F32, Some(math)) => Ok(Self::from_vec(map_slices(
                O::NAME,
                self.typed::<f32>(O::NAME, l)?,
                super::elementwise::math_par_min::<f32>(math),
                |src, dst| super::math::apply_f32(math, src, dst),
            )?)),
            (DType::F64, Some(math)) => Ok(Self::from_vec(map_slices(
                O::NAME,
                self.typed::<f64>(O::NAME, l)?,
                super::elementwise::math_par_min::<f64>(math),
                |src, dst| super::math::apply_f64(math, src, dst),
            )?)),
            _ => with_float_dtype!(self.dtype(), T => {
                Ok(Self::from_vec(map1(O::NAME, self.typed::<T>(O::NAME, l)?, O::f::<T>)?))
            }, other => Err(unsupported(O::NAME, self.dtype(), l.shape(), FLOATING))),
        }
    }

    /// `O` over `self` and `rhs` broadcast to `shape` (checked by the caller).
    #[inline]
    pub(crate) fn binary<O: BinaryOp>(
        &self,
        l: &Layout,
        rhs: &Self,
        rl: &Layout,
        shape: &[usize],
    ) -> Result<Self> {
        with_num_dtype!(self.dtype(), T => {
            let (a, b) = (self.typed::<T>(O::NAME, l)?, rhs.typed::<T>(O::NAME, rl)?);
            Ok(Self::from_vec(zip2(O::NAME, a, b, shape, O::f::<T>)?))
        }, bool => Err(unsupported(O::NAME, self.dtype(), l.shape(), NUMERIC)))
    }

    pub(crate) fn float_binary<O: FloatBinaryOp>(
        &self,
        l: &Layout,
        rhs: &Self,
        rl: &Layout,
        shape: &[usize],
    ) -> Result<Self> {
        with_float_dtype!(self.dtype(), T => {
            let (a, b) = (self.typed::<T>(O::NAME, l)?, rhs.typed::<T>(O::NAME, rl)?);
            Ok(Self::from_vec(zip2(O::NAME, a, b, shape, O::f::<T>)?))
        }, other => Err(unsupported(O::NAME, self.dtype(), l.shape(), FLOATING)))
    }

    pub(crate) fn compare<O: CmpOp>(
        &self,
        l: &Layout,
        rhs: &Self,
        rl: &Layout,
        shape: &[usize],
    ) -> Result<Self> {
        with_dtype!(self.dtype(), T => {
            let (a, b) = (self.typed::<T>(O::NAME, l)?, rhs.typed::<T>(O::NAME, rl)?);
            Ok(Self::from_vec(zip2(O::NAME, a, b, shape, O::f::<T>)?))
        })
    }

    /// `O` with the scalar `s` (cast to the dtype) as its second operand, or its first.
    pub(crate) fn binary_scalar<O: BinaryOp>(
        &self,
        l: &Layout,
        s: f64,
        scalar_first: bool,
    ) -> Result<Self> {
        with_num_dtype!(self.dtype(), T => {
            let a = self.typed::<T>(O::NAME, l)?;
            let s = <T as Element>::from_f64(s);
            // `move`: the scalar by value, so that the loop need not reload it through a pointer
            // that might alias the output (which keeps it from vectorizing).
            let v = if scalar_first {
                map1(O::NAME, a, move |x| O::f(s, x))?
            } else {
                map1(O::NAME, a, move |x| O::f(x, s))?
            };
            Ok(Self::from_vec(v))
        }, bool => Err(unsupported(O::NAME, self.dtype(), l.shape(), NUMERIC)))
    }

    pub(crate) fn pow_scalar(&self, l: &Layout, p: f64) -> Result<Self> {
        with_float_dtype!(self.dtype(), T => {
            let p = <T as Element>::from_f64(p);
            // Six float32 ns an element, twenty float64 (glibc's powf and pow).
            let par_min = super::elementwise::elements_for(if size_of::<T>() > 4 { 20.0 } else { 6.0 });
            let x = self.typed::<T>("pow", l)?;
            Ok(Self::from_vec(map1_from("pow", x, par_min, move |x| x.powf(p))?))
        }, other => Err(unsupported("pow", self.dtype(), l.shape(), FLOATING)))
    }

    /// `self > s`, with `s` one the dtype holds exactly (the caller rounds it).
    // `x > s` is generic; clippy sees its `bool` instance as a comparison of booleans.
    #[allow(clippy::bool_comparison)]
    pub(crate) fn gt_scalar(&self, l: &Layout, s: f64) -> Result<Self> {
        with_dtype!(self.dtype(), T => {
            let s = <T as Element>::from_f64(s);
            Ok(Self::from_vec(map1("greater", self.typed::<T>("greater", l)?, move |x| x > s)?))
        })
    }

    /// Elements of `a` where `c` holds, of `b` elsewhere, all broadcast to `shape`.
    #[allow(clippy::too_many_arguments)]
    pub(crate) fn where_cond(
        c: &Self,
        cl: &Layout,
        a: &Self,
        al: &Layout,
        b: &Self,
        bl: &Layout,
        shape: &[usize],
    ) -> Result<Self> {
        const OP: &str = "where";
        let c = c.typed::<bool>(OP, cl)?;
        with_dtype!(a.dtype(), T => {
            let (x, y) = (a.typed::<T>(OP, al)?, b.typed::<T>(OP, bl)?);
            Ok(Self::from_vec(zip3(OP, c, x, y, shape, |c, x, y| if c { x } else { y })?))
        })
    }

    /// `x * y + z`, broadcast to `shape`.
    #[allow(clippy::too_many_arguments)]
    #[inline]
    pub(crate) fn mul_add(
        x: &Self,
        xl: &Layout,
        y: &Self,
        yl: &Layout,
        z: &Self,
        zl: &Layout,
        shape: &[usize],
    ) -> Result<Self> {
        const OP: &str = "mul_add";
        with_num_dtype!(x.dtype(), T => {
            let (a, b, c) = (x.typed::<T>(OP, xl)?, y.typed::<T>(OP, yl)?, z.typed::<T>(OP, zl)?);
            Ok(Self::from_vec(zip3(OP, a, b, c, shape, |a, b, c| a.times(b).plus(c))?))
        }, bool => Err(unsupported(OP, x.dtype(), xl.shape(), NUMERIC)))
    }

    /// The elements converted to `dtype`, as `Array::astype` documents.
    pub(crate) fn astype(&self, l: &Layout, dtype: DType) -> Result<Self> {
        with_dtype!(self.dtype(), S => {
            let a = self.typed::<S>("astype", l)?;
            Ok(with_dtype!(dtype, D => Self::from_vec(
                map1("astype", a, |x| match Element::to_wide(x) {
                    Some(i) => D::from_wide(i),
                    None => <D as Element>::from_f64(x.to_f64()),
                })?
            )))
        })
    }

    /// The elements in C order, in a buffer of their own.
    pub(crate) fn contiguous(&self, l: &Layout) -> Result<Self> {
        with_dtype!(self.dtype(), T => {
            Ok(Self::from_vec(map1("contiguous", self.typed::<T>("contiguous", l)?, |x| x)?))
        })
    }

    /// Softmax or log-softmax along the last axis, fused, for float32 and float64 (C order of
    /// `l`'s shape); `None` for the other dtypes, which the caller composes from array ops.
    pub(crate) fn softmax_last(&self, l: &Layout, form: SoftmaxForm) -> Result<Option<Self>> {
        let len = row_len(l);
        let op = form.name();
        match self.dtype() {
            DType::F32 => fused_rows(op, self.typed::<f32>(op, l)?, |x, out| {
                super::softmax::rows(x, len, form, out)
            }),
            DType::F64 => fused_rows(op, self.typed::<f64>(op, l)?, |x, out| {
                super::softmax::rows(x, len, form, out)
            }),
            _ => Ok(None),
        }
    }

    /// [`super::softmax::grad_rows`]: the gradient of softmax or log-softmax along the last axis
    /// from its output `self` and the output's gradient `gy` (one shape, checked by the caller),
    /// C order; `None` for dtypes other than float32 and float64.
    pub(crate) fn softmax_grad_last(
        &self,
        l: &Layout,
        gy: &Self,
        gl: &Layout,
        form: SoftmaxForm,
    ) -> Result<Option<Self>> {
        let op = form.name();
        let len = row_len(l);
        match self.dtype() {
            DType::F32 => {
                let g = gy.typed::<f32>(op, gl)?.to_cow(op)?;
                fused_rows(op, self.typed::<f32>(op, l)?, |y, out| {
                    super::softmax::grad_rows(y, &g, len, form, out)
                })
            }
            DType::F64 => {
                let g = gy.typed::<f64>(op, gl)?.to_cow(op)?;
                fused_rows(op, self.typed::<f64>(op, l)?, |y, out| {
                    super::softmax::grad_rows(y, &g, len, form, out)
                })
            }
            _ => Ok(None),
        }
    }

    /// Each row's cross-entropy against its label (`ln Σ exp(x) - x[label]`, 0 where the label
    /// is negative) of a `[N, C]` float32 or float64 buffer; `None` for the other dtypes.
    pub(crate) fn cross_entropy_rows(&self, l: &Layout, labels: &[i64]) -> Result<Option<Self>> {
        let op = "softmax_cross_entropy";
        let len = row_len(l);
        match self.dtype() {
            DType::F32 => Ok(Some(Self::from_vec(super::softmax::cross_entropy(
                &self.typed::<f32>(op, l)?.to_cow(op)?,
                len,
                labels,
            )))),
            DType::F64 => Ok(Some(Self::from_vec(super::softmax::cross_entropy(
                &self.typed::<f64>(op, l)?.to_cow(op)?,
                len,
                labels,
            )))),
            _ => Ok(None),
        }
    }

    /// [`super::softmax::cross_entropy_grad`] of the rows of `self` (float32 or float64; `None`
    /// for other dtypes), `scale` the output gradient over the count.
    pub(crate) fn cross_entropy_grad_rows(
        &self,
        l: &Layout,
        labels: &[i64],
        scale: f64,
    ) -> Result<Option<Self>> {
        let op = "softmax_cross_entropy";
        let len = row_len(l);
        match self.dtype() {
            DType::F32 => fused_rows(op, self.typed::<f32>(op, l)?, |x, out| {
                super::softmax::cross_entropy_grad(x, len, labels, scale as f32, out)
            }),
            DType::F64 => fused_rows(op, self.typed::<f64>(op, l)?, |x, out| {
                super::softmax::cross_entropy_grad(x, len, labels, scale, out)
            }),
            _ => Ok(None),
        }
    }

    /// The reduction over `axes` (sorted, distinct), the kept axes in C order.
    pub(crate) fn reduce(
        &self,
        op: &'static str,
        l: &Layout,
        axes: &[usize],
        kind: Reduction,
    ) -> Result<Self> {
        with_num_dtype!(self.dtype(), T => {
            Ok(Self::from_vec(reduce(op, self.typed::<T>(op, l)?, axes, kind)?))
        }, bool => Err(unsupported(op, self.dtype(), l.shape(), NUMERIC)))
    }

    /// `self @ rhs` for operands shaped `[.., n, k]` and `[.., k, m]` whose batch axes broadcast
    /// to `batch` (checked by the caller): `batch + [n, m]` in C order. Half types are
    /// multiplied in float32 by the caller.
    pub(crate) fn matmul(
        &self,
        l: &Layout,
        rhs: &Self,
        rl: &Layout,
        batch: &[usize],
        nkm: (usize, usize, usize),
    ) -> Result<Self> {
        fn product<T: Element + LinalgScalar>(
            a: CpuRef<'_, T>,
            b: CpuRef<'_, T>,
            batch: &[usize],
            nkm: (usize, usize, usize),
        ) -> Result<CpuStorage> {
            Ok(CpuStorage::from_vec(matmul("matmul", a, b, batch, nkm)?))
        }
        const OP: &str = "matmul";
        match self.dtype() {
            DType::I32 => product(self.typed::<i32>(OP, l)?, rhs.typed(OP, rl)?, batch, nkm),
            DType::I64 => product(self.typed::<i64>(OP, l)?, rhs.typed(OP, rl)?, batch, nkm),
            DType::F32 => product(self.typed::<f32>(OP, l)?, rhs.typed(OP, rl)?, batch, nkm),
            DType::F64 => product(self.typed::<f64>(OP, l)?, rhs.typed(OP, rl)?, batch, nkm),
            DType::F16 | DType::BF16 => Err(unsupported(
                OP,
                self.dtype(),
                l.shape(),
                "int32, int64, float32 or float64 (half types multiply in float32)",
            )),
            // bool and the integers narrower than 32 bits or unsigned.
            _ => Err(unsupported(OP, self.dtype(), l.shape(), MATMUL_DTYPES)),
        }
    }
}

/// The length of `l`'s rows (its last axis; 1 for a 0-d layout or an empty last axis), as the
/// fused row kernels of `cpu::softmax` take it.
fn row_len(l: &Layout) -> usize {
    l.shape().last().copied().unwrap_or(1).max(1)
}

/// A fused row kernel of `cpu::softmax` over `x` in C order: `fill(x, out)` writes every element
/// of a fresh buffer of `x`'s length.
fn fused_rows<T: Element>(
    op: &'static str,
    x: CpuRef<'_, T>,
    fill: impl FnOnce(&[T], &mut [std::mem::MaybeUninit<T>]),
) -> Result<Option<CpuStorage>> {
    let x = x.to_cow(op)?;
    let mut out: Vec<T> = super::pool::alloc(op, x.len())?;
    fill(&x, &mut out.spare_capacity_mut()[..x.len()]);
    // SAFETY: `fill` wrote every element of `out[..x.len()]`.
    unsafe { out.set_len(x.len()) };
    Ok(Some(CpuStorage::from_vec(out)))
}
