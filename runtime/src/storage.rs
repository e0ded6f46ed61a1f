//! Where an array's elements live: one enum over devices (the CUDA variant is uninhabited when
//! kusari is built without its `cuda` feature).

use std::any::Any;

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

/// Moves a typed value into an `Option` slot read back as `Any` (used to go from a generic
/// `T: Element` to the storage variant of `T::DTYPE` without unsafe code).
pub(crate) fn take_as<T: 'static, U: 'static>(value: T) -> Option<U> {
    let mut slot = Some(value);
    (&mut slot as &mut dyn Any)
        .downcast_mut::<Option<U>>()
        .and_then(Option::take)
}
