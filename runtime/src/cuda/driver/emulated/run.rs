//! Loading a compiled kernel library and running a launch: every block and thread of the grid,
//! following CUDA's semantics.
//!
//! - The grid's blocks are shared out among the host's cores; each block runs on one host thread
//!   from start to end, so `__shared__` memory is per block.
//! - A block's threads run one after another, in one loop with the kernel inlined. In a module
//!   that uses `__syncthreads` or warp intrinsics that loop runs on a runner (a stack of its own,
//!   switched by the shim); a thread that waits keeps the runner as its fiber, the next starts
//!   on another, so the barrier is real — every thread of the block reaches it before any goes
//!   on — and a barrier that some threads of a block skip is an error, as it is undefined in
//!   CUDA, while threads that never wait cost no switch.
//! - Before running, the launch is checked as the GPU would (block and grid limits), and beyond:
//!   the number of parameters, the width each was packed in against the width the kernel reads,
//!   and that every pointer parameter addresses memory of the launching device.

use std::ffi::{CStr, CString, c_char, c_int, c_void};
use std::sync::{Arc, Mutex, OnceLock, PoisonError};

use rayon::prelude::*;

use super::checks::{self, Checks, FaultFn, ImageFile, ReportDesc};
use super::memory;
use crate::cuda::driver::types::DriverResult;

/// The launch description the shim reads (`kusari_emu::Launch` in `shim.hpp`).
#[repr(C)]
struct LaunchDesc {
    grid: [u32; 3],
    block: [u32; 3],
    first_block: u64,
    end_block: u64,
    fibers: c_int,
    error: *mut c_char,
    error_len: usize,
    shared_bytes: u64,
    stacks: *const *mut c_void,
    stack_bytes: u64,
    checks: u32,
    nranges: u32,
    ranges: *const RangeDesc,
    reports: *mut ReportDesc,
    report_cap: u32,
    report_count: u32,
    /// For a checked launch, the live allocation holding an address the parameters' ranges do
    /// not (one the kernel reached through a pointer stored in memory).
    lookup: Option<unsafe extern "C" fn(u64, *mut RangeDesc) -> c_int>,
    /// For a checked launch, the bytes of race shadow it may map ([`checks::shadow_budget`]).
    shadow_budget: u64,
}

/// `LaunchDesc::lookup`: writes the range of the live allocation whose accessible bytes hold
/// `address` to `out`, and returns 1, or returns 0 when no allocation holds it.
///
/// # Safety
/// `out` must be valid for a write of a `RangeDesc`.
unsafe extern "C" fn lookup_allocation(address: u64, out: *mut RangeDesc) -> c_int {
    let Some(e) = memory::extent_holding(address) else {
        return 0;
    };
    let range = RangeDesc {
        lo: e.lo,
        start: e.start,
        end: e.end,
        written: e.written,
        param: checks::REACHED,
        readonly: 0,
    };
    // SAFETY: the caller's contract.
    unsafe { out.write(range) };
    1
}

/// An allocation a pointer parameter addresses (`kusari_emu::Range` in `shim.hpp`).
#[repr(C)]
#[derive(Clone, Copy, Debug)]
struct RangeDesc {
    lo: u64,
    start: u64,
    end: u64,
    written: *mut u64,
    param: c_int,
    /// Every parameter that points into it is a pointer to const.
    readonly: c_int,
}

// SAFETY: `written` points at an allocation's written bits, which the shim updates with atomic
// operations only; the allocation outlives the launch.
unsafe impl Send for RangeDesc {}
// SAFETY: as above.
unsafe impl Sync for RangeDesc {}

/// The findings a checked launch keeps (in report mode; a failing check stops at the first).
const REPORTS: usize = 16;

/// The size of each fiber stack (a thread of a block with barriers), and of the inaccessible
/// guard below it, which turns an overflow into a fault rather than a neighbour's corruption.
const FIBER_STACK: usize = 256 * 1024;
const GUARD: usize = 4096;

/// The fiber stacks of one host thread, shared by every kernel library that thread runs (a
/// library has none of its own, so that many loaded kernels cost no memory mappings), grown to
/// the largest block it ran and unmapped when the thread ends.
struct FiberStacks(Vec<*mut c_void>);

