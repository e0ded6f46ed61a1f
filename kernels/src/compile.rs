//! NVRTC: generated CUDA source to PTX for a virtual architecture, or to a device's machine code
//! (a cubin), without a GPU.
//!
//! cudarc loads `libnvrtc` at run time (and would panic if it is missing), so every entry point
//! probes for the library first and reports [`CompileError::NvrtcUnavailable`] instead.
//!
//! - [`compile_ptx`] / [`compile_ptx_cached`]: PTX text for an architecture such as
//!   `"compute_90"`.
//! - [`compile_binary`] / [`compile_binary_cached`]: what a device loads (`cuModuleLoadData`):
//!   a cubin for the device's `sm_XY` ([`target_for`]), or NUL-terminated PTX when NVRTC cannot
//!   make that cubin (see [`compile_binary`] for what is chosen).

use std::ffi::{CString, c_char, c_int};
use std::fmt;

use std::sync::{Arc, OnceLock};

use cudarc::nvrtc::{result, sys};

use crate::cache::{BinaryCache, CacheKey, default_dir};
use crate::codegen::KernelSource;
pub use crate::compile_error::CompileError;

/// NVRTC options used for every kernel (part of the cache key), besides the architecture.
fn options() -> Vec<String> {
    vec!["--std=c++17".to_string()]
}

pub use crate::raw::ELF_MAGIC;

/// What [`compile_binary`] compiles for.
///
/// ```
/// use kusari_kernels::compile::{target_for, Target};
/// assert_eq!(target_for(9, 0).to_string(), "sm_90");
/// assert_eq!(Target::Ptx { major: 8, minor: 6 }.to_string(), "compute_86");
/// assert_eq!(target_for(10, 0).to_string(), "sm_100");
/// ```
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub enum Target {
    /// Machine code for devices of compute capability `major.minor` (`sm_{major}{minor}`): an
    /// ELF cubin, loaded without JIT compilation.
    Cubin {
        /// Compute capability, major part.
        major: u32,
        /// Compute capability, minor part.
        minor: u32,
    },
    /// PTX for the virtual architecture `compute_{major}{minor}`, NUL-terminated (as
    /// `cuModuleLoadData` wants it); the driver JIT-compiles it for a device of that compute
    /// capability or a newer one.
    Ptx {
        /// Compute capability, major part.
        major: u32,
        /// Compute capability, minor part.
        minor: u32,
    },
}

impl Target {
    /// The compute capability as NVRTC numbers architectures: `major * 10 + minor` (90 for 9.0).
    pub fn arch_number(self) -> u32 {
        let (major, minor) = self.capability();
        major * 10 + minor
    }

    /// The compute capability `(major, minor)`.
    pub fn capability(self) -> (u32, u32) {
        match self {
            Target::Cubin { major, minor } | Target::Ptx { major, minor } => (major, minor),
        }
    }

    /// Whether this is a cubin (else PTX).
    pub fn is_cubin(self) -> bool {
        matches!(self, Target::Cubin { .. })
    }

    fn ptx_of(number: u32) -> Target {
        Target::Ptx {
            major: number / 10,
            minor: number % 10,
        }
    }
}

impl fmt::Display for Target {
    /// `sm_XY` for a cubin, `compute_XY` for PTX: the value of NVRTC's `--gpu-architecture`.
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            Target::Cubin { major, minor } => write!(f, "sm_{major}{minor}"),
            Target::Ptx { major, minor } => write!(f, "compute_{major}{minor}"),
        }
    }
}

/// The target for a device of compute capability `major.minor`: its cubin, `sm_{major}{minor}`
/// ([`compile_binary`] falls back to PTX where NVRTC cannot make that cubin).
pub fn target_for(major: u32, minor: u32) -> Target {
    Target::Cubin { major, minor }
}

/// Whether `libnvrtc` can be loaded.
///
/// Probed once per process (opening the library costs about half a millisecond, and every
/// cached compile asks).
pub fn nvrtc_available() -> bool {
    static PRESENT: OnceLock<bool> = OnceLock::new();
    // SAFETY: only tries to open the library; no symbol is called.
    *PRESENT.get_or_init(|| unsafe { sys::is_culib_present() })
}

