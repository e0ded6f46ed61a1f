//! Host fallback (ChainerX's): a function without a GPU forward, applied to CUDA arrays, runs its
//! CPU forward on host copies and its outputs are copied back. Each fallback is counted and
//! emitted as a `tracing` event (target `kusari::fallback`), and
//! [`config::using_host_fallback(false)`](crate::config::using_host_fallback) turns it into an
//! error for code that must not copy.

use std::sync::atomic::{AtomicUsize, Ordering};

use crate::config;
use crate::error::{Error, Result};
use crate::function_node::{ForwardContext, FunctionNode};
use crate::{Array, Device};

static FALLBACKS: AtomicUsize = AtomicUsize::new(0);

/// How many forwards have run on the host for CUDA inputs since the process started.
pub fn host_fallback_count() -> usize {
    FALLBACKS.load(Ordering::Relaxed)
}

/// Runs `function`'s CPU forward on host copies of `inputs` (on `device`) and moves the
/// outputs back to `device`.
pub(crate) fn forward_on_host<F: FunctionNode + ?Sized>(
    function: &mut F,
    ctx: &mut ForwardContext,
    inputs: &[Array],
    device: Device,
) -> Result<Vec<Array>> {
    let label = function.label();
    if !config::current().host_fallback {
        return Err(Error::HostFallbackForbidden {
            function: label.into_owned(),
            device,
        });
    }
    FALLBACKS.fetch_add(1, Ordering::Relaxed);
    tracing::info!(
        target: "kusari::fallback",
        function = %label,
        device = %device,
        "no forward_gpu: running forward_cpu on host copies of the inputs"
    );
    let host: Vec<Array> = inputs
        .iter()
        .map(|a| a.to_device(Device::Cpu))
        .collect::<Result<_>>()?;
    function
        .forward_cpu(ctx, &host)?
        .iter()
        .map(|o| o.to_device(device))
        .collect()
}