impl FiberStacks {
    /// At least `n` stacks, or `None` when the host is out of memory or mappings.
    fn at_least(&mut self, n: usize) -> Option<*const *mut c_void> {
        while self.0.len() < n {
            // SAFETY: a fresh private anonymous mapping; nothing else refers to it.
            let mem = unsafe {
                libc::mmap(
                    std::ptr::null_mut(),
                    GUARD + FIBER_STACK,
                    libc::PROT_READ | libc::PROT_WRITE,
                    libc::MAP_PRIVATE | libc::MAP_ANONYMOUS | libc::MAP_NORESERVE,
                    -1,
                    0,
                )
            };
            if mem == libc::MAP_FAILED {
                return None;
            }
            // SAFETY: the first page of the mapping just made.
            unsafe { libc::mprotect(mem, GUARD, libc::PROT_NONE) };
            // SAFETY: within the mapping.
            self.0.push(unsafe { mem.cast::<u8>().add(GUARD) }.cast());
        }
        Some(self.0.as_ptr())
    }
}

impl Drop for FiberStacks {
    fn drop(&mut self) {
        for &stack in &self.0 {
            // SAFETY: each stack was mapped by `at_least`, `GUARD` bytes into its mapping, and
            // no fiber runs on it any more: its thread is ending.
            unsafe { libc::munmap(stack.cast::<u8>().sub(GUARD).cast(), GUARD + FIBER_STACK) };
        }
    }
}

/// How many fiber stacks this thread holds.
#[cfg(test)]
pub(crate) fn fiber_stacks_of_this_thread() -> usize {
    FIBER_STACKS.with(|s| s.borrow().0.len())
}

thread_local! {
    static FIBER_STACKS: std::cell::RefCell<FiberStacks> =
        const { std::cell::RefCell::new(FiberStacks(Vec::new())) };
}

type LaunchFn = unsafe extern "C" fn(*mut *mut c_void, *mut LaunchDesc) -> c_int;
type CountFn = unsafe extern "C" fn() -> u32;
type DescribeFn = unsafe extern "C" fn(*mut u64, *mut c_int);

/// A loaded kernel library. It stays loaded for the life of the process (as modules in the
/// upload cache do).
pub(crate) struct Library {
    handle: *mut c_void,
    uses_barriers: bool,
    fault: FaultFn,
    /// The unit it was built from (`kusari_emu_unit`), for its checked build; none in a
    /// checked build.
    unit: Option<String>,
    /// Its checked build, made at the first checked launch.
    checked: OnceLock<Result<Arc<Library>, String>>,
    /// A checked build's image (for `addr2line`), and the lock that runs its launches one at a
    /// time (its dynamic shared memory is one buffer).
    image: Option<Arc<Vec<u8>>>,
    one_at_a_time: Mutex<()>,
}

// SAFETY: the handle is only used to look up symbols, which `dlsym` allows from any thread.
unsafe impl Send for Library {}
// SAFETY: as above.
unsafe impl Sync for Library {}

fn dl_error() -> String {
    // SAFETY: dlerror returns NULL or a NUL-terminated message owned by the C library.
    let e = unsafe { libc::dlerror() };
    if e.is_null() {
        "unknown dynamic-loader error".to_string()
    } else {
        // SAFETY: non-null, NUL-terminated (see above).
        unsafe { CStr::from_ptr(e) }.to_string_lossy().into_owned()
    }
}

/// The symbol `name` of the loaded library `handle`.
fn dl_symbol(handle: *mut c_void, name: &str) -> DriverResult<*mut c_void> {
    let c = CString::new(name).map_err(|_| format!("`{name}` contains a NUL byte"))?;
    // SAFETY: a live handle and a NUL-terminated name.
    let p = unsafe { libc::dlsym(handle, c.as_ptr()) };
    if p.is_null() {
        Err(format!("CUDA_ERROR_NOT_FOUND: no `{name}` in the module"))
    } else {
        Ok(p)
    }
}

impl Library {
    /// Loads a library [`super::compile_cached`] made.
    pub(crate) fn load(image: &[u8]) -> DriverResult<Arc<Library>> {
        Self::load_as(image, None)
    }

