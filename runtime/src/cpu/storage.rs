//! The host's buffers: [`CpuStorage`] (one `Vec` per dtype, returned to the buffer pool when
//! dropped) and [`CpuRef`] (a typed, borrowed buffer and its layout).

use super::pool::{self};
use crate::DType;
use crate::dtype::Element;
use crate::dtype::take_as;
use crate::layout::Layout;
use half::{bf16, f16};
use ndarray::{ArrayViewD, Axis, IxDyn, ShapeBuilder};
use std::any::Any;

/// `$body` with `$v` bound to the vector of whichever variant `$storage` is.
macro_rules! each_vec {
    ($storage:expr, $v:ident => $body:expr) => {
        match $storage {
            CpuStorage::Bool($v) => $body,
            CpuStorage::I8($v) => $body,
            CpuStorage::I16($v) => $body,
            CpuStorage::U8($v) => $body,
            CpuStorage::U16($v) => $body,
            CpuStorage::U32($v) => $body,
            CpuStorage::U64($v) => $body,
            CpuStorage::I32($v) => $body,
            CpuStorage::I64($v) => $body,
            CpuStorage::F16($v) => $body,
            CpuStorage::BF16($v) => $body,
            CpuStorage::F32($v) => $body,
            CpuStorage::F64($v) => $body,
        }
    };
}

/// A host buffer of one dtype.
#[derive(Debug, Clone)]
pub(crate) enum CpuStorage {
    Bool(Vec<bool>),
    I8(Vec<i8>),
    I16(Vec<i16>),
    I32(Vec<i32>),
    I64(Vec<i64>),
    U8(Vec<u8>),
    U16(Vec<u16>),
    U32(Vec<u32>),
    U64(Vec<u64>),
    F16(Vec<f16>),
    BF16(Vec<bf16>),
    F32(Vec<f32>),
    F64(Vec<f64>),
}

impl Drop for CpuStorage {
    /// Large buffers go back to the pool for the next array of the same dtype and length.
    fn drop(&mut self) {
        each_vec!(self, v => pool::recycle(std::mem::take(v)))
    }
}

impl CpuStorage {
    pub(crate) fn dtype(&self) -> DType {
        match self {
            CpuStorage::Bool(_) => DType::Bool,
            CpuStorage::I8(_) => DType::I8,
            CpuStorage::I16(_) => DType::I16,
            CpuStorage::U8(_) => DType::U8,
            CpuStorage::U16(_) => DType::U16,
            CpuStorage::U32(_) => DType::U32,
            CpuStorage::U64(_) => DType::U64,
            CpuStorage::I32(_) => DType::I32,
            CpuStorage::I64(_) => DType::I64,
            CpuStorage::F16(_) => DType::F16,
            CpuStorage::BF16(_) => DType::BF16,
            CpuStorage::F32(_) => DType::F32,
            CpuStorage::F64(_) => DType::F64,
        }
    }

    /// Wraps a typed vector in the variant of its dtype.
    pub(crate) fn from_vec<T: Element>(v: Vec<T>) -> Self {
        // `T::DTYPE` names `T` exactly (the trait is sealed), so each downcast succeeds.
        fn wrap<T: Element, U: 'static>(v: Vec<T>, f: fn(Vec<U>) -> CpuStorage) -> CpuStorage {
            f(take_as::<Vec<T>, Vec<U>>(v).expect("Element::DTYPE names its own type"))
        }
        match T::DTYPE {
            DType::Bool => wrap(v, CpuStorage::Bool),
            DType::I8 => wrap(v, CpuStorage::I8),
            DType::I16 => wrap(v, CpuStorage::I16),
            DType::U8 => wrap(v, CpuStorage::U8),
            DType::U16 => wrap(v, CpuStorage::U16),
            DType::U32 => wrap(v, CpuStorage::U32),
            DType::U64 => wrap(v, CpuStorage::U64),
            DType::I32 => wrap(v, CpuStorage::I32),
            DType::I64 => wrap(v, CpuStorage::I64),
            DType::F16 => wrap(v, CpuStorage::F16),
            DType::BF16 => wrap(v, CpuStorage::BF16),
            DType::F32 => wrap(v, CpuStorage::F32),
            DType::F64 => wrap(v, CpuStorage::F64),
        }
    }

    /// The whole buffer as `&[T]`, if `T` is its element type.
    pub(crate) fn as_slice<T: Element>(&self) -> Option<&[T]> {
        let any: &dyn Any = each_vec!(self, v => v);
        any.downcast_ref::<Vec<T>>().map(Vec::as_slice)
    }

    /// The whole buffer as `&mut [T]`, if `T` is its element type.
    pub(crate) fn as_mut_slice<T: Element>(&mut self) -> Option<&mut [T]> {
        let any: &mut dyn Any = each_vec!(self, v => v);
        any.downcast_mut::<Vec<T>>().map(Vec::as_mut_slice)
    }
}

/// A typed, borrowed array on the host: its buffer and the layout into it.
#[derive(Clone, Copy)]
pub(crate) struct CpuRef<'a, T> {
    pub(crate) data: &'a [T],
    pub(crate) layout: &'a Layout,
}

impl<'a, T: Element> CpuRef<'a, T> {
    pub(crate) fn shape(&self) -> &'a [usize] {
        self.layout.shape()
    }

    /// The elements in C order as one slice, if the layout is contiguous.
    pub(crate) fn contiguous(&self) -> Option<&'a [T]> {
        self.layout.contiguous_range().map(|r| &self.data[r])
    }

    /// An ndarray view of the elements (any strides, including zero and negative).
    pub(crate) fn view(&self) -> ArrayViewD<'a, T> {
        let dims = IxDyn(self.layout.shape());
        if self.layout.size() == 0 {
            // Without elements the strides mean nothing; ndarray's own checks (e.g. in
            // `to_owned`) expect default ones for empty arrays.
            return ArrayViewD::from_shape(dims, &self.data[..0])
                .expect("an empty shape fits an empty slice");
        }
        let (base, abs, negative) = self.layout.view_parts();
        // Every layout in kusari is built from a buffer and checked transformations of it, so
        // all elements the view reaches lie inside `data`.
        debug_assert!(base < self.data.len());
        let ptr = self.data[base..].as_ptr();
        // SAFETY: `ptr` and the non-negative strides stay inside `data` (see above), the view
        // borrows `data` for 'a, and nothing mutates a shared buffer.
        let mut view = unsafe { ArrayViewD::from_shape_ptr(dims.strides(abs), ptr) };
        for axis in negative {
            view.invert_axis(Axis(axis));
        }
        view
    }
}
