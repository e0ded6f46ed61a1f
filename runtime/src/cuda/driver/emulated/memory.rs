//! Emulated device memory: device pointers are host addresses, each allocation is fenced so that
//! a kernel's mistakes fail loudly instead of passing.
//!
//! - Every allocation gets its own mapping with an inaccessible guard page before and after it,
//!   and ends exactly where the trailing guard page starts: reading or writing one element past
//!   the end (or far before the start) faults (`SIGSEGV`), which the launch reports naming the
//!   allocation ([`locate`]). The start is therefore aligned to the largest power of two dividing
//!   the size (the element size, for an array); the bytes between the first page's start and it
//!   are caught by the sanitizer's bounds check.
//! - Fresh memory is filled with [`POISON`] bytes: NaN in every float type, -1 in every integer
//!   type, an invalid `bool`. An output a kernel forgets to write shows up.
//! - Freed memory is made inaccessible and its pages are handed back; the address range stays
//!   reserved for a while (a quarantine), so a use after free faults rather than reading the
//!   next allocation.
//! - Copies and GEMM operands are checked against the allocation they address.
//! - For the sanitizer's initialization check, an allocation made while it is on keeps a bit a
//!   byte: written since it was made ([`mark_written`], [`mark_all_written`], and the checked
//!   kernels themselves through [`extent`]), until its thread launches a kernel without checks
//!   ([`unchecked_launch`]), which may write it through a pointer stored in memory.

use std::collections::{BTreeMap, VecDeque};
use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};
use std::sync::{Arc, Mutex, OnceLock, PoisonError};

use crate::cuda::driver::types::{DevicePtr, DriverResult};

/// The byte fresh allocations are filled with.
pub(crate) const POISON: u8 = 0xff;

/// Freed ranges kept reserved (inaccessible) before their addresses may be reused.
const QUARANTINE: usize = 4096;

struct Allocation {
    /// The mapping (guard pages included).
    base: usize,
    map_len: usize,
    bytes: usize,
    ordinal: usize,
    /// Which bytes were written, when the initialization check was on as it was made; `None`:
    /// not tracked (counts as written).
    written: Option<Written>,
}

/// A bit a byte of an allocation: written since it was made (by a kernel, copy or memset).
struct Written {
    bits: Box<[AtomicU64]>,
    /// The launches without checks of the thread that made the allocation, and their number
    /// when it was made: once that thread has launched a kernel without checks, which may have
    /// written any byte of the allocation through a pointer stored in memory, the bits no
    /// longer say what was written and every byte counts as written.
    maker: Arc<AtomicU64>,
    made_at: u64,
}

impl Allocation {
    /// Its written bits while they say which bytes were written (see [`Written::maker`]).
    fn written_bits(&self) -> Option<&[AtomicU64]> {
        let w = self.written.as_ref()?;
        (w.maker.load(Ordering::SeqCst) == w.made_at).then_some(&*w.bits)
    }
}

thread_local! {
    /// This thread's launches without checks while some allocation tracked its written bytes.
    static UNCHECKED_LAUNCHES: Arc<AtomicU64> = Arc::new(AtomicU64::new(0));
}

/// Notes that this thread launches a kernel without checks. What it writes is not known: the
/// allocations it receives are marked written by the caller ([`mark_all_written`]), and every
/// allocation this thread made before counts as written from now on, as the kernel may reach
/// any of them through a pointer stored in memory (the thread that made an allocation is the
/// one that ordinarily hands its address around). Costs nothing per allocation.
pub(crate) fn unchecked_launch() {
    if TRACKING.load(Ordering::Relaxed) {
        // A thread whose thread-locals are being destroyed has no allocations left to mark.
        let _ = UNCHECKED_LAUNCHES.try_with(|n| n.fetch_add(1, Ordering::SeqCst));
    }
}

