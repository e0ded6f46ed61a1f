//! The emulated device's sanitizer: which checks a launch runs, the reports they make, and the
//! signal handler that turns a kernel's crash into an error.
//!
//! A checked launch runs the kernel library's **checked build**: the same unit, compiled with
//! the host compiler's thread-sanitizer instrumentation, whose calls (`__tsan_read4(address)`,
//! ...) the shim answers itself (no sanitizer runtime is linked). The shim checks each access of
//! a kernel to a parameter's allocation or to shared memory: bounds to the byte, reads of bytes
//! nothing wrote, and races between the launch's threads (see `shim.hpp`). The runtime gives it
//! the allocations and their written bits ([`super::memory`]) and formats what it finds here,
//! with the source line of each access (the checked build has debug lines; `addr2line` reads
//! them) and the name of a `__shared__` variable (`readelf`).

use std::cell::Cell;
use std::collections::HashSet;
use std::ffi::{c_int, c_void};
use std::io::Write;
use std::process::{Command, Stdio};
use std::sync::{Mutex, OnceLock, PoisonError};
use std::time::{Duration, Instant};

use crate::env::CUDA_SANITIZE as SANITIZE_VAR;

/// What the initialization check does with a read of memory nothing has written.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, Hash)]
pub enum InitCheck {
    /// Not checked.
    #[default]
    Off,
    /// The launch fails, naming the kernel, the memory and the element.
    Fail,
    /// The launch goes on; each finding (one an instruction and buffer) is logged as a
    /// `tracing` warning (target `kusari::cuda::sanitizer`) and kept for
    /// [`take_reports`](crate::cuda::sanitizer::take_reports).
    Report,
}

/// The checks the emulated device runs on a launch (see the guide's chapter on the emulated
/// device). A GPU ignores them.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, Hash)]
pub struct Checks {
    /// Two accesses to one byte by different threads of a launch, at least one a write, not
    /// both atomic, and not ordered by a `__syncthreads` of their block.
    pub races: bool,
    /// Reads of device or shared memory that nothing has written.
    pub initialization: InitCheck,
    /// Accesses outside a parameter's allocation or the launch's dynamic shared memory, to the
    /// byte (without it, the guard pages catch what crosses a page).
    pub bounds: bool,
}

impl Checks {
    /// No checks: the fast build runs.
    pub const NONE: Checks = Checks {
        races: false,
        initialization: InitCheck::Off,
        bounds: false,
    };

    /// Every check, each failing the launch.
    pub const ALL: Checks = Checks {
        races: true,
        initialization: InitCheck::Fail,
        bounds: true,
    };

    /// Whether any check is on.
    pub fn any(self) -> bool {
        self != Checks::NONE
    }

    /// The shim's `checks` bits (`kCheck*` in `shim.hpp`).
    pub(crate) fn bits(self) -> u32 {
        u32::from(self.races)
            | match self.initialization {
                InitCheck::Off => 0,
                InitCheck::Fail => 2,
                InitCheck::Report => 2 | 8,
            }
            | (u32::from(self.bounds) << 2)
    }

    /// Parses `KUSARI_CUDA_SANITIZE`'s value: `1`, `on` or `all`; `0`, `off` or empty; or a
    /// comma-separated list of `races`, `init`, `init=report` and `bounds`.
    pub fn parse(value: &str) -> Result<Checks, String> {
        let value = value.trim();
        match value.to_ascii_lowercase().as_str() {
            "" | "0" | "off" | "none" => return Ok(Checks::NONE),
            "1" | "on" | "all" => return Ok(Checks::ALL),
            _ => {}
        }
        let mut checks = Checks::NONE;
        for word in value.split(',').map(str::trim) {
            match word.to_ascii_lowercase().as_str() {
                "races" | "race" => checks.races = true,
                "init" | "initialization" => checks.initialization = InitCheck::Fail,
                "init=report" => checks.initialization = InitCheck::Report,
                "bounds" => checks.bounds = true,
                _ => {
                    return Err(format!(
                        "{SANITIZE_VAR}={value}: `{word}` is not a check; give 1 (all), 0 (none), \
                         or a list of races, init, init=report and bounds"
                    ));
                }
            }
        }
        Ok(checks)
    }
}

