//! The real driver behind the seam: the CUDA driver API and cuBLAS, through cudarc.
//!
//! cudarc loads `libcuda` at run time and panics when it is missing, so [`count`] probes for the
//! library first and turns its absence into a reason the caller reports as
//! [`Error::CudaUnavailable`].
//!
//! When a device opens it is checked and set up once:
//! - the driver must support the CUDA version of the NVRTC that compiles kusari's kernels,
//!   else it could not load what NVRTC emits: the error names both versions and the fix;
//! - the stream-ordered memory pool keeps freed memory (release threshold `u64::MAX`) instead
//!   of returning it to the OS at every synchronisation.

use std::ffi::c_void;
use std::sync::{Arc, Mutex, OnceLock, PoisonError};

use cudarc::cublas::result as blas;
use cudarc::cublas::sys as blas_sys;
use cudarc::driver::result as drv;
use cudarc::driver::sys::{self, CUdevice_attribute};
use cudarc::driver::{CudaContext, CudaFunction, CudaModule, CudaStream};

use super::types::{DevicePtr, DriverResult, Gemm, GemmType};
use crate::device::DeviceProperties;
use crate::error::{Error, Result};

/// Whether `libcuda` can be loaded (without it cudarc would panic on the first driver call).
pub(crate) fn driver_present() -> bool {
    static PRESENT: OnceLock<bool> = OnceLock::new();
    // SAFETY: only tries to open the shared library; no driver function is called.
    *PRESENT.get_or_init(|| unsafe { sys::is_culib_present() })
}

/// Whether `libcublas` can be loaded.
pub(crate) fn cublas_present() -> bool {
    static PRESENT: OnceLock<bool> = OnceLock::new();
    // SAFETY: only tries to open the shared library.
    *PRESENT.get_or_init(|| unsafe { blas_sys::is_culib_present() })
}

/// The number of CUDA devices, or why there are none to use.
pub(crate) fn count() -> DriverResult<usize> {
    static COUNT: OnceLock<DriverResult<usize>> = OnceLock::new();
    COUNT
        .get_or_init(|| {
            if !driver_present() {
                return Err(
                    "no CUDA driver on this machine (libcuda.so could not be loaded)".to_string(),
                );
            }
            drv::init().map_err(|e| format!("the CUDA driver failed to initialise: {e}"))?;
            let n = CudaContext::device_count()
                .map_err(|e| format!("the CUDA driver cannot count devices: {e}"))?;
            Ok(n.max(0) as usize)
        })
        .clone()
}

/// The CUDA version the driver supports, e.g. `(13, 0)`.
fn driver_version() -> DriverResult<(u32, u32)> {
    let mut v: std::ffi::c_int = 0;
    // SAFETY: the driver is loaded (the device count was read first); `v` is valid for writes.
    unsafe { sys::cuDriverGetVersion(&mut v) }
        .result()
        .map_err(|e| e.to_string())?;
    let v = v.max(0) as u32;
    Ok((v / 1000, (v % 1000) / 10))
}

/// An error when the driver (supporting CUDA `driver`) is older than the NVRTC (`nvrtc`) that
/// compiles kusari's kernels: it could not load the cubins and PTX NVRTC makes.
pub(crate) fn check_driver_against_nvrtc(
    ordinal: usize,
    driver: (u32, u32),
    nvrtc: (u32, u32),
) -> Result<()> {
    if driver >= nvrtc {
        return Ok(());
    }
    Err(Error::Cuda {
        op: format!("open cuda:{ordinal}"),
        msg: format!(
            "the CUDA driver supports CUDA {}.{} but kusari's kernels are compiled by NVRTC {}.{}, \
             whose output that driver cannot load: install an NVIDIA driver for CUDA {}.{} or newer, \
             or put an NVRTC no newer than {}.{} on LD_LIBRARY_PATH (e.g. the nvidia-cuda-nvrtc \
             pip package of that version)",
            driver.0, driver.1, nvrtc.0, nvrtc.1, nvrtc.0, nvrtc.1, driver.0, driver.1
        ),
    })
}

/// A cuBLAS handle bound to a device's stream.
struct Handle(blas_sys::cublasHandle_t);
// SAFETY: a handle is used under its device's lock, one thread at a time.
unsafe impl Send for Handle {}

/// One device: its primary context, the stream every operation on it is ordered on, and its
/// cuBLAS handle (made on first use).
pub(crate) struct RealDevice {
    ordinal: usize,
    ctx: Arc<CudaContext>,
    stream: Arc<CudaStream>,
    async_alloc: bool,
    blas: Mutex<Option<Handle>>,
}

fn err(e: cudarc::driver::DriverError) -> String {
    e.to_string()
}

