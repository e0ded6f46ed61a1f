//! Indexing (NumPy's basic and integer-array indexing, [`Ix`]), and the copies that join, split
//! and pad arrays: concatenation, stacking, splitting along an axis, constant padding. Basic
//! indexing and splitting are views; the rest make one new buffer each.

use crate::Array;
use crate::dtype::DType;
use crate::error::{Error, Result};
use crate::layout::{Layout, normalize_axis};
use crate::storage::Storage;

/// One entry of an index for [`Array::get_item`] and [`Variable::get_item`](crate::Variable::get_item),
/// NumPy's (and Chainer's `get_item`'s) index written as a slice of entries: `x[1, ::-1, None,
/// ..., idx]` is `x.get_item(&[Ix::Int(1), Ix::slice(None, None, -1), Ix::NewAxis, Ix::Ellipsis,
/// Ix::Array(&idx)])`.
///
/// Entries apply to the axes in order; axes left over are taken whole, as by a trailing
/// [`Ellipsis`](Ix::Ellipsis). Integers, slices, new axes and the ellipsis are **basic**
/// indexing: the result is a view of the same buffer (no copy). One [`Array`](Ix::Array) entry
/// (an integer array of any integer dtype and any shape) is **integer-array indexing**: it gathers
/// elements into a new array, its shape in place of the indexed axis; when integer entries
/// stand apart from it (`x[0, :, idx]`), its axes go first, as NumPy puts them. Indices are
/// checked (an index outside the axis is an error, never a wrong element) and negative ones
/// count from the end; to check them, an index array on a CUDA device is read back to the host.
///
/// ```
/// use kusari::{Array, Ix};
/// # fn main() -> kusari::Result<()> {
/// let x = Array::from_vec((0..12).map(|v| v as f32).collect(), &[3, 4])?;
/// // The last row, every other element backwards.
/// let y = x.get_item(&[Ix::Int(-1), Ix::slice(None, None, -2)])?;
/// assert_eq!(y.to_vec::<f32>()?, vec![11.0, 9.0]);
/// assert!(y.shares_buffer(&x)); // a view
/// // Rows 2, 0 and 2 again, with a new axis in front.
/// let idx = Array::from_vec(vec![2i64, 0, -1], &[3])?;
/// let z = x.get_item(&[Ix::NewAxis, Ix::Array(&idx), Ix::range(1, 3)])?;
/// assert_eq!(z.shape(), &[1, 3, 2]);
/// assert_eq!(z.to_vec::<f32>()?, vec![9.0, 10.0, 1.0, 2.0, 9.0, 10.0]);
/// assert!(x.get_item(&[Ix::Int(3)]).is_err()); // axis 0 has 3 rows
/// # Ok(()) }
/// ```
#[derive(Clone, Copy, Debug)]
pub enum Ix<'a> {
    /// One position along the axis (negative counts from the end); the axis goes away.
    Int(isize),
    /// Python's `start:stop:step` along the axis: `None` bounds are the ends (which end
    /// depends on the step's sign), negative ones count from the end, bounds past the ends are
    /// clamped; `step` is not zero and may be negative.
    Slice {
        /// The first position (`None`: the start, or the end for a negative step).
        start: Option<isize>,
        /// The position to stop before (`None`: past the end, or before the start).
        stop: Option<isize>,
        /// The step (not zero).
        step: isize,
    },
    /// A new axis of length 1 (NumPy's `None` / `np.newaxis`).
    NewAxis,
    /// As many whole axes as the other entries leave (at most one ellipsis).
    Ellipsis,
    /// An integer array (any integer dtype) of positions along the axis; repeated positions are
    /// allowed (their gradients add up).
    Array(&'a Array),
}

impl Ix<'_> {
    /// The whole axis, `:`.
    pub fn all() -> Self {
        Ix::Slice {
            start: None,
            stop: None,
            step: 1,
        }
    }

    /// `start..stop`, Python's `start:stop` (negative bounds count from the end).
    pub fn range(start: isize, stop: isize) -> Self {
        Ix::Slice {
            start: Some(start),
            stop: Some(stop),
            step: 1,
        }
    }

    /// Python's `start:stop:step`.
    pub fn slice(start: Option<isize>, stop: Option<isize>, step: isize) -> Self {
        Ix::Slice { start, stop, step }
    }
}