    /// Loads a library; `checked_image` is the image itself when it is a checked build.
    fn load_as(image: &[u8], checked_image: Option<Arc<Vec<u8>>>) -> DriverResult<Arc<Library>> {
        use std::sync::atomic::{AtomicUsize, Ordering};
        static N: AtomicUsize = AtomicUsize::new(0);
        let path = std::env::temp_dir().join(format!(
            "kusari-emu-{}-module-{}.so",
            std::process::id(),
            N.fetch_add(1, Ordering::Relaxed)
        ));
        std::fs::write(&path, image)
            .map_err(|e| format!("cannot write the kernel library to {}: {e}", path.display()))?;
        let c_path = CString::new(path.to_string_lossy().as_bytes())
            .map_err(|_| "the temporary directory's path contains a NUL byte".to_string())?;
        // SAFETY: a path to a library this process just wrote; its initialisers only set up
        // the shim's thread-local state.
        let handle = unsafe { libc::dlopen(c_path.as_ptr(), libc::RTLD_NOW | libc::RTLD_LOCAL) };
        let loaded = if handle.is_null() {
            Err(format!("cannot load the kernel library: {}", dl_error()))
        } else {
            Ok(())
        };
        // The mapping outlives the file.
        let _ = std::fs::remove_file(&path);
        loaded?;
        let lookup = |name: &str| dl_symbol(handle, name);
        // SAFETY: the symbol is the `int` the compiler module defined; the library stays loaded.
        let uses_barriers = unsafe { *lookup("kusari_emu_uses_barriers")?.cast::<c_int>() } != 0;
        // SAFETY: the shim's `kusari_emu_fault`, of this signature.
        let fault =
            unsafe { std::mem::transmute::<*mut c_void, FaultFn>(lookup("kusari_emu_fault")?) };
        let unit = match checked_image {
            Some(_) => None,
            // SAFETY: the NUL-terminated text `with_own_source` appended.
            None => Some(
                unsafe { CStr::from_ptr(lookup("kusari_emu_unit")?.cast::<c_char>()) }
                    .to_string_lossy()
                    .into_owned(),
            ),
        };
        Ok(Arc::new(Library {
            handle,
            uses_barriers,
            fault,
            unit,
            checked: OnceLock::new(),
            image: checked_image,
            one_at_a_time: Mutex::new(()),
        }))
    }

    /// This library's checked build, compiled (through the cache) and loaded at its first use.
    fn checked(&self) -> Result<Arc<Library>, String> {
        self.checked
            .get_or_init(|| {
                let unit = self
                    .unit
                    .as_deref()
                    .ok_or_else(|| "a checked build has no checked build".to_string())?;
                let image =
                    super::compile::compile_checked(unit, crate::cuda::driver::global_cache())?;
                Library::load_as(&image, Some(image.clone())).map_err(|e| {
                    format!(
                        "the checked build of the kernel does not load ({e}); the checks follow \
                         CUDA's own atomic functions, not the host compiler's atomic builtins"
                    )
                })
            })
            .clone()
    }

    /// # Safety
    /// `T` is the symbol's type.
    unsafe fn symbol<T>(&self, name: &str) -> DriverResult<*mut T> {
        dl_symbol(self.handle, name).map(<*mut c_void>::cast)
    }

    /// The kernel `name`, with what it says of its parameters.
    pub(crate) fn kernel(self: &Arc<Self>, name: &str) -> DriverResult<Kernel> {
        let missing = |e: String| {
            if e.starts_with("CUDA_ERROR_NOT_FOUND") {
                format!("CUDA_ERROR_NOT_FOUND: the module has no kernel named `{name}`")
            } else {
                e
            }
        };
        // SAFETY: the three symbols are the functions KUSARI_EMU_ENTRY defines, with these
        // signatures.
        let (launch, count, describe) = unsafe {
            (
                std::mem::transmute::<*mut c_void, LaunchFn>(
                    self.symbol(&format!("kusari_emu_launch_{name}"))
                        .map_err(missing)?,
                ),
                std::mem::transmute::<*mut c_void, CountFn>(
                    self.symbol(&format!("kusari_emu_param_count_{name}"))
                        .map_err(missing)?,
                ),
                std::mem::transmute::<*mut c_void, DescribeFn>(
                    self.symbol(&format!("kusari_emu_params_{name}"))
                        .map_err(missing)?,
                ),
            )
        };
        // SAFETY: the functions take nothing / write `count` entries to each array.
        let n = unsafe { count() } as usize;
        let mut sizes = vec![0u64; n];
        let mut pointers = vec![0 as c_int; n];
        // SAFETY: both arrays have room for the `n` entries written.
        unsafe { describe(sizes.as_mut_ptr(), pointers.as_mut_ptr()) };
        Ok(Kernel {
            name: name.to_string(),
            launch,
            sizes: sizes.into_iter().map(|s| s as usize).collect(),
            kinds: pointers
                .into_iter()
                .map(|p| match p {
                    0 => ParamKind::Value,
                    1 => ParamKind::Pointer,
                    _ => ParamKind::ConstPointer,
                })
                .collect(),
            library: self.clone(),
            checked: OnceLock::new(),
        })
    }
}

