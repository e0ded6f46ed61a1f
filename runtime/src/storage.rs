//! Where an array's elements live: one enum over devices (the CUDA variant is uninhabited when
//! kusari is built without its `cuda` feature).

use crate::cpu::CpuStorage;
use crate::cuda::CudaStorage;
use crate::{DType, Device};

/// An array's buffer on one device. Shared between views through `Arc`.
#[derive(Debug)]
pub(crate) enum Storage {
    Cpu(CpuStorage),
    #[cfg_attr(not(feature = "cuda"), allow(dead_code))]
    Cuda(CudaStorage),
}

impl Storage {
    pub(crate) fn dtype(&self) -> DType {
        match self {
            Storage::Cpu(s) => s.dtype(),
            Storage::Cuda(s) => s.dtype(),
        }
    }

    pub(crate) fn device(&self) -> Device {
        match self {
            Storage::Cpu(_) => Device::Cpu,
            Storage::Cuda(s) => Device::Cuda(s.ordinal()),
        }
    }
}