/// NVRTC's version as (major, minor).
pub fn nvrtc_version() -> Result<(i32, i32), CompileError> {
    if !nvrtc_available() {
        return Err(CompileError::NvrtcUnavailable);
    }
    static VERSION: OnceLock<Option<(i32, i32)>> = OnceLock::new();
    let version = VERSION.get_or_init(|| {
        let (mut major, mut minor) = (0, 0);
        // SAFETY: the library is present (probed above); both pointers are valid for writes.
        let status = unsafe { sys::nvrtcVersion(&mut major, &mut minor) };
        (status == sys::nvrtcResult::NVRTC_SUCCESS).then_some((major, minor))
    });
    version.ok_or(CompileError::NvrtcUnavailable)
}

/// The real architectures NVRTC can make cubins for, ascending, as `major * 10 + minor`
/// (e.g. `[75, 80, 86, 87, 88, 89, 90, 100, ...]` for NVRTC 13).
pub fn supported_archs() -> Result<Vec<u32>, CompileError> {
    static ARCHS: OnceLock<Option<Vec<u32>>> = OnceLock::new();
    if !nvrtc_available() {
        return Err(CompileError::NvrtcUnavailable);
    }
    ARCHS
        .get_or_init(|| {
            let mut n: c_int = 0;
            // SAFETY: the library is present (probed above); `n` is valid for writes.
            unsafe { sys::nvrtcGetNumSupportedArchs(&mut n) }
                .result()
                .ok()?;
            let mut archs: Vec<c_int> = vec![0; usize::try_from(n).ok()?];
            // SAFETY: `archs` has room for the `n` entries NVRTC writes.
            unsafe { sys::nvrtcGetSupportedArchs(archs.as_mut_ptr()) }
                .result()
                .ok()?;
            let mut archs: Vec<u32> = archs
                .into_iter()
                .filter_map(|a| u32::try_from(a).ok())
                .collect();
            archs.sort_unstable();
            archs.dedup();
            Some(archs)
        })
        .clone()
        .ok_or(CompileError::NvrtcUnavailable)
}

/// What NVRTC produces.
#[derive(Clone, Copy, PartialEq, Eq)]
enum Output {
    Ptx,
    Cubin,
}

/// Why one NVRTC run failed.
enum RunError {
    /// NVRTC rejected an option (for us: the architecture), with its log.
    InvalidOption(String),
    /// Anything else (a compile error, with its log).
    Other(String),
}

impl RunError {
    fn into_compile_error(self, src: &KernelSource, arch: &str) -> CompileError {
        let (RunError::InvalidOption(log) | RunError::Other(log)) = self;
        failed(src, arch, log)
    }
}

fn failed(src: &KernelSource, arch: &str, log: String) -> CompileError {
    CompileError::Failed {
        entry: src.entry.clone(),
        arch: arch.to_string(),
        log,
        numbered_source: src.numbered(),
    }
}

/// NVRTC's `char`s as bytes (`c_char` is `i8` or `u8` depending on the platform).
#[allow(clippy::unnecessary_cast)]
fn c_bytes(chars: Vec<c_char>) -> Vec<u8> {
    chars.into_iter().map(|c| c as u8).collect()
}

/// A NUL-terminated log as text.
fn c_chars_to_string(chars: Vec<c_char>) -> String {
    let mut bytes = c_bytes(chars);
    if let Some(end) = bytes.iter().position(|&b| b == 0) {
        bytes.truncate(end);
    }
    String::from_utf8_lossy(&bytes).into_owned()
}

/// Destroys the program when dropped, on every path.
struct Program(sys::nvrtcProgram);

impl Drop for Program {
    fn drop(&mut self) {
        // SAFETY: the program came from `create_program` and is destroyed only here.
        let _ = unsafe { result::destroy_program(self.0) };
    }
}

