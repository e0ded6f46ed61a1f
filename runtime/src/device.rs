//! Devices: where an array's memory lives ([`Device`]), what a CUDA device reports
//! ([`DeviceProperties`]), and how often a function ran on the host for CUDA inputs.

use std::fmt;
use std::str::FromStr;
use std::sync::atomic::{AtomicUsize, Ordering};

/// A device that holds array memory: the host (`native:0`, alias `cpu`) or a CUDA GPU (`cuda:N`).
///
/// ```
/// use kusari::Device;
/// assert_eq!("cpu".parse::<Device>().unwrap(), Device::Cpu);
/// assert_eq!("cuda:1".parse::<Device>().unwrap(), Device::Cuda(1));
/// assert_eq!(Device::Cpu.to_string(), "native:0");
/// ```
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash, Default)]
pub enum Device {
    /// Host memory, computed with ndarray.
    #[default]
    Cpu,
    /// CUDA device with the given ordinal.
    Cuda(usize),
}

impl Device {
    /// Whether this is the host.
    pub fn is_cpu(self) -> bool {
        self == Device::Cpu
    }
}

impl fmt::Display for Device {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            Device::Cpu => f.write_str("native:0"),
            Device::Cuda(i) => write!(f, "cuda:{i}"),
        }
    }
}

/// A device name that does not parse (`"gpu"`, `"cuda:x"`); `?` turns it into
/// [`Error::InvalidDevice`](crate::Error::InvalidDevice).
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct ParseDeviceError {
    /// The name given.
    pub name: String,
}

impl fmt::Display for ParseDeviceError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(
            f,
            "invalid device name {:?}; expected \"cpu\", \"native:0\" or \"cuda:N\"",
            self.name
        )
    }
}

impl std::error::Error for ParseDeviceError {}

impl FromStr for Device {
    type Err = ParseDeviceError;

    fn from_str(name: &str) -> Result<Self, ParseDeviceError> {
        let invalid = || ParseDeviceError {
            name: name.to_string(),
        };
        match name {
            "cpu" | "native" | "native:0" => Ok(Device::Cpu),
            _ => {
                let (backend, index) = name.split_once(':').ok_or_else(invalid)?;
                let index: usize = index.parse().map_err(|_| invalid())?;
                match backend {
                    "cuda" => Ok(Device::Cuda(index)),
                    _ => Err(invalid()),
                }
            }
        }
    }
}

static HOST_FALLBACKS: AtomicUsize = AtomicUsize::new(0);

/// How many forwards have run on the host for CUDA inputs since the process started (public as
/// [`cuda::host_fallback_count`](crate::cuda::host_fallback_count)).
pub fn host_fallback_count() -> usize {
    HOST_FALLBACKS.load(Ordering::Relaxed)
}

/// Counts one host fallback (called by the graph's host fallback).
pub(crate) fn count_host_fallback() {
    HOST_FALLBACKS.fetch_add(1, Ordering::Relaxed);
}

/// What a CUDA device reports when it opens ([`crate::cuda::device_properties`]).
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct DeviceProperties {
    /// The device's name; an emulated device's says so.
    pub name: String,
    /// Compute capability `(major, minor)`.
    pub compute_capability: (u32, u32),
    /// Streaming multiprocessors (a GPU's elementwise grids and every device's reduction grids
    /// are sized from it; the emulated device covers an elementwise array instead).
    pub sm_count: u32,
    /// Device memory in bytes (what the emulated device lets a process allocate).
    pub total_memory: usize,
    /// The newest CUDA version the driver supports, e.g. `(13, 0)`.
    pub driver_version: (u32, u32),
    /// Whether the device is kusari's emulated CUDA device.
    pub emulated: bool,
}
