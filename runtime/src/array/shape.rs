//! Shape manipulation: views where the layout allows, copies only where it must.

use crate::Array;
use crate::error::{Error, Result};
use crate::layout::{Layout, normalize_axes, normalize_axis};

impl Array {
    /// The same elements in `shape`. A view when the array is contiguous, a copy otherwise.
    ///
    /// ```
    /// let a = kusari::Array::arange(0.0, 6.0, 1.0, kusari::DType::F32).unwrap();
    /// let b = a.reshape(&[2, 3]).unwrap();
    /// assert!(b.shares_buffer(&a));
    /// assert!(a.reshape(&[4, 2]).is_err());
    /// ```
    pub fn reshape(&self, shape: &[usize]) -> Result<Array> {
        let size = crate::layout::checked_size("reshape", shape, self.dtype())?;
        if size != self.size() {
            return Err(Error::Shape {
                op: "reshape",
                msg: format!(
                    "cannot reshape {:?} ({} elements) into {shape:?} ({size} elements)",
                    self.shape(),
                    self.size()
                ),
            });
        }
        if shape == self.shape() {
            return Ok(self.clone());
        }
        let src = self.contiguous()?;
        let layout = src
            .layout()
            .reshaped(shape)
            .expect("contiguous() is contiguous");
        Ok(src.with_layout(layout))
    }

    /// Axes permuted (`None` reverses them, as `.T`). Always a view.
    pub fn transpose(&self, axes: Option<&[usize]>) -> Result<Array> {
        let n = self.ndim();
        let axes: Vec<usize> = match axes {
            None => (0..n).rev().collect(),
            Some(a) => a.to_vec(),
        };
        let mut seen = vec![false; n];
        let valid = axes.len() == n
            && axes
                .iter()
                .all(|&a| a < n && !std::mem::replace(&mut seen[a], true));
        if !valid {
            return Err(Error::Shape {
                op: "transpose",
                msg: format!(
                    "axes {axes:?} are not a permutation of 0..{n} (shape {:?})",
                    self.shape()
                ),
            });
        }
        Ok(self.with_layout(self.layout().permuted(&axes)))
    }

    /// All axes reversed, as NumPy's `a.T`. A view.
    pub fn t(&self) -> Array {
        let axes: Vec<usize> = (0..self.ndim()).rev().collect();
        self.with_layout(self.layout().permuted(&axes))
    }

    /// A view in `shape` following NumPy's broadcasting rules (stride 0 on repeated axes).
    pub fn broadcast_to(&self, shape: &[usize]) -> Result<Array> {
        if shape == self.shape() {
            return Ok(self.clone());
        }
        crate::layout::checked_size("broadcast_to", shape, self.dtype())?;
        Ok(self.with_layout(self.layout().broadcast_to(shape, "broadcast_to")?))
    }

    /// `axis` reversed: a view with a negative stride.
    pub fn flip(&self, axis: isize) -> Result<Array> {
        let axis = normalize_axis("flip", axis, self.shape())?;
        Ok(self.with_layout(self.layout().flipped(axis)))
    }

    /// Elements `start..stop` with `step` along `axis` (a view). `step` may be negative, then
    /// going from `start` down to above `stop`; bounds are clamped as in Python slicing.
    pub fn slice_axis(&self, axis: isize, start: isize, stop: isize, step: isize) -> Result<Array> {
        let axis = normalize_axis("slice_axis", axis, self.shape())?;
        if step == 0 {
            return Err(Error::Shape {
                op: "slice_axis",
                msg: "step must not be zero".to_string(),
            });
        }
        let len = self.shape()[axis] as isize;
        let clamp = |i: isize, lo: isize, hi: isize| {
            let i = if i < 0 { i + len } else { i };
            i.clamp(lo, hi)
        };
        // Counted in i128: `step` may be isize::MIN or isize::MAX, whose negation or sum with a
        // length overflows isize.
        let (first, count) = if step > 0 {
            let (s, e) = (clamp(start, 0, len), clamp(stop, 0, len));
            let count = if e > s {
                ((e - s) as i128 - 1) / step as i128 + 1
            } else {
                0
            };
            (s, count)
        } else {
            let (s, e) = (clamp(start, -1, len - 1), clamp(stop, -1, len - 1));
            let count = if s > e {
                ((s - e) as i128 - 1) / -(step as i128) + 1
            } else {
                0
            };
            (s, count)
        };
        // A step that reaches past the axis takes at most one element; its stride is then never
        // used, and the step is clamped so the stride cannot overflow.
        let step = if count <= 1 { 1 } else { step };
        let first = if count == 0 { 0 } else { first as usize };
        Ok(self.with_layout(self.layout().sliced(axis, first, count as usize, step)))
    }

    /// Length-1 axes removed (`None`: all of them). A view.
    pub fn squeeze(&self, axes: Option<&[isize]>) -> Result<Array> {
        let axes = match axes {
            None => (0..self.ndim()).filter(|&a| self.shape()[a] == 1).collect(),
            Some(a) => normalize_axes("squeeze", Some(a), self.shape())?,
        };
        if let Some(&a) = axes.iter().find(|&&a| self.shape()[a] != 1) {
            return Err(Error::Shape {
                op: "squeeze",
                msg: format!(
                    "axis {a} of shape {:?} has length {}, not 1",
                    self.shape(),
                    self.shape()[a]
                ),
            });
        }
        let keep: Vec<usize> = (0..self.ndim()).filter(|a| !axes.contains(a)).collect();
        let shape: Vec<usize> = keep.iter().map(|&a| self.shape()[a]).collect();
        Ok(self.with_layout(self.strided_subset(&keep, &shape)))
    }

    /// A length-1 axis inserted at `axis` (`-1` appends). A view.
    pub fn expand_dims(&self, axis: isize) -> Result<Array> {
        let n = self.ndim() as isize + 1;
        let a = if axis < 0 { axis + n } else { axis };
        if !(0..n).contains(&a) {
            return Err(Error::Axis {
                op: "expand_dims",
                axis,
                shape: self.shape().to_vec(),
            });
        }
        let mut shape = self.shape().to_vec();
        shape.insert(a as usize, 1);
        let mut strides = self.strides();
        strides.insert(a as usize, 0);
        Ok(self.with_layout(Layout::from_strides(
            &shape,
            &strides,
            self.layout().offset(),
        )))
    }

    /// Sums broadcast axes away so the result has `shape` (the gradient of `broadcast_to`).
    pub fn sum_to(&self, shape: &[usize]) -> Result<Array> {
        if shape == self.shape() {
            return Ok(self.clone());
        }
        let err = || Error::Shape {
            op: "sum_to",
            msg: format!("cannot sum shape {:?} to {shape:?}", self.shape()),
        };
        if shape.len() > self.ndim() {
            return Err(err());
        }
        let lead = self.ndim() - shape.len();
        let mut axes: Vec<isize> = (0..lead as isize).collect();
        for (i, &d) in shape.iter().enumerate() {
            let src = self.shape()[lead + i];
            if d == 1 && src != 1 {
                axes.push((lead + i) as isize);
            } else if d != src {
                return Err(err());
            }
        }
        self.sum_axes(&axes, true)?.reshape(shape)
    }

    /// The layout keeping only axes `keep` (whose dropped axes all have length 1).
    fn strided_subset(&self, keep: &[usize], shape: &[usize]) -> Layout {
        let strides: Vec<isize> = keep.iter().map(|&a| self.layout().stride(a)).collect();
        Layout::from_strides(shape, &strides, self.layout().offset())
    }
}
