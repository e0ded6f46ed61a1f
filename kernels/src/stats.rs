//! Counters of the kernel machinery (compiles, cache hits, module loads, launches), as the runtime
//! reports them for tests and benchmarks.

/// Counters of the CUDA kernel machinery, for tests and benchmarks.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct KernelStats {
    /// Kernel binaries compiled by NVRTC in this process.
    pub compiles: usize,
    /// Binaries read from the on-disk cache.
    pub disk_hits: usize,
    /// Binaries found in the in-memory cache.
    pub memory_hits: usize,
    /// Modules loaded onto a device.
    pub module_loads: usize,
    /// Kernels launched (zero-size launches, which run nothing, are not counted).
    pub launches: usize,
}