/// The standard headers NVRTC lacks and a kernel commonly includes, given to every program as
/// NVRTC's built-in headers, as the host compiler has them for the emulated device: `<cstdint>`
/// and `<stdint.h>`, the fixed-width integer types of a 64-bit Linux host (`int64_t` is `long`,
/// as glibc has it and NVRTC's 64-bit `long` allows), their limits, and `std::` names for them.
pub const BUILTIN_HEADERS: [(&str, &str); 2] = [("stdint.h", STDINT), ("cstdint", CSTDINT)];

const STDINT: &str = r#"#ifndef KUSARI_STDINT_H
#define KUSARI_STDINT_H
typedef signed char int8_t;
typedef short int16_t;
typedef int int32_t;
typedef long int64_t;
typedef unsigned char uint8_t;
typedef unsigned short uint16_t;
typedef unsigned int uint32_t;
typedef unsigned long uint64_t;
typedef signed char int_least8_t;
typedef short int_least16_t;
typedef int int_least32_t;
typedef long int_least64_t;
typedef unsigned char uint_least8_t;
typedef unsigned short uint_least16_t;
typedef unsigned int uint_least32_t;
typedef unsigned long uint_least64_t;
typedef signed char int_fast8_t;
typedef long int_fast16_t;
typedef long int_fast32_t;
typedef long int_fast64_t;
typedef unsigned char uint_fast8_t;
typedef unsigned long uint_fast16_t;
typedef unsigned long uint_fast32_t;
typedef unsigned long uint_fast64_t;
typedef long intptr_t;
typedef unsigned long uintptr_t;
typedef long intmax_t;
typedef unsigned long uintmax_t;
#define INT8_MIN (-128)
#define INT16_MIN (-32767 - 1)
#define INT32_MIN (-2147483647 - 1)
#define INT64_MIN (-9223372036854775807L - 1)
#define INT8_MAX 127
#define INT16_MAX 32767
#define INT32_MAX 2147483647
#define INT64_MAX 9223372036854775807L
#define UINT8_MAX 255
#define UINT16_MAX 65535
#define UINT32_MAX 4294967295U
#define UINT64_MAX 18446744073709551615UL
#define INTPTR_MIN INT64_MIN
#define INTPTR_MAX INT64_MAX
#define UINTPTR_MAX UINT64_MAX
#define INTMAX_MIN INT64_MIN
#define INTMAX_MAX INT64_MAX
#define UINTMAX_MAX UINT64_MAX
#define SIZE_MAX UINT64_MAX
#define INT8_C(c) c
#define INT16_C(c) c
#define INT32_C(c) c
#define INT64_C(c) c##L
#define UINT8_C(c) c
#define UINT16_C(c) c
#define UINT32_C(c) c##U
#define UINT64_C(c) c##UL
#define INTMAX_C(c) c##L
#define UINTMAX_C(c) c##UL
#endif
"#;

const CSTDINT: &str = r#"#ifndef KUSARI_CSTDINT
#define KUSARI_CSTDINT
#include <stdint.h>
namespace std {
using ::int8_t; using ::int16_t; using ::int32_t; using ::int64_t;
using ::uint8_t; using ::uint16_t; using ::uint32_t; using ::uint64_t;
using ::int_least8_t; using ::int_least16_t; using ::int_least32_t; using ::int_least64_t;
using ::uint_least8_t; using ::uint_least16_t; using ::uint_least32_t; using ::uint_least64_t;
using ::int_fast8_t; using ::int_fast16_t; using ::int_fast32_t; using ::int_fast64_t;
using ::uint_fast8_t; using ::uint_fast16_t; using ::uint_fast32_t; using ::uint_fast64_t;
using ::intptr_t; using ::uintptr_t; using ::intmax_t; using ::uintmax_t;
}
#endif
"#;

/// [`BUILTIN_HEADERS`] as the C strings nvrtcCreateProgram takes (include name, contents),
/// made once.
fn builtin_headers() -> &'static [(CString, CString)] {
    static STRINGS: OnceLock<Vec<(CString, CString)>> = OnceLock::new();
    STRINGS.get_or_init(|| {
        let c = |s: &str| CString::new(s).expect("a built-in header holds no NUL");
        (BUILTIN_HEADERS.iter())
            .map(|(name, text)| (c(name), c(text)))
            .collect()
    })
}

