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