fn default_cell() -> &'static Mutex<Result<Checks, String>> {
    static DEFAULT: OnceLock<Mutex<Result<Checks, String>>> = OnceLock::new();
    DEFAULT.get_or_init(|| {
        Mutex::new(match std::env::var(SANITIZE_VAR) {
            Ok(v) => Checks::parse(&v),
            Err(_) => Ok(Checks::NONE),
        })
    })
}

thread_local! {
    /// This thread's checks, when a guard set them.
    static SCOPED: Cell<Option<Checks>> = const { Cell::new(None) };
}

/// The process's checks: `KUSARI_CUDA_SANITIZE`'s, unless [`set_default`] changed them.
pub fn default_checks() -> Result<Checks, String> {
    default_cell()
        .lock()
        .unwrap_or_else(PoisonError::into_inner)
        .clone()
}

/// Sets the checks of every launch of the process that no [`scoped`] guard covers.
pub fn set_default(checks: Checks) {
    *default_cell()
        .lock()
        .unwrap_or_else(PoisonError::into_inner) = Ok(checks);
}

/// Restores the thread's checks when dropped (see [`scoped`]).
#[must_use = "the checks last as long as the guard"]
#[derive(Debug)]
pub struct ChecksGuard {
    previous: Option<Checks>,
}

impl Drop for ChecksGuard {
    fn drop(&mut self) {
        SCOPED.with(|s| s.set(self.previous));
    }
}

/// Runs the launches this thread makes, while the guard lives, with `checks` (a test's, or one
/// launch's), whatever the process's default.
pub fn scoped(checks: Checks) -> ChecksGuard {
    ChecksGuard {
        previous: SCOPED.with(|s| s.replace(Some(checks))),
    }
}

/// The checks of a launch made now by this thread.
pub(crate) fn current() -> Result<Checks, String> {
    match SCOPED.with(Cell::get) {
        Some(c) => Ok(c),
        None => default_checks(),
    }
}

/// Whether a new allocation tracks which of its bytes are written (the initialization check
/// is on for this thread or the process).
pub(crate) fn tracks_initialization() -> bool {
    let on = |c: Checks| c.initialization != InitCheck::Off;
    SCOPED.with(Cell::get).is_some_and(on) || default_checks().is_ok_and(on)
}

fn reports() -> &'static Mutex<Vec<String>> {
    static REPORTS: Mutex<Vec<String>> = Mutex::new(Vec::new());
    &REPORTS
}

/// Keeps a finding of a check in report mode.
pub(crate) fn keep_report(report: String) {
    tracing::warn!(target: "kusari::cuda::sanitizer", "{report}");
    reports()
        .lock()
        .unwrap_or_else(PoisonError::into_inner)
        .push(report);
}

/// The parameter index of memory a kernel reached through a pointer stored in memory.
pub(crate) const REACHED: c_int = -2;

/// The race shadow a checked launch may map: a 40-byte cell for each 4 bytes of each
/// allocation its kernel may write, mapped as the kernel touches it, so up to ten times the
/// bytes the kernel touches. A quarter of the machine's memory; the allocations past it get
/// none (their races go unchecked, which a warning says), instead of the process running out
/// of memory.
pub(crate) fn shadow_budget() -> u64 {
    #[cfg(test)]
    if let Some(budget) = SHADOW_BUDGET.with(Cell::get) {
        return budget;
    }
    static BUDGET: OnceLock<u64> = OnceLock::new();
    *BUDGET.get_or_init(|| {
        // SAFETY: sysconf reads system constants.
        let (pages, page) = unsafe {
            (
                libc::sysconf(libc::_SC_PHYS_PAGES),
                libc::sysconf(libc::_SC_PAGESIZE),
            )
        };
        let bytes = u64::try_from(pages).unwrap_or(0) * u64::try_from(page).unwrap_or(0);
        bytes.max(1 << 30) / 4
    })
}

