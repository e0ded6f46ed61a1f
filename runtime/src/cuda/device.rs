//! CUDA devices: the driver probe, one context and one stream per device, created on first use.
//!
//! cudarc loads `libcuda` at run time and panics when it is missing, so every path here probes
//! for the library first ([`driver_present`]) and turns its absence into
//! [`Error::CudaUnavailable`].

use std::sync::{Arc, Mutex, OnceLock, PoisonError};

use cudarc::driver::sys::CUdevice_attribute;
use cudarc::driver::{CudaContext, CudaStream};

use crate::error::{Error, Result};
use crate::Device;

/// One CUDA device as kusari uses it: its primary context, the stream every operation on it is
/// ordered on, and the properties launches need.
pub(crate) struct CudaDevice {
    pub(crate) ordinal: usize,
    pub(crate) ctx: Arc<CudaContext>,
    pub(crate) stream: Arc<CudaStream>,
    /// Streaming multiprocessors (sizes elementwise grids).
    pub(crate) sm_count: u32,
    /// Compute capability (picks the cubin architecture).
    pub(crate) compute_capability: (u32, u32),
    /// Whether stream-ordered allocation (`cuMemAllocAsync`) is available.
    pub(crate) async_alloc: bool,
    pub(crate) name: String,
}

impl CudaDevice {
    /// Makes this device's context current on the calling thread (cheap when it already is).
    pub(crate) fn bind(&self) -> Result<()> {
        self.ctx
            .bind_to_thread()
            .map_err(|e| driver_error(&format!("cuda:{}", self.ordinal), e))
    }

    /// Waits for every operation queued on the device.
    pub(crate) fn synchronize(&self) -> Result<()> {
        self.bind()?;
        self.stream
            .synchronize()
            .map_err(|e| driver_error(&format!("synchronize(cuda:{})", self.ordinal), e))
    }
}

/// A driver error as kusari's error, naming the operation.
pub(crate) fn driver_error(op: &str, e: cudarc::driver::DriverError) -> Error {
    Error::Cuda {
        op: op.to_string(),
        msg: e.to_string(),
    }
}

/// Whether `libcuda` can be loaded (without it cudarc would panic on the first driver call).
pub(crate) fn driver_present() -> bool {
    static PRESENT: OnceLock<bool> = OnceLock::new();
    // SAFETY: only tries to open the shared library; no driver function is called.
    *PRESENT.get_or_init(|| unsafe { cudarc::driver::sys::is_culib_present() })
}

fn unavailable(op: &str, reason: impl Into<String>) -> Error {
    Error::CudaUnavailable {
        op: op.to_string(),
        reason: reason.into(),
    }
}

/// The number of CUDA devices, or why there are none to use.
fn count() -> std::result::Result<usize, String> {
    static COUNT: OnceLock<std::result::Result<usize, String>> = OnceLock::new();
    COUNT
        .get_or_init(|| {
            if !driver_present() {
                return Err(
                    "no CUDA driver on this machine (libcuda.so could not be loaded)".to_string(),
                );
            }
            cudarc::driver::result::init()
                .map_err(|e| format!("the CUDA driver failed to initialise: {e}"))?;
            let n = CudaContext::device_count()
                .map_err(|e| format!("the CUDA driver cannot count devices: {e}"))?;
            Ok(n.max(0) as usize)
        })
        .clone()
}

/// Number of CUDA devices (0 without a driver).
pub fn device_count() -> usize {
    count().unwrap_or(0)
}

/// Whether at least one CUDA device can be used.
pub fn is_available() -> bool {
    device_count() > 0
}

/// Why CUDA cannot be used here, or `None` when a device exists.
pub fn unavailable_reason() -> Option<String> {
    match count() {
        Err(reason) => Some(reason),
        Ok(0) => Some("the CUDA driver reports no device".to_string()),
        Ok(_) => None,
    }
}

type Slot = OnceLock<Arc<CudaDevice>>;

fn slots() -> &'static [Slot] {
    static SLOTS: OnceLock<Vec<Slot>> = OnceLock::new();
    SLOTS.get_or_init(|| (0..device_count()).map(|_| OnceLock::new()).collect())
}

/// Device `ordinal`, opened on first use. `op` names the operation for the error when CUDA or
/// that device is missing.
pub(crate) fn device(ordinal: usize, op: &str) -> Result<Arc<CudaDevice>> {
    let n = count().map_err(|reason| unavailable(op, reason))?;
    let slot = slots().get(ordinal).ok_or_else(|| {
        unavailable(
            op,
            format!("cuda:{ordinal} does not exist; this machine has {n} CUDA device(s)"),
        )
    })?;
    if let Some(d) = slot.get() {
        return Ok(d.clone());
    }
    // Opening a device is rare; one lock keeps two threads from opening the same one twice.
    static OPENING: Mutex<()> = Mutex::new(());
    let _guard = OPENING.lock().unwrap_or_else(PoisonError::into_inner);
    if let Some(d) = slot.get() {
        return Ok(d.clone());
    }
    let d = Arc::new(open(ordinal)?);
    Ok(slot.get_or_init(|| d).clone())
}

fn open(ordinal: usize) -> Result<CudaDevice> {
    let op = format!("open cuda:{ordinal}");
    let err = |e| driver_error(&op, e);
    let ctx = CudaContext::new(ordinal).map_err(err)?;
    let stream = ctx.new_stream().map_err(err)?;
    let attr = |a| ctx.attribute(a).map_err(err);
    let sm_count = attr(CUdevice_attribute::CU_DEVICE_ATTRIBUTE_MULTIPROCESSOR_COUNT)? as u32;
    let (major, minor) = ctx.compute_capability().map_err(err)?;
    let name = ctx.name().map_err(err)?;
    let async_alloc = ctx.has_async_alloc();
    Ok(CudaDevice {
        ordinal,
        ctx,
        stream,
        sm_count,
        compute_capability: (major as u32, minor as u32),
        async_alloc,
        name,
    })
}

/// Checks that `device` can hold arrays: the host always can, `cuda:N` when the driver and
/// device `N` exist.
pub(crate) fn check(target: Device, op: &str) -> Result<()> {
    match target {
        Device::Cpu => Ok(()),
        Device::Cuda(i) => device(i, op).map(|_| ()),
    }
}

/// Waits until every operation queued on `device` has finished (a no-op for the host).
pub fn synchronize(device: Device) -> Result<()> {
    match device {
        Device::Cpu => Ok(()),
        Device::Cuda(i) => self::device(i, &format!("synchronize(cuda:{i})"))?.synchronize(),
    }
}

/// The name and compute capability of `cuda:N`, e.g. `("NVIDIA H100 80GB HBM3", (9, 0))`.
pub fn properties(ordinal: usize) -> Result<(String, (u32, u32))> {
    let d = device(ordinal, &format!("properties(cuda:{ordinal})"))?;
    Ok((d.name.clone(), d.compute_capability))
}