/// One NVRTC run: `src` compiled with `--gpu-architecture={arch}`, PTX (with its trailing NUL,
/// as NVRTC returns it) or cubin bytes.
fn run_nvrtc(src: &KernelSource, arch: &str, output: Output) -> Result<Vec<u8>, RunError> {
    run_nvrtc_named(src, arch, output, &[]).map(|(binary, _)| binary)
}

/// [`run_nvrtc`] with name expressions (`my_func<float>`) given to NVRTC, whose lowered
/// (mangled) names come back in their order.
fn run_nvrtc_named(
    src: &KernelSource,
    arch: &str,
    output: Output,
    names: &[String],
) -> Result<(Vec<u8>, Vec<String>), RunError> {
    let source = CString::new(src.source.as_bytes())
        .map_err(|_| RunError::Other("the generated source contains a NUL byte".into()))?;
    let name = CString::new(format!("{}.cu", src.entry))
        .map_err(|_| RunError::Other("the kernel name contains a NUL byte".into()))?;
    let headers = builtin_headers();
    let include_names: Vec<*const c_char> = headers.iter().map(|(n, _)| n.as_ptr()).collect();
    let contents: Vec<*const c_char> = headers.iter().map(|(_, t)| t.as_ptr()).collect();
    let mut raw = std::mem::MaybeUninit::uninit();
    // SAFETY: `source` and `name` are NUL-terminated strings, and `contents` holds as many
    // NUL-terminated strings as `include_names`, all of which outlive the call (NVRTC copies them when
    // it creates the program).
    unsafe {
        sys::nvrtcCreateProgram(
            raw.as_mut_ptr(),
            source.as_ptr(),
            name.as_ptr(),
            headers.len() as c_int,
            contents.as_ptr(),
            include_names.as_ptr(),
        )
    }
    .result()
    .map_err(|e| RunError::Other(format!("nvrtcCreateProgram failed: {e:?}")))?;
    // SAFETY: nvrtcCreateProgram succeeded, so it wrote the program.
    let prog = Program(unsafe { raw.assume_init() });
    let names: Vec<CString> = names
        .iter()
        .map(|n| CString::new(n.as_bytes()))
        .collect::<Result<_, _>>()
        .map_err(|_| RunError::Other("a name expression contains a NUL byte".into()))?;
    for n in &names {
        // SAFETY: `prog` is live (see below) and `n` a NUL-terminated string.
        unsafe { sys::nvrtcAddNameExpression(prog.0, n.as_ptr()) }
            .result()
            .map_err(|e| RunError::Other(format!("nvrtcAddNameExpression failed: {e:?}")))?;
    }
    let mut opts = vec![format!("--gpu-architecture={arch}")];
    opts.extend(options());
    // SAFETY: `prog` is a live program (destroyed only by its `Drop`, after this function's
    // last use of it; `source` and `name` outlive it, being declared before it).
    if let Err(e) = unsafe { result::compile_program(prog.0, &opts) } {
        // SAFETY: as above.
        let log = unsafe { result::get_program_log(prog.0) }
            .map(c_chars_to_string)
            .unwrap_or_default();
        let log = if log.trim().is_empty() {
            format!("nvrtcCompileProgram failed: {e:?}")
        } else {
            log
        };
        return Err(if e.0 == sys::nvrtcResult::NVRTC_ERROR_INVALID_OPTION {
            RunError::InvalidOption(log)
        } else {
            RunError::Other(log)
        });
    }
    let mut lowered = Vec::with_capacity(names.len());
    for n in &names {
        let mut out: *const c_char = std::ptr::null();
        // SAFETY: `prog` is live and compiled with `n` added; NVRTC points `out` at a string it
        // owns until the program is destroyed, which is after the copy below.
        unsafe { sys::nvrtcGetLoweredName(prog.0, n.as_ptr(), &mut out) }
            .result()
            .map_err(|e| {
                RunError::Other(format!(
                    "nvrtcGetLoweredName failed for `{}`: {e:?}",
                    n.to_string_lossy()
                ))
            })?;
        if out.is_null() {
            return Err(RunError::Other(format!(
                "NVRTC gave no lowered name for `{}`",
                n.to_string_lossy()
            )));
        }
        // SAFETY: `out` is a NUL-terminated string NVRTC owns (above).
        lowered.push(
            unsafe { std::ffi::CStr::from_ptr(out) }
                .to_string_lossy()
                .into_owned(),
        );
    }
    let binary = match output {
        // SAFETY: `prog` is live and compiled.
        Output::Ptx => unsafe { result::get_ptx(prog.0) }
            .map(c_bytes)
            .map_err(|e| RunError::Other(format!("nvrtcGetPTX failed: {e:?}"))),
        Output::Cubin => {
            let mut size = 0usize;
            // SAFETY: `prog` is live and compiled; `size` is valid for writes.
            unsafe { sys::nvrtcGetCUBINSize(prog.0, &mut size) }
                .result()
                .map_err(|e| RunError::Other(format!("nvrtcGetCUBINSize failed: {e:?}")))?;
            if size == 0 {
                return Err(RunError::Other(format!("NVRTC made no cubin for {arch}")));
            }
            let mut cubin = vec![0u8; size];
            // SAFETY: `cubin` has room for the `size` bytes NVRTC writes.
            unsafe { sys::nvrtcGetCUBIN(prog.0, cubin.as_mut_ptr().cast()) }
                .result()
                .map_err(|e| RunError::Other(format!("nvrtcGetCUBIN failed: {e:?}")))?;
            Ok(cubin)
        }
    }?;
    Ok((binary, lowered))
}

