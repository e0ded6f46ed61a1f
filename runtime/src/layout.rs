//! Shapes, strides and offsets: how an array's elements sit in its buffer.
//!
//! Strides are counted in elements and may be zero (broadcast) or negative (flipped views).
//! Dimensions and strides are kept in ndarray's `IxDyn`, which stores up to four dimensions
//! inline, so building a layout for a small array allocates nothing.

use ndarray::{Dimension, IxDyn};

use crate::error::{Error, Result};
use crate::{DType, Device};

/// A shape held inline for up to four dimensions.
pub(crate) type Shape = IxDyn;

/// Shape, element strides and start offset of an array inside its buffer.
#[derive(Clone, Debug, PartialEq, Eq)]
pub(crate) struct Layout {
    dims: IxDyn,
    /// Strides as `isize` values stored in `usize` (ndarray's convention).
    strides: IxDyn,
    offset: usize,
    /// Whether the elements lie in C order without gaps (computed once; checked on every op).
    contiguous: bool,
}

/// C-order (row-major) strides for `shape`.
///
/// For a shape that passed [`checked_size`] every stride fits in `isize`. A zero-size array may
/// have axes whose product overflows (`[0, 1 << 62, 8]`): its strides saturate, which is harmless
/// since no element is ever addressed through them.
pub(crate) fn c_strides(shape: &[usize]) -> IxDyn {
    let mut strides = IxDyn::zeros(shape.len());
    let mut acc = 1usize;
    for (s, &d) in strides.slice_mut().iter_mut().zip(shape).rev() {
        *s = acc;
        acc = acc.saturating_mul(d.max(1)).min(isize::MAX as usize);
    }
    strides
}

/// The product of `shape`'s axes, or `None` when it overflows (which a shape with a zero axis
/// can do too, when the axes before the zero overflow).
fn checked_product(shape: &[usize]) -> Option<usize> {
    shape.iter().try_fold(1usize, |acc, &d| acc.checked_mul(d))
}

/// The element count of `shape`, checked: the count, the size in bytes of `dtype` elements and
/// the largest C-order stride must all fit in `isize` (the bound of Rust allocations and of
/// pointer offsets). A shape with a zero axis has no elements, whatever its other axes.
pub(crate) fn checked_size(op: &'static str, shape: &[usize], dtype: DType) -> Result<usize> {
    let overflow = |what| Error::ShapeOverflow {
        op,
        shape: shape.to_vec(),
        dtype,
        what,
    };
    if shape.contains(&0) {
        return Ok(0);
    }
    let size = checked_product(shape)
        .filter(|&n| n <= isize::MAX as usize)
        .ok_or_else(|| overflow("the element count"))?;
    size.checked_mul(dtype.size_in_bytes())
        .filter(|&b| b <= isize::MAX as usize)
        .ok_or_else(|| overflow("the size in bytes"))?;
    Ok(size)
}

impl Layout {
    /// A C-contiguous layout starting at offset 0.
    pub(crate) fn contiguous(shape: &[usize]) -> Self {
        Layout {
            dims: IxDyn(shape),
            strides: c_strides(shape),
            offset: 0,
            contiguous: true,
        }
    }

    fn new(dims: IxDyn, strides: IxDyn, offset: usize) -> Self {
        let mut layout = Layout {
            dims,
            strides,
            offset,
            contiguous: false,
        };
        layout.contiguous = layout.compute_contiguous();
        layout
    }

    /// A layout from explicit parts (the caller keeps them inside the buffer).
    pub(crate) fn from_strides(shape: &[usize], strides: &[isize], offset: usize) -> Self {
        let mut st = IxDyn::zeros(strides.len());
        for (d, &s) in st.slice_mut().iter_mut().zip(strides) {
            *d = s as usize;
        }
        Layout::new(IxDyn(shape), st, offset)
    }

    pub(crate) fn dims(&self) -> &Shape {
        &self.dims
    }

    pub(crate) fn shape(&self) -> &[usize] {
        self.dims.slice()
    }

    pub(crate) fn ndim(&self) -> usize {
        self.dims.ndim()
    }