/// A basic index entry, with the ellipsis expanded (owned: kept by the graph's nodes).
#[derive(Clone, Debug, PartialEq)]
pub(crate) enum Basic {
    /// A position, already checked and made non-negative.
    Int(usize),
    /// A slice's first position, element count and step.
    Slice(usize, usize, isize),
    NewAxis,
}

/// An integer-array index resolved against the array it indexes.
#[derive(Clone, Debug)]
pub(crate) struct TakePlan {
    /// The axis of the basic view that the array indexes.
    pub(crate) axis: usize,
    /// The positions, checked and made non-negative, in C order of the index array.
    pub(crate) idx: Vec<i64>,
    /// The index array's shape, which replaces the axis.
    pub(crate) idx_shape: Vec<usize>,
    /// Whether the index's axes go first (integer entries apart from the array, NumPy's rule).
    pub(crate) to_front: bool,
}

/// An index resolved against a shape: basic entries covering every axis (the array entry as a
/// whole slice), and the gather that follows them.
#[derive(Clone, Debug)]
pub(crate) struct IndexPlan {
    pub(crate) basic: Vec<Basic>,
    pub(crate) take: Option<TakePlan>,
}

impl IndexPlan {
    /// Whether the basic part leaves the array as it is.
    pub(crate) fn basic_is_identity(&self, shape: &[usize]) -> bool {
        self.basic.len() == shape.len()
            && self
                .basic
                .iter()
                .zip(shape)
                .all(|(b, &len)| *b == Basic::Slice(0, len, 1))
    }

    /// The shape after the gather's axes are in place, and the permutation (if any) that moves
    /// them to the front.
    pub(crate) fn gathered_shape(&self, taken: &[usize]) -> (Vec<usize>, Option<Vec<usize>>) {
        let Some(t) = &self.take else {
            return (taken.to_vec(), None);
        };
        let mut shape = taken[..t.axis].to_vec();
        shape.extend(&t.idx_shape);
        shape.extend(&taken[t.axis + 1..]);
        let k = t.idx_shape.len();
        let perm = t.to_front.then(|| {
            (t.axis..t.axis + k)
                .chain(0..t.axis)
                .chain(t.axis + k..shape.len())
                .collect()
        });
        (shape, perm)
    }
}

fn index_error(msg: String) -> Error {
    Error::InvalidArgument {
        op: "get_item".to_string(),
        msg,
    }
}

/// Python's `slice.indices` then the count: the first position and the number of elements of
/// `start:stop:step` over an axis of `len`.
fn slice_span(
    len: usize,
    start: Option<isize>,
    stop: Option<isize>,
    step: isize,
) -> (usize, usize) {
    let len = len as i128;
    let step = step as i128;
    let (lower, upper) = if step < 0 { (-1, len - 1) } else { (0, len) };
    let bound = |v: Option<isize>, default: i128| match v {
        None => default,
        Some(v) if v < 0 => (v as i128 + len).max(lower),
        Some(v) => (v as i128).min(upper),
    };
    let first = bound(start, if step < 0 { upper } else { lower });
    let end = bound(stop, if step < 0 { lower } else { upper });
    let count = if step > 0 && end > first {
        (end - first - 1) / step + 1
    } else if step < 0 && first > end {
        (first - end - 1) / -step + 1
    } else {
        0
    };
    if count == 0 {
        (0, 0)
    } else {
        (first as usize, count as usize)
    }
}