/// Compiles `src` to PTX for `arch` (e.g. `"compute_90"`). The text has no trailing NUL (see
/// [`compile_binary`] for a loadable image).
pub fn compile_ptx(src: &KernelSource, arch: &'static str) -> Result<String, CompileError> {
    if !nvrtc_available() {
        return Err(CompileError::NvrtcUnavailable);
    }
    let mut ptx = run_nvrtc(src, arch, Output::Ptx).map_err(|e| e.into_compile_error(src, arch))?;
    while ptx.last() == Some(&0) {
        ptx.pop();
    }
    Ok(String::from_utf8_lossy(&ptx).into_owned())
}

/// The target [`compile_binary`] compiles for when asked for `target`, decided from NVRTC's list
/// of supported architectures before running it (so that the cache key is known up front).
fn resolve(src: &KernelSource, target: Target) -> Result<Target, CompileError> {
    let Target::Cubin { .. } = target else {
        return Ok(target);
    };
    let Ok(archs) = supported_archs() else {
        // Unknown: try the cubin, and fall back to PTX if NVRTC rejects the architecture.
        return Ok(target);
    };
    let wanted = target.arch_number();
    if archs.contains(&wanted) {
        return Ok(target);
    }
    match archs.iter().rev().find(|&&a| a <= wanted) {
        Some(&newest) => Ok(Target::ptx_of(newest)),
        None => {
            let (major, minor) = nvrtc_version()?;
            Err(failed(
                src,
                &target.to_string(),
                format!(
                    "NVRTC {major}.{minor} supports {}; the device ({target}) is older than all of them",
                    archs
                        .iter()
                        .map(|a| format!("sm_{a}"))
                        .collect::<Vec<_>>()
                        .join(", ")
                ),
            ))
        }
    }
}

/// Compiles an already resolved target; a cubin NVRTC rejects the architecture of becomes PTX
/// for the same compute capability.
fn compile_resolved(src: &KernelSource, target: Target) -> Result<(Target, Vec<u8>), CompileError> {
    compile_resolved_named(src, target, &[]).map(|(t, b, _)| (t, b))
}

