//! kusari's emulated CUDA device: the other implementation of the driver seam
//! ([`crate::cuda::driver`]). It runs the very kernels and launch code a GPU would, on the host,
//! so that every CUDA path executes where there is no GPU (CI, a laptop).
//!
//! - **Properties**: compute capability 9.0 and an H100's 132 SMs, so launch configurations are
//!   the real ones; the name says the device is emulated.
//! - **Memory** ([`memory`]): device pointers are host addresses, fenced by guard pages,
//!   poisoned when fresh, inaccessible when freed.
//! - **Kernels** ([`compile`]): the NVRTC source behind a host shim, built by the host C++
//!   compiler into a shared library, cached like GPU binaries. Where NVRTC loads, the driver
//!   (`Backend::compile`) first has NVRTC compile the source for the reported architecture, so
//!   that a kernel a GPU's compiler refuses is refused here too, with NVRTC's log.
//! - **Execution** ([`run`]): every block and thread of the grid; real barriers; launches and
//!   their parameters checked; a kernel's crash (`SIGSEGV`, `SIGFPE`) an error naming it.
//! - **The sanitizer** ([`checks`]): a launch may run the library's checked build, which
//!   checks every access to the byte (bounds), for reads of unwritten memory, and for races.
//! - **cuBLAS** ([`blas`]): the strided-batched GEMM with cuBLAS's column-major semantics.
//! - **NCCL** (`nccl`, feature `nccl`): a stand-in, a test double that enforces NCCL's rules,
//!   with the ranks as threads of this process.
//!
//! Work is done when it is issued (the device's stream is always idle); work a GPU would queue on
//! a stream of its own (an NCCL communicator's asynchronous collectives) runs on a thread of its
//! own ([`stream`]). Anything not emulated is an error naming it.

mod blas;
pub(crate) mod checks;
mod compile;
mod memory;
#[cfg(feature = "nccl")]
pub(crate) mod nccl;
mod run;
#[cfg(feature = "nccl")]
pub(crate) mod stream;

#[cfg(all(test, feature = "nccl"))]
mod nccl_tests;
#[cfg(test)]
mod tests;

use std::ffi::c_void;

use crate::cuda::driver::types::{DevicePtr, DriverResult, Gemm};
use crate::device::DeviceProperties;

pub(crate) use compile::compile_cached;
pub(crate) use run::{Kernel, Library};

/// The compute capability the emulated device reports (an H100's); the driver's
/// `Backend::compile` also has NVRTC compile each kernel for it, where NVRTC loads.
pub(crate) const CAPABILITY: (u32, u32) = (9, 0);

/// The streaming multiprocessors of the H100 the emulated device reports.
pub(crate) const SM_COUNT: u32 = 132;

/// Whether this machine can run the emulated device: a 64-bit Unix host with a C++ compiler.
pub(crate) fn available() -> std::result::Result<(), String> {
    if !cfg!(all(unix, target_pointer_width = "64")) {
        return Err("the emulated CUDA device needs a 64-bit Unix host".to_string());
    }
    compile::host_compiler().map(|_| ()).map_err(|why| {
        format!(
            "the emulated CUDA device compiles kernels with the host C++ compiler, and {why}: \
             install g++ or clang++, or set CXX"
        )
    })
}

/// One emulated device.
#[derive(Debug)]
pub(crate) struct EmuDevice {
    ordinal: usize,
}

impl EmuDevice {
    pub(crate) fn open(ordinal: usize) -> (EmuDevice, DeviceProperties) {
        let info = DeviceProperties {
            name: format!(
                "kusari emulated CUDA device {ordinal} (H100 profile, runs on the host CPU)"
            ),
            compute_capability: CAPABILITY,
            sm_count: SM_COUNT,
            total_memory: memory::capacity(),
            driver_version: (13, 0),
            emulated: true,
        };
        (EmuDevice { ordinal }, info)
    }

    pub(crate) fn alloc(&self, bytes: usize) -> DriverResult<DevicePtr> {
        memory::alloc(self.ordinal, bytes)
    }

    pub(crate) fn free(&self, ptr: DevicePtr) {
        memory::free(ptr)
    }

    fn check(&self, ptr: DevicePtr, len: usize, what: &str) -> DriverResult<()> {
        memory::check_range(self.ordinal, ptr, len, what)
    }

    pub(crate) fn copy_htod(&self, dst: DevicePtr, src: &[u8]) -> DriverResult<()> {
        self.check(dst, src.len(), "cuMemcpyHtoD destination")?;
        // SAFETY: `dst` addresses `src.len()` bytes of a live allocation (checked).
        unsafe { std::ptr::copy_nonoverlapping(src.as_ptr(), dst as *mut u8, src.len()) };
        memory::mark_written(dst, src.len());
        Ok(())
    }

    pub(crate) fn copy_dtoh(&self, dst: &mut [u8], src: DevicePtr) -> DriverResult<()> {
        self.check(src, dst.len(), "cuMemcpyDtoH source")?;
        // SAFETY: `src` addresses `dst.len()` bytes of a live allocation (checked).
        unsafe { std::ptr::copy_nonoverlapping(src as *const u8, dst.as_mut_ptr(), dst.len()) };
        Ok(())
    }

    pub(crate) fn copy_dtod(
        &self,
        dst: DevicePtr,
        from: &EmuDevice,
        src: DevicePtr,
        bytes: usize,
    ) -> DriverResult<()> {
        from.check(src, bytes, "cuMemcpyDtoD source")?;
        self.check(dst, bytes, "cuMemcpyDtoD destination")?;
        // SAFETY: both ranges lie in live allocations (checked); `copy` allows overlap.
        unsafe { std::ptr::copy(src as *const u8, dst as *mut u8, bytes) };
        memory::mark_written(dst, bytes);
        Ok(())
    }

    pub(crate) fn memset(&self, dst: DevicePtr, value: u8, bytes: usize) -> DriverResult<()> {
        self.check(dst, bytes, "cuMemsetD8")?;
        // SAFETY: the range lies in a live allocation (checked).
        unsafe { std::ptr::write_bytes(dst as *mut u8, value, bytes) };
        memory::mark_written(dst, bytes);
        Ok(())
    }

    /// # Safety
    /// See [`crate::cuda::driver::Backend::launch`].
    pub(crate) unsafe fn launch(
        &self,
        kernel: &Kernel,
        grid: [u32; 3],
        block: [u32; 3],
        shared_bytes: u32,
        params: &mut [*mut c_void],
        sizes: &[usize],
    ) -> DriverResult<()> {
        // SAFETY: forwarded contract.
        unsafe { kernel.run(self.ordinal, grid, block, shared_bytes, params, sizes) }
    }

    pub(crate) fn gemm(&self, g: &Gemm) -> DriverResult<()> {
        blas::gemm(self.ordinal, g)
    }
}

/// Bytes the emulated devices of this process hold.
pub fn emulated_bytes_in_use() -> usize {
    memory::live_bytes()
}
