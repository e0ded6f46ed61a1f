//! Host fallback (ChainerX's): a function without a GPU forward, applied to CUDA arrays, runs its
//! CPU forward on host copies and its outputs are copied back. Each fallback is counted
//! ([`cuda::host_fallback_count`](crate::cuda::host_fallback_count)) and emitted as a `tracing`
//! event (target `kusari::fallback`), and
//! [`config::using_host_fallback(false)`](crate::config::using_host_fallback) turns it into an
//! error for code that must not copy.

use crate::config;
use crate::device::count_host_fallback;
use crate::error::{Error, Result};
use crate::{Array, Device};

/// Runs `forward_cpu`, the CPU forward of the function labelled `function`, on host copies of
/// `inputs` (on `device`) and moves the outputs back to `device`.
pub(crate) fn forward_on_host(
    function: &str,
    inputs: &[Array],
    device: Device,
    forward_cpu: impl FnOnce(&[Array]) -> Result<Vec<Array>>,
) -> Result<Vec<Array>> {
    if !config::current().host_fallback {
        return Err(Error::HostFallbackForbidden {
            function: function.to_string(),
            device,
        });
    }
    count_host_fallback();
    tracing::info!(
        target: "kusari::fallback",
        function = %function,
        device = %device,
        "no forward_gpu: running forward_cpu on host copies of the inputs"
    );
    let host: Vec<Array> = inputs
        .iter()
        .map(|a| a.to_device(Device::Cpu))
        .collect::<Result<_>>()?;
    forward_cpu(&host)?
        .iter()
        .map(|o| o.to_device(device))
        .collect()
}