/// Resolves `index` against `shape`: checks every entry and expands the ellipsis.
pub(crate) fn plan_index(shape: &[usize], index: &[Ix<'_>]) -> Result<IndexPlan> {
    let consumes = |e: &Ix<'_>| !matches!(e, Ix::NewAxis | Ix::Ellipsis);
    let used = index.iter().filter(|e| consumes(e)).count();
    if used > shape.len() {
        return Err(index_error(format!(
            "{used} indices for an array of shape {shape:?} ({} dimensions)",
            shape.len()
        )));
    }
    if index.iter().filter(|e| matches!(e, Ix::Ellipsis)).count() > 1 {
        return Err(index_error(format!(
            "an index can only have a single ellipsis (shape {shape:?})"
        )));
    }
    if index.iter().filter(|e| matches!(e, Ix::Array(_))).count() > 1 {
        return Err(index_error(format!(
            "one integer-array index is supported, several were given (shape {shape:?})"
        )));
    }
    let mut entries: Vec<Ix<'_>> = Vec::with_capacity(index.len() + shape.len());
    for e in index {
        match e {
            Ix::Ellipsis => entries.extend((0..shape.len() - used).map(|_| Ix::all())),
            e => entries.push(*e),
        }
    }
    if !index.iter().any(|e| matches!(e, Ix::Ellipsis)) {
        entries.extend((0..shape.len() - used).map(|_| Ix::all()));
    }
    // NumPy's rule: integers count as advanced indices beside an array; when the advanced
    // entries are not next to each other, the gathered axes go first.
    let advanced: Vec<usize> = entries
        .iter()
        .enumerate()
        .filter(|(_, e)| matches!(e, Ix::Int(_) | Ix::Array(_)))
        .map(|(i, _)| i)
        .collect();
    let adjacent = advanced.windows(2).all(|w| w[1] == w[0] + 1);
    let (mut basic, mut take) = (Vec::with_capacity(entries.len()), None);
    let (mut axis, mut out_axis) = (0usize, 0usize);
    for e in &entries {
        match *e {
            Ix::NewAxis => {
                basic.push(Basic::NewAxis);
                out_axis += 1;
            }
            Ix::Int(i) => {
                let len = shape[axis];
                let at = if i < 0 {
                    i as i128 + len as i128
                } else {
                    i as i128
                };
                if at < 0 || at >= len as i128 {
                    return Err(index_error(format!(
                        "index {i} is out of range for axis {axis} of length {len} (shape {shape:?})"
                    )));
                }
                basic.push(Basic::Int(at as usize));
                axis += 1;
            }
            Ix::Slice { start, stop, step } => {
                if step == 0 {
                    return Err(index_error(format!(
                        "a slice's step must not be zero (axis {axis}, shape {shape:?})"
                    )));
                }
                let (first, count) = slice_span(shape[axis], start, stop, step);
                basic.push(Basic::Slice(first, count, step));
                axis += 1;
                out_axis += 1;
            }
            Ix::Array(a) => {
                let len = shape[axis];
                if !a.dtype().is_int() {
                    return Err(Error::UnsupportedDType {
                        op: "get_item",
                        dtype: a.dtype(),
                        shape: a.shape().to_vec(),
                        expected: "an integer index array",
                    });
                }
                let idx = integer_values(a)?;
                let idx = idx
                    .into_iter()
                    .map(|i| {
                        let at = if i < 0 { i + len as i64 } else { i };
                        if at < 0 || at >= len as i64 {
                            Err(index_error(format!(
                                "index {i} in the index array is out of range for axis {axis} of \
                                 length {len} (shape {shape:?})"
                            )))
                        } else {
                            Ok(at)
                        }
                    })
                    .collect::<Result<Vec<i64>>>()?;
                basic.push(Basic::Slice(0, len, 1));
                take = Some(TakePlan {
                    axis: out_axis,
                    idx,
                    idx_shape: a.shape().to_vec(),
                    to_front: !adjacent,
                });
                axis += 1;
                out_axis += 1;
            }
            Ix::Ellipsis => unreachable!("expanded above"),
        }
    }
    Ok(IndexPlan { basic, take })
}

/// The layout that `basic` (resolved against `layout`'s shape) selects from `layout`.
pub(crate) fn basic_layout(layout: &Layout, basic: &[Basic]) -> Layout {
    let (mut shape, mut strides) = (Vec::new(), Vec::new());
    let mut offset = layout.offset() as isize;
    let mut axis = 0;
    for b in basic {
        match *b {
            Basic::NewAxis => {
                shape.push(1);
                strides.push(0);
            }
            Basic::Int(i) => {
                offset += i as isize * layout.stride(axis);
                axis += 1;
            }
            Basic::Slice(first, count, step) => {
                let s = layout.stride(axis);
                offset += first as isize * s;
                shape.push(count);
                strides.push(if count > 1 { s * step } else { s });
                axis += 1;
            }
        }
    }
    for a in axis..layout.ndim() {
        shape.push(layout.shape()[a]);
        strides.push(layout.stride(a));
    }
    Layout::from_strides(&shape, &strides, offset as usize)
}

/// How an array splits along an axis (Chainer's `indices_or_sections`).
#[derive(Clone, Copy, Debug)]
pub enum IndicesOrSections<'a> {
    /// This many pieces of equal length (which must divide the axis).
    Sections(usize),
    /// The positions to split at, non-decreasing and at most the axis' length: `[2, 5]` gives
    /// `..2`, `2..5` and `5..`.
    Indices(&'a [usize]),
}

impl From<usize> for IndicesOrSections<'_> {
    fn from(n: usize) -> Self {
        IndicesOrSections::Sections(n)
    }
}

