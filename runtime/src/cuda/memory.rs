//! Device buffers: untyped allocations on one device's stream, freed on that stream when the
//! last array viewing them drops.

use std::sync::Arc;

use cudarc::driver::result as drv;
use cudarc::driver::sys::CUdeviceptr;

use super::device::{driver_error, CudaDevice};
use crate::error::Result;
use crate::storage::Storage;
use crate::{Array, DType};

/// An array's buffer on a CUDA device: `len` elements of `dtype`.
pub(crate) struct CudaStorage {
    ptr: CUdeviceptr,
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
        let bytes = len * dtype.size_in_bytes();
        let ptr = if bytes == 0 {
            0
        } else {
            device.bind()?;
            let op = format!("allocate {bytes} bytes on cuda:{}", device.ordinal);
            // SAFETY: the context is bound; the memory is only used on this device's stream
            // (async allocation) and freed in `drop`.
            unsafe {
                if device.async_alloc {
                    drv::malloc_async(device.stream.cu_stream(), bytes)
                } else {
                    drv::malloc_sync(bytes)
                }
            }
            .map_err(|e| driver_error(&op, e))?
        };
        Ok(CudaStorage {
            ptr,
            len,
            dtype,
            device: device.clone(),
        })
    }

    /// The buffer of a CUDA array (callers have checked the device).
    pub(crate) fn of(a: &Array) -> &CudaStorage {
        match a.storage() {
            Storage::Cuda(s) => s,
            Storage::Cpu(_) => unreachable!("the caller checked that the array is on CUDA"),
        }
    }

    pub(crate) fn dtype(&self) -> DType {
        self.dtype
    }

    pub(crate) fn ordinal(&self) -> usize {
        self.device.ordinal
    }

    /// The device address of element `offset` (element offsets, as layouts count them).
    pub(crate) fn ptr_at(&self, offset: usize) -> CUdeviceptr {
        self.ptr + (offset * self.dtype.size_in_bytes()) as CUdeviceptr
    }

    /// Copies `bytes` from the host into the buffer. Returns once the host memory may be reused.
    pub(crate) fn write_from_host(&self, bytes: &[u8]) -> Result<()> {
        debug_assert_eq!(bytes.len(), self.len * self.dtype.size_in_bytes());
        if bytes.is_empty() {
            return Ok(());
        }
        self.device.bind()?;
        let op = format!("copy to cuda:{}", self.ordinal());
        // SAFETY: the buffer holds `bytes.len()` bytes; the copy is ordered on the stream the
        // buffer was allocated on, and the synchronisation below keeps `bytes` alive until it
        // has been read.
        unsafe { drv::memcpy_htod_async(self.ptr, bytes, self.device.stream.cu_stream()) }
            .map_err(|e| driver_error(&op, e))?;
        self.device.synchronize()
    }

    /// Copies `out.len()` bytes from element `offset` on to the host, after every queued
    /// operation that writes them.
    pub(crate) fn read_to_host(&self, offset: usize, out: &mut [u8]) -> Result<()> {
        debug_assert!(
            offset * self.dtype.size_in_bytes() + out.len()
                <= self.len * self.dtype.size_in_bytes()
        );
        if out.is_empty() {
            return Ok(());
        }
        self.device.bind()?;
        let op = format!("copy from cuda:{}", self.ordinal());
        // SAFETY: the range lies inside the buffer (asserted above); the stream is synchronised before `out` is read.
        unsafe { drv::memcpy_dtoh_async(out, self.ptr_at(offset), self.device.stream.cu_stream()) }
            .map_err(|e| driver_error(&op, e))?;
        self.device.synchronize()
    }

    /// Fills the buffer with zero bytes (zero for every dtype).
    pub(crate) fn zero(&self) -> Result<()> {
        let bytes = self.len * self.dtype.size_in_bytes();
        if bytes == 0 {
            return Ok(());
        }
        self.device.bind()?;
        // SAFETY: the buffer holds `bytes` bytes; ordered on its stream.
        unsafe { drv::memset_d8_async(self.ptr, 0, bytes, self.device.stream.cu_stream()) }
            .map_err(|e| driver_error("memset", e))
    }
}

impl Drop for CudaStorage {
    fn drop(&mut self) {
        if self.ptr == 0 || self.device.bind().is_err() {
            return;
        }
        // SAFETY: the pointer came from the matching allocation call and is freed once, on the
        // stream that orders every kernel that used it, so queued work finishes first.
        let _ = unsafe {
            if self.device.async_alloc {
                drv::free_async(self.ptr, self.device.stream.cu_stream())
            } else {
                drv::free_sync(self.ptr)
            }
        };
    }
}
