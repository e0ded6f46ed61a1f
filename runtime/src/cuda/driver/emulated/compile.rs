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
use kusari_kernels::raw::is_name_expression;

/// The host definitions of CUDA's built-ins and the block scheduler.
pub(crate) const SHIM: &str = include_str!("shim.hpp");

/// Flags of every host compile (part of the cache key). `_FORTIFY_SOURCE` is off because its
/// checked `longjmp` rejects the switch between the threads' stacks; FMA contraction is off so
/// that results do not depend on the host's instruction set; signed integers wrap on overflow
/// (`-fwrapv`), as a GPU's do, where C++ leaves it undefined (and the optimizer may assume it
/// never happens); only the shim's entry points are exported (`-fvisibility=hidden`), so that a
/// kernel named like a C library function (`index`, `sync`) is the one its entry point calls.
const FLAGS: [&str; 9] = [
    "-fvisibility=hidden",
    "-fwrapv",
    "-std=c++17",
    "-O2",
    "-fPIC",
    "-shared",
    "-U_FORTIFY_SOURCE",
    "-ffp-contract=off",
    "-fno-strict-aliasing",
];

/// The flags of the checked build (see [`compile_checked`]), beyond [`FLAGS`] less `-shared`:
/// the compiler's thread-sanitizer instrumentation and its check of indices into arrays of fixed
/// size (`-fsanitize=bounds`: `__constant__`, `__shared__` and local arrays, which no
/// allocation's bounds cover; the shim answers the calls of both), debug lines
/// (to name the source line of an access), `-O1` (as sanitizers are usually built: it
/// compiles in two thirds of `-O2`'s time, and the checks' calls dominate the run time anyway),
/// the shim's checked half, and static locals initialized without atomic guards (checked
/// launches of a library run one at a time, and the guards' atomics would be calls no runtime
/// answers).
const CHECKED_FLAGS: [&str; 7] = [
    "-fsanitize=thread",
    "-fsanitize=bounds",
    "-g",
    "-O1",
    "-DKUSARI_EMU_CHECKED",
    "-fno-threadsafe-statics",
    "-c",
];

/// What the emulated device cannot run, with why; a kernel using one is refused before compiling.
const NOT_EMULATED: [(&str, &str); 2] = [
    ("cooperative_groups", "cooperative groups"),
    ("__nanosleep", "sleeping"),
];

/// What makes a kernel's threads run as fibers, which wait for each other: the block's
/// barrier, and the warp intrinsics (each a meeting of the lanes of its mask).
const MEETINGS: [&str; 17] = [
    "__syncthreads",
    "__syncwarp",
    "__shfl_sync",
    "__shfl_up_sync",
    "__shfl_down_sync",
    "__shfl_xor_sync",
    "__ballot_sync",
    "__any_sync",
    "__all_sync",
    "__activemask",
    "__reduce_add_sync",
    "__reduce_min_sync",
    "__reduce_max_sync",
    "__reduce_and_sync",
    "__reduce_or_sync",
    "__reduce_xor_sync",
    "__match_",
];

