//! Kernels for the emulated device: the very source NVRTC compiles, behind the host shim
//! (`shim.hpp`), built into a shared library by the host C++ compiler (`$CXX`, else `c++`) and
//! cached in kusari's binary cache like the GPU binaries (keyed by the source, the shim, the
//! compiler and its flags).
//!
//! For each `__global__` function the library exports a host entry point that takes the same
//! `kernelParams` array a GPU launch passes and reads each argument with its device-side type,
//! and describes the parameters (their sizes, and which are pointers) so that a launch that packs
//! one with the wrong width is caught.

use std::fmt::Write;
use std::path::PathBuf;
use std::process::Command;
use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::{Arc, OnceLock};

use kusari_kernels::cache::{BinaryCache, CacheKey};
use kusari_kernels::codegen::KernelSource;
use kusari_kernels::compile::CompileError;

/// The host definitions of CUDA's built-ins and the block scheduler.
pub(crate) const SHIM: &str = include_str!("shim.hpp");

/// Flags of every host compile (part of the cache key). `_FORTIFY_SOURCE` is off because its
/// checked `longjmp` rejects the switch between the threads' stacks; FMA contraction is off so
/// that results do not depend on the host's instruction set.
const FLAGS: [&str; 7] = [
    "-std=c++17",
    "-O2",
    "-fPIC",
    "-shared",
    "-U_FORTIFY_SOURCE",
    "-ffp-contract=off",
    "-fno-strict-aliasing",
];

/// What the emulated device cannot run, with why; a kernel using one is refused before compiling.
const NOT_EMULATED: [(&str, &str); 14] = [
    ("__shfl_sync", "warp shuffles"),
    ("__shfl_up_sync", "warp shuffles"),
    ("__shfl_down_sync", "warp shuffles"),
    ("__shfl_xor_sync", "warp shuffles"),
    ("__ballot_sync", "warp votes"),
    ("__any_sync", "warp votes"),
    ("__all_sync", "warp votes"),
    ("__activemask", "warp masks"),
    ("__syncwarp", "warp barriers"),
    ("__match_any_sync", "warp matching"),
    ("__match_all_sync", "warp matching"),
    ("__reduce_add_sync", "warp reductions"),
    ("cooperative_groups", "cooperative groups"),
    ("__nanosleep", "sleeping"),
];

fn compiler() -> String {
    std::env::var("CXX")
        .ok()
        .filter(|c| !c.trim().is_empty())
        .unwrap_or_else(|| "c++".to_string())
}

/// The compiler's first `--version` line, which identifies it in the cache key.
fn compiler_identity(cxx: &str) -> Result<String, String> {
    static IDENTITY: OnceLock<(String, Result<String, String>)> = OnceLock::new();
    let (who, identity) = IDENTITY.get_or_init(|| {
        let out = Command::new(cxx).arg("--version").output();
        let identity = match out {
            Ok(o) if o.status.success() => Ok(String::from_utf8_lossy(&o.stdout)
                .lines()
                .next()
                .unwrap_or_default()
                .to_string()),
            Ok(o) => Err(format!(
                "`{cxx} --version` failed: {}",
                String::from_utf8_lossy(&o.stderr).trim()
            )),
            Err(e) => Err(format!("`{cxx}` could not be run: {e}")),
        };
        (cxx.to_string(), identity)
    });
    if who != cxx {
        return Err(format!(
            "CXX changed from `{who}` to `{cxx}` while the process ran"
        ));
    }
    identity.clone()
}

/// The host C++ compiler (`$CXX`, else `c++`) and its identity, or why it cannot be used.
pub(crate) fn host_compiler() -> Result<(String, String), String> {
    let cxx = compiler();
    compiler_identity(&cxx).map(|identity| (cxx, identity))
}

fn is_ident(c: char) -> bool {
    c.is_ascii_alphanumeric() || c == '_'
}

/// The names of the `__global__` functions `source` defines, in order.
pub(crate) fn kernel_names(source: &str) -> Vec<String> {
    let mut names = Vec::new();
    let mut rest = source;
    while let Some(at) = rest.find("__global__") {
        let after = &rest[at + "__global__".len()..];
        let before_ok = rest[..at].chars().next_back().is_none_or(|c| !is_ident(c));
        rest = after;
        if !before_ok || after.chars().next().is_some_and(is_ident) {
            continue;
        }
        let after = after.trim_start();
        let Some(after) = after.strip_prefix("void") else {
            continue;
        };
        let mut after = after.trim_start();
        if let Some(bounds) = after.strip_prefix("__launch_bounds__") {
            after = bounds
                .find(')')
                .map_or("", |close| &bounds[close + 1..])
                .trim_start();
        }
        let name: String = after.chars().take_while(|&c| is_ident(c)).collect();
        if !name.is_empty() && after[name.len()..].trim_start().starts_with('(') {
            names.push(name);
        }
    }
    names
}

/// The first construct of `source` the emulated device cannot run, and what it is.
pub(crate) fn not_emulated(source: &str) -> Option<(&'static str, &'static str)> {
    if let Some(at) = source.find("extern __shared__") {
        let _ = at;
        return Some(("extern __shared__", "dynamic shared memory"));
    }
    NOT_EMULATED.into_iter().find(|(name, _)| {
        source.match_indices(name).any(|(at, _)| {
            let before = source[..at].chars().next_back();
            let after = source[at + name.len()..].chars().next();
            before.is_none_or(|c| !is_ident(c)) && after.is_none_or(|c| !is_ident(c))
        })
    })
}

