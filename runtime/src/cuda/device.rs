//! CUDA devices: one per ordinal, opened on first use through the driver seam
//! ([`super::driver`]), whichever driver (the real one or the emulated device) is behind it.
//!
//! The real driver is probed before any driver call (cudarc panics without libcuda), and its
//! absence is [`Error::CudaUnavailable`].

use std::sync::{Arc, Mutex, OnceLock, PoisonError};

use kusari_kernels::grid::{launch_config, launch_config_capped};

use super::driver::{Backend, DriverResult, driver};
use crate::Device;
use crate::device::DeviceProperties;
use crate::error::{Error, Result};

/// One CUDA device as kusari uses it: what its driver gives, and the properties launches need.
pub(crate) struct CudaDevice {
    pub(crate) ordinal: usize,
    pub(crate) backend: Backend,
    pub(crate) info: DeviceProperties,
}

impl CudaDevice {
    /// Streaming multiprocessors (sizes reductions' grids).
    pub(crate) fn sm_count(&self) -> u32 {
        self.info.sm_count
    }

    /// The grid of an elementwise launch of `n` elements (`None` for none).
    ///
    /// A GPU's is capped at the blocks its multiprocessors hold at once, its grid-stride loop
    /// covering the rest. The emulated device's covers arrays up to
    /// [`EMULATED_ELEMENTWISE_BLOCKS`] blocks: it runs a block's threads one after another, so
    /// a capped grid walks each thread across the whole array, in strides that are multiples of
    /// 4 KiB (a cache set's period) for the threads that follow to fetch again. A launch the
    /// sanitizer checks keeps the GPU's grid, so that the checks see the launch a GPU runs, the
    /// grid-stride loop's later rounds included (and check fewer threads, each of which costs
    /// the checks more than a cache miss).
    pub(crate) fn elementwise_grid(&self, n: usize) -> Option<(u32, u32)> {
        let checked = || super::driver::checks::current().is_ok_and(|c| c.any());
        if self.info.emulated && !checked() {
            launch_config_capped(n, EMULATED_ELEMENTWISE_BLOCKS)
        } else {
            launch_config(n, self.info.sm_count)
        }
    }

    /// Waits for every operation queued on the device.
    pub(crate) fn synchronize(&self) -> Result<()> {
        self.check(self.backend.synchronize(), || {
            format!("synchronize(cuda:{})", self.ordinal)
        })
    }

    /// A driver failure as kusari's error, naming the operation (formatted only on failure).
    pub(crate) fn check<T>(&self, r: DriverResult<T>, op: impl FnOnce() -> String) -> Result<T> {
        r.map_err(|msg| Error::Cuda { op: op(), msg })
    }
}

/// The most blocks of an elementwise grid on the emulated device (16M elements), beyond which its
/// grid-stride loop goes round. With the H100's cap (1056 blocks) a 1M-element MulAdd took
/// 10.8 ns an element in a native loop of the same order, against 0.65 ns with a grid that
/// covers it: each thread's four strides fell in one L1 cache set.
pub(crate) const EMULATED_ELEMENTWISE_BLOCKS: u32 = 1 << 16;

fn unavailable(op: &str, reason: impl Into<String>) -> Error {
    Error::CudaUnavailable {
        op: op.to_string(),
        reason: reason.into(),
    }
}

/// The number of CUDA devices, or why there are none to use.
fn count() -> std::result::Result<usize, String> {
    driver().count()
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
    let (backend, info) = driver().open(ordinal)?;
    Ok(CudaDevice {
        ordinal,
        backend,
        info,
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

/// The name and compute capability of `cuda:N`, e.g. `("NVIDIA H100 80GB HBM3", (9, 0))`. An
/// emulated device's name says so.
pub fn properties(ordinal: usize) -> Result<(String, (u32, u32))> {
    let p = device_properties(ordinal)?;
    Ok((p.name, p.compute_capability))
}

/// Everything `cuda:N` reports: name, compute capability, SM count, memory, the driver's CUDA
/// version, and whether it is kusari's emulated device.
pub fn device_properties(ordinal: usize) -> Result<DeviceProperties> {
    let d = device(ordinal, &format!("properties(cuda:{ordinal})"))?;
    Ok(d.info.clone())
}