fn compiler() -> String {
    crate::env::cxx()
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

/// Whether position `at` of `source` lies on a preprocessor line (continuation lines included).
fn in_directive(source: &str, at: usize) -> bool {
    let mut start = source[..at].rfind('\n').map_or(0, |p| p + 1);
    loop {
        if source[start..].trim_start().starts_with('#') {
            return true;
        }
        if start == 0 {
            return false;
        }
        let prev_start = source[..start - 1].rfind('\n').map_or(0, |p| p + 1);
        if !source[prev_start..start - 1].trim_end().ends_with('\\') {
            return false;
        }
        start = prev_start;
    }
}

/// The names of the `__global__` functions `source` defines, in order, each once (a prototype
/// and its definition are one kernel). A template kernel has no address without its arguments,
/// so it gets no entry point. A kernel a macro declares is not in the text: see
/// [`compile_cached`], which finds it in the preprocessor's output.
pub(crate) fn kernel_names(source: &str) -> Vec<String> {
    let mut names: Vec<String> = Vec::new();
    let mut from = 0;
    while let Some(found) = source[from..].find("__global__") {
        let at = from + found;
        let after = &source[at + "__global__".len()..];
        let before_ok = source[..at]
            .chars()
            .next_back()
            .is_none_or(|c| !is_ident(c));
        from = at + "__global__".len();
        if !before_ok || after.chars().next().is_some_and(is_ident) || in_directive(source, at) {
            continue;
        }
        let decl_start = source[..at].rfind([';', '{', '}']).map_or(0, |p| p + 1);
        if source[decl_start..at].contains("template") {
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
        if !name.is_empty()
            && after[name.len()..].trim_start().starts_with('(')
            && !names.contains(&name)
        {
            names.push(name);
        }
    }
    names
}

/// The first construct of `source` the emulated device cannot run, and what it is.
pub(crate) fn not_emulated(source: &str) -> Option<(&'static str, &'static str)> {
    NOT_EMULATED.into_iter().find(|(name, _)| {
        source.match_indices(name).any(|(at, _)| {
            let before = source[..at].chars().next_back();
            let after = source[at + name.len()..].chars().next();
            before.is_none_or(|c| !is_ident(c)) && after.is_none_or(|c| !is_ident(c))
        })
    })
}

/// `source` with each dynamic shared memory declaration, `extern __shared__ T name[];`, made a
/// pointer to the running host thread's dynamic shared memory (`KUSARI_DYNAMIC_SHARED T* const
/// name = (T*)kusari_emu::dynamic_shared();`: one buffer per host thread, which runs one block at
/// a time, as a static `__shared__` array is one per host thread; one per library in the checked
/// build, which runs one launch at a time), on as many lines as before.
/// A declaration of another form is an error naming it.
pub(crate) fn with_dynamic_shared(source: &str) -> Result<String, String> {
    let mut out = String::with_capacity(source.len());
    let mut rest = source;
    while let Some(at) = rest.find("extern") {
        let before_ok = rest[..at].chars().next_back().is_none_or(|c| !is_ident(c));
        let after = &rest[at + "extern".len()..];
        let shared = after.trim_start();
        let is_decl = before_ok
            && after.starts_with(char::is_whitespace)
            && shared.starts_with("__shared__")
            && !shared["__shared__".len()..].starts_with(is_ident);
        if !is_decl {
            out.push_str(&rest[..at + "extern".len()]);
            rest = after;
            continue;
        }
        out.push_str(&rest[..at]);
        let Some(end) = rest[at..].find(';') else {
            return Err("an `extern __shared__` declaration has no `;`".to_string());
        };
        let decl = &rest[at..at + end];
        let body = decl["extern".len()..].trim_start()["__shared__".len()..].trim();
        let mut spec = body.to_string();
        for attr in ["__align__", "alignas"] {
            while let Some(a) = spec.find(attr) {
                let close = spec[a..].find(')').map_or(spec.len(), |c| a + c + 1);
                spec.replace_range(a..close, "");
            }
        }
        let parsed = spec.trim().strip_suffix(']').and_then(|s| {
            let s = s.trim_end().strip_suffix('[')?.trim_end();
            let name_len = s.chars().rev().take_while(|&c| is_ident(c)).count();
            let (ty, name) = s.split_at(s.len() - name_len);
            let ty = ty.trim();
            (!name.is_empty() && !ty.is_empty() && !ty.contains('[')).then_some((ty, name))
        });
        let Some((ty, name)) = parsed else {
            return Err(format!(
                "the emulated CUDA device reads dynamic shared memory declared as \
                 `extern __shared__ T name[];`, not `{}`",
                decl.split_whitespace().collect::<Vec<_>>().join(" ")
            ));
        };
        out.push_str(&format!(
            "KUSARI_DYNAMIC_SHARED {ty}* const {name} = ({ty}*)kusari_emu::dynamic_shared();"
        ));
        out.extend(std::iter::repeat_n('\n', decl.matches('\n').count()));
        rest = &rest[at + end + 1..];
    }
    out.push_str(rest);
    Ok(out)
}

/// The translation unit the host compiler builds: the shim, the kernel's source, one entry
/// point per kernel, and one per name expression (`my_func<float>`), under the symbol
/// [`instance_symbol`] gives it.
pub(crate) fn host_source(src: &KernelSource, names: &[String], instances: &[String]) -> String {
    let mut out = String::with_capacity(SHIM.len() + src.source.len() + 256);
    out.push_str(SHIM);
    out.push_str(&src.source);
    out.push_str("\n// kusari emulated-device entry points\n");
    let barriers = MEETINGS.iter().any(|m| src.source.contains(m));
    let _ = writeln!(
        out,
        "extern \"C\" {{ KUSARI_EMU_EXPORT int kusari_emu_uses_barriers = {}; }}",
        i32::from(barriers)
    );
    for name in names {
        let _ = writeln!(out, "KUSARI_EMU_ENTRY({name})");
    }
    for (i, expression) in instances.iter().enumerate() {
        let _ = writeln!(
            out,
            "KUSARI_EMU_ENTRY_AS({}, {expression})",
            instance_symbol(i)
        );
    }
    out
}

/// The name the emulated device's library knows the `i`-th name expression's kernel by (its
/// "lowered name").
pub(crate) fn instance_symbol(i: usize) -> String {
    format!("kusari_instance_{i}")
}

fn failed(src: &KernelSource, log: String) -> CompileError {
    CompileError::Failed {
        entry: src.entry.clone(),
        arch: "the emulated device (host C++)".to_string(),
        log,
        numbered_source: src.numbered(),
    }
}

/// Whether a preprocessor line of `source` holds `__global__`: a macro that declares kernels,
/// whose names only the preprocessor's output shows.
fn declares_kernels_in_macros(source: &str) -> bool {
    source
        .match_indices("__global__")
        .any(|(at, _)| in_directive(source, at))
}

/// `source` after the host preprocessor (without the shim, so `__global__` stays in the text),
/// or nothing when it cannot be preprocessed (the compile then reports why).
fn preprocessed(cxx: &str, source: &str) -> String {
    let Ok(dir) = scratch_dir() else {
        return String::new();
    };
    let path = dir.join("kernel.cpp");
    let out = std::fs::write(&path, source).ok().and_then(|()| {
        Command::new(cxx)
            .args(["-E", "-P", "-std=c++17", "-x", "c++"])
            .arg(&path)
            .output()
            .ok()
    });
    let _ = std::fs::remove_dir_all(&dir);
    match out {
        Some(o) if o.status.success() => String::from_utf8_lossy(&o.stdout).into_owned(),
        _ => String::new(),
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

/// `unit` followed by its own text, exported as `kusari_emu_unit`: a loaded library can then
/// build its checked twin ([`compile_checked`]) when a launch first asks for checks.
fn with_own_source(unit: String) -> String {
    let mut out = String::with_capacity(2 * unit.len() + 128);
    out.push_str(&unit);
    out.push_str("extern \"C\" KUSARI_EMU_EXPORT const char kusari_emu_unit[] =\n\"");
    for (i, b) in unit.bytes().enumerate() {
        match b {
            b'"' => out.push_str("\\\""),
            b'\\' => out.push_str("\\\\"),
            b'\n' => out.push_str("\\n\"\n\""),
            b'?' => out.push_str("\\?"),
            0x20..=0x7e => out.push(b as char),
            _ => {
                // An octal escape, which (unlike `\x`) ends after three digits.
                let _ = write!(out, "\\{b:03o}");
            }
        }
        if i % 4096 == 4095 {
            out.push_str("\"\n\"");
        }
    }
    out.push_str("\";\n");
    out
}

/// The name a unit includes the precompiled shim by ([`precompiled_shim`]).
const SHIM_HEADER: &str = "kusari_emu_shim.hpp";

/// The shim without its last line (`#line 1 "kernel"`, which a unit then gives itself).
fn shim_header() -> &'static str {
    SHIM.trim_end()
        .strip_suffix("#line 1 \"kernel\"")
        .unwrap_or(SHIM)
}

/// A directory holding the shim as a header and as the host compiler's precompiled header for
/// `flags` (GCC's `.gch`, used by `#include` when its flags match and read instead of the
/// text): a unit then compiles in about two thirds of the time, most of a small kernel's time
/// being the shim's parsing. Built once per compiler, flags and shim, in the temporary
/// directory, shared by processes (each file made in a private [`scratch_dir`], then renamed).
/// `None` where the compiler cannot build one (the unit then includes the shim's text).
fn precompiled_shim(cxx: &str, identity: &str, flags: &[&str]) -> Option<PathBuf> {
    use std::collections::HashMap;
    use std::hash::{Hash, Hasher};
    use std::sync::Mutex;
    static BUILT: OnceLock<Mutex<HashMap<Vec<String>, Option<PathBuf>>>> = OnceLock::new();
    let pch_flags: Vec<&str> = flags
        .iter()
        .copied()
        .filter(|f| !matches!(*f, "-shared" | "-c"))
        .collect();
    let key: Vec<String> = std::iter::once(cxx)
        .chain(pch_flags.iter().copied())
        .map(str::to_string)
        .collect();
    let mut built = BUILT
        .get_or_init(Default::default)
        .lock()
        .unwrap_or_else(|e| e.into_inner());
    if let Some(dir) = built.get(&key) {
        return dir.clone();
    }
    let mut h = std::collections::hash_map::DefaultHasher::new();
    (SHIM, cxx, identity, &pch_flags).hash(&mut h);
    let dir = std::env::temp_dir().join(format!("kusari-emu-pch-{:016x}", h.finish()));
    let header = dir.join(SHIM_HEADER);
    let gch = dir.join(format!("{SHIM_HEADER}.gch"));
    let made = (|| {
        if header.is_file() && gch.is_file() {
            return Some(dir.clone());
        }
        // Both files are made in a private scratch directory, then renamed into place.
        std::fs::create_dir_all(&dir).ok()?;
        let scratch = scratch_dir().ok()?;
        let (tmp_header, tmp_gch) = (scratch.join(SHIM_HEADER), scratch.join("shim.gch"));
        let ok = std::fs::write(&tmp_header, shim_header()).is_ok()
            && Command::new(cxx)
                .args(&pch_flags)
                .args(["-x", "c++-header"])
                .arg(&tmp_header)
                .arg("-o")
                .arg(&tmp_gch)
                .output()
                .is_ok_and(|o| o.status.success())
            && std::fs::rename(&tmp_header, &header).is_ok()
            && std::fs::rename(&tmp_gch, &gch).is_ok();
        let _ = std::fs::remove_dir_all(&scratch);
        ok.then(|| dir.clone())
    })();
    built.insert(key, made.clone());
    made
}

/// Runs the host compiler on `unit` with `flags`; with `link`, the object it makes is then
/// linked into a shared library without any sanitizer runtime (the shim answers the checked
/// build's calls). A unit that starts with the shim includes it precompiled where the compiler
/// can ([`precompiled_shim`]).
fn run_compiler_with(
    cxx: &str,
    src: &KernelSource,
    unit: &str,
    flags: &[&str],
    link: bool,
) -> Result<Vec<u8>, CompileError> {
    let io = |what: &str, e: std::io::Error| failed(src, format!("{what}: {e}"));
    let dir = scratch_dir().map_err(|e| io("cannot make a scratch directory", e))?;
    let cpp = dir.join("kernel.cpp");
    let obj = dir.join("kernel.o");
    let so = dir.join("kernel.so");
    let pch = match unit.strip_prefix(SHIM) {
        Some(rest) => compiler_identity(cxx)
            .ok()
            .and_then(|identity| precompiled_shim(cxx, &identity, flags))
            .map(|dir| (dir, rest)),
        None => None,
    };
    let include = pch.as_ref().map(|(dir, _)| {
        let mut flag = std::ffi::OsString::from("-I");
        flag.push(dir);
        flag
    });
    let result = (|| {
        match &pch {
            Some((_, rest)) => std::fs::write(
                &cpp,
                format!("#include \"{SHIM_HEADER}\"\n#line 1 \"kernel\"\n{rest}"),
            ),
            None => std::fs::write(&cpp, unit),
        }
        .map_err(|e| io("cannot write the source", e))?;
        let run = |args: &[&std::ffi::OsStr]| -> Result<(), CompileError> {
            let out = Command::new(cxx)
                .args(args)
                .output()
                .map_err(|e| io(&format!("`{cxx}` could not be run"), e))?;
            if out.status.success() {
                return Ok(());
            }
            let log =
                String::from_utf8_lossy(&out.stderr).replace(&*cpp.to_string_lossy(), "kernel.cpp");
            Err(failed(src, log))
        };
        let mut args: Vec<&std::ffi::OsStr> = flags.iter().map(std::ffi::OsStr::new).collect();
        args.extend(include.as_deref());
        args.push(cpp.as_os_str());
        args.push(std::ffi::OsStr::new("-o"));
        args.push(if link {
            obj.as_os_str()
        } else {
            so.as_os_str()
        });
        run(&args)?;
        if link {
            run(&[
                std::ffi::OsStr::new("-shared"),
                obj.as_os_str(),
                std::ffi::OsStr::new("-o"),
                so.as_os_str(),
            ])?;
        }
        std::fs::read(&so).map_err(|e| io("cannot read the compiled library", e))
    })();
    let _ = std::fs::remove_dir_all(&dir);
    result
}

fn run_compiler(cxx: &str, src: &KernelSource, unit: &str) -> Result<Vec<u8>, CompileError> {
    run_compiler_with(cxx, src, unit, &FLAGS, false)
}

/// The checked build of a library's `unit` (its `kusari_emu_unit`), through `cache`: every
/// access of its kernels to memory calls the shim's checks (bounds, initialization, races).
pub(crate) fn compile_checked(unit: &str, cache: &BinaryCache) -> Result<Arc<Vec<u8>>, String> {
    let (cxx, identity) = host_compiler()?;
    let src = KernelSource {
        entry: "the checked build".to_string(),
        source: unit.to_string(),
    };
    let flags: Vec<&str> = FLAGS
        .iter()
        .copied()
        .filter(|f| *f != "-shared")
        .chain(CHECKED_FLAGS)
        .collect();
    let key_flags: Vec<String> = flags.iter().map(|f| f.to_string()).collect();
    let key = CacheKey::new(
        unit,
        &key_flags,
        (0, 0),
        &format!("emulator:{cxx}:{identity}"),
    );
    cache
        .get_or_compile(key, || run_compiler_with(&cxx, &src, unit, &flags, true))
        .map_err(|e| match e {
            CompileError::Failed { log, .. } => {
                format!("the checked build of the kernel does not compile: {log}")
            }
            other => other.to_string(),
        })
}

/// `src` compiled for the emulated device, through `cache`. The library exports an entry
/// point for each kernel the source declares, those that macros declare included (found by
/// running the host preprocessor, only for a source with `__global__` in a `#define`), and one
/// for each of the name expressions `instances`, whose names come back in their order. (The
/// driver has NVRTC compile the source first, where it loads: see `Backend::compile`.)
pub(crate) fn compile_cached(
    src: &KernelSource,
    instances: &[String],
    cache: &BinaryCache,
) -> Result<(Arc<Vec<u8>>, Vec<String>), CompileError> {
    if let Some((name, what)) = not_emulated(&src.source) {
        return Err(failed(
            src,
            format!("the emulated CUDA device does not support {what} (`{name}`)"),
        ));
    }
    let host_src = KernelSource {
        entry: src.entry.clone(),
        source: with_dynamic_shared(&src.source).map_err(|why| failed(src, why))?,
    };
    let (cxx, identity) = host_compiler().map_err(|why| {
        failed(
            src,
            format!(
                "the emulated CUDA device compiles kernels with the host C++ compiler, and {why}: \
                 install g++ or clang++, or set CXX"
            ),
        )
    })?;
    let mut names = kernel_names(&src.source);
    if declares_kernels_in_macros(&src.source) {
        for name in kernel_names(&preprocessed(&cxx, &host_src.source)) {
            if !names.contains(&name) {
                names.push(name);
            }
        }
    }
    if let Some(bad) = instances.iter().find(|e| !is_name_expression(e)) {
        return Err(failed(
            src,
            format!("`{bad}` is not a name expression (`name<arguments>`)"),
        ));
    }
    if names.is_empty() && instances.is_empty() {
        return Err(failed(
            src,
            "no `__global__ void name(...)` kernel found in the source".to_string(),
        ));
    }
    let unit = with_own_source(host_source(&host_src, &names, instances));
    let flags: Vec<String> = FLAGS.iter().map(|f| f.to_string()).collect();
    let key = CacheKey::new(&unit, &flags, (0, 0), &format!("emulator:{cxx}:{identity}"));
    let lowered = (0..instances.len()).map(instance_symbol).collect();
    cache
        .get_or_compile(key, || run_compiler(&cxx, src, &unit))
        .map(|b| (b, lowered))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_shim_is_precompiled_once_for_each_set_of_flags() {
        let Ok((cxx, identity)) = host_compiler() else {
            eprintln!("SKIPPED: no host C++ compiler");
            return;
        };
        let plain = precompiled_shim(&cxx, &identity, &FLAGS).expect("a precompiled shim");
        assert!(plain.join(format!("{SHIM_HEADER}.gch")).is_file());
        assert_eq!(
            std::fs::read_to_string(plain.join(SHIM_HEADER)).unwrap(),
            shim_header()
        );
        assert!(!shim_header().contains("#line 1 \"kernel\""));
        // Asked again: the same one, not rebuilt.
        assert_eq!(
            precompiled_shim(&cxx, &identity, &FLAGS),
            Some(plain.clone())
        );
        let checked: Vec<&str> = FLAGS.iter().copied().chain(CHECKED_FLAGS).collect();
        let other = precompiled_shim(&cxx, &identity, &checked).expect("a checked one");
        assert_ne!(other, plain);
        // A unit compiled through it is a library exporting its entry point.
        let src = KernelSource {
            entry: "pch_probe".into(),
            source: "extern \"C\" __global__ void pch_probe(float* p) { p[threadIdx.x] = 1.0f; }\n"
                .into(),
        };
        let unit = host_source(&src, &["pch_probe".to_string()], &[]);
        let so = run_compiler(&cxx, &src, &unit).expect("compiles");
        assert!(so.starts_with(b"\x7fELF"));
        assert!(so.windows(9).any(|w| w == b"pch_probe"));
    }

    #[test]
    fn kernel_names_finds_every_global_function() {
        let src = "extern \"C\" __global__ void a__contiguous_i32(const float* x) {}\n\
                   __global__ void __launch_bounds__(256) b(int n) {}\n\
                   __device__ void not_a_kernel() {}\n\
                   // my__global__ void c() is not a kernel\n\
                   extern \"C\" __global__\nvoid\nd (int n) {}\n\
                   extern \"C\" __global__ void d(int n);\n\
                   template <typename T> __global__ void t(T* x) {}\n\
                   #define K(n) \\\n  extern \"C\" __global__ void n(int x) {}\n";
        assert_eq!(kernel_names(src), ["a__contiguous_i32", "b", "d"]);
        assert!(declares_kernels_in_macros(src));
        assert!(!declares_kernels_in_macros(
            "__global__ void k() {}\n#define N 4\n"
        ));
        assert!(kernel_names("__device__ float f(float x) { return x; }").is_empty());
    }

    #[test]
    fn what_is_not_emulated_is_named() {
        assert_eq!(
            not_emulated("cooperative_groups::this_grid().sync();"),
            Some(("cooperative_groups", "cooperative groups"))
        );
        assert_eq!(not_emulated("my__nanosleep_helper(1);"), None);
        assert_eq!(
            not_emulated("v = __shfl_down_sync(0xffffffff, v, 1);"),
            None
        );
    }

    #[test]
    fn dynamic_shared_memory_becomes_the_threads_buffer_on_the_same_lines() {
        let src = "extern __shared__ float buf[];\n\
                   __global__ void k() {\n  extern  __shared__ __align__(16)\n unsigned char raw [ ];\n\
                   my_extern __shared__ int x; externally();\n}\n";
        let out = with_dynamic_shared(src).unwrap();
        assert_eq!(
            out,
            "KUSARI_DYNAMIC_SHARED float* const buf = (float*)kusari_emu::dynamic_shared();\n\
             __global__ void k() {\n  \
             KUSARI_DYNAMIC_SHARED unsigned char* const raw = (unsigned char*)kusari_emu::dynamic_shared();\n\n\
             my_extern __shared__ int x; externally();\n}\n"
        );
        assert_eq!(out.lines().count(), src.lines().count());
        let e = with_dynamic_shared("extern __shared__ float s[][32];").unwrap_err();
        assert!(e.contains("`extern __shared__ float s[][32]`"), "{e}");
        assert!(with_dynamic_shared("extern __shared__ float s[]").is_err());
        // The shim's buffer is as large as a launch may ask for.
        assert_eq!(kusari_kernels::raw::MAX_DYNAMIC_SHARED_BYTES, 48 * 1024);
        assert!(SHIM.contains("kMaxDynamicShared = 48 * 1024"));
    }

    #[test]
    fn the_host_source_is_the_shim_the_kernel_and_its_entry_points() {
        let src = KernelSource {
            entry: "k".into(),
            source: "extern \"C\" __global__ void k(float* p) { __syncthreads(); }\n".into(),
        };
        let unit = host_source(
            &src,
            &kernel_names(&src.source),
            &["t<float, 2>".to_string()],
        );
        assert!(unit.starts_with(SHIM));
        assert!(unit.contains(&src.source));
        assert!(unit.contains("KUSARI_EMU_ENTRY(k)"));
        assert!(unit.contains("KUSARI_EMU_EXPORT int kusari_emu_uses_barriers = 1;"));
        assert!(unit.contains("KUSARI_EMU_ENTRY_AS(kusari_instance_0, t<float, 2>)"));

        // The shim ends by restarting the line count, so the compiler's line numbers are the
        // kernel source's own.
        assert!(SHIM.trim_end().ends_with("#line 1 \"kernel\""));

        // A library carries its own unit, for its checked build: the text, escaped.
        let carried = with_own_source("a \"b\" \\ c??=\n\u{e9}".to_string());
        assert!(
            carried.ends_with(
                "kusari_emu_unit[] =\n\"a \\\"b\\\" \\\\ c\\?\\?=\\n\"\n\"\\303\\251\";\n"
            ),
            "{carried}"
        );
    }
}