#[cfg(test)]
thread_local! {
    /// A test's race-shadow budget for this thread's checked launches.
    pub(crate) static SHADOW_BUDGET: Cell<Option<u64>> = const { Cell::new(None) };
}

/// Warns, once for each kernel and parameter (all the memory a kernel reaches through stored
/// pointers counting as one), that a launch checked its races without a race shadow for that
/// memory, and keeps the warning for [`take_reports`]. Once, so that a loop of launches neither
/// floods the log nor grows the kept warnings.
pub(crate) fn note_unshadowed(kernel: &str, param: c_int, text: String) {
    static NOTED: OnceLock<Mutex<HashSet<(String, c_int)>>> = OnceLock::new();
    let first = NOTED
        .get_or_init(Default::default)
        .lock()
        .unwrap_or_else(PoisonError::into_inner)
        .insert((kernel.to_string(), param));
    if first {
        keep_report(text);
    }
}

/// The findings kept in report mode ([`InitCheck::Report`]) since the last call, oldest first,
/// and the warnings that a checked launch left an allocation's races unchecked (its race shadow
/// would pass the launch's budget, a quarter of the machine's memory; once for each kernel and
/// parameter).
pub fn take_reports() -> Vec<String> {
    std::mem::take(&mut *reports().lock().unwrap_or_else(PoisonError::into_inner))
}

// ---- Reports of a launch -------------------------------------------------------------------

/// One side of a finding (`Access` in `shim.hpp`).
#[repr(C)]
#[derive(Clone, Copy, Debug, Default)]
pub(crate) struct AccessDesc {
    pub(crate) block: [u32; 3],
    pub(crate) thread: [u32; 3],
    pub(crate) kind: c_int,
    pub(crate) epoch: u32,
    /// The thread's linear index in its block (its warp and lane).
    pub(crate) lane: u32,
    pub(crate) pad: u32,
    pub(crate) pc: u64,
}

/// A finding (`Report` in `shim.hpp`).
#[repr(C)]
#[derive(Clone, Copy, Debug, Default)]
pub(crate) struct ReportDesc {
    pub(crate) what: c_int,
    pub(crate) space: c_int,
    pub(crate) param: c_int,
    pub(crate) size: c_int,
    pub(crate) offset: i64,
    pub(crate) address: u64,
    pub(crate) signal: c_int,
    /// An index outside a fixed-size array (7): its source line.
    pub(crate) line: c_int,
    pub(crate) now: AccessDesc,
    pub(crate) before: AccessDesc,
}

/// Runs `program` with `args` for at most a few seconds and gives its standard output.
fn output_within(program: &str, args: &[&str]) -> Option<String> {
    let mut child = Command::new(program)
        .args(args)
        .stdin(Stdio::null())
        .stdout(Stdio::piped())
        .stderr(Stdio::null())
        .spawn()
        .ok()?;
    let deadline = Instant::now() + Duration::from_secs(10);
    loop {
        match child.try_wait() {
            Ok(Some(_)) => break,
            Ok(None) if Instant::now() < deadline => std::thread::sleep(Duration::from_millis(5)),
            _ => {
                let _ = child.kill();
                let _ = child.wait();
                return None;
            }
        }
    }
    let mut out = String::new();
    std::io::Read::read_to_string(&mut child.stdout.take()?, &mut out).ok()?;
    Some(out)
}

/// A checked library's image on disk, for `addr2line` and `readelf`, removed when dropped.
pub(crate) struct ImageFile(std::path::PathBuf);

impl ImageFile {
    pub(crate) fn write(image: &[u8]) -> Option<ImageFile> {
        use std::sync::atomic::{AtomicUsize, Ordering};
        static N: AtomicUsize = AtomicUsize::new(0);
        let path = std::env::temp_dir().join(format!(
            "kusari-emu-{}-checked-{}.so",
            std::process::id(),
            N.fetch_add(1, Ordering::Relaxed)
        ));
        let mut f = std::fs::File::create(&path).ok()?;
        f.write_all(image).ok()?;
        Some(ImageFile(path))
    }