/// [`compile_resolved`] with name expressions, whose lowered names come back too.
fn compile_resolved_named(
    src: &KernelSource,
    target: Target,
    names: &[String],
) -> Result<(Target, Vec<u8>, Vec<String>), CompileError> {
    let arch = target.to_string();
    match target {
        Target::Ptx { .. } => {
            let (mut ptx, lowered) = run_nvrtc_named(src, &arch, Output::Ptx, names)
                .map_err(|e| e.into_compile_error(src, &arch))?;
            if ptx.last() != Some(&0) {
                ptx.push(0);
            }
            Ok((target, ptx, lowered))
        }
        Target::Cubin { major, minor } => match run_nvrtc_named(src, &arch, Output::Cubin, names) {
            Ok((cubin, lowered)) => Ok((target, cubin, lowered)),
            Err(RunError::InvalidOption(_)) => {
                compile_resolved_named(src, Target::Ptx { major, minor }, names)
            }
            Err(e) => Err(e.into_compile_error(src, &arch)),
        },
    }
}

/// Compiles `src` into something a device loads with `cuModuleLoadData`, and says what it is.
///
/// - [`Target::Ptx`]: PTX for that `compute_XY`, NUL-terminated, exactly as asked.
/// - [`Target::Cubin`] for `sm_XY` (see [`target_for`]):
///   - NVRTC lists `sm_XY` among its architectures ([`supported_archs`]): the cubin, an ELF
///     file starting with [`ELF_MAGIC`], compiled with `--gpu-architecture=sm_XY`.
///   - It does not (a device newer than this NVRTC, or a variant it has no code generator for):
///     PTX for the newest architecture it lists below `XY`, which the driver JIT-compiles for
///     the device.
///   - It lists nothing at or below `XY` (a device older than this NVRTC supports):
///     [`CompileError::Failed`] saying so.
///   - The list cannot be had and NVRTC rejects `sm_XY`: PTX for `compute_XY`.
///
/// The returned [`Target`] is the one actually compiled for.
pub fn compile_binary(
    src: &KernelSource,
    target: &Target,
) -> Result<(Target, Vec<u8>), CompileError> {
    if !nvrtc_available() {
        return Err(CompileError::NvrtcUnavailable);
    }
    compile_resolved(src, resolve(src, *target)?)
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

/// [`compile_binary`] through `cache`. The key holds the target actually compiled for, marked
/// as a loadable binary (`binary:sm_90`, `binary:compute_90`), so a cubin, a NUL-terminated
/// PTX image and [`compile_ptx_cached`]'s PTX text never share an entry. A cached entry is told
/// apart as cubin or PTX by its [`ELF_MAGIC`].
pub fn compile_binary_cached(
    src: &KernelSource,
    target: &Target,
    cache: &BinaryCache,
) -> Result<(Target, Arc<Vec<u8>>), CompileError> {
    let version = nvrtc_version()?;
    let resolved = resolve(src, *target)?;
    let key = CacheKey::new(
        &src.source,
        &options(),
        version,
        &format!("binary:{resolved}"),
    );
    let binary = cache.get_or_compile(key, || compile_resolved(src, resolved).map(|(_, b)| b))?;
    Ok((made_for(resolved, &binary), binary))
}

/// [`compile_binary`] with name expressions (CuPy's `name_expressions`: `my_func<float>`, the
/// address of a template kernel's instance): NVRTC instantiates each and says its lowered
/// (mangled) name, the name the compiled module knows it by. The names come back in the
/// expressions' order.
pub fn compile_binary_named(
    src: &KernelSource,
    target: &Target,
    names: &[String],
) -> Result<(Target, NamedBinary), CompileError> {
    if !nvrtc_available() {
        return Err(CompileError::NvrtcUnavailable);
    }
    let (used, binary, lowered) = compile_resolved_named(src, resolve(src, *target)?, names)?;
    Ok((
        used,
        NamedBinary {
            binary: Arc::new(binary),
            lowered,
        },
    ))
}

/// What a cached binary compiled for `resolved` is: a cubin when it is an ELF file, else PTX
/// for the same compute capability (NVRTC made PTX where it could not make the cubin).
fn made_for(resolved: Target, binary: &[u8]) -> Target {
    let (major, minor) = resolved.capability();
    if binary.starts_with(ELF_MAGIC) {
        Target::Cubin { major, minor }
    } else {
        Target::Ptx { major, minor }
    }
}

/// [`compile_binary_named`] through `cache`: the entry holds the lowered names before the
/// binary ([`NamedBinary`]), and its key the expressions. Without expressions, this is
/// [`compile_binary_cached`].
pub fn compile_binary_named_cached(
    src: &KernelSource,
    target: &Target,
    names: &[String],
    cache: &BinaryCache,
) -> Result<(Target, NamedBinary), CompileError> {
    if names.is_empty() {
        return compile_binary_cached(src, target, cache).map(|(t, binary)| {
            (
                t,
                NamedBinary {
                    binary,
                    lowered: Vec::new(),
                },
            )
        });
    }
    let version = nvrtc_version()?;
    let resolved = resolve(src, *target)?;
    let mut opts = options();
    opts.extend(names.iter().map(|n| format!("--name-expression={n}")));
    let key = CacheKey::new(&src.source, &opts, version, &format!("binary:{resolved}"));
    let entry = cache.get_or_compile(key, || {
        compile_resolved_named(src, resolved, names).map(|(_, binary, lowered)| {
            NamedBinary {
                binary: Arc::new(binary),
                lowered,
            }
            .encode()
        })
    })?;
    let named = NamedBinary::decode(&entry, names.len()).ok_or_else(|| {
        failed(
            src,
            &resolved.to_string(),
            "a damaged cache entry".to_string(),
        )
    })?;
    Ok((made_for(resolved, &named.binary), named))
}

/// A compiled module with the lowered names of its name expressions, as a cache entry holds
/// them: the count (4 bytes, little-endian), each name's length (4 bytes) and bytes, then the
/// binary.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct NamedBinary {
    /// What the device loads.
    pub binary: Arc<Vec<u8>>,
    /// The lowered names, in the expressions' order.
    pub lowered: Vec<String>,
}