#[derive(Default)]
struct State {
    live: BTreeMap<DevicePtr, Allocation>,
    live_bytes: usize,
    quarantine: VecDeque<(usize, usize)>,
}

fn state() -> &'static Mutex<State> {
    static STATE: OnceLock<Mutex<State>> = OnceLock::new();
    STATE.get_or_init(Default::default)
}

fn lock() -> std::sync::MutexGuard<'static, State> {
    state().lock().unwrap_or_else(PoisonError::into_inner)
}

pub(crate) fn page_size() -> usize {
    static PAGE: OnceLock<usize> = OnceLock::new();
    // SAFETY: sysconf has no preconditions.
    *PAGE.get_or_init(|| {
        usize::try_from(unsafe { libc::sysconf(libc::_SC_PAGESIZE) }).unwrap_or(4096)
    })
}

/// The most the emulated devices of a process may hold together: half the host's memory.
pub(crate) fn capacity() -> usize {
    static CAPACITY: OnceLock<usize> = OnceLock::new();
    *CAPACITY.get_or_init(|| {
        // SAFETY: sysconf has no preconditions.
        let pages = unsafe { libc::sysconf(libc::_SC_PHYS_PAGES) };
        usize::try_from(pages)
            .ok()
            .and_then(|p| p.checked_mul(page_size()))
            .map_or(8 << 30, |total| total / 2)
    })
}

/// `bytes` fresh, poisoned bytes on emulated device `ordinal`.
pub(crate) fn alloc(ordinal: usize, bytes: usize) -> DriverResult<DevicePtr> {
    let page = page_size();
    let too_big = || {
        format!(
            "CUDA_ERROR_OUT_OF_MEMORY: the emulated cuda:{ordinal} cannot allocate {bytes} bytes \
             (the emulated devices may hold {} bytes together, half of this host's memory)",
            capacity()
        )
    };
    let data = bytes.checked_next_multiple_of(page).ok_or_else(too_big)?;
    let map_len = data.checked_add(2 * page).ok_or_else(too_big)?;
    {
        let s = lock();
        if s.live_bytes.saturating_add(bytes) > capacity() {
            return Err(too_big());
        }
    }
    // SAFETY: a fresh anonymous mapping; nothing else refers to it.
    let base = unsafe {
        libc::mmap(
            std::ptr::null_mut(),
            map_len,
            libc::PROT_NONE,
            libc::MAP_PRIVATE | libc::MAP_ANONYMOUS | libc::MAP_NORESERVE,
            -1,
            0,
        )
    };
    if base == libc::MAP_FAILED {
        return Err(too_big());
    }
    let base = base as usize;
    // SAFETY: the data pages lie inside the mapping just made.
    let ok = unsafe {
        libc::mprotect(
            (base + page) as *mut libc::c_void,
            data,
            libc::PROT_READ | libc::PROT_WRITE,
        )
    } == 0;
    if !ok {
        // SAFETY: the mapping was made above and is not used.
        unsafe { libc::munmap(base as *mut libc::c_void, map_len) };
        return Err(too_big());
    }
    let start = base + page + data - bytes;
    // SAFETY: `start..start + bytes` lies in the writable data pages.
    unsafe { std::ptr::write_bytes(start as *mut u8, POISON, bytes) };
    // A thread whose thread-locals are being destroyed makes untracked memory.
    let maker = super::checks::tracks_initialization()
        .then(|| UNCHECKED_LAUNCHES.try_with(Arc::clone).ok())
        .flatten();
    let written = maker.map(|maker| {
        TRACKING.store(true, Ordering::Relaxed);
        Written {
            bits: (0..bytes.div_ceil(64)).map(|_| AtomicU64::new(0)).collect(),
            made_at: maker.load(Ordering::SeqCst),
            maker,
        }
    });
    let mut s = lock();
    s.live_bytes += bytes;
    s.live.insert(
        start as DevicePtr,
        Allocation {
            base,
            map_len,
            bytes,
            ordinal,
            written,
        },
    );
    Ok(start as DevicePtr)
}

