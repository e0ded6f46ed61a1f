//! The driver seam: the one narrow interface through which the CUDA backend reaches a device.
//!
//! Everything above it — allocation, views, launch planning and parameter packing, both kernel
//! caches, host fallback, every array op and built-in function — is the same code whichever
//! driver is behind it:
//!
//! - [`Driver::Real`]: the CUDA driver and cuBLAS, through cudarc ([`real`]).
//! - [`Driver::Emulated`]: kusari's emulated CUDA device ([`emulated`]), which runs the
//!   very kernels and launch code a GPU would, on the host. Chosen with `KUSARI_CUDA_EMULATE=1`
//!   (`=N` for N devices) or [`emulate`] before the first CUDA call.
//!
//! The interface: device count and properties, alloc/free, copies host↔device↔device, memset,
//! compile and load a module, look up a function, launch (grid, block, shared bytes,
//! `kernelParams`), synchronize, and cuBLAS's strided-batched GEMM. Errors are the driver's
//! message; callers add the operation's name.

use std::ffi::c_void;
use std::sync::{Arc, OnceLock};

use kusari_kernels::cache::{BinaryCache, CacheKey};
use kusari_kernels::codegen::KernelSource;
use kusari_kernels::compile::{
    NamedBinary, Target, compile_binary_named_cached, global_cache, nvrtc_available, target_for,
};

use crate::device::DeviceProperties;
use crate::env::CUDA_EMULATE as EMULATE_VAR;
use crate::error::{Error, Result};

mod emulated;
pub(crate) use emulated::checks;
#[cfg(feature = "nccl")]
pub(crate) mod nccl;
#[cfg(feature = "nccl")]
mod nccl_real;
#[cfg(feature = "nccl")]
mod nccl_types;
pub(crate) mod real;
mod types;

pub use emulated::emulated_bytes_in_use;
pub(crate) use types::{DevicePtr, DriverResult, Gemm, GemmType};

/// Most emulated devices one process may ask for.
const MAX_EMULATED_DEVICES: usize = 64;

/// Which driver the process uses; chosen once, on the first CUDA call.
pub(crate) enum Driver {
    /// The CUDA driver.
    Real,
    /// `n` emulated devices.
    Emulated(usize),
    /// `KUSARI_CUDA_EMULATE` holds something that is not a device count: every CUDA call says so.
    Misconfigured(String),
}

static CHOSEN: OnceLock<Driver> = OnceLock::new();

fn from_env() -> Driver {
    match crate::env::cuda_emulate() {
        Err(std::env::VarError::NotPresent) => Driver::Real,
        Ok(v) => match v.trim().parse::<usize>() {
            Ok(0) => Driver::Real,
            Ok(n) if n <= MAX_EMULATED_DEVICES => Driver::Emulated(n),
            _ if v.trim().is_empty() => Driver::Real,
            _ => Driver::Misconfigured(format!(
                "{EMULATE_VAR}={v:?} is not a number of emulated devices (1 to {MAX_EMULATED_DEVICES}, or 0 for the real driver)"
            )),
        },
        Err(e) => Driver::Misconfigured(format!("{EMULATE_VAR} cannot be read: {e}")),
    }
}

/// The process's driver.
pub(crate) fn driver() -> &'static Driver {
    CHOSEN.get_or_init(from_env)
}

