//! The [`Array`] handle: a shared buffer on a device and a layout into it, with its constructors,
//! accessors and moves between devices; [`WeakArray`], a handle that does not keep the buffer
//! alive. The operations are in the sibling files.

use crate::cpu::{CpuRef, CpuStorage};
use crate::dtype::{Element, with_dtype};
use crate::error::{Error, Result};
use crate::layout::Layout;
use crate::random::Rng;
use crate::storage::Storage;
use crate::{DType, Device};
use ndarray::{ArrayD, ArrayViewD, Dimension};
use std::fmt;
use std::sync::{Arc, Weak};

/// An n-dimensional array: a shared buffer on a device, a dtype known at run time, and a layout
/// (shape, strides, offset) into the buffer.
///
/// Cloning is cheap (the buffer is shared), and so are the views that transpose, broadcast,
/// flip, slice or reshape a contiguous array. Arrays are immutable: operations return new arrays
/// (only a kernel launch with outputs the caller gives writes into an existing buffer, which
/// every view of it then sees: [`KernelCall`](crate::KernelCall)).
/// Every operation returns [`Result`]; operators are implemented for `Array`, `&Array` and
/// `Result<Array>`, so expressions chain:
///
/// ```
/// use kusari::{Array, Result};
/// # fn main() -> Result<()> {
/// let x = Array::from_vec(vec![1.0f32, 2.0, 3.0], &[3])?;
/// let y = Array::from_vec(vec![4.0f32, 5.0, 6.0], &[3])?;
/// let w = ((&x * &y)? + 1.0)?;
/// assert_eq!(w.to_vec::<f32>()?, vec![5.0, 11.0, 19.0]);
/// # Ok(()) }
/// ```
#[derive(Clone)]
pub struct Array {
    pub(super) storage: Arc<Storage>,
    pub(super) layout: Layout,
}

/// A weak handle on an array's buffer: tells whether the buffer is still alive without keeping it.
#[derive(Clone, Debug)]
pub struct WeakArray(Weak<Storage>);

impl WeakArray {
    /// Whether any array still holds the buffer.
    pub fn is_alive(&self) -> bool {
        self.0.strong_count() > 0
    }
}

impl Array {
    /// A C-contiguous array over `data`, whose length the caller guarantees is `shape`'s size.
    pub(crate) fn from_cpu_vec<T: Element>(data: Vec<T>, shape: &[usize]) -> Self {
        debug_assert_eq!(data.len(), shape.iter().product::<usize>());
        Array {
            storage: Arc::new(Storage::Cpu(CpuStorage::from_vec(data))),
            layout: Layout::contiguous(shape),
        }
    }

    /// An array over `storage` with `layout` (which the caller keeps inside the buffer).
    #[inline]
    pub(crate) fn from_storage(storage: Storage, layout: Layout) -> Self {
        Array {
            storage: Arc::new(storage),
            layout,
        }
    }

    /// A C-contiguous array of `shape` over `storage`, borrowing the layout of an operand of the
    /// same shape when it is already the layout a fresh buffer needs (saves rebuilding it).
    #[inline]
    pub(crate) fn from_storage_shaped(
        storage: Storage,
        shape: &[usize],
        operands: &[&Array],
    ) -> Self {
        match operands
            .iter()
            .find(|a| a.shape() == shape && a.layout.is_contiguous() && a.layout.offset() == 0)
        {
            Some(a) => Self::from_storage(storage, a.layout.clone()),
            None => Self::from_storage(storage, Layout::contiguous(shape)),
        }
    }

    /// A C-contiguous array over `storage` shaped like `like` (no shape to rebuild).
    #[inline]
    pub(crate) fn from_storage_like(storage: Storage, like: &Layout) -> Self {
        let layout = if like.is_contiguous() && like.offset() == 0 {
            like.clone()
        } else {
            Layout::contiguous(like.shape())
        };
        Self::from_storage(storage, layout)
    }