/// What a kernel declares a parameter to be (`pointer_kind` in `shim.hpp`).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
enum ParamKind {
    Value,
    Pointer,
    /// A pointer to const (`const T*`): the kernel does not write through it.
    ConstPointer,
}

/// A kernel of a loaded library.
pub(crate) struct Kernel {
    name: String,
    launch: LaunchFn,
    /// Each parameter's size as the kernel declares it.
    sizes: Vec<usize>,
    /// What each parameter is.
    kinds: Vec<ParamKind>,
    library: Arc<Library>,
    /// The same kernel in the library's checked build.
    checked: OnceLock<Result<Box<Kernel>, String>>,
}

/// The dynamic shared memory a block may have: CUDA's default limit (48 KiB), which a kernel
/// raises on a GPU with `cudaFuncSetAttribute` (not emulated). The shim's per-thread buffer has
/// this size (`kMaxDynamicShared` in `shim.hpp`).
const MAX_DYNAMIC_SHARED: u32 = kusari_kernels::raw::MAX_DYNAMIC_SHARED_BYTES as u32;

/// CUDA's limits on a launch (those of compute capability 9.0).
fn check_dims(grid: [u32; 3], block: [u32; 3], shared_bytes: u32) -> DriverResult<()> {
    let threads = u64::from(block[0]) * u64::from(block[1]) * u64::from(block[2]);
    if block.contains(&0) || grid.contains(&0) {
        return Err(format!(
            "CUDA_ERROR_INVALID_VALUE: grid {grid:?} and block {block:?} must have no zero dimension"
        ));
    }
    if threads > 1024 || block[0] > 1024 || block[1] > 1024 || block[2] > 64 {
        return Err(format!(
            "CUDA_ERROR_INVALID_VALUE: block {block:?} exceeds the limits (1024 threads, 1024 x 1024 x 64)"
        ));
    }
    if grid[0] > i32::MAX as u32 || grid[1] > 65535 || grid[2] > 65535 {
        return Err(format!(
            "CUDA_ERROR_INVALID_VALUE: grid {grid:?} exceeds the limits (2^31-1 x 65535 x 65535)"
        ));
    }
    if shared_bytes > MAX_DYNAMIC_SHARED {
        return Err(format!(
            "CUDA_ERROR_INVALID_VALUE: {shared_bytes} bytes of dynamic shared memory exceed the \
             {MAX_DYNAMIC_SHARED} bytes a block has"
        ));
    }
    Ok(())
}

/// The launch's parameters, shared read-only by the host threads that run its blocks.
struct Params(*mut *mut c_void);
// SAFETY: the kernel only reads the parameter values, which outlive the launch.
unsafe impl Sync for Params {}
// SAFETY: as above.
unsafe impl Send for Params {}

impl Kernel {
    /// Checks the packed parameters against the kernel's declaration.
    ///
    /// # Safety
    /// Each `params[i]` points at `sizes[i]` readable bytes.
    unsafe fn check_params(
        &self,
        ordinal: usize,
        params: &[*mut c_void],
        sizes: &[usize],
    ) -> DriverResult<()> {
        let name = &self.name;
        if params.len() != self.sizes.len() || sizes.len() != params.len() {
            return Err(format!(
                "CUDA_ERROR_INVALID_VALUE: kernel {name} takes {} parameters but the launch passed {}",
                self.sizes.len(),
                params.len()
            ));
        }
        for (i, ((&declared, &packed), &kind)) in
            self.sizes.iter().zip(sizes).zip(&self.kinds).enumerate()
        {
            if declared != packed {
                return Err(format!(
                    "kernel {name}: parameter {i} is {declared} bytes wide on the device, but the \
                     launch packed {packed} bytes (a parameter of the wrong width)"
                ));
            }
            if kind != ParamKind::Value {
                // SAFETY: a pointer parameter was packed in 8 bytes (checked above).
                let p = unsafe { params[i].cast::<u64>().read_unaligned() };
                if p != 0 {
                    memory::check_range(ordinal, p, 0, &format!("kernel {name}: parameter {i}"))?;
                }
            }
        }
        Ok(())
    }