impl RealDevice {
    pub(crate) fn open(ordinal: usize) -> Result<(RealDevice, DeviceProperties)> {
        let op = format!("open cuda:{ordinal}");
        let fail = |e: cudarc::driver::DriverError| Error::Cuda {
            op: op.clone(),
            msg: e.to_string(),
        };
        let ctx = CudaContext::new(ordinal).map_err(fail)?;
        let stream = ctx.new_stream().map_err(fail)?;
        let attr = |a| ctx.attribute(a).map_err(fail);
        let sm_count = attr(CUdevice_attribute::CU_DEVICE_ATTRIBUTE_MULTIPROCESSOR_COUNT)? as u32;
        let (major, minor) = ctx.compute_capability().map_err(fail)?;
        let name = ctx.name().map_err(fail)?;
        let total_memory = ctx.total_mem().map_err(fail)?;
        let version = driver_version().map_err(|msg| Error::Cuda {
            op: op.clone(),
            msg,
        })?;
        if let Ok((nv_major, nv_minor)) = kusari_kernels::compile::nvrtc_version() {
            check_driver_against_nvrtc(
                ordinal,
                version,
                (nv_major.max(0) as u32, nv_minor.max(0) as u32),
            )?;
        }
        let async_alloc = ctx.has_async_alloc();
        if async_alloc {
            // Keep freed memory in the pool: the default threshold (0) hands it back to the
            // OS at every synchronisation, and the next allocation pays for it again.
            let mut threshold = u64::MAX;
            // SAFETY: the device comes from the context just opened; the attribute takes a
            // `cuuint64_t`, which `threshold` is.
            unsafe {
                let pool = drv::device::get_default_mem_pool(ctx.cu_device()).map_err(fail)?;
                drv::mem_pool::set_attribute(
                    pool,
                    sys::CUmemPool_attribute::CU_MEMPOOL_ATTR_RELEASE_THRESHOLD,
                    (&mut threshold as *mut u64).cast::<c_void>(),
                )
                .map_err(fail)?;
            }
        }
        let info = DeviceProperties {
            name,
            compute_capability: (major as u32, minor as u32),
            sm_count,
            total_memory,
            driver_version: version,
            emulated: false,
        };
        let device = RealDevice {
            ordinal,
            ctx,
            stream,
            async_alloc,
            blas: Mutex::new(None),
        };
        Ok((device, info))
    }

    /// Makes this device's context current on the calling thread (cheap when it already is).
    pub(crate) fn bind(&self) -> DriverResult<()> {
        self.ctx.bind_to_thread().map_err(err)
    }

    /// The stream every operation on this device is ordered on (NCCL's work joins it).
    #[cfg(feature = "nccl")]
    pub(crate) fn stream(&self) -> &Arc<CudaStream> {
        &self.stream
    }

    /// A new stream beside the device's (non-blocking: it does not wait for the legacy
    /// default stream), for work that overlaps the device's stream's.
    #[cfg(feature = "nccl")]
    pub(crate) fn new_side_stream(&self) -> DriverResult<Arc<CudaStream>> {
        self.bind()?;
        self.ctx.new_stream().map_err(err)
    }

    pub(crate) fn alloc(&self, bytes: usize) -> DriverResult<DevicePtr> {
        self.bind()?;
        // SAFETY: the context is bound; the memory is only used on this device's stream and
        // freed by `free`.
        unsafe {
            if self.async_alloc {
                drv::malloc_async(self.stream.cu_stream(), bytes)
            } else {
                drv::malloc_sync(bytes)
            }
        }
        .map_err(err)
    }

    /// # Safety
    /// `ptr` came from `alloc` and is freed once.
    pub(crate) unsafe fn free(&self, ptr: DevicePtr) {
        if self.bind().is_err() {
            return;
        }
        // SAFETY: freed once, on the stream that orders every kernel that used it.
        let _ = unsafe {
            if self.async_alloc {
                drv::free_async(ptr, self.stream.cu_stream())
            } else {
                drv::free_sync(ptr)
            }
        };
    }

    /// # Safety
    /// `dst` addresses `src.len()` bytes of this device.
    pub(crate) unsafe fn copy_htod(&self, dst: DevicePtr, src: &[u8]) -> DriverResult<()> {
        self.bind()?;
        // SAFETY: the caller's contract; the synchronisation keeps `src` borrowed until read.
        unsafe { drv::memcpy_htod_async(dst, src, self.stream.cu_stream()) }.map_err(err)?;
        self.synchronize()
    }

    /// # Safety
    /// `src` addresses `dst.len()` bytes of this device.
    pub(crate) unsafe fn copy_dtoh(&self, dst: &mut [u8], src: DevicePtr) -> DriverResult<()> {
        self.bind()?;
        // SAFETY: the caller's contract; the stream is synchronised before `dst` is read.
        unsafe { drv::memcpy_dtoh_async(dst, src, self.stream.cu_stream()) }.map_err(err)?;
        self.synchronize()
    }

    /// # Safety
    /// `dst` addresses `bytes` bytes of this device, `src` as many of `from`.
    pub(crate) unsafe fn copy_dtod(
        &self,
        dst: DevicePtr,
        from: &RealDevice,
        src: DevicePtr,
        bytes: usize,
    ) -> DriverResult<()> {
        // Work queued on the source's stream must finish first.
        from.synchronize()?;
        self.bind()?;
        // SAFETY: the caller's contract; ordered on this device's stream.
        unsafe {
            if from.ordinal == self.ordinal {
                drv::memcpy_dtod_async(dst, src, bytes, self.stream.cu_stream())
            } else {
                drv::memcpy_peer_async(
                    self.ctx.cu_ctx(),
                    dst,
                    from.ctx.cu_ctx(),
                    src,
                    bytes,
                    self.stream.cu_stream(),
                )
            }
        }
        .map_err(err)
    }