impl<'a> From<&'a [usize]> for IndicesOrSections<'a> {
    fn from(i: &'a [usize]) -> Self {
        IndicesOrSections::Indices(i)
    }
}

impl<'a, const N: usize> From<&'a [usize; N]> for IndicesOrSections<'a> {
    fn from(i: &'a [usize; N]) -> Self {
        IndicesOrSections::Indices(i)
    }
}

/// The `(start, length)` of each piece of an axis of `len` split as `how` says.
pub(crate) fn split_bounds(
    shape: &[usize],
    axis: usize,
    how: IndicesOrSections<'_>,
) -> Result<Vec<(usize, usize)>> {
    let len = shape[axis];
    let bad = |msg: String| Error::InvalidArgument {
        op: "split_axis".to_string(),
        msg,
    };
    match how {
        IndicesOrSections::Sections(n) => {
            if n == 0 || !len.is_multiple_of(n) {
                return Err(bad(format!(
                    "indices_or_sections {n} does not divide axis {axis} of length {len} into \
                     equal sections (shape {shape:?})"
                )));
            }
            Ok((0..n).map(|i| (i * (len / n), len / n)).collect())
        }
        IndicesOrSections::Indices(at) => {
            let mut prev = 0;
            for &i in at {
                if i < prev || i > len {
                    return Err(bad(format!(
                        "indices_or_sections {at:?} must be non-decreasing and at most the length \
                         {len} of axis {axis} (shape {shape:?}); {i} is not"
                    )));
                }
                prev = i;
            }
            let mut bounds = Vec::with_capacity(at.len() + 1);
            let mut start = 0;
            for &i in at.iter().chain(std::iter::once(&len)) {
                bounds.push((start, i - start));
                start = i;
            }
            Ok(bounds)
        }
    }
}

/// The checked `(before, after)` widths of `pad`, one per axis.
pub(crate) fn pad_widths(
    shape: &[usize],
    pad_width: &[(isize, isize)],
    mode: &str,
) -> Result<Vec<(usize, usize)>> {
    let bad = |msg: String| Error::InvalidArgument {
        op: "pad".to_string(),
        msg,
    };
    if mode != "constant" {
        return Err(bad(format!(
            "mode {mode:?} is not supported; kusari pads in mode \"constant\" only"
        )));
    }
    let widths: Vec<(isize, isize)> = match pad_width.len() {
        1 => vec![pad_width[0]; shape.len()],
        n if n == shape.len() => pad_width.to_vec(),
        n => {
            return Err(bad(format!(
                "pad_width has {n} (before, after) pairs for shape {shape:?} ({} dimensions): \
                 give one pair, or one per axis",
                shape.len()
            )));
        }
    };
    widths
        .iter()
        .enumerate()
        .map(|(axis, &(b, a))| {
            if b < 0 || a < 0 {
                Err(bad(format!(
                    "pad_width ({b}, {a}) of axis {axis} is negative (shape {shape:?})"
                )))
            } else {
                Ok((b as usize, a as usize))
            }
        })
        .collect()
}