    /// This kernel in its library's checked build.
    fn checked(&self) -> Result<&Kernel, String> {
        self.checked
            .get_or_init(|| {
                let lib = self.library.checked()?;
                lib.kernel(&self.name).map(Box::new)
            })
            .as_deref()
            .map_err(|e| format!("kernel {}: {e}", self.name))
    }

    /// Runs the whole grid on emulated device `ordinal`, with this thread's checks.
    ///
    /// # Safety
    /// See [`crate::cuda::driver::Backend::launch`].
    pub(crate) unsafe fn run(
        &self,
        ordinal: usize,
        grid: [u32; 3],
        block: [u32; 3],
        shared_bytes: u32,
        params: &mut [*mut c_void],
        sizes: &[usize],
    ) -> DriverResult<()> {
        check_dims(grid, block, shared_bytes)?;
        // SAFETY: forwarded contract.
        unsafe { self.check_params(ordinal, params, sizes) }?;
        let checks = checks::current()?;
        checks::install_fault_handler();
        let pointers: Vec<(usize, u64)> = self
            .kinds
            .iter()
            .enumerate()
            .filter(|&(_, &kind)| kind != ParamKind::Value)
            // SAFETY: a pointer parameter was packed in 8 bytes (checked above).
            .map(|(i, _)| (i, unsafe { params[i].cast::<u64>().read_unaligned() }))
            .filter(|&(_, p)| p != 0)
            .collect();
        if !checks.any() {
            // What an unchecked kernel writes is not known: its allocations count as written,
            // and so does every allocation this thread made (reachable through pointers
            // stored in memory).
            memory::unchecked_launch();
            for &(_, p) in &pointers {
                memory::mark_all_written(p);
            }
            // SAFETY: forwarded contract.
            return unsafe { self.run_with(grid, block, shared_bytes, params, None) };
        }
        let checked = self.checked()?;
        let _one = checked
            .library
            .one_at_a_time
            .lock()
            .unwrap_or_else(PoisonError::into_inner);
        // The allocations the pointer parameters address, each once, in address order; one
        // that only pointers to const address is read-only for the launch.
        let mut ranges: Vec<RangeDesc> = Vec::new();
        for &(i, p) in &pointers {
            let readonly = c_int::from(self.kinds[i] == ParamKind::ConstPointer);
            if let Some(r) = ranges.iter_mut().find(|r| r.start <= p && p <= r.end) {
                r.readonly &= readonly;
            } else if let Some(e) = memory::extent(p) {
                ranges.push(RangeDesc {
                    lo: e.lo,
                    start: e.start,
                    end: e.end,
                    written: e.written,
                    param: i as c_int,
                    readonly,
                });
            }
        }
        ranges.sort_by_key(|r| r.lo);
        let setup = CheckedLaunch {
            checks,
            ranges: &ranges,
        };
        // SAFETY: forwarded contract; the allocations stay live for the launch (its caller
        // holds them).
        unsafe { checked.run_with(grid, block, shared_bytes, params, Some(setup)) }
    }