    pub(crate) fn layout(&self) -> &Layout {
        &self.layout
    }

    pub(crate) fn storage(&self) -> &Storage {
        &self.storage
    }

    /// Whether this array is the only holder of its buffer (no other array or weak handle):
    /// then writing the buffer in place changes no other array.
    #[cfg(feature = "nccl")]
    pub(crate) fn owns_buffer(&self) -> bool {
        Arc::strong_count(&self.storage) == 1 && Arc::weak_count(&self.storage) == 0
    }

    /// The elements in C order as one host slice, if the array is on the host, of `T`'s dtype
    /// and C-contiguous.
    pub(crate) fn host_slice<T: Element>(&self) -> Option<&[T]> {
        match &*self.storage {
            Storage::Cpu(c) => c.typed::<T>("host_slice", &self.layout).ok()?.contiguous(),
            Storage::Cuda(_) => None,
        }
    }

    /// [`host_slice`](Self::host_slice), writable, if this array is also the only holder of
    /// its buffer (no other array or weak handle sees the writes).
    pub(crate) fn host_slice_mut<T: Element>(&mut self) -> Option<&mut [T]> {
        let range = self.layout.contiguous_range()?;
        match Arc::get_mut(&mut self.storage)? {
            Storage::Cpu(c) => Some(&mut c.as_mut_slice::<T>()?[range]),
            Storage::Cuda(_) => None,
        }
    }

    /// A view of the same buffer with another layout.
    pub(crate) fn with_layout(&self, layout: Layout) -> Self {
        Array {
            storage: self.storage.clone(),
            layout,
        }
    }

    // ----- constructors -----

    /// An array of `shape` over `data` in C order, on this thread's
    /// [default device](crate::default_device).
    ///
    /// ```
    /// let a = kusari::Array::from_vec(vec![1i64, 2, 3, 4, 5, 6], &[2, 3]).unwrap();
    /// assert_eq!(a.shape(), &[2, 3]);
    /// assert!(kusari::Array::from_vec(vec![1.0f32; 5], &[2, 3]).is_err());
    /// ```
    pub fn from_vec<T: Element>(data: Vec<T>, shape: &[usize]) -> Result<Self> {
        let size = crate::layout::checked_size("from_vec", shape, T::DTYPE)?;
        if data.len() != size {
            return Err(Error::Shape {
                op: "from_vec",
                msg: format!(
                    "{} {} element(s) do not fill shape {shape:?} ({size} elements)",
                    data.len(),
                    T::DTYPE
                ),
            });
        }
        Self::from_cpu_vec(data, shape).to_device(crate::default_device())
    }

    /// Takes an ndarray array (any dimensionality and memory order) without copying a C-order one.
    pub fn from_ndarray<T: Element, D: Dimension>(a: ndarray::Array<T, D>) -> Self {
        let shape = a.shape().to_vec();
        Self::from_cpu_vec(crate::cpu::into_c_vec(a.into_dyn()), &shape)
    }

    /// A 0-dimensional array holding `value`.
    pub fn scalar<T: Element>(value: T) -> Self {
        Self::from_cpu_vec(vec![value], &[])
    }

    /// An array of `shape` filled with `value` (cast to `dtype`), on the host.
    ///
    /// A shape whose element count or byte size overflows is [`Error::ShapeOverflow`]; a buffer
    /// the host cannot provide is [`Error::OutOfMemory`] (the process is not aborted).
    ///
    /// ```
    /// use kusari::{Array, DType, Error};
    /// let a = Array::full(&[2], 1.5, DType::F32).unwrap();
    /// assert_eq!(a.to_vec::<f32>().unwrap(), vec![1.5, 1.5]);
    /// assert!(matches!(Array::zeros(&[1 << 40, 1 << 40], DType::F32), Err(Error::ShapeOverflow { .. })));
    /// assert!(matches!(Array::zeros(&[1 << 40], DType::F64), Err(Error::OutOfMemory { .. })));
    /// ```
    pub fn full(shape: &[usize], value: f64, dtype: DType) -> Result<Self> {
        Self::full_named("full", shape, value, dtype)
    }

