//! Every environment variable kusari reads, read here and nowhere else (the kernels crate reads
//! its own in `kusari_kernels::env`).
//!
//! | Variable | Meaning | Default | Read |
//! |---|---|---|---|
//! | `KUSARI_CUDA_EMULATE` | `N` (1 to 64): every CUDA call of the process goes to `N` emulated CUDA devices, which run the kernels on the host; `0` or empty: the real driver | the real driver | once, at the process's first CUDA call ([`crate::cuda::emulate`] makes the same choice from code, before that call) |
//! | `KUSARI_CUDA_SANITIZE` | the emulated device's checks of every launch ([`crate::cuda::sanitizer`]): `1`, `on` or `all`; `0`, `off` or empty; or a comma-separated list of `races`, `init`, `init=report` and `bounds` | no checks | once, at the first launch or allocation on the emulated device ([`set_default`](crate::cuda::sanitizer::set_default) changes it from code) |
//! | `KUSARI_DEBUG` | `1`, `true`, `yes` or `on`: every function's outputs and gradients are checked for NaN ([`Config::debug`](crate::config::Config::debug)) | off | once, when the global configuration is first read without having been set |
//! | `KUSARI_REQUIRE_GPU` | set to anything but empty or `0`: a test that would skip for want of a CUDA device fails instead ([`crate::testing::cuda_or_skip`]; CI sets it) | unset | by each such test |
//! | `KUSARI_KERNEL_CACHE_DIR` | the on-disk kernel cache's directory (read by `kusari_kernels::env`) | `$XDG_CACHE_HOME/kusari/kernels`, else `~/.cache/kusari/kernels` | once, when the cache is first used |
//! | `KUSARI_REQUIRE_NVRTC` | set: a test that would skip for want of NVRTC fails instead (read by `kusari_kernels::env`) | unset | by each such test |
//! | `KUSARI_HOST_JIT` | `0`, `off`, `false` or `no`: the host runs every expression body on its interpreter; `eager`: a body is compiled at its first run; anything else: compiled once it has computed 2²⁰ elements (with the `jit` feature, on by default) | compiled after 2²⁰ elements | once, at the first body run on the host |
//! | `CXX` | the C++ compiler the emulated CUDA device builds its kernels with | `c++` | at each compile of a kernel for the emulated device |
//!
//! What is fixed once per process: the CUDA driver (real or emulated, and how many emulated
//! devices), chosen at the first CUDA call and never changed; the `KUSARI_DEBUG` default; the
//! kernel cache's directory. What is not: the configuration ([`crate::config`]) is per thread,
//! starting from global defaults that [`set_global`](crate::config::set_global) changes; host
//! fallback (a function without a GPU forward running on host copies of CUDA inputs) is on by
//! default and turned off per thread with [`Config::host_fallback`](crate::config::Config).

/// The variable that selects the emulated CUDA device.
pub const CUDA_EMULATE: &str = "KUSARI_CUDA_EMULATE";
/// The variable that sets the emulated device's checks (its sanitizer).
pub const CUDA_SANITIZE: &str = "KUSARI_CUDA_SANITIZE";
/// The variable that turns on the NaN checks of debug mode by default.
pub const DEBUG: &str = "KUSARI_DEBUG";
/// The variable that turns a test's skip for want of a CUDA device into a failure.
pub const REQUIRE_GPU: &str = "KUSARI_REQUIRE_GPU";

/// The variable that chooses when the host compiles expression bodies.
pub const HOST_JIT: &str = "KUSARI_HOST_JIT";

/// When the host compiles expression bodies to machine code.
#[cfg(feature = "jit")]
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) enum HostJit {
    /// Never: the interpreter runs every body.
    Off,
    /// Once a body has computed 2²⁰ elements on the interpreter.
    Tiered,
    /// At a body's first run.
    Eager,
}

/// When `KUSARI_HOST_JIT` says the host compiles expression bodies.
#[cfg(feature = "jit")]
pub(crate) fn host_jit() -> HostJit {
    match std::env::var(HOST_JIT)
        .unwrap_or_default()
        .trim()
        .to_ascii_lowercase()
        .as_str()
    {
        "0" | "off" | "false" | "no" => HostJit::Off,
        "eager" => HostJit::Eager,
        _ => HostJit::Tiered,
    }
}

/// `KUSARI_CUDA_EMULATE` as the environment holds it (the CUDA backend parses it).
pub(crate) fn cuda_emulate() -> Result<String, std::env::VarError> {
    std::env::var(CUDA_EMULATE)
}

/// Whether `KUSARI_DEBUG` asks for debug mode: `1`, `true`, `yes` or `on`, in any case.
pub(crate) fn debug() -> bool {
    std::env::var(DEBUG).is_ok_and(|v| {
        matches!(
            v.trim().to_ascii_lowercase().as_str(),
            "1" | "true" | "yes" | "on"
        )
    })
}

/// The C++ compiler the emulated CUDA device builds its kernels with: `CXX` unless unset or
/// blank, else `c++`.
///
/// ```
/// assert!(!kusari::env::cxx().trim().is_empty());
/// ```
pub fn cxx() -> String {
    std::env::var("CXX")
        .ok()
        .filter(|c| !c.trim().is_empty())
        .unwrap_or_else(|| "c++".to_string())
}

/// Whether `KUSARI_REQUIRE_GPU` is set to anything but empty or `0`.
///
/// ```
/// // What a test that needs a CUDA device does when none can be used.
/// if !kusari::env::require_gpu() {
///     println!("SKIPPED: no CUDA device");
/// }
/// ```
pub fn require_gpu() -> bool {
    std::env::var(REQUIRE_GPU).is_ok_and(|v| !v.trim().is_empty() && v.trim() != "0")
}