/// Frees an allocation: its pages become inaccessible and go back to the OS; its addresses stay
/// reserved while in the quarantine.
pub(crate) fn free(ptr: DevicePtr) {
    let mut s = lock();
    let Some(a) = s.live.remove(&ptr) else {
        // Freeing what is not allocated: the caller's bug, but never a crash here.
        tracing::error!(target: "kusari::cuda", "emulated device: free of {ptr:#x}, which is not allocated");
        return;
    };
    s.live_bytes -= a.bytes;
    // SAFETY: the mapping belongs to this allocation, which no longer exists.
    unsafe {
        libc::madvise(a.base as *mut libc::c_void, a.map_len, libc::MADV_DONTNEED);
        libc::mprotect(a.base as *mut libc::c_void, a.map_len, libc::PROT_NONE);
    }
    s.quarantine.push_back((a.base, a.map_len));
    while s.quarantine.len() > QUARANTINE {
        if let Some((base, len)) = s.quarantine.pop_front() {
            // SAFETY: a quarantined mapping, unmapped once.
            unsafe { libc::munmap(base as *mut libc::c_void, len) };
        }
    }
}

/// Where `ptr` points: `(the allocation's start, its size, its device)`, when it points into (or
/// just past) a live allocation.
pub(crate) fn find(ptr: DevicePtr) -> Option<(DevicePtr, usize, usize)> {
    let s = lock();
    let (&start, a) = s.live.range(..=ptr).next_back()?;
    (ptr <= start + a.bytes as u64).then_some((start, a.bytes, a.ordinal))
}

/// Checks that `len` bytes at `ptr` lie in one live allocation of device `ordinal`; `what`
/// names the access.
pub(crate) fn check_range(
    ordinal: usize,
    ptr: DevicePtr,
    len: usize,
    what: &str,
) -> DriverResult<()> {
    let Some((start, bytes, owner)) = find(ptr) else {
        return Err(format!(
            "{what}: {ptr:#x} is not memory of any emulated device (a host pointer, or freed)"
        ));
    };
    if owner != ordinal {
        return Err(format!(
            "{what}: {ptr:#x} is memory of cuda:{owner}, not of cuda:{ordinal}"
        ));
    }
    let end = ptr.checked_add(len as u64);
    if end.is_none_or(|end| end > start + bytes as u64) {
        return Err(format!(
            "{what}: {len} bytes at {ptr:#x} overrun its allocation ({bytes} bytes at {start:#x})"
        ));
    }
    Ok(())
}

/// What a checked launch knows of the allocation `ptr` points into (see `Range` in the shim).
pub(crate) struct Extent {
    /// Its first accessible byte (its first page's start).
    pub(crate) lo: u64,
    pub(crate) start: u64,
    pub(crate) end: u64,
    /// Its written bits, or null when not tracked, when its thread has launched a kernel
    /// without checks since it was made, or when every byte is written (then no read of it
    /// needs checking). They live as long as the allocation.
    pub(crate) written: *mut u64,
}

/// The allocation `ptr` points into (or just past), for a checked launch.
pub(crate) fn extent(ptr: DevicePtr) -> Option<Extent> {
    let s = lock();
    let (&start, a) = s.live.range(..=ptr).next_back()?;
    (ptr <= start + a.bytes as u64).then(|| extent_of(start, a))
}

/// The allocation whose accessible bytes (from its first page's start to its end) hold `addr`,
/// for a checked kernel that reached `addr` through a pointer stored in memory.
pub(crate) fn extent_holding(addr: DevicePtr) -> Option<Extent> {
    let s = lock();
    let below = s.live.range(..=addr).next_back();
    let above = s.live.range(addr..).next();
    match (below, above) {
        (Some((&start, a)), _) if addr < start + a.bytes as u64 => Some(extent_of(start, a)),
        (_, Some((&start, a))) if (a.base + page_size()) as u64 <= addr => {
            Some(extent_of(start, a))
        }
        _ => None,
    }
}