impl Array {
    /// NumPy's indexing (Chainer's `get_item` on arrays): see [`Ix`]. Basic indices give a
    /// view; an integer-array index gives a new array.
    pub fn get_item(&self, index: &[Ix<'_>]) -> Result<Array> {
        let plan = plan_index(self.shape(), index)?;
        let view = self.basic_view(&plan.basic);
        let Some(t) = &plan.take else {
            return Ok(view);
        };
        let taken = view.take_rows(&t.idx, t.axis)?;
        let (shape, perm) = plan.gathered_shape(taken.shape());
        let y = taken.reshape(&shape)?;
        match perm {
            Some(p) => y.transpose(Some(&p)),
            None => Ok(y),
        }
    }

    /// The view `basic` (resolved against this shape) selects.
    pub(crate) fn basic_view(&self, basic: &[Basic]) -> Array {
        self.with_layout(basic_layout(self.layout(), basic))
    }

    /// Zeros of `shape` with this array written where `basic` (resolved against `shape`)
    /// selects: the adjoint of [`basic_view`](Self::basic_view).
    pub(crate) fn basic_scatter(&self, basic: &[Basic], shape: &[usize]) -> Result<Array> {
        let dst = basic_layout(&Layout::contiguous(shape), basic);
        Array::assemble(
            "get_item",
            shape,
            self.dtype(),
            0.0,
            self.device(),
            &[(self, dst)],
        )
    }

    /// A new array of `shape` on `device`, `fill` everywhere but where the pieces go: each
    /// piece is copied to its destination layout (a layout into the new C-contiguous buffer,
    /// of the piece's shape, each element its own).
    pub(crate) fn assemble(
        op: &'static str,
        shape: &[usize],
        dtype: DType,
        fill: f64,
        device: crate::Device,
        pieces: &[(&Array, Layout)],
    ) -> Result<Array> {
        // Destinations with negative strides are flipped, with their pieces, so that every
        // write goes forwards.
        let parts: Vec<(Array, Layout)> = pieces
            .iter()
            .map(|(a, dst)| {
                let (mut src, mut dst) = (a.layout().clone(), dst.clone());
                for axis in 0..dst.ndim() {
                    if dst.stride(axis) < 0 {
                        dst = dst.flipped(axis);
                        src = src.flipped(axis);
                    }
                }
                (a.with_layout(src), dst)
            })
            .collect();
        let refs: Vec<(&Storage, &Layout, &Layout)> = parts
            .iter()
            .map(|(a, dst)| (a.storage(), a.layout(), dst))
            .collect();
        let storage = Storage::assemble(op, shape, dtype, fill, device, &refs)?;
        Ok(Array::from_storage(storage, Layout::contiguous(shape)))
    }

    /// The `[outer, n, inner]` split of this shape around `axis`.
    fn around(&self, axis: usize) -> (usize, usize, usize) {
        let s = self.shape();
        (
            s[..axis].iter().product(),
            s[axis],
            s[axis + 1..].iter().product(),
        )
    }

    /// Positions `idx` along `axis` (checked by the caller, below the axis' length; a negative
    /// one gives zeros), as a new array with that axis of length `idx.len()`.
    pub(crate) fn take_rows(&self, idx: &[i64], axis: usize) -> Result<Array> {
        if matches!(self.dtype(), DType::F16 | DType::BF16) {
            return self
                .astype(DType::F32)?
                .take_rows(idx, axis)?
                .astype(self.dtype());
        }
        let mut shape = self.shape().to_vec();
        shape[axis] = idx.len();
        crate::layout::checked_size("take", &shape, self.dtype())?;
        let storage = self.storage().take(self.layout(), idx, self.around(axis))?;
        Ok(Array::from_storage(storage, Layout::contiguous(&shape)))
    }

    /// The adjoint of [`take_rows`](Self::take_rows): this array's slices along `axis` added
    /// into zeros whose `axis` has length `n_out`, at positions `idx` (negative ones dropped).
    pub(crate) fn scatter_add_rows(&self, idx: &[i64], axis: usize, n_out: usize) -> Result<Array> {
        if matches!(self.dtype(), DType::F16 | DType::BF16) {
            return self
                .astype(DType::F32)?
                .scatter_add_rows(idx, axis, n_out)?
                .astype(self.dtype());
        }
        let (outer, _, inner) = self.around(axis);
        let mut shape = self.shape().to_vec();
        shape[axis] = n_out;
        crate::layout::checked_size("scatter_add", &shape, self.dtype())?;
        let storage = self
            .storage()
            .scatter_add(self.layout(), idx, n_out, (outer, inner))?;
        Ok(Array::from_storage(storage, Layout::contiguous(&shape)))
    }

    /// The arrays joined along `axis` (Chainer's and NumPy's `concatenate`): every other axis
    /// must match, and so must the dtypes and devices.
    ///
    /// ```
    /// use kusari::Array;
    /// let a = Array::from_vec(vec![1.0f32, 2.0], &[1, 2]).unwrap();
    /// let b = Array::from_vec(vec![3.0f32, 4.0, 5.0, 6.0], &[2, 2]).unwrap();
    /// let c = Array::concat(&[&a, &b], 0).unwrap();
    /// assert_eq!((c.shape(), c.to_vec::<f32>().unwrap()), (&[3, 2][..], vec![1.0, 2.0, 3.0, 4.0, 5.0, 6.0]));
    /// assert!(Array::concat(&[&a, &b], 1).is_err()); // 1 row against 2
    /// ```
    pub fn concat(xs: &[&Array], axis: isize) -> Result<Array> {
        let shape = concat_shape("concat", xs, axis)?;
        let axis = normalize_axis("concat", axis, xs[0].shape())?;
        let out = Layout::contiguous(&shape);
        let mut start = 0;
        let pieces: Vec<(&Array, Layout)> = xs
            .iter()
            .map(|x| {
                let len = x.shape()[axis];
                let dst = out.sliced(axis, start, len, 1);
                start += len;
                (*x, dst)
            })
            .collect();
        Array::assemble(
            "concat",
            &shape,
            xs[0].dtype(),
            0.0,
            xs[0].device(),
            &pieces,
        )
    }

    /// The arrays (all of one shape) joined along a new axis `axis` (NumPy's `stack`).
    ///
    /// ```
    /// use kusari::Array;
    /// let a = Array::from_vec(vec![1i32, 2], &[2]).unwrap();
    /// let b = Array::from_vec(vec![3i32, 4], &[2]).unwrap();
    /// let s = Array::stack(&[&a, &b], 1).unwrap();
    /// assert_eq!((s.shape(), s.to_vec::<i32>().unwrap()), (&[2, 2][..], vec![1, 3, 2, 4]));
    /// ```
    pub fn stack(xs: &[&Array], axis: isize) -> Result<Array> {
        stack_check("stack", xs)?;
        let expanded = xs
            .iter()
            .map(|x| x.expand_dims(axis))
            .collect::<Result<Vec<Array>>>()
            .map_err(|e| restate(e, "stack"))?;
        let refs: Vec<&Array> = expanded.iter().collect();
        Array::concat(&refs, axis)
    }

    /// Views of the pieces of `axis` split as `indices_or_sections` says (Chainer's
    /// `split_axis`).
    ///
    /// ```
    /// use kusari::Array;
    /// let x = Array::arange(0.0, 6.0, 1.0, kusari::DType::F64).unwrap();
    /// let parts = x.split_axis(&[1, 4], 0).unwrap();
    /// assert_eq!(parts.iter().map(|p| p.size()).collect::<Vec<_>>(), vec![1, 3, 2]);
    /// assert!(x.split_axis(4, 0).is_err()); // 6 is not divisible by 4
    /// ```
    pub fn split_axis<'a>(
        &self,
        indices_or_sections: impl Into<IndicesOrSections<'a>>,
        axis: isize,
    ) -> Result<Vec<Array>> {
        let a = normalize_axis("split_axis", axis, self.shape())?;
        let bounds = split_bounds(self.shape(), a, indices_or_sections.into())?;
        Ok(bounds
            .into_iter()
            .map(|(start, len)| self.with_layout(self.layout().sliced(a, start, len, 1)))
            .collect())
    }

