//! Device buffers: untyped allocations on one device's stream, freed on that stream when the
//! last array viewing them drops.

use std::sync::Arc;

use super::device::CudaDevice;
use super::driver::DevicePtr;
use crate::DType;
use crate::error::{Error, Result};

/// An array's buffer on a CUDA device: `len` elements of `dtype`.
pub(crate) struct CudaStorage {
    ptr: DevicePtr,
    len: usize,
    dtype: DType,
    pub(crate) device: Arc<CudaDevice>,
}

impl std::fmt::Debug for CudaStorage {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(
            f,
            "CudaStorage({} x {} on cuda:{})",
            self.len, self.dtype, self.device.ordinal
        )
    }
}

// SAFETY: the buffer is a device address owned by this value; every use of it is ordered on
// the device's stream, which the driver allows from any thread once the context is bound.
unsafe impl Send for CudaStorage {}
// SAFETY: as above; shared references only read the address.
unsafe impl Sync for CudaStorage {}

impl CudaStorage {
    /// `len` uninitialised elements of `dtype` on `device`. A zero-size buffer allocates nothing.
    pub(crate) fn alloc(device: &Arc<CudaDevice>, len: usize, dtype: DType) -> Result<Self> {
        let bytes = len
            .checked_mul(dtype.size_in_bytes())
            .ok_or_else(|| Error::Cuda {
                op: format!("allocate {len} x {dtype} on cuda:{}", device.ordinal),
                msg: "the size in bytes overflows".to_string(),
            })?;
        let ptr = match device.backend.alloc(bytes) {
            Ok(ptr) => ptr,
            // The driver's (and the emulator's) out-of-memory is the same error as the host's.
            Err(msg) if msg.contains("OUT_OF_MEMORY") => {
                return Err(Error::OutOfMemory {
                    op: format!("allocate {len} x {dtype}"),
                    device: crate::Device::Cuda(device.ordinal),
                    bytes,
                });
            }
            r => device.check(r, || {
                format!("allocate {bytes} bytes on cuda:{}", device.ordinal)
            })?,
        };
        Ok(CudaStorage {
            ptr,
            len,
            dtype,
            device: device.clone(),
        })
    }

    fn bytes(&self) -> usize {
        self.len * self.dtype.size_in_bytes()
    }

    /// The number of elements.
    #[cfg(feature = "nccl")]
    pub(crate) fn len(&self) -> usize {
        self.len
    }

    pub(crate) fn dtype(&self) -> DType {
        self.dtype
    }

    pub(crate) fn ordinal(&self) -> usize {
        self.device.ordinal
    }

    /// The device address of element `offset` (element offsets, as layouts count them).
    pub(crate) fn ptr_at(&self, offset: usize) -> DevicePtr {
        self.ptr + (offset * self.dtype.size_in_bytes()) as DevicePtr
    }

    /// Copies `bytes` from the host into the buffer. Returns once the host memory may be reused.
    pub(crate) fn write_from_host(&self, bytes: &[u8]) -> Result<()> {
        debug_assert_eq!(bytes.len(), self.bytes());
        // SAFETY: the buffer holds `bytes.len()` bytes.
        let r = unsafe { self.device.backend.copy_htod(self.ptr, bytes) };
        self.device
            .check(r, || format!("copy to cuda:{}", self.ordinal()))
    }

    /// Copies `out.len()` bytes from element `offset` on to the host, after every queued
    /// operation that writes them.
    pub(crate) fn read_to_host(&self, offset: usize, out: &mut [u8]) -> Result<()> {
        debug_assert!(offset * self.dtype.size_in_bytes() + out.len() <= self.bytes());
        // SAFETY: the range lies inside the buffer (asserted above).
        let r = unsafe { self.device.backend.copy_dtoh(out, self.ptr_at(offset)) };
        self.device
            .check(r, || format!("copy from cuda:{}", self.ordinal()))
    }

    /// Fills the buffer with the elements of `src` (on any device) from element `offset` on.
    pub(crate) fn copy_from(&self, src: &CudaStorage, offset: usize) -> Result<()> {
        debug_assert_eq!(self.dtype, src.dtype);
        debug_assert!(offset + self.len <= src.len);
        // SAFETY: both ranges lie in their buffers (asserted above).
        let r = unsafe {
            self.device.backend.copy_dtod(
                self.ptr,
                &src.device.backend,
                src.ptr_at(offset),
                self.bytes(),
            )
        };
        self.device.check(r, || {
            format!(
                "copy from cuda:{} to cuda:{}",
                src.ordinal(),
                self.ordinal()
            )
        })
    }

    /// Fills the buffer with zero bytes (zero for every dtype).
    pub(crate) fn zero(&self) -> Result<()> {
        // SAFETY: the buffer holds `self.bytes()` bytes.
        let r = unsafe { self.device.backend.memset(self.ptr, 0, self.bytes()) };
        self.device
            .check(r, || format!("memset on cuda:{}", self.ordinal()))
    }
}

impl Drop for CudaStorage {
    fn drop(&mut self) {
        // SAFETY: the pointer came from this device's allocation and is freed once, ordered
        // after every kernel that used it.
        unsafe { self.device.backend.free(self.ptr) };
    }
}