    pub(crate) fn size(&self) -> usize {
        // Shapes are checked where they are made (`checked_size`), so the product can only
        // overflow when an axis is zero (`[8, 1 << 62, 0]`): the array is then empty.
        checked_product(self.shape()).unwrap_or(0)
    }

    pub(crate) fn offset(&self) -> usize {
        self.offset
    }

    pub(crate) fn stride(&self, axis: usize) -> isize {
        self.strides[axis] as isize
    }

    pub(crate) fn strides(&self) -> Vec<isize> {
        (0..self.ndim()).map(|a| self.stride(a)).collect()
    }

    /// Whether the elements are C-contiguous (axes of length 1 may have any stride).
    pub(crate) fn is_contiguous(&self) -> bool {
        self.contiguous
    }

    fn compute_contiguous(&self) -> bool {
        let mut expected = 1isize;
        for axis in (0..self.ndim()).rev() {
            let d = self.dims[axis];
            if d != 1 && self.stride(axis) != expected {
                return false;
            }
            expected *= d as isize;
        }
        true
    }

    /// The buffer range holding the elements, in order, if the layout is C-contiguous.
    pub(crate) fn contiguous_range(&self) -> Option<std::ops::Range<usize>> {
        self.is_contiguous()
            .then(|| self.offset..self.offset + self.size())
    }

    /// Lowest buffer index touched and the absolute strides: what an ndarray view needs
    /// (ndarray views take non-negative strides; negative axes are inverted afterwards).
    pub(crate) fn view_parts(&self) -> (usize, IxDyn, Vec<usize>) {
        let mut base = self.offset as isize;
        let mut abs = IxDyn::zeros(self.ndim());
        let mut negative = Vec::new();
        for axis in 0..self.ndim() {
            let s = self.stride(axis);
            if s < 0 {
                if self.dims[axis] > 0 {
                    base += (self.dims[axis] as isize - 1) * s;
                }
                negative.push(axis);
            }
            abs[axis] = s.unsigned_abs();
        }
        (base.max(0) as usize, abs, negative)
    }

    /// Axes permuted: `axes[i]` is the source axis of output axis `i`.
    pub(crate) fn permuted(&self, axes: &[usize]) -> Self {
        let mut dims = IxDyn::zeros(axes.len());
        let mut strides = IxDyn::zeros(axes.len());
        for (i, &a) in axes.iter().enumerate() {
            dims[i] = self.dims[a];
            strides[i] = self.strides[a];
        }
        Layout::new(dims, strides, self.offset)
    }

    /// The same elements seen in `shape`, broadcasting per NumPy's rules (no copy: stride 0).
    pub(crate) fn broadcast_to(&self, shape: &[usize], op: &'static str) -> Result<Self> {
        let err = || Error::Broadcast {
            op,
            lhs: self.shape().to_vec(),
            rhs: shape.to_vec(),
        };
        if shape.len() < self.ndim() {
            return Err(err());
        }
        let lead = shape.len() - self.ndim();
        let mut strides = IxDyn::zeros(shape.len());
        for (i, &d) in shape.iter().enumerate().skip(lead) {
            let src = self.dims[i - lead];
            strides[i] = if src == d {
                self.strides[i - lead]
            } else if src == 1 {
                0
            } else {
                return Err(err());
            };
        }
        Ok(Layout::new(IxDyn(shape), strides, self.offset))
    }

    /// Axis `axis` reversed (a negative-stride view).
    pub(crate) fn flipped(&self, axis: usize) -> Self {
        let mut out = self.clone();
        let d = self.dims[axis];
        let s = self.stride(axis);
        if d > 0 {
            out.offset = (self.offset as isize + (d as isize - 1) * s) as usize;
        }
        out.strides[axis] = (-s) as usize;
        out.contiguous = out.compute_contiguous();
        out
    }