    /// Runs the grid: spread over the host's cores, or, checked, on this thread alone.
    ///
    /// # Safety
    /// See [`crate::cuda::driver::Backend::launch`].
    unsafe fn run_with(
        &self,
        grid: [u32; 3],
        block: [u32; 3],
        shared_bytes: u32,
        params: &mut [*mut c_void],
        checked: Option<CheckedLaunch<'_>>,
    ) -> DriverResult<()> {
        let blocks = u64::from(grid[0]) * u64::from(grid[1]) * u64::from(grid[2]);
        let workers = match checked {
            Some(_) => 1,
            None => crate::cpu::threads::count().clamp(1, 64) as u64,
        };
        let chunks = workers.min(blocks);
        let per = blocks.div_ceil(chunks);
        let shared = Params(params.as_mut_ptr());
        let fibers = c_int::from(self.library.uses_barriers);
        let fault = self.library.fault;
        let run_chunk = |c: u64| -> Option<String> {
            let first = c * per;
            let end = (first + per).min(blocks);
            if first >= end {
                return None;
            }
            let mut error = [0 as c_char; 512];
            let mut reports = [ReportDesc::default(); REPORTS];
            let threads = (block[0] * block[1] * block[2]) as usize;
            let stacks = match fibers != 0 {
                true => match FIBER_STACKS.with(|s| s.borrow_mut().at_least(threads)) {
                    Some(p) => p,
                    None => return Some("out of host memory for the block's threads".to_string()),
                },
                false => std::ptr::null(),
            };
            let (bits, ranges) = checked
                .as_ref()
                .map_or((0, &[][..]), |c| (c.checks.bits(), c.ranges));
            let mut desc = LaunchDesc {
                grid,
                block,
                first_block: first,
                end_block: end,
                fibers,
                error: error.as_mut_ptr(),
                error_len: error.len(),
                shared_bytes: u64::from(shared_bytes),
                stacks,
                stack_bytes: FIBER_STACK as u64,
                checks: bits,
                nranges: ranges.len() as u32,
                ranges: ranges.as_ptr(),
                reports: reports.as_mut_ptr(),
                report_cap: if checked.is_some() { REPORTS as u32 } else { 1 },
                report_count: 0,
                lookup: checked.is_some().then_some(lookup_allocation as _),
                shadow_budget: if checked.is_some() {
                    checks::shadow_budget()
                } else {
                    0
                },
            };
            let shared = &shared;
            let failed = {
                let _in_kernel = checks::in_kernel(fault);
                // SAFETY: the entry point reads each parameter with its declared type (the
                // widths were checked), runs the blocks `first..end`, and writes at most
                // `error_len` bytes of message and `report_cap` reports.
                unsafe { (self.launch)(shared.0, &mut desc) != 0 }
            };
            let found = &reports[..desc.report_count as usize];
            self.explain(found, failed, shared_bytes, checked.as_ref(), || {
                // SAFETY: the shim wrote a NUL-terminated message within the buffer.
                unsafe { CStr::from_ptr(error.as_ptr()) }
                    .to_string_lossy()
                    .into_owned()
            })
        };
        let failure = if chunks == 1 {
            run_chunk(0)
        } else {
            (0..chunks).into_par_iter().find_map_any(run_chunk)
        };
        match failure {
            None => Ok(()),
            Some(msg) => Err(msg),
        }
    }

    /// The error of a launch that failed, from what the shim reported; findings of report mode
    /// are kept and do not fail it.
    fn explain(
        &self,
        found: &[ReportDesc],
        failed: bool,
        shared_bytes: u32,
        checked: Option<&CheckedLaunch<'_>>,
        message: impl FnOnce() -> String,
    ) -> Option<String> {
        if found.is_empty() {
            return failed.then(|| format!("kernel {}: {}", self.name, message()));
        }
        let image = self
            .library
            .image
            .as_deref()
            .and_then(|i| ImageFile::write(i));
        let place = |addr: u64| fault_place(addr, shared_bytes);
        let texts: Vec<String> = found
            .iter()
            .map(|r| checks::describe(&self.name, r, image.as_ref(), shared_bytes, place))
            .collect();
        let report_mode =
            checked.is_some_and(|c| c.checks.initialization == checks::InitCheck::Report);
        let mut error = None;
        for (r, text) in found.iter().zip(texts) {
            if r.what == 6 {
                checks::note_unshadowed(&self.name, r.param, text);
            } else if report_mode && r.what == 2 {
                checks::keep_report(text);
            } else if error.is_none() {
                error = Some(text);
            }
        }
        if error.is_none() && failed {
            error = Some(format!("kernel {}: {}", self.name, message()));
        }
        error
    }
}

/// What a checked launch checks, and the allocations its pointer parameters address.
#[derive(Clone, Copy)]
struct CheckedLaunch<'a> {
    checks: Checks,
    ranges: &'a [RangeDesc],
}

/// Where a faulting address lies, in words.
fn fault_place(addr: u64, shared_bytes: u32) -> String {
    if let Some(place) = memory::locate(addr) {
        return place;
    }
    let page = memory::page_size() as u64;
    let on_a_guard = FIBER_STACKS.with(|s| {
        s.borrow()
            .0
            .iter()
            .any(|&st| addr < st as u64 && addr + GUARD as u64 >= st as u64)
    });
    if on_a_guard {
        return format!(
            "the guard page below the thread's stack: the thread's stack ({} KiB) overflowed \
             (deep recursion, or large local arrays)",
            FIBER_STACK / 1024
        );
    }
    if addr < page {
        return "a null pointer (or an offset from one)".to_string();
    }
    format!(
        "not memory of any emulated device: a host pointer, an uninitialized pointer, or beyond \
         the {shared_bytes} bytes of dynamic shared memory the launch gave"
    )
}