    /// `kernel:LINE` (the kernel source's line) of the instruction at `pc`.
    fn line(&self, pc: u64) -> Option<String> {
        let out = output_within(
            "addr2line",
            &["-e", self.0.to_str()?, "-i", &format!("{pc:#x}")],
        )?;
        let first = out.lines().next()?.trim();
        let line = first.split(" (discriminator").next()?.trim();
        // `#line 1 "name"` names the kernel's source; the compiler's directory is not part of it.
        let line = line.rsplit('/').next()?;
        (!line.starts_with("??")).then(|| line.to_string())
    }

    /// The `__shared__` variable at `offset` of the library's thread-local block, and the byte
    /// within it.
    fn shared_variable(&self, offset: u64) -> Option<(String, u64)> {
        let out = output_within("readelf", &["-sW", self.0.to_str()?])?;
        out.lines().find_map(|l| {
            let f: Vec<&str> = l.split_whitespace().collect();
            if f.len() < 8 || f[3] != "TLS" {
                return None;
            }
            let value = u64::from_str_radix(f[1], 16).ok()?;
            let size: u64 = f[2].parse().ok()?;
            let name = f[7];
            (offset >= value && offset < value + size && !name.starts_with("_ZN10kusari_emu"))
                .then(|| (demangle_static(name), offset - value))
        })
    }
}

impl Drop for ImageFile {
    fn drop(&mut self) {
        let _ = std::fs::remove_file(&self.0);
    }
}

/// A static variable's name as the source spells it (`_ZL5sdata` and `_ZZ4kernE5sdata` are
/// `sdata`).
fn demangle_static(name: &str) -> String {
    let Some(rest) = name.strip_prefix("_Z") else {
        return name.to_string();
    };
    // The last length-prefixed component.
    let bytes = rest.as_bytes();
    let mut i = 0;
    let mut last = name.to_string();
    while i < bytes.len() {
        if bytes[i].is_ascii_digit() {
            let start = i;
            while i < bytes.len() && bytes[i].is_ascii_digit() {
                i += 1;
            }
            let n: usize = rest[start..i].parse().unwrap_or(0);
            if n > 0 && i + n <= bytes.len() {
                last = rest[i..i + n].to_string();
                i += n;
                continue;
            }
        } else {
            i += 1;
        }
    }
    last
}

fn coords(v: [u32; 3]) -> String {
    format!("({}, {}, {})", v[0], v[1], v[2])
}

fn verb(kind: c_int) -> &'static str {
    match kind {
        0 => "read",
        1 => "wrote",
        _ => "updated atomically",
    }
}

fn at_line(image: Option<&ImageFile>, pc: u64) -> String {
    match image.and_then(|i| i.line(pc)) {
        Some(line) => format!(" at {line}"),
        None => String::new(),
    }
}

/// The allocation starting at `start`, which no parameter addresses, in words.
fn reached_allocation(start: u64) -> String {
    format!(
        "the allocation at {start:#x}, which the kernel reached through a pointer stored in \
         memory (no parameter points into it)"
    )
}

/// What a report's memory is: a parameter's allocation, a `__shared__` variable or dynamic
/// shared memory, with the element the access reached.
fn memory_of(r: &ReportDesc, image: Option<&ImageFile>) -> String {
    let size = i64::from(r.size.max(1));
    let element = |offset: i64| {
        if offset % size == 0 {
            format!(
                "element {} ({}-byte elements)",
                offset.div_euclid(size),
                size
            )
        } else {
            format!("byte {offset}")
        }
    };
    match r.space {
        0 if r.param == REACHED => format!(
            "{}, {}",
            reached_allocation(r.address.wrapping_sub(r.offset as u64)),
            element(r.offset)
        ),
        0 => format!("parameter {}, {}", r.param, element(r.offset)),
        1 => match image.and_then(|i| i.shared_variable(r.offset as u64)) {
            Some((name, within)) => {
                format!("__shared__ `{name}`, {}", element(within as i64))
            }
            None => format!("__shared__ memory, byte {}", r.offset),
        },
        2 => format!("extern __shared__ memory, {}", element(r.offset)),
        _ => format!("memory at {:#x}", r.address),
    }
}

