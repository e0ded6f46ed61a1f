//! Copies that move elements to other places: a new buffer assembled from pieces (concatenation,
//! padding, the gradient of a basic index), rows taken along an axis (integer-array indexing,
//! embeddings) and rows added back along it (their gradients).

use super::CpuStorage;
use super::pool;
use crate::DType;
use crate::dtype::{Element, NumElement as _, with_dtype, with_num_dtype};
use crate::error::Result;
use crate::layout::Layout;
use crate::op::{NUMERIC, unsupported};

/// Calls `f(k, offset)` for the `k`-th element of `l` in C order at buffer index `offset`.
fn for_each_offset(l: &Layout, mut f: impl FnMut(usize, usize)) {
    let shape = l.shape();
    let n = l.size();
    if n == 0 {
        return;
    }
    let strides = l.strides();
    let mut index = vec![0usize; shape.len()];
    let mut offset = l.offset() as isize;
    for k in 0..n {
        f(k, offset as usize);
        for axis in (0..shape.len()).rev() {
            index[axis] += 1;
            offset += strides[axis];
            if index[axis] < shape[axis] {
                break;
            }
            offset -= strides[axis] * shape[axis] as isize;
            index[axis] = 0;
        }
    }
}

impl CpuStorage {
    /// `size` elements of `fill` (cast to `dtype`) with each piece's elements (the buffer and
    /// its layout) written, in C order, to the elements of its destination layout.
    pub(crate) fn assemble(
        op: &'static str,
        size: usize,
        dtype: DType,
        fill: f64,
        pieces: &[(&CpuStorage, &Layout, &Layout)],
    ) -> Result<Self> {
        with_dtype!(dtype, T => {
            let mut data = pool::alloc::<T>(op, size)?;
            data.resize(size, <T as Element>::from_f64(fill));
            for &(src, sl, dst) in pieces {
                let values = src.typed::<T>(op, sl)?.to_cow(op)?;
                for_each_offset(dst, |k, at| data[at] = values[k]);
            }
            Ok(Self::from_vec(data))
        })
    }

    /// Rows `idx` of `l` (seen as `[outer, n, inner]`) along its middle axis, a zero row where an
    /// index is negative: `[outer, idx.len(), inner]` in C order. Indices are below `n`.
    pub(crate) fn take(
        &self,
        l: &Layout,
        idx: &[i64],
        (outer, n, inner): (usize, usize, usize),
    ) -> Result<Self> {
        const OP: &str = "take";
        with_dtype!(self.dtype(), T => {
            let x = self.typed::<T>(OP, l)?.to_cow(OP)?;
            let mut out = pool::alloc::<T>(OP, outer * idx.len() * inner)?;
            let zero = <T as Element>::from_f64(0.0);
            for o in 0..outer {
                for &r in idx {
                    if r < 0 {
                        out.extend(std::iter::repeat_n(zero, inner));
                    } else {
                        let start = (o * n + r as usize) * inner;
                        out.extend_from_slice(&x[start..start + inner]);
                    }
                }
            }
            Ok(Self::from_vec(out))
        })
    }

    /// The adjoint of [`take`](Self::take): `l` (seen as `[outer, idx.len(), inner]`) added
    /// into zeros `[outer, n_out, inner]` at rows `idx` (rows of negative indices dropped), in
    /// the order of `idx`.
    pub(crate) fn scatter_add(
        &self,
        l: &Layout,
        idx: &[i64],
        n_out: usize,
        (outer, inner): (usize, usize),
    ) -> Result<Self> {
        const OP: &str = "scatter_add";
        with_num_dtype!(self.dtype(), T => {
            let src = self.typed::<T>(OP, l)?.to_cow(OP)?;
            let size = outer * n_out * inner;
            let mut out = pool::alloc::<T>(OP, size)?;
            out.resize(size, <T as Element>::from_f64(0.0));
            for o in 0..outer {
                for (j, &r) in idx.iter().enumerate() {
                    if r < 0 {
                        continue;
                    }
                    let from = (o * idx.len() + j) * inner;
                    let to = (o * n_out + r as usize) * inner;
                    for k in 0..inner {
                        out[to + k] = out[to + k].plus(src[from + k]);
                    }
                }
            }
            Ok(Self::from_vec(out))
        }, bool => Err(unsupported(OP, self.dtype(), l.shape(), NUMERIC)))
    }
}