    fn full_named(op: &'static str, shape: &[usize], value: f64, dtype: DType) -> Result<Self> {
        let storage = Storage::full(op, shape, value, dtype, Device::Cpu)?;
        Ok(Self::from_storage(storage, Layout::contiguous(shape)))
    }

    /// Zeros of `shape` and `dtype`, on the host (errors as [`full`](Self::full)).
    pub fn zeros(shape: &[usize], dtype: DType) -> Result<Self> {
        Self::full_named("zeros", shape, 0.0, dtype)
    }

    /// Ones of `shape` and `dtype`, on the host (errors as [`full`](Self::full)).
    pub fn ones(shape: &[usize], dtype: DType) -> Result<Self> {
        Self::full_named("ones", shape, 1.0, dtype)
    }

    /// An array of `shape` filled with `value` (cast to `dtype`) on `device`.
    ///
    /// ```
    /// use kusari::{Array, DType, Device};
    /// let a = Array::full_on(&[2], 3.0, DType::I32, Device::Cpu).unwrap();
    /// assert_eq!(a.to_vec::<i32>().unwrap(), vec![3, 3]);
    /// ```
    pub fn full_on(shape: &[usize], value: f64, dtype: DType, device: Device) -> Result<Self> {
        let storage = Storage::full("full", shape, value, dtype, device)?;
        Ok(Self::from_storage(storage, Layout::contiguous(shape)))
    }

    /// Zeros of `shape` and `dtype` on `device`.
    pub fn zeros_on(shape: &[usize], dtype: DType, device: Device) -> Result<Self> {
        Self::full_on(shape, 0.0, dtype, device)
    }

    /// `value` in this array's shape, dtype and device.
    pub fn full_like(&self, value: f64) -> Result<Self> {
        Self::full_on(self.shape(), value, self.dtype(), self.device())
    }

    /// Zeros in this array's shape, dtype and device.
    pub fn zeros_like(&self) -> Result<Self> {
        self.full_like(0.0)
    }

    /// Ones in this array's shape, dtype and device.
    pub fn ones_like(&self) -> Result<Self> {
        self.full_like(1.0)
    }

    /// `start, start + step, ...` below `stop` (above it for a negative step), as NumPy's
    /// arange, on this thread's [default device](crate::default_device).
    ///
    /// ```
    /// let a = kusari::Array::arange(0.0, 1.0, 0.25, kusari::DType::F64).unwrap();
    /// assert_eq!(a.to_vec::<f64>().unwrap(), vec![0.0, 0.25, 0.5, 0.75]);
    /// ```
    pub fn arange(start: f64, stop: f64, step: f64, dtype: DType) -> Result<Self> {
        if step == 0.0 || !step.is_finite() || !start.is_finite() || !stop.is_finite() {
            return Err(Error::Shape {
                op: "arange",
                msg: format!(
                    "start {start}, stop {stop} and step {step} must be finite and step non-zero"
                ),
            });
        }
        let count = ((stop - start) / step).ceil().max(0.0);
        // `as usize` saturates; a count that large overflows in checked_size below.
        let n = if count >= usize::MAX as f64 {
            usize::MAX
        } else {
            count as usize
        };
        crate::layout::checked_size("arange", &[n], dtype)?;
        with_dtype!(dtype, T => {
            let mut data = crate::cpu::pool::alloc::<T>("arange", n)?;
            data.extend((0..n).map(|i| <T as crate::Element>::from_f64(start + i as f64 * step)));
            Self::from_cpu_vec(data, &[n])
        })
        .to_device(crate::default_device())
    }

