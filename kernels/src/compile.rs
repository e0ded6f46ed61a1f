//! NVRTC: generated CUDA source to PTX, for a given virtual architecture.
//!
//! cudarc loads `libnvrtc` at run time (and would panic if it is missing), so every entry point
//! probes for the library first and reports [`CompileError::NvrtcUnavailable`] instead.

use std::fmt;

use std::sync::{Arc, OnceLock};

use crate::cache::{default_dir, BinaryCache, CacheKey};
use crate::codegen::KernelSource;

/// NVRTC options used for every kernel (part of the cache key).
fn options() -> Vec<String> {
    vec!["--std=c++17".to_string()]
}

/// Why a kernel did not compile.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum CompileError {
    /// No `libnvrtc` could be loaded (install `nvidia-cuda-nvrtc` and put its `lib` folder on
    /// `LD_LIBRARY_PATH`).
    NvrtcUnavailable,
    /// NVRTC rejected the source: its log (line numbers inside the body refer to the user's
    /// body, thanks to `#line`) and the whole generated source, numbered.
    Failed {
        /// The kernel's entry point.
        entry: String,
        /// The architecture compiled for.
        arch: String,
        /// NVRTC's log.
        log: String,
        /// The generated source with line numbers.
        numbered_source: String,
    },
}

impl fmt::Display for CompileError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            CompileError::NvrtcUnavailable => f.write_str(
                "NVRTC is not available: install the nvidia-cuda-nvrtc package (13.x) and put its lib folder on LD_LIBRARY_PATH",
            ),
            CompileError::Failed {
                entry,
                arch,
                log,
                numbered_source,
            } => write!(
                f,
                "kernel {entry} does not compile for {arch}:\n{}\ngenerated source:\n{numbered_source}",
                log.trim_end()
            ),
        }
    }
}

impl std::error::Error for CompileError {}

/// Whether `libnvrtc` can be loaded.
pub fn nvrtc_available() -> bool {
    // SAFETY: only tries to open the library; no symbol is called.
    unsafe { cudarc::nvrtc::sys::is_culib_present() }
}

/// NVRTC's version as (major, minor).
pub fn nvrtc_version() -> Result<(i32, i32), CompileError> {
    if !nvrtc_available() {
        return Err(CompileError::NvrtcUnavailable);
    }
    let (mut major, mut minor) = (0, 0);
    // SAFETY: the library is present (probed above); both pointers are valid for writes.
    let status = unsafe { cudarc::nvrtc::sys::nvrtcVersion(&mut major, &mut minor) };
    if status == cudarc::nvrtc::sys::nvrtcResult::NVRTC_SUCCESS {
        Ok((major, minor))
    } else {
        Err(CompileError::NvrtcUnavailable)
    }
}

/// Compiles `src` to PTX for `arch` (e.g. `"compute_90"`).
pub fn compile_ptx(src: &KernelSource, arch: &'static str) -> Result<String, CompileError> {
    if !nvrtc_available() {
        return Err(CompileError::NvrtcUnavailable);
    }
    let opts = cudarc::nvrtc::CompileOptions {
        arch: Some(arch),
        name: Some(format!("{}.cu", src.entry)),
        options: options(),
        ..Default::default()
    };
    match cudarc::nvrtc::compile_ptx_with_opts(&src.source, opts) {
        Ok(ptx) => Ok(ptx.to_src()),
        Err(cudarc::nvrtc::CompileError::CompileError { log, .. }) => Err(CompileError::Failed {
            entry: src.entry.clone(),
            arch: arch.to_string(),
            log: log.to_string_lossy().into_owned(),
            numbered_source: src.numbered(),
        }),
        Err(other) => Err(CompileError::Failed {
            entry: src.entry.clone(),
            arch: arch.to_string(),
            log: other.to_string(),
            numbered_source: src.numbered(),
        }),
    }
}

/// The process-wide cache of compiled kernels, in [`default_dir`].
pub fn global_cache() -> &'static BinaryCache {
    static CACHE: OnceLock<BinaryCache> = OnceLock::new();
    CACHE.get_or_init(|| BinaryCache::new(default_dir()))
}

/// [`compile_ptx`] through `cache`: NVRTC runs only when neither memory nor disk has the PTX for
/// this source, options, NVRTC version, architecture and kusari version.
pub fn compile_ptx_cached(
    src: &KernelSource,
    arch: &'static str,
    cache: &BinaryCache,
) -> Result<Arc<Vec<u8>>, CompileError> {
    let key = CacheKey::new(&src.source, &options(), nvrtc_version()?, arch);
    cache.get_or_compile(key, || compile_ptx(src, arch).map(String::into_bytes))
}