/// The translation unit the host compiler builds: the shim, the kernel's source, and one entry
/// point per kernel.
pub(crate) fn host_source(src: &KernelSource, names: &[String]) -> String {
    let mut out = String::with_capacity(SHIM.len() + src.source.len() + 256);
    out.push_str(SHIM);
    out.push_str(&src.source);
    out.push_str("\n// kusari emulated-device entry points\n");
    let barriers = src.source.contains("__syncthreads");
    let _ = writeln!(
        out,
        "extern \"C\" {{ int kusari_emu_uses_barriers = {}; }}",
        i32::from(barriers)
    );
    for name in names {
        let _ = writeln!(out, "KUSARI_EMU_ENTRY({name})");
    }
    out
}

fn failed(src: &KernelSource, log: String) -> CompileError {
    CompileError::Failed {
        entry: src.entry.clone(),
        arch: "the emulated device (host C++)".to_string(),
        log,
        numbered_source: src.numbered(),
    }
}

/// A fresh private directory for one compile.
fn scratch_dir() -> std::io::Result<PathBuf> {
    static N: AtomicUsize = AtomicUsize::new(0);
    let dir = std::env::temp_dir().join(format!(
        "kusari-emu-{}-{}",
        std::process::id(),
        N.fetch_add(1, Ordering::Relaxed)
    ));
    std::fs::create_dir_all(&dir)?;
    Ok(dir)
}

fn run_compiler(cxx: &str, src: &KernelSource, unit: &str) -> Result<Vec<u8>, CompileError> {
    let io = |what: &str, e: std::io::Error| failed(src, format!("{what}: {e}"));
    let dir = scratch_dir().map_err(|e| io("cannot make a scratch directory", e))?;
    let cpp = dir.join("kernel.cpp");
    let so = dir.join("kernel.so");
    let result = (|| {
        std::fs::write(&cpp, unit).map_err(|e| io("cannot write the source", e))?;
        let out = Command::new(cxx)
            .args(FLAGS)
            .arg(&cpp)
            .arg("-o")
            .arg(&so)
            .output()
            .map_err(|e| io(&format!("`{cxx}` could not be run"), e))?;
        if !out.status.success() {
            let log =
                String::from_utf8_lossy(&out.stderr).replace(&*cpp.to_string_lossy(), "kernel.cpp");
            return Err(failed(src, log));
        }
        std::fs::read(&so).map_err(|e| io("cannot read the compiled library", e))
    })();
    let _ = std::fs::remove_dir_all(&dir);
    result
}

/// `src` compiled for the emulated device, through `cache`.
pub(crate) fn compile_cached(
    src: &KernelSource,
    cache: &BinaryCache,
) -> Result<Arc<Vec<u8>>, CompileError> {
    if let Some((name, what)) = not_emulated(&src.source) {
        return Err(failed(
            src,
            format!("the emulated CUDA device does not support {what} (`{name}`)"),
        ));
    }
    let names = kernel_names(&src.source);
    if names.is_empty() {
        return Err(failed(
            src,
            "no `__global__ void name(...)` kernel found in the source".to_string(),
        ));
    }
    let (cxx, identity) = host_compiler().map_err(|why| {
        failed(
            src,
            format!(
                "the emulated CUDA device compiles kernels with the host C++ compiler, and {why}: \
                 install g++ or clang++, or set CXX"
            ),
        )
    })?;
    let unit = host_source(src, &names);
    let flags: Vec<String> = FLAGS.iter().map(|f| f.to_string()).collect();
    let key = CacheKey::new(&unit, &flags, (0, 0), &format!("emulator:{cxx}:{identity}"));
    cache.get_or_compile(key, || run_compiler(&cxx, src, &unit))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn kernel_names_finds_every_global_function() {
        let src = "extern \"C\" __global__ void a__contiguous_i32(const float* x) {}\n\
                   __global__ void __launch_bounds__(256) b(int n) {}\n\
                   __device__ void not_a_kernel() {}\n\
                   // my__global__ void c() is not a kernel\n\
                   extern \"C\" __global__\nvoid\nd (int n) {}\n";
        assert_eq!(kernel_names(src), ["a__contiguous_i32", "b", "d"]);
        assert!(kernel_names("__device__ float f(float x) { return x; }").is_empty());
    }

    #[test]
    fn warp_intrinsics_and_dynamic_shared_memory_are_named() {
        assert_eq!(
            not_emulated("v = __shfl_down_sync(0xffffffff, v, 1);"),
            Some(("__shfl_down_sync", "warp shuffles"))
        );
        assert_eq!(
            not_emulated("extern __shared__ float buf[];"),
            Some(("extern __shared__", "dynamic shared memory"))
        );
        assert_eq!(not_emulated("my__shfl_sync_helper(1);"), None);
        assert_eq!(not_emulated("__syncthreads();"), None);
    }

    #[test]
    fn the_host_source_is_the_shim_the_kernel_and_its_entry_points() {
        let src = KernelSource {
            entry: "k".into(),
            source: "extern \"C\" __global__ void k(float* p) { __syncthreads(); }\n".into(),
        };
        let unit = host_source(&src, &kernel_names(&src.source));
        assert!(unit.starts_with(SHIM));
        assert!(unit.contains(&src.source));
        assert!(unit.contains("KUSARI_EMU_ENTRY(k)"));
        assert!(unit.contains("kusari_emu_uses_barriers = 1;"));
        // The shim ends by restarting the line count, so the compiler's line numbers are the
        // kernel source's own.
        assert!(SHIM.trim_end().ends_with("#line 1 \"kernel\""));
    }
}