    /// Samples from `U[low, high)`, drawn from `rng` (cast to `dtype`), on the host (errors as
    /// [`full`](Self::full)).
    pub fn uniform(
        shape: &[usize],
        low: f64,
        high: f64,
        dtype: DType,
        rng: &mut Rng,
    ) -> Result<Self> {
        Self::sampled("uniform", shape, dtype, || {
            low + (high - low) * rng.next_f64()
        })
    }

    /// Samples from `N(mean, std²)`, drawn from `rng` (cast to `dtype`), on the host (errors as
    /// [`full`](Self::full)).
    pub fn normal(
        shape: &[usize],
        mean: f64,
        std: f64,
        dtype: DType,
        rng: &mut Rng,
    ) -> Result<Self> {
        Self::sampled("normal", shape, dtype, || mean + std * rng.next_normal())
    }

    fn sampled(
        op: &'static str,
        shape: &[usize],
        dtype: DType,
        mut sample: impl FnMut() -> f64,
    ) -> Result<Self> {
        let size = crate::layout::checked_size(op, shape, dtype)?;
        with_dtype!(dtype, T => {
            let mut data = crate::cpu::pool::alloc::<T>(op, size)?;
            data.extend((0..size).map(|_| <T as crate::Element>::from_f64(sample())));
            Ok(Self::from_cpu_vec(data, shape))
        })
    }

    // ----- properties -----

    /// The dimensions.
    pub fn shape(&self) -> &[usize] {
        self.layout.shape()
    }

    /// Number of dimensions.
    pub fn ndim(&self) -> usize {
        self.layout.ndim()
    }

    /// Number of elements.
    pub fn size(&self) -> usize {
        self.layout.size()
    }

    /// The element type.
    pub fn dtype(&self) -> DType {
        self.storage.dtype()
    }

    /// The device holding the buffer.
    pub fn device(&self) -> Device {
        self.storage.device()
    }

    /// Element strides (may be zero for broadcast axes, negative for flipped ones).
    pub fn strides(&self) -> Vec<isize> {
        self.layout.strides()
    }

    /// Whether the elements lie in C order without gaps.
    pub fn is_contiguous(&self) -> bool {
        self.layout.is_contiguous()
    }

    /// Whether two arrays are views of the same buffer.
    pub fn shares_buffer(&self, other: &Array) -> bool {
        Arc::ptr_eq(&self.storage, &other.storage)
    }

    /// A weak handle on the buffer, to observe when it is freed.
    pub fn downgrade(&self) -> WeakArray {
        WeakArray(Arc::downgrade(&self.storage))
    }

    // ----- data out -----

    fn element_type_error<T: Element>(&self, op: &'static str) -> Error {
        Error::ElementType {
            op,
            requested: T::DTYPE,
            actual: self.dtype(),
        }
    }

