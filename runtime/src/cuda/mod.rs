//! The CUDA backend (feature `cuda`, on by default): device buffers, elementwise kernels compiled
//! with NVRTC and cached on disk and per device, reductions and cuBLAS matrix products. Its
//! operations (`ops.rs`) take buffers and layouts and return buffers; they never see `Array`.
//!
//! Nothing here needs CUDA at build time: the driver, NVRTC and cuBLAS are loaded when first
//! used. A machine without a driver gets [`Error::CudaUnavailable`](crate::Error) from every
//! CUDA entry point, never a panic.
//!
//! Every device is reached through one narrow driver interface (`driver.rs`), implemented by the
//! real CUDA driver and by kusari's **emulated CUDA device**, which runs the same kernels and
//! launch code on the host: set `KUSARI_CUDA_EMULATE=1` (or call [`emulate`]) to run CUDA code
//! where there is no GPU.
//!
//! ```
//! use kusari::{cuda, Array, Device, DType};
//! let x = Array::ones(&[3], DType::F32).unwrap();
//! match x.to_device(Device::Cuda(0)) {
//!     Ok(g) => assert_eq!((&g * 2.0).unwrap().to_vec::<f32>().unwrap(), vec![2.0; 3]),
//!     Err(e) => {
//!         assert!(!cuda::is_available());
//!         println!("no GPU: {e}");
//!     }
//! }
//! ```

mod device;
mod driver;
mod index;
mod launch;
mod memory;
#[cfg(feature = "nccl")]
pub(crate) mod nccl;
mod ops;
mod raw;
mod reduction_launch;

pub use crate::device::DeviceProperties;
pub use device::{
    device_count, device_properties, is_available, properties, synchronize, unavailable_reason,
};
pub use driver::{emulate, emulated_bytes_in_use, is_emulated};

/// The emulated device's sanitizer: bounds to the byte, reads of memory nothing wrote, and
/// data races between a launch's threads, checked on every access of a kernel (see the guide's
/// chapter on the emulated device). `KUSARI_CUDA_SANITIZE` sets the process's checks; a GPU
/// ignores them.
///
/// ```no_run
/// use kusari::cuda::sanitizer::{self, Checks};
/// // The launches this thread makes while `_checks` lives are checked.
/// let _checks = sanitizer::scoped(Checks::ALL);
/// ```
pub mod sanitizer {
    pub use super::driver::checks::{
        Checks, ChecksGuard, InitCheck, default_checks, scoped, set_default, take_reports,
    };
}
pub use kusari_kernels::KernelStats;
pub use launch::kernel_stats;

pub(crate) use device::check as check_device;
pub(crate) use launch::CudaRef;
pub(crate) use launch::cached_variants;
pub(crate) use memory::CudaStorage;
pub(crate) use raw::{RawDims, RawLoads, compile_raw, launch_raw};
pub(crate) use reduction_launch::{cached_reduction_variants, launch_reduction_on};

pub use crate::device::host_fallback_count;
