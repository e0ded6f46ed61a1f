//! Why a kernel did not compile: NVRTC's (or the emulated device's compiler's) log and the
//! numbered generated source. Built without the `nvrtc` feature too, so that a runtime error
//! can carry it as its source in every build.

use std::fmt;

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
        /// The architecture compiled for (`compute_90`, `sm_90`).
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