/// Runs every CUDA operation of this process on `devices` emulated CUDA devices (see the
/// guide's chapter "The emulated CUDA device"), as `KUSARI_CUDA_EMULATE=N` does. Call it before
/// any other CUDA call: once the process has chosen its driver, asking for another is an error.
/// Asking again for the same number of emulated devices is fine.
///
/// ```
/// kusari::cuda::emulate(2).unwrap();
/// assert!(kusari::cuda::is_emulated());
/// assert!(kusari::cuda::emulate(1).is_err());
/// // Two devices, where the host has a C++ compiler to build their kernels.
/// match kusari::cuda::unavailable_reason() {
///     None => assert_eq!(kusari::cuda::device_count(), 2),
///     Some(why) => assert!(why.contains("C++ compiler"), "{why}"),
/// }
/// ```
pub fn emulate(devices: usize) -> Result<()> {
    if devices == 0 || devices > MAX_EMULATED_DEVICES {
        return Err(Error::InvalidArgument {
            op: format!("cuda::emulate({devices})"),
            msg: format!("the emulated device count must be 1 to {MAX_EMULATED_DEVICES}"),
        });
    }
    let chosen = CHOSEN.get_or_init(|| Driver::Emulated(devices));
    match chosen {
        Driver::Emulated(n) if *n == devices => Ok(()),
        Driver::Emulated(n) => Err(Error::InvalidArgument {
            op: format!("cuda::emulate({devices})"),
            msg: format!("this process already runs on {n} emulated device(s)"),
        }),
        Driver::Real => Err(Error::InvalidArgument {
            op: format!("cuda::emulate({devices})"),
            msg: "this process already uses the CUDA driver (call emulate before any other CUDA call)"
                .to_string(),
        }),
        Driver::Misconfigured(why) => Err(Error::InvalidArgument {
            op: format!("cuda::emulate({devices})"),
            msg: why.clone(),
        }),
    }
}

/// Whether this process runs CUDA on the emulated device.
pub fn is_emulated() -> bool {
    matches!(driver(), Driver::Emulated(_))
}

impl Driver {
    /// The number of devices, or why there are none to use.
    pub(crate) fn count(&self) -> std::result::Result<usize, String> {
        match self {
            Driver::Real => real::count(),
            Driver::Emulated(n) => emulated::available().map(|()| *n),
            Driver::Misconfigured(why) => Err(why.clone()),
        }
    }

    /// Opens device `ordinal` (which the caller has checked exists).
    pub(crate) fn open(&self, ordinal: usize) -> Result<(Backend, DeviceProperties)> {
        match self {
            Driver::Real => {
                let (d, info) = real::RealDevice::open(ordinal)?;
                Ok((Backend::Real(d), info))
            }
            Driver::Emulated(_) => {
                let (d, info) = emulated::EmuDevice::open(ordinal);
                tracing::info!(
                    target: "kusari::cuda",
                    ordinal,
                    "cuda:{ordinal} is an emulated CUDA device: kernels run on the host CPU"
                );
                Ok((Backend::Emulated(d), info))
            }
            Driver::Misconfigured(why) => Err(Error::CudaUnavailable {
                op: format!("open cuda:{ordinal}"),
                reason: why.clone(),
            }),
        }
    }
}

/// A device as its driver sees it.
pub(crate) enum Backend {
    Real(real::RealDevice),
    Emulated(emulated::EmuDevice),
}

/// A loaded module: keeps its functions alive.
#[derive(Clone)]
pub(crate) enum Module {
    Real(Arc<cudarc::driver::CudaModule>),
    Emulated(Arc<emulated::Library>),
}

/// A kernel function in a loaded module.
pub(crate) enum Function {
    Real(cudarc::driver::CudaFunction),
    Emulated(emulated::Kernel),
}

/// What a device's kernels are compiled into.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) enum BinaryTarget {
    /// NVRTC's cubin or PTX for the device's architecture.
    Nvrtc(Target),
    /// A host shared library for the emulated device.
    Host,
}

impl std::fmt::Display for BinaryTarget {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match self {
            BinaryTarget::Nvrtc(t) => t.fmt(f),
            BinaryTarget::Host => f.write_str("host (emulated device)"),
        }
    }
}

impl Backend {
    /// `bytes` uninitialised bytes (a zero-size request allocates nothing and gives 0).
    pub(crate) fn alloc(&self, bytes: usize) -> DriverResult<DevicePtr> {
        if bytes == 0 {
            return Ok(0);
        }
        match self {
            Backend::Real(d) => d.alloc(bytes),
            Backend::Emulated(d) => d.alloc(bytes),
        }
    }

    /// Frees what [`Backend::alloc`] gave, after the work queued on the device.
    ///
    /// # Safety
    /// `ptr` came from this device's `alloc` and is freed once.
    pub(crate) unsafe fn free(&self, ptr: DevicePtr) {
        if ptr == 0 {
            return;
        }
        match self {
            // SAFETY: forwarded contract.
            Backend::Real(d) => unsafe { d.free(ptr) },
            Backend::Emulated(d) => d.free(ptr),
        }
    }