impl NamedBinary {
    /// The entry's bytes.
    pub fn encode(&self) -> Vec<u8> {
        let mut out = Vec::with_capacity(self.binary.len() + 64);
        out.extend((self.lowered.len() as u32).to_le_bytes());
        for n in &self.lowered {
            out.extend((n.len() as u32).to_le_bytes());
            out.extend(n.as_bytes());
        }
        out.extend(self.binary.iter());
        out
    }

    /// The entry read back, if it holds `count` names.
    pub fn decode(bytes: &[u8], count: usize) -> Option<NamedBinary> {
        fn take<'a>(bytes: &mut &'a [u8], n: usize) -> Option<&'a [u8]> {
            let (head, tail) = (bytes.get(..n)?, bytes.get(n..)?);
            *bytes = tail;
            Some(head)
        }
        fn len(bytes: &mut &[u8]) -> Option<usize> {
            Some(u32::from_le_bytes(take(bytes, 4)?.try_into().ok()?) as usize)
        }
        let mut rest = bytes;
        if len(&mut rest)? != count {
            return None;
        }
        let mut lowered = Vec::with_capacity(count);
        for _ in 0..count {
            let n = len(&mut rest)?;
            lowered.push(String::from_utf8(take(&mut rest, n)?.to_vec()).ok()?);
        }
        Some(NamedBinary {
            binary: Arc::new(rest.to_vec()),
            lowered,
        })
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// Whether NVRTC loads; false (after printing why `test` skips) where it does not, unless
    /// `KUSARI_REQUIRE_NVRTC` is set, which makes that a failure.
    fn nvrtc_or_skip(test: &str) -> bool {
        if nvrtc_available() {
            return true;
        }
        assert!(
            !crate::env::require_nvrtc(),
            "KUSARI_REQUIRE_NVRTC is set but NVRTC cannot be loaded"
        );
        println!("SKIPPED {test}: NVRTC not found");
        false
    }

    fn trivial() -> KernelSource {
        KernelSource {
            entry: "k".into(),
            source: "extern \"C\" __global__ void k(float* p) { p[threadIdx.x] = 1.0f; }\n".into(),
        }
    }

    #[test]
    fn targets_display_as_nvrtc_architectures() {
        assert_eq!(target_for(8, 6).to_string(), "sm_86");
        assert_eq!(target_for(12, 1).to_string(), "sm_121");
        assert_eq!(Target::Ptx { major: 9, minor: 0 }.to_string(), "compute_90");
        assert_eq!(target_for(12, 1).arch_number(), 121);
        assert_eq!(
            Target::ptx_of(100),
            Target::Ptx {
                major: 10,
                minor: 0
            }
        );
        assert!(target_for(9, 0).is_cubin());
    }

    /// `<cstdint>` and `<stdint.h>`, which NVRTC lacks, are built in, with a 64-bit Linux
    /// host's types (what the emulated device's host compiler has); another standard header is
    /// still NVRTC's error, naming it.
    #[test]
    fn the_standard_integer_headers_are_built_in() {
        if !nvrtc_or_skip("the_standard_integer_headers_are_built_in") {
            return;
        }
        let src = KernelSource {
            entry: "widths".into(),
            source: r#"#include <cstdint>
#include <stdint.h>
#include <cstdint>
static_assert(sizeof(int8_t) == 1 && sizeof(uint16_t) == 2 && sizeof(std::int32_t) == 4, "");
static_assert(sizeof(int64_t) == 8 && sizeof(std::uint64_t) == 8 && sizeof(uintptr_t) == 8, "");
template <class A, class B> struct same { static const bool value = false; };
template <class A> struct same<A, A> { static const bool value = true; };
static_assert(same<int64_t, long>::value && same<uint64_t, unsigned long>::value, "LP64");
static_assert(same<std::uint8_t, unsigned char>::value && same<int16_t, short>::value, "");
static_assert(INT64_MAX == 9223372036854775807L && INT64_MIN < 0 && UINT8_MAX == 255, "");
static_assert(UINT32_C(4294967295) == UINT32_MAX && INT64_C(1) << 62 > 0, "");
extern "C" __global__ void widths(std::int64_t* out, const uint8_t* in, int16_t k) {
    out[threadIdx.x] = (int64_t)in[threadIdx.x] + k;
}
"#
            .into(),
        };
        let ptx = compile_ptx(&src, "compute_90").unwrap_or_else(|e| panic!("{e}"));
        assert!(ptx.contains(".entry widths"), "{ptx}");
        let src = KernelSource {
            entry: "v".into(),
            source: "#include <vector>\nextern \"C\" __global__ void v() {}\n".into(),
        };
        let e = compile_ptx(&src, "compute_90").unwrap_err().to_string();
        assert!(e.contains("vector"), "{e}");
    }

    /// Without the architecture list, a cubin NVRTC rejects the architecture of is retried as
    /// PTX for the same compute capability (here NVRTC knows neither, so that fails too).
    #[test]
    fn a_rejected_cubin_architecture_is_retried_as_ptx() {
        if !nvrtc_or_skip("a_rejected_cubin_architecture_is_retried_as_ptx") {
            return;
        }
        let src = trivial();
        match run_nvrtc(&src, "sm_99", Output::Cubin) {
            Err(RunError::InvalidOption(log)) => {
                assert!(log.contains("--gpu-architecture"), "{log}")
            }
            Err(RunError::Other(log)) => panic!("expected an invalid option, got {log}"),
            Ok(_) => panic!("sm_99 compiled"),
        }
        match compile_resolved(&src, target_for(9, 9)) {
            Err(CompileError::Failed { arch, .. }) => assert_eq!(arch, "compute_99"),
            other => panic!("expected a PTX attempt, got {other:?}"),
        }
        let (t, cubin) = compile_resolved(&src, target_for(8, 0)).unwrap();
        assert_eq!(t, target_for(8, 0));
        assert!(cubin.starts_with(ELF_MAGIC));
    }
}
