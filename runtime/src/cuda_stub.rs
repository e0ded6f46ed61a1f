//! The CUDA backend's stand-in when kusari is built without the `cuda` feature: the same API,
//! and every operation that would touch a GPU returns [`Error::CudaUnavailable`].
//!
//! ```
//! assert_eq!(kusari::cuda::device_count(), 0);
//! ```

use crate::cpu::Reduction;
use crate::error::{Error, Result};
use crate::kernel::ElementwiseKernel;
use crate::{Array, DType, Device};

const REASON: &str = "kusari was built without its `cuda` feature";

fn unavailable(op: &str) -> Error {
    Error::CudaUnavailable {
        op: op.to_string(),
        reason: REASON.to_string(),
    }
}

/// A CUDA buffer: none can exist in this build.
#[derive(Debug)]
pub(crate) enum CudaStorage {}

impl CudaStorage {
    pub(crate) fn dtype(&self) -> DType {
        match *self {}
    }

    pub(crate) fn ordinal(&self) -> usize {
        match *self {}
    }
}

pub use crate::kernel::KernelStats;

/// The counters (all zero in this build).
pub fn kernel_stats() -> KernelStats {
    KernelStats::default()
}

/// Number of CUDA devices: 0 in this build.
pub fn device_count() -> usize {
    0
}

/// Whether a CUDA device can be used: never in this build.
pub fn is_available() -> bool {
    false
}

/// Why CUDA cannot be used: this build has no CUDA backend.
pub fn unavailable_reason() -> Option<String> {
    Some(REASON.to_string())
}

/// Waits for a device: an error for `cuda:N` in this build.
pub fn synchronize(device: Device) -> Result<()> {
    match device {
        Device::Cpu => Ok(()),
        Device::Cuda(i) => Err(unavailable(&format!("synchronize(cuda:{i})"))),
    }
}

/// A device's name and compute capability: an error in this build.
pub fn properties(ordinal: usize) -> Result<(String, (u32, u32))> {
    Err(unavailable(&format!("properties(cuda:{ordinal})")))
}

pub use crate::device::host_fallback_count;

pub use crate::device::DeviceProperties;

/// A device's properties: an error in this build.
pub fn device_properties(ordinal: usize) -> Result<DeviceProperties> {
    Err(unavailable(&format!("properties(cuda:{ordinal})")))
}

/// The emulated CUDA device: an error in this build, which has no CUDA backend to emulate.
pub fn emulate(devices: usize) -> Result<()> {
    Err(unavailable(&format!("cuda::emulate({devices})")))
}

/// Whether CUDA runs on the emulated device: never in this build.
pub fn is_emulated() -> bool {
    false
}

/// Bytes the emulated devices hold: none in this build.
pub fn emulated_bytes_in_use() -> usize {
    0
}

pub(crate) fn check_device(device: Device, op: &str) -> Result<()> {
    match device {
        Device::Cpu => Ok(()),
        Device::Cuda(_) => Err(unavailable(op)),
    }
}

pub(crate) fn launch(
    kernel: &ElementwiseKernel,
    _inputs: &[&Array],
    _params: &[f64],
    _shape: Option<&[usize]>,
) -> Result<Vec<Array>> {
    Err(unavailable(&format!("kernel {}", kernel.name)))
}

pub(crate) fn to_device(_a: &Array, ordinal: usize) -> Result<Array> {
    Err(unavailable(&format!("to_device(cuda:{ordinal})")))
}

pub(crate) fn to_host(_a: &Array) -> Result<Array> {
    Err(unavailable("to_host"))
}

pub(crate) fn full(_shape: &[usize], _value: f64, _dtype: DType, ordinal: usize) -> Result<Array> {
    Err(unavailable(&format!("full_on(cuda:{ordinal})")))
}

pub(crate) fn contiguous(_a: &Array) -> Result<Array> {
    Err(unavailable("contiguous"))
}

pub(crate) fn astype(_a: &Array, _dtype: DType) -> Result<Array> {
    Err(unavailable("astype"))
}

pub(crate) fn reduce(_a: &Array, _axes: &[usize], _kind: Reduction) -> Result<Array> {
    Err(unavailable("reduce"))
}

pub(crate) fn matmul(
    _a: &Array,
    _b: &Array,
    _batch: &[usize],
    _nkm: (usize, usize, usize),
    _out_shape: &[usize],
) -> Result<Array> {
    Err(unavailable("matmul"))
}