/// The length of the outermost dimension of an array type as the compiler names it
/// (`'float [16]'` and `'float [2][3]'` give 16 and 2).
fn fixed_length(array: &str) -> Option<u64> {
    let open = array.find('[')?;
    let close = open + array[open..].find(']')?;
    array[open + 1..close].trim().parse().ok()
}

/// A signal's name and what it usually means in a kernel.
fn signal_name(sig: c_int) -> &'static str {
    match sig {
        libc::SIGSEGV => "SIGSEGV (an access to memory the thread may not touch)",
        libc::SIGBUS => "SIGBUS (a misaligned or impossible access)",
        libc::SIGFPE => "SIGFPE (an integer division by zero or overflow)",
        libc::SIGILL => "SIGILL (an illegal instruction)",
        _ => "a signal",
    }
}

/// The message of report `r` of kernel `kernel`; `shared_bytes` is the launch's dynamic shared
/// memory, `fault_place` what a faulting address lies in.
pub(crate) fn describe(
    kernel: &str,
    r: &ReportDesc,
    image: Option<&ImageFile>,
    shared_bytes: u32,
    fault_place: impl FnOnce(u64) -> String,
) -> String {
    let who = format!(
        "thread {} of block {}",
        coords(r.now.thread),
        coords(r.now.block)
    );
    match r.what {
        1 => {
            let other = format!(
                "thread {} of block {}",
                coords(r.before.thread),
                coords(r.before.block)
            );
            let why = if r.before.block != r.now.block {
                "threads of different blocks, which no __syncthreads orders".to_string()
            } else if r.before.lane / 32 == r.now.lane / 32 {
                format!(
                    "with no __syncthreads between them (both after {} barrier(s) of the \
                     block) and no __syncwarp ordering lane {} before lane {} of warp {}",
                    r.now.epoch,
                    r.before.lane % 32,
                    r.now.lane % 32,
                    r.now.lane / 32
                )
            } else {
                format!(
                    "with no __syncthreads between them (both after {} barrier(s) of the block)",
                    r.now.epoch
                )
            };
            let before = if r.before.thread == r.now.thread && r.before.block == r.now.block {
                "other threads of the block read it".to_string()
            } else {
                format!(
                    "{other} {} it{}",
                    verb(r.before.kind),
                    at_line(image, r.before.pc)
                )
            };
            format!(
                "kernel {kernel}: data race on {}: {who} {} it{}, and {before}, {why}",
                memory_of(r, image),
                verb(r.now.kind),
                at_line(image, r.now.pc)
            )
        }
        2 => format!(
            "kernel {kernel}: read of uninitialized memory: {who} read {}{}, which no kernel, \
             copy or memset has written{}",
            memory_of(r, image),
            at_line(image, r.now.pc),
            if r.space == 0 {
                " (a kernel reading an output it never wrote, or memory allocated without values)"
            } else {
                " in this block (shared memory starts undefined in every block)"
            }
        ),
        3 => {
            let place = match r.space {
                2 => format!(
                    "byte {} of extern __shared__ memory, but the launch gave {shared_bytes} \
                     bytes of dynamic shared memory (shared_mem_bytes too small?)",
                    r.offset
                ),
                _ => format!(
                    "{}: {} bytes before the first byte of its allocation",
                    memory_of(r, image),
                    -r.offset
                ),
            };
            format!(
                "kernel {kernel}: out-of-bounds access: {who} {} {} bytes at {place}{}",
                verb(r.now.kind),
                r.size,
                at_line(image, r.now.pc)
            )
        }
        7 => {
            // SAFETY: `address` points to the NUL-terminated type name the compiler put in the
            // library that made the report, which stays loaded while its reports are described
            // (`Kernel::explain` holds it).
            let array = (r.address != 0)
                .then(|| unsafe { std::ffi::CStr::from_ptr(r.address as *const std::ffi::c_char) })
                .map_or_else(|| "'?'".to_string(), |n| n.to_string_lossy().into_owned());
            let index = match r.signal {
                1 => format!("index {}", r.offset),
                2 => format!("index {}", r.offset as u64),
                _ => "an index".to_string(),
            };
            let valid = match fixed_length(&array) {
                Some(0) => " (an array of no elements)".to_string(),
                Some(n) => format!(", whose indices run from 0 to {}", n - 1),
                None => String::new(),
            };
            let line = match at_line(image, r.now.pc) {
                l if !l.is_empty() => l,
                _ if r.line > 0 => format!(" at line {}", r.line),
                _ => String::new(),
            };
            format!(
                "kernel {kernel}: index out of bounds: {who} used {index} into an array of type \
                 {array}{valid}{line} (a __constant__, __shared__ or local array, or a row of a \
                 multidimensional one; the access was stopped before it happened)"
            )
        }
        6 => format!(
            "kernel {kernel}: races on {} ({} MiB) go unchecked: its race shadow (ten times its \
             size) would pass the launch's budget of {} MiB (a quarter of the machine's \
             memory); its bounds and initialization are still checked",
            match r.param {
                REACHED => reached_allocation(r.address),
                p => format!("parameter {p}"),
            },
            (r.offset as u64).div_ceil(1 << 20),
            shadow_budget() >> 20
        ),
        5 => format!(
            "kernel {kernel}: {who} {} {}{}, but every parameter that points into that \
             allocation is a pointer to const: the kernel may not write it (a cast-away const, \
             or a pointer that strays into another parameter's allocation; the race check \
             tracks no reads of const parameters); declare the parameter without const to \
             write it",
            verb(r.now.kind),
            memory_of(r, image),
            at_line(image, r.now.pc)
        ),
        _ => format!(
            "kernel {kernel}: {} in {who}, at address {:#x}: {}",
            signal_name(r.signal),
            r.address,
            fault_place(r.address)
        ),
    }
}