    /// Copies `src` to `dst`; returns once `src` may be reused.
    ///
    /// # Safety
    /// `dst` addresses `src.len()` bytes of this device.
    pub(crate) unsafe fn copy_htod(&self, dst: DevicePtr, src: &[u8]) -> DriverResult<()> {
        if src.is_empty() {
            return Ok(());
        }
        match self {
            // SAFETY: forwarded contract.
            Backend::Real(d) => unsafe { d.copy_htod(dst, src) },
            Backend::Emulated(d) => d.copy_htod(dst, src),
        }
    }

    /// Copies `dst.len()` bytes from `src`, after the work queued on the device.
    ///
    /// # Safety
    /// `src` addresses `dst.len()` bytes of this device.
    pub(crate) unsafe fn copy_dtoh(&self, dst: &mut [u8], src: DevicePtr) -> DriverResult<()> {
        if dst.is_empty() {
            return Ok(());
        }
        match self {
            // SAFETY: forwarded contract.
            Backend::Real(d) => unsafe { d.copy_dtoh(dst, src) },
            Backend::Emulated(d) => d.copy_dtoh(dst, src),
        }
    }

    /// Copies `bytes` bytes from `src` on device `from` (this one or another) to `dst` on this
    /// device, after the work queued on `from`; ordered on this device's stream.
    ///
    /// # Safety
    /// `dst` addresses `bytes` bytes of this device and `src` as many of `from`.
    pub(crate) unsafe fn copy_dtod(
        &self,
        dst: DevicePtr,
        from: &Backend,
        src: DevicePtr,
        bytes: usize,
    ) -> DriverResult<()> {
        if bytes == 0 {
            return Ok(());
        }
        match (self, from) {
            // SAFETY: forwarded contract.
            (Backend::Real(d), Backend::Real(s)) => unsafe { d.copy_dtod(dst, s, src, bytes) },
            (Backend::Emulated(d), Backend::Emulated(s)) => d.copy_dtod(dst, s, src, bytes),
            _ => Err("the two devices belong to different drivers".to_string()),
        }
    }

    /// Sets `bytes` bytes at `dst` to `value`, ordered on the device's stream.
    ///
    /// # Safety
    /// `dst` addresses `bytes` bytes of this device.
    pub(crate) unsafe fn memset(
        &self,
        dst: DevicePtr,
        value: u8,
        bytes: usize,
    ) -> DriverResult<()> {
        if bytes == 0 {
            return Ok(());
        }
        match self {
            // SAFETY: forwarded contract.
            Backend::Real(d) => unsafe { d.memset(dst, value, bytes) },
            Backend::Emulated(d) => d.memset(dst, value, bytes),
        }
    }

    /// Waits for everything queued on the device.
    pub(crate) fn synchronize(&self) -> DriverResult<()> {
        match self {
            Backend::Real(d) => d.synchronize(),
            Backend::Emulated(_) => Ok(()),
        }
    }

    /// What this device's kernels compile into, for a device of `capability`.
    pub(crate) fn binary_target(&self, (major, minor): (u32, u32)) -> BinaryTarget {
        match self {
            Backend::Real(_) => BinaryTarget::Nvrtc(target_for(major, minor)),
            Backend::Emulated(_) => BinaryTarget::Host,
        }
    }

    /// The key of `src` with the name expressions `names` compiled for `target` in the upload
    /// cache.
    pub(crate) fn module_key(
        src: &KernelSource,
        names: &[String],
        target: BinaryTarget,
    ) -> CacheKey {
        CacheKey::new(&src.source, names, (0, 0), &target.to_string())
    }