    /// An ndarray view of the elements, for CPU code written with ndarray.
    ///
    /// Fails when `T` is not the dtype, or when the array is not on the host.
    pub fn view<T: Element>(&self) -> Result<ArrayViewD<'_, T>> {
        self.host::<T>("view").map(|r| r.view())
    }

    pub(crate) fn host<T: Element>(&self, op: &'static str) -> Result<CpuRef<'_, T>> {
        if !self.device().is_cpu() {
            return Err(Error::DeviceMismatch {
                op: op.to_string(),
                lhs: self.device(),
                rhs: Device::Cpu,
            });
        }
        self.storage
            .host_ref::<T>(&self.layout)
            .ok_or_else(|| self.element_type_error::<T>(op))
    }

    /// The elements in C order (copied from the device for a CUDA array).
    pub fn to_vec<T: Element>(&self) -> Result<Vec<T>> {
        if T::DTYPE != self.dtype() {
            return Err(self.element_type_error::<T>("to_vec"));
        }
        let (storage, layout) = self.storage.on_host(&self.layout)?;
        let host = storage.typed::<T>("to_vec", &layout)?;
        Ok(host.to_owned_vec("to_vec")?)
    }

    /// The elements in C order converted to `f64`, whatever the dtype or device.
    pub fn to_f64_vec(&self) -> Result<Vec<f64>> {
        let (storage, layout) = self.storage.on_host(&self.layout)?;
        with_dtype!(self.dtype(), T => Ok(storage
            .typed::<T>("to_f64_vec", &layout)?
            .to_cow("to_f64_vec")?
            .iter()
            .map(|v| v.to_f64())
            .collect()))
    }

    /// A copy as an ndarray array (from the device for a CUDA array).
    pub fn to_ndarray<T: Element>(&self) -> Result<ArrayD<T>> {
        if T::DTYPE != self.dtype() {
            return Err(self.element_type_error::<T>("to_ndarray"));
        }
        let (storage, layout) = self.storage.on_host(&self.layout)?;
        Ok(storage.typed::<T>("to_ndarray", &layout)?.view().to_owned())
    }

    /// The single element of a size-1 array.
    pub fn item<T: Element>(&self) -> Result<T> {
        if self.size() != 1 {
            return Err(Error::Shape {
                op: "item",
                msg: format!(
                    "only a one-element array has an item, not shape {:?}",
                    self.shape()
                ),
            });
        }
        Ok(self.to_vec::<T>()?[0])
    }

    /// The same elements on `device`. On the same device this shares the buffer; otherwise the
    /// elements are copied (a view is copied as a C-contiguous array).
    ///
    /// A CUDA device on a machine without a driver or without that device, or in a build
    /// without the `cuda` feature, is [`Error::CudaUnavailable`].
    pub fn to_device(&self, device: Device) -> Result<Array> {
        if device == self.device() {
            return Ok(self.clone());
        }
        let storage = self.storage.to_device(&self.layout, device)?;
        Ok(Self::from_storage(
            storage,
            Layout::contiguous(self.shape()),
        ))
    }

    /// The elements converted to `dtype` (the same array when the dtype already matches).
    ///
    /// Float to integer truncates and saturates, and NaN becomes 0; integer to integer wraps (as
    /// NumPy's `astype`); a float rounds once to nearest even; non-zero becomes `true`. CUDA
    /// arrays convert the same way.
    pub fn astype(&self, dtype: DType) -> Result<Array> {
        if dtype == self.dtype() {
            return Ok(self.clone());
        }
        let storage = self.storage.astype(&self.layout, dtype)?;
        Ok(Self::from_storage(
            storage,
            Layout::contiguous(self.shape()),
        ))
    }

    /// A C-contiguous array with the same elements on the same device (the same array if
    /// already contiguous).
    pub fn contiguous(&self) -> Result<Array> {
        if self.is_contiguous() {
            return Ok(self.clone());
        }
        let storage = self.storage.contiguous(&self.layout)?;
        Ok(Self::from_storage(
            storage,
            Layout::contiguous(self.shape()),
        ))
    }
}

impl<T: Element, D: Dimension> From<ndarray::Array<T, D>> for Array {
    fn from(a: ndarray::Array<T, D>) -> Self {
        Array::from_ndarray(a)
    }
}

impl fmt::Debug for Array {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(
            f,
            "Array({}{:?} on {}",
            self.dtype(),
            self.shape(),
            self.device()
        )?;
        with_dtype!(self.dtype(), T => match self.storage.host_ref::<T>(&self.layout) {
            Some(a) => write!(f, ", {})", a.view()),
            None => f.write_str(")"),
        })
    }
}

impl fmt::Display for Array {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        with_dtype!(self.dtype(), T => match self.storage.host_ref::<T>(&self.layout) {
            Some(a) => write!(f, "{}", a.view()),
            None => write!(f, "<{} {:?} on {}>", self.dtype(), self.shape(), self.device()),
        })
    }
}