// ---- Faults --------------------------------------------------------------------------------

/// What the shim's `kusari_emu_fault` is.
pub(crate) type FaultFn = unsafe extern "C" fn(c_int, *mut c_void);

thread_local! {
    /// The running kernel library's fault entry, while a launch runs on this thread.
    static IN_KERNEL: Cell<Option<FaultFn>> = const { Cell::new(None) };
}

/// The handlers there were before ours, for faults outside kernels.
static PREVIOUS: OnceLock<Vec<(c_int, libc::sigaction)>> = OnceLock::new();

const SIGNALS: [c_int; 4] = [libc::SIGSEGV, libc::SIGBUS, libc::SIGFPE, libc::SIGILL];

extern "C" fn on_signal(sig: c_int, info: *mut libc::siginfo_t, context: *mut c_void) {
    // A const-initialized thread-local without a destructor: a plain TLS read, safe here.
    if let Some(fault) = IN_KERNEL.with(Cell::get) {
        // SAFETY: the signal came from a kernel of the library whose entry this is, on this
        // thread; the entry records it and jumps back to the launch, which reports it.
        let address = unsafe { (*info).si_addr() };
        unsafe { fault(sig, address) };
    }
    // Not a kernel's: what was there before ours decides.
    let previous = PREVIOUS
        .get()
        .and_then(|p| p.iter().find(|(s, _)| *s == sig).map(|(_, a)| *a));
    // SAFETY: restoring or calling the handler installed before ours, with the signal's own
    // arguments.
    unsafe {
        match previous {
            Some(a) if a.sa_sigaction != libc::SIG_DFL && a.sa_sigaction != libc::SIG_IGN => {
                if a.sa_flags & libc::SA_SIGINFO != 0 {
                    let f: extern "C" fn(c_int, *mut libc::siginfo_t, *mut c_void) =
                        std::mem::transmute(a.sa_sigaction);
                    f(sig, info, context);
                } else {
                    let f: extern "C" fn(c_int) = std::mem::transmute(a.sa_sigaction);
                    f(sig);
                }
            }
            _ => {
                // The default action: it happens when the faulting instruction runs again.
                libc::signal(sig, libc::SIG_DFL);
            }
        }
    }
}

