//! Devices: where an array's memory lives.

use std::fmt;
use std::str::FromStr;

use crate::error::{Error, Result};

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

impl FromStr for Device {
    type Err = Error;

    fn from_str(name: &str) -> Result<Self> {
        let invalid = || Error::InvalidDevice {
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

thread_local! {
    static DEFAULT: std::cell::Cell<Device> = const { std::cell::Cell::new(Device::Cpu) };
}

/// This thread's default device: where [`Array::from_vec`](crate::Array::from_vec) and
/// [`Array::arange`](crate::Array::arange) place new arrays. The host unless changed with
/// [`using_device`].
pub fn default_device() -> Device {
    DEFAULT.with(std::cell::Cell::get)
}

/// Restores the previous default device of its thread when dropped.
#[must_use = "the default device is restored when the guard is dropped"]
#[derive(Debug)]
pub struct DeviceGuard {
    previous: Device,
    _thread_bound: std::marker::PhantomData<*const ()>,
}

impl Drop for DeviceGuard {
    fn drop(&mut self) {
        DEFAULT.with(|d| d.set(self.previous));
    }
}

/// Makes `device` this thread's default device until the guard drops (ChainerX's
/// `using_device`). A CUDA device must exist: on a machine without it this is
/// [`Error::CudaUnavailable`], so device-agnostic code learns at the scope's start.
///
/// ```
/// use kusari::{default_device, using_device, Array, Device};
/// {
///     let _cpu = using_device(Device::Cpu).unwrap();
///     let x = Array::from_vec(vec![1.0f32, 2.0], &[2]).unwrap();
///     assert_eq!(x.device(), Device::Cpu);
/// }
/// if !kusari::cuda::is_available() {
///     assert!(using_device(Device::Cuda(0)).is_err());
/// }
/// assert_eq!(default_device(), Device::Cpu);
/// ```
pub fn using_device(device: Device) -> Result<DeviceGuard> {
    crate::cuda::check_device(device, &format!("using_device({device})"))?;
    let previous = DEFAULT.with(|d| d.replace(device));
    Ok(DeviceGuard {
        previous,
        _thread_bound: std::marker::PhantomData,
    })
}

/// What a CUDA device reports when it opens ([`crate::cuda::device_properties`]).
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct DeviceProperties {
    /// The device's name; an emulated device's says so.
    pub name: String,
    /// Compute capability `(major, minor)`.
    pub compute_capability: (u32, u32),
    /// Streaming multiprocessors (elementwise grids are sized from it).
    pub sm_count: u32,
    /// Device memory in bytes (what the emulated device lets a process allocate).
    pub total_memory: usize,
    /// The newest CUDA version the driver supports, e.g. `(13, 0)`.
    pub driver_version: (u32, u32),
    /// Whether the device is kusari's emulated CUDA device.
    pub emulated: bool,
}