    /// This array inside a border of `constant_values` (NumPy's `pad` in mode `"constant"`;
    /// other modes are an error). `pad_width` is one `(before, after)` pair per axis, or one
    /// pair for every axis.
    ///
    /// ```
    /// use kusari::Array;
    /// let x = Array::from_vec(vec![1.0f32, 2.0], &[2]).unwrap();
    /// let y = x.pad(&[(1, 2)], "constant", 9.0).unwrap();
    /// assert_eq!(y.to_vec::<f32>().unwrap(), vec![9.0, 1.0, 2.0, 9.0, 9.0]);
    /// ```
    pub fn pad(
        &self,
        pad_width: &[(isize, isize)],
        mode: &str,
        constant_values: f64,
    ) -> Result<Array> {
        let widths = pad_widths(self.shape(), pad_width, mode)?;
        let shape: Vec<usize> = self
            .shape()
            .iter()
            .zip(&widths)
            .map(|(&d, &(b, a))| d.checked_add(b).and_then(|d| d.checked_add(a)))
            .collect::<Option<Vec<usize>>>()
            .ok_or_else(|| Error::ShapeOverflow {
                op: "pad",
                shape: self.shape().to_vec(),
                dtype: self.dtype(),
                what: "the padded shape",
            })?;
        let mut dst = Layout::contiguous(&shape);
        for (axis, (&(b, _), &d)) in widths.iter().zip(self.shape()).enumerate() {
            dst = dst.sliced(axis, b, d, 1);
        }
        Array::assemble(
            "pad",
            &shape,
            self.dtype(),
            constant_values,
            self.device(),
            &[(self, dst)],
        )
    }
}