fn extent_of(start: DevicePtr, a: &Allocation) -> Extent {
    Extent {
        lo: (a.base + page_size()) as u64,
        start,
        end: start + a.bytes as u64,
        written: match a.written_bits() {
            Some(w) if !all_set(w, a.bytes) => w.as_ptr() as *mut u64,
            _ => std::ptr::null_mut(),
        },
    }
}

/// Whether the first `bytes` bits of `bits` are all set.
fn all_set(bits: &[AtomicU64], bytes: usize) -> bool {
    let full = bytes / 64;
    bits[..full]
        .iter()
        .all(|w| w.load(Ordering::Relaxed) == u64::MAX)
        && (bytes.is_multiple_of(64) || {
            let mask = (1u64 << (bytes % 64)) - 1;
            bits[full].load(Ordering::Relaxed) & mask == mask
        })
}

/// Whether an allocation has ever tracked its written bytes: until one has, marking them (at
/// every copy, memset and unchecked launch) takes no lock.
static TRACKING: AtomicBool = AtomicBool::new(false);

/// Records `len` bytes at `ptr` as written (a copy, a memset, an unchecked kernel's output).
pub(crate) fn mark_written(ptr: DevicePtr, len: usize) {
    if !TRACKING.load(Ordering::Relaxed) {
        return;
    }
    let s = lock();
    let Some((&start, a)) = s.live.range(..=ptr).next_back() else {
        return;
    };
    let Some(bits) = a.written_bits() else {
        return;
    };
    let from = (ptr - start) as usize;
    let to = (from + len).min(a.bytes);
    for i in from..to {
        if i % 64 == 0 && i + 64 <= to {
            bits[i / 64].store(u64::MAX, Ordering::Relaxed);
        } else {
            bits[i / 64].fetch_or(1 << (i % 64), Ordering::Relaxed);
        }
    }
}

/// Records the whole allocation `ptr` points into as written: an unchecked launch received it,
/// and what it wrote is not known.
pub(crate) fn mark_all_written(ptr: DevicePtr) {
    if !TRACKING.load(Ordering::Relaxed) {
        return;
    }
    let s = lock();
    if let Some((&start, a)) = s.live.range(..=ptr).next_back()
        && ptr <= start + a.bytes as u64
        && let Some(bits) = a.written_bits()
    {
        for w in bits.iter() {
            w.store(u64::MAX, Ordering::Relaxed);
        }
    }
}

/// Where `addr` lies, for a fault's report: in or around a live allocation (its guard pages and
/// the gap before its first byte included), or in a freed one.
pub(crate) fn locate(addr: u64) -> Option<String> {
    let s = lock();
    let page = page_size() as u64;
    for (&start, a) in s.live.range(..=addr.saturating_add(2 * page)).rev().take(4) {
        let (base, map_end) = (a.base as u64, (a.base + a.map_len) as u64);
        if addr < base || addr >= map_end {
            continue;
        }
        let end = start + a.bytes as u64;
        let whose = format!(
            "the allocation of {} bytes at {start:#x} (cuda:{})",
            a.bytes, a.ordinal
        );
        return Some(if addr < start {
            format!("{} bytes before {whose}", start - addr)
        } else if addr >= end {
            format!(
                "byte {} of {whose}, {} past its end",
                addr - start,
                addr - end + 1
            )
        } else {
            format!("byte {} of {whose}", addr - start)
        });
    }
    s.quarantine
        .iter()
        .any(|&(base, len)| addr >= base as u64 && addr < (base + len) as u64)
        .then(|| "memory that was freed (a use after free)".to_string())
}

/// Bytes the emulated devices hold now.
pub(crate) fn live_bytes() -> usize {
    lock().live_bytes
}