    /// Compiles `src` for `target` through the binary cache, with the name expressions `names`
    /// (a template kernel's instances), and says what was made (a cubin may come back as PTX)
    /// and the name each expression's kernel has in it. For the emulated device, where NVRTC
    /// loads, the source must compile with it for the device's architecture first: NVRTC's
    /// error, if any, is the error.
    pub(crate) fn compile(
        src: &KernelSource,
        names: &[String],
        target: BinaryTarget,
    ) -> std::result::Result<(BinaryTarget, NamedBinary), kusari_kernels::compile::CompileError>
    {
        match target {
            BinaryTarget::Nvrtc(t) => compile_binary_named_cached(src, &t, names, global_cache())
                .map(|(used, b)| (BinaryTarget::Nvrtc(used), b)),
            BinaryTarget::Host => {
                // What a GPU would refuse is refused here: the host compiler accepts more than
                // NVRTC (its standard headers, host-only code), and a kernel checked by it alone
                // could fail on the first real GPU. NVRTC's binary is cached, not loaded.
                if nvrtc_available() {
                    let (major, minor) = emulated::CAPABILITY;
                    compile_binary_named_cached(src, &target_for(major, minor), names, checks())?;
                }
                emulated::compile_cached(src, names, global_cache())
                    .map(|(binary, lowered)| (BinaryTarget::Host, NamedBinary { binary, lowered }))
            }
        }
    }

    /// Whether this device loads modules it did not compile (PTX, cubins): a GPU does; the
    /// emulated device runs only what it compiled from CUDA C++.
    pub(crate) fn loads_binaries(&self) -> bool {
        matches!(self, Backend::Real(_))
    }

    /// Loads a compiled module.
    pub(crate) fn load_module(&self, image: &[u8]) -> DriverResult<Module> {
        match self {
            Backend::Real(d) => d.load_module(image).map(Module::Real),
            Backend::Emulated(_) => emulated::Library::load(image).map(Module::Emulated),
        }
    }

    /// Launches `f` with `params[i]` pointing at the value of kernel parameter `i`, which the
    /// launch packed in `sizes[i]` bytes. The real driver reads each parameter with the width
    /// the kernel declares; the emulated device checks that the two agree.
    ///
    /// # Safety
    /// `params` matches the kernel's parameter list, every device pointer among them is valid
    /// for what the kernel reaches, and the values live until this returns.
    pub(crate) unsafe fn launch(
        &self,
        f: &Function,
        grid: [u32; 3],
        block: [u32; 3],
        shared_bytes: u32,
        params: &mut [*mut c_void],
        sizes: &[usize],
    ) -> DriverResult<()> {
        match (self, f) {
            // SAFETY: forwarded contract.
            (Backend::Real(d), Function::Real(f)) => unsafe {
                d.launch(f, grid, block, shared_bytes, params)
            },
            // SAFETY: forwarded contract.
            (Backend::Emulated(d), Function::Emulated(k)) => unsafe {
                d.launch(k, grid, block, shared_bytes, params, sizes)
            },
            _ => Err("the function was loaded by another driver".to_string()),
        }
    }

    /// Whether [`Backend::gemm`] can run (the real driver needs libcublas).
    pub(crate) fn has_blas(&self) -> bool {
        match self {
            Backend::Real(_) => real::cublas_present(),
            Backend::Emulated(_) => true,
        }
    }

    /// cuBLAS's strided-batched GEMM (see [`Gemm`]).
    ///
    /// # Safety
    /// The pointers address matrices of this device as large as `g` says.
    pub(crate) unsafe fn gemm(&self, g: &Gemm) -> DriverResult<()> {
        match self {
            // SAFETY: forwarded contract.
            Backend::Real(d) => unsafe { d.gemm(g) },
            Backend::Emulated(d) => d.gemm(g),
        }
    }
}

impl Module {
    /// The kernel `name` in this module.
    pub(crate) fn function(&self, name: &str) -> DriverResult<Function> {
        match self {
            Module::Real(m) => m
                .load_function(name)
                .map(Function::Real)
                .map_err(|e| e.to_string()),
            Module::Emulated(lib) => lib.kernel(name).map(Function::Emulated),
        }
    }
}

/// The cache of NVRTC's checks of the emulated device's kernels: the global cache's directory,
/// counted apart from it, so that `kernel_stats` counts the binaries a device loads (one compile
/// a kernel), as on a GPU.
fn checks() -> &'static BinaryCache {
    static CHECKS: OnceLock<BinaryCache> = OnceLock::new();
    CHECKS.get_or_init(|| BinaryCache::new(global_cache().dir().map(std::path::Path::to_path_buf)))
}