/// The same error with `op` in place of the operation that raised it.
fn restate(e: Error, op: &'static str) -> Error {
    match e {
        Error::Axis { axis, shape, .. } => Error::Axis { op, axis, shape },
        e => e,
    }
}

/// Checks that `xs` is not empty and all of one shape and dtype (`stack`).
pub(crate) fn stack_check(op: &'static str, xs: &[&Array]) -> Result<()> {
    let Some(first) = xs.first() else {
        return Err(Error::InvalidArgument {
            op: op.to_string(),
            msg: "needs at least one array".to_string(),
        });
    };
    for (i, x) in xs.iter().enumerate() {
        if x.shape() != first.shape() {
            return Err(Error::Shape {
                op,
                msg: format!(
                    "array {i} has shape {:?}, but array 0 has {:?} (every array must have the same shape)",
                    x.shape(),
                    first.shape()
                ),
            });
        }
    }
    Ok(())
}

/// The shape of `xs` concatenated along `axis`, checked: at least one array, one ndim, one
/// dtype, every axis but `axis` the same.
pub(crate) fn concat_shape(op: &'static str, xs: &[&Array], axis: isize) -> Result<Vec<usize>> {
    let Some(first) = xs.first() else {
        return Err(Error::InvalidArgument {
            op: op.to_string(),
            msg: "needs at least one array".to_string(),
        });
    };
    let a = normalize_axis(op, axis, first.shape())?;
    let mut shape = first.shape().to_vec();
    shape[a] = 0;
    for (i, x) in xs.iter().enumerate() {
        let fits = x.ndim() == first.ndim()
            && (0..x.ndim()).all(|d| d == a || x.shape()[d] == first.shape()[d]);
        if !fits {
            return Err(Error::Shape {
                op,
                msg: format!(
                    "array {i} has shape {:?}, which does not match array 0's {:?} off axis {axis}",
                    x.shape(),
                    first.shape()
                ),
            });
        }
        if x.dtype() != first.dtype() {
            return Err(Error::DTypeMismatch {
                op,
                lhs: first.dtype(),
                lhs_shape: first.shape().to_vec(),
                rhs: x.dtype(),
                rhs_shape: x.shape().to_vec(),
            });
        }
        shape[a] = shape[a]
            .checked_add(x.shape()[a])
            .ok_or_else(|| Error::ShapeOverflow {
                op,
                shape: x.shape().to_vec(),
                dtype: x.dtype(),
                what: "the joined axis",
            })?;
    }
    crate::layout::checked_size(op, &shape, first.dtype())?;
    Ok(shape)
}

/// The values of an integer array as `i64`s; a `uint64` value beyond `i64::MAX` becomes
/// `i64::MAX`, which is out of range for any axis (not a wrapped negative index).
pub(crate) fn integer_values(a: &Array) -> Result<Vec<i64>> {
    match a.dtype() {
        DType::U64 => Ok((a.to_vec::<u64>()?.into_iter())
            .map(|v| i64::try_from(v).unwrap_or(i64::MAX))
            .collect()),
        _ => a.astype(DType::I64)?.to_vec::<i64>(),
    }
}