    /// # Safety
    /// `dst` addresses `bytes` bytes of this device.
    pub(crate) unsafe fn memset(
        &self,
        dst: DevicePtr,
        value: u8,
        bytes: usize,
    ) -> DriverResult<()> {
        self.bind()?;
        // SAFETY: the caller's contract; ordered on the device's stream.
        unsafe { drv::memset_d8_async(dst, value, bytes, self.stream.cu_stream()) }.map_err(err)
    }

    pub(crate) fn synchronize(&self) -> DriverResult<()> {
        self.bind()?;
        self.stream.synchronize().map_err(err)
    }

    pub(crate) fn load_module(&self, image: &[u8]) -> DriverResult<Arc<CudaModule>> {
        self.bind()?;
        self.ctx
            .load_module(cudarc::nvrtc::Ptx::from_binary(image.to_vec()))
            .map_err(err)
    }

    /// # Safety
    /// See [`super::Backend::launch`].
    pub(crate) unsafe fn launch(
        &self,
        f: &CudaFunction,
        grid: [u32; 3],
        block: [u32; 3],
        shared_bytes: u32,
        params: &mut [*mut c_void],
    ) -> DriverResult<()> {
        self.bind()?;
        // SAFETY: the caller upholds the parameter contract; the stream belongs to this
        // device, whose context is bound.
        unsafe {
            drv::launch_kernel(
                f.cu_function(),
                (grid[0], grid[1], grid[2]),
                (block[0], block[1], block[2]),
                shared_bytes,
                self.stream.cu_stream(),
                params,
            )
        }
        .map_err(err)
    }

    /// # Safety
    /// See [`super::Backend::gemm`].
    pub(crate) unsafe fn gemm(&self, g: &Gemm) -> DriverResult<()> {
        self.bind()?;
        let blas_err = |e: blas::CublasError| format!("{e:?}");
        let mut slot = self.blas.lock().unwrap_or_else(PoisonError::into_inner);
        let handle = match &*slot {
            Some(h) => h.0,
            None => {
                let h = blas::create_handle().map_err(blas_err)?;
                // SAFETY: `h` was just created in the bound context; the stream belongs to it.
                unsafe { blas::set_stream(h, self.stream.cu_stream() as _) }.map_err(blas_err)?;
                *slot = Some(Handle(h));
                h
            }
        };
        let op = |t: bool| {
            if t {
                blas_sys::cublasOperation_t::CUBLAS_OP_T
            } else {
                blas_sys::cublasOperation_t::CUBLAS_OP_N
            }
        };
        let (ta, tb) = (op(g.trans_a), op(g.trans_b));
        // SAFETY: the caller's contract; the handle is bound to this device's stream and used
        // under its lock.
        unsafe {
            match g.dtype {
                GemmType::F32 => blas::sgemm_strided_batched(
                    handle,
                    ta,
                    tb,
                    g.m,
                    g.n,
                    g.k,
                    &(g.alpha as f32),
                    g.a as *const f32,
                    g.lda,
                    g.stride_a,
                    g.b as *const f32,
                    g.ldb,
                    g.stride_b,
                    &(g.beta as f32),
                    g.c as *mut f32,
                    g.ldc,
                    g.stride_c,
                    g.batch,
                ),
                GemmType::F64 => blas::dgemm_strided_batched(
                    handle,
                    ta,
                    tb,
                    g.m,
                    g.n,
                    g.k,
                    &g.alpha,
                    g.a as *const f64,
                    g.lda,
                    g.stride_a,
                    g.b as *const f64,
                    g.ldb,
                    g.stride_b,
                    &g.beta,
                    g.c as *mut f64,
                    g.ldc,
                    g.stride_c,
                    g.batch,
                ),
            }
        }
        .map_err(blas_err)
    }
}

impl std::fmt::Debug for RealDevice {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(f, "RealDevice(cuda:{})", self.ordinal)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_driver_older_than_nvrtc_is_an_error_naming_both_versions_and_the_fix() {
        assert!(check_driver_against_nvrtc(0, (13, 0), (13, 0)).is_ok());
        assert!(check_driver_against_nvrtc(0, (13, 1), (13, 0)).is_ok());
        let e = check_driver_against_nvrtc(1, (12, 4), (13, 0))
            .unwrap_err()
            .to_string();
        assert!(e.contains("open cuda:1"), "{e}");
        assert!(e.contains("CUDA 12.4") && e.contains("NVRTC 13.0"), "{e}");
        assert!(
            e.contains("install an NVIDIA driver for CUDA 13.0 or newer"),
            "{e}"
        );
        let e = check_driver_against_nvrtc(0, (13, 0), (13, 2)).unwrap_err();
        assert!(e.to_string().contains("NVRTC 13.2"));
    }
}