/// Installs the handler that turns a kernel's fault into an error (once a process).
pub(crate) fn install_fault_handler() {
    PREVIOUS.get_or_init(|| {
        let mut previous = Vec::new();
        for sig in SIGNALS {
            // SAFETY: a zeroed sigaction is valid; the handler only reads thread-local state
            // and calls the kernel library's fault entry or the previous handler.
            unsafe {
                let mut action: libc::sigaction = std::mem::zeroed();
                action.sa_sigaction = on_signal as *const () as usize;
                action.sa_flags = libc::SA_SIGINFO | libc::SA_ONSTACK | libc::SA_NODEFER;
                libc::sigemptyset(&mut action.sa_mask);
                let mut old: libc::sigaction = std::mem::zeroed();
                if libc::sigaction(sig, &action, &mut old) == 0 {
                    previous.push((sig, old));
                }
            }
        }
        previous
    });
}

/// Marks this thread as running a kernel of the library whose fault entry is `fault` until
/// the returned guard drops.
pub(crate) fn in_kernel(fault: FaultFn) -> InKernel {
    IN_KERNEL.with(|k| k.set(Some(fault)));
    InKernel
}

pub(crate) struct InKernel;

impl Drop for InKernel {
    fn drop(&mut self) {
        IN_KERNEL.with(|k| k.set(None));
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_variable_s_values_parse_and_a_mistake_names_the_word() {
        assert_eq!(Checks::parse("1"), Ok(Checks::ALL));
        assert_eq!(Checks::parse(" ALL "), Ok(Checks::ALL));
        assert_eq!(Checks::parse(""), Ok(Checks::NONE));
        assert_eq!(Checks::parse("off"), Ok(Checks::NONE));
        assert_eq!(
            Checks::parse("races, init=report"),
            Ok(Checks {
                races: true,
                initialization: InitCheck::Report,
                bounds: false,
            })
        );
        let e = Checks::parse("races,bound").unwrap_err();
        assert!(e.contains("`bound` is not a check"), "{e}");
        // The shim's bits (`kCheck*` in shim.hpp).
        assert_eq!(Checks::ALL.bits(), 1 | 2 | 4);
        assert_eq!(Checks::parse("init=report").unwrap().bits(), 2 | 8);
        assert!(!Checks::NONE.any());
    }

    #[test]
    fn a_static_variable_s_symbol_gives_its_source_name() {
        assert_eq!(demangle_static("_ZL7partial"), "partial");
        assert_eq!(demangle_static("_ZZ9block_sumE7partial"), "partial");
        assert_eq!(demangle_static("tile"), "tile");
    }

    #[test]
    fn an_array_type_s_name_gives_its_outermost_length() {
        assert_eq!(fixed_length("'float [16]'"), Some(16));
        assert_eq!(fixed_length("'float [2][3]'"), Some(2));
        assert_eq!(fixed_length("'const int [0]'"), Some(0));
        assert_eq!(fixed_length("'float *'"), None);
        assert_eq!(fixed_length("'float []'"), None);
    }

    #[test]
    fn a_scoped_guard_sets_this_thread_s_checks_and_restores_them() {
        let before = current();
        {
            let _g = scoped(Checks::ALL);
            assert_eq!(current(), Ok(Checks::ALL));
            {
                let _h = scoped(Checks::NONE);
                assert_eq!(current(), Ok(Checks::NONE));
            }
            assert_eq!(current(), Ok(Checks::ALL));
            assert!(tracks_initialization());
        }
        assert_eq!(current(), before);
    }
}