    /// Elements `start, start + step, ...` below `end` along `axis` (`step` may be negative,
    /// then counting down from `start` to above `end`).
    pub(crate) fn sliced(&self, axis: usize, start: usize, len: usize, step: isize) -> Self {
        let mut out = self.clone();
        let s = self.stride(axis);
        out.offset = (self.offset as isize + start as isize * s) as usize;
        out.dims[axis] = len;
        out.strides[axis] = (s * step) as usize;
        out.contiguous = out.compute_contiguous();
        out
    }

    /// The same elements with a new shape, if the layout is contiguous (a view, no copy).
    pub(crate) fn reshaped(&self, shape: &[usize]) -> Option<Self> {
        self.is_contiguous().then(|| Layout {
            offset: self.offset,
            ..Layout::contiguous(shape)
        })
    }
}

/// The shape two operands broadcast to, per NumPy's rules (the kernel layer's rule, with `op`
/// named in the error).
pub(crate) fn broadcast_shapes(
    op: &'static str,
    lhs: &[usize],
    rhs: &[usize],
) -> Result<Vec<usize>> {
    kusari_kernels::loop_plan::broadcast_shapes(lhs, rhs).map_err(|e| Error::Broadcast {
        op,
        lhs: e.lhs,
        rhs: e.rhs,
    })
}

/// The first of shape, dtype and device in which `actual` differs from `expected`, as
/// `(what, expected, actual)` for a message.
pub(crate) fn first_difference(
    expected: (&[usize], DType, Device),
    actual: (&[usize], DType, Device),
) -> Option<(&'static str, String, String)> {
    if actual.0 != expected.0 {
        Some((
            "shape",
            format!("{:?}", expected.0),
            format!("{:?}", actual.0),
        ))
    } else if actual.1 != expected.1 {
        Some(("dtype", expected.1.to_string(), actual.1.to_string()))
    } else if actual.2 != expected.2 {
        Some(("device", expected.2.to_string(), actual.2.to_string()))
    } else {
        None
    }
}

/// Normalises a possibly negative axis against `ndim`.
pub(crate) fn normalize_axis(op: &'static str, axis: isize, shape: &[usize]) -> Result<usize> {
    let ndim = shape.len() as isize;
    let a = if axis < 0 { axis + ndim } else { axis };
    if (0..ndim).contains(&a) {
        Ok(a as usize)
    } else {
        Err(Error::Axis {
            op,
            axis,
            shape: shape.to_vec(),
        })
    }
}

/// Normalises a list of axes (`None` = all), sorted and without duplicates.
pub(crate) fn normalize_axes(
    op: &'static str,
    axes: Option<&[isize]>,
    shape: &[usize],
) -> Result<Vec<usize>> {
    let mut out = match axes {
        None => (0..shape.len()).collect(),
        Some(axes) => axes
            .iter()
            .map(|&a| normalize_axis(op, a, shape))
            .collect::<Result<Vec<_>>>()?,
    };
    out.sort_unstable();
    let before = out.len();
    out.dedup();
    if out.len() != before {
        return Err(Error::Shape {
            op,
            msg: format!("repeated axis in {axes:?} for shape {shape:?}"),
        });
    }
    Ok(out)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn broadcast_shapes_follow_numpy() {
        assert_eq!(broadcast_shapes("t", &[3, 1], &[4]).unwrap(), vec![3, 4]);
        assert_eq!(broadcast_shapes("t", &[], &[2, 2]).unwrap(), vec![2, 2]);
        assert!(broadcast_shapes("t", &[3], &[4]).is_err());
    }

    #[test]
    fn flipped_then_view_parts_finds_lowest_address() {
        let l = Layout::contiguous(&[2, 3]).flipped(1);
        assert_eq!(l.offset(), 2);
        assert_eq!(l.stride(1), -1);
        let (base, abs, neg) = l.view_parts();
        assert_eq!((base, abs.slice(), neg), (0, &[3usize, 1][..], vec![1]));
    }

    #[test]
    fn contiguity_ignores_unit_axes() {
        assert!(
            Layout::contiguous(&[1, 4])
                .permuted(&[1, 0])
                .is_contiguous()
        );
        assert!(
            !Layout::contiguous(&[2, 4])
                .permuted(&[1, 0])
                .is_contiguous()
        );
    }
}
