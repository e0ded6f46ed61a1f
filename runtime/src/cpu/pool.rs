//! A cache of large host buffers, so that a loop that frees and allocates arrays of the same size
//! (every training step does) reuses memory instead of asking the OS for fresh pages.
//!
//! Fresh pages of a large allocation are faulted in and zeroed by the kernel on first touch; on
//! virtual machines that costs several times the arithmetic of an elementwise op. Buffers of at
//! least [`MIN_POOLED_BYTES`] are kept here when their array is dropped, up to a byte limit, and
//! handed out again for the same dtype and length. Smaller buffers go straight to the allocator.
//!
//! The pool keeps no more buffers of one dtype and length than the most that [`alloc`] has had
//! out at once ([`Entry`]): a loop that makes an array from its own `Vec` every step (a batch
//! of input data) drops one more buffer a step than the ops take back, and the pool would
//! otherwise keep every one of them until its byte limit.

use std::any::Any;
use std::collections::HashMap;
use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::{Mutex, OnceLock};

use crate::Device;
use crate::dtype::Element;
use crate::error::Error;
use crate::sync::lock;

/// A host allocation that could not be made: the op and the bytes it asked for. Kept small
/// (the cpu layer returns it beside every buffer); `?` turns it into [`Error::OutOfMemory`].
#[derive(Clone, Copy, Debug)]
pub(crate) struct HostOom {
    op: &'static str,
    bytes: usize,
}

impl From<HostOom> for Error {
    #[cold]
    fn from(e: HostOom) -> Error {
        Error::OutOfMemory {
            op: e.op.to_string(),
            device: Device::Cpu,
            bytes: e.bytes,
        }
    }
}

/// The cpu layer's result: a value, or the allocation that failed.
pub(crate) type Result<T> = std::result::Result<T, HostOom>;

/// Buffers below this size are not cached (the allocator serves them from its free lists).
/// Not higher: glibc's allocator returns a freed buffer of more than its trim threshold (128 KiB
/// at first) to the OS, so that one of 512 KiB freed and asked for again in a loop is faulted in
/// afresh every time (measured: a float64 64K-element division's forward and backward took
/// 1.6 ms so, 0.21 ms with the buffers kept).
pub(crate) const MIN_POOLED_BYTES: usize = 64 << 10;

/// Default cap on cached bytes.
const DEFAULT_LIMIT: usize = 1 << 30;

static LIMIT: AtomicUsize = AtomicUsize::new(DEFAULT_LIMIT);

#[derive(Default)]
struct Pool {
    /// Free buffers and their demand by [`Key`].
    free: HashMap<Key, Entry>,
    bytes: usize,
}

/// A buffer's element type and length.
type Key = (std::any::TypeId, usize);

fn key<T: 'static>(n: usize) -> Key {
    (std::any::TypeId::of::<T>(), n)
}

/// The free buffers of one element type and length, and how many of them the pool's callers
/// need: the pool keeps `bufs.len() + live <= peak`, so that it never holds more buffers of
/// this key than [`alloc`] has had out at once. A buffer dropped beyond that (one the pool did
/// not hand out, or a clone's) goes back to the allocator.
#[derive(Default)]
struct Entry {
    /// Free buffers, each a `Vec<T>` of this key's capacity.
    bufs: Vec<Box<dyn Any + Send>>,
    /// Buffers [`alloc`] has handed out less those dropped since (a dropped buffer counts
    /// whoever allocated it, so this errs low, never high).
    live: usize,
    /// The most `live` has been.
    peak: usize,
}

static POOL: Mutex<Option<Pool>> = Mutex::new(None);

/// An empty `Vec<T>` with capacity for exactly `n` elements, reused from the pool when possible.
///
/// A refused allocation frees the cache and is tried once more before it is an error.
///
/// Fails with [`Error::OutOfMemory`] naming `op` instead of aborting the process: when the size
/// overflows, when it exceeds this machine's memory and swap (where that is known; a request that
/// can never be met is refused before it is tried, whatever the kernel's overcommit policy), or
/// when the allocator refuses it (e.g. under a process memory limit).
pub(crate) fn alloc<T: Copy + Send + 'static>(op: &'static str, n: usize) -> Result<Vec<T>> {
    match n.checked_mul(std::mem::size_of::<T>()) {
        // Small buffers (every op on tiny arrays) take the allocator's fast path: below 64 KiB a
        // refusal means the process is out of memory anyway.
        Some(bytes) if bytes < MIN_POOLED_BYTES => Ok(Vec::with_capacity(n)),
        bytes => alloc_large(op, n, bytes),
    }
}

#[cold]
fn alloc_large<T: Copy + Send + 'static>(
    op: &'static str,
    n: usize,
    bytes: Option<usize>,
) -> Result<Vec<T>> {
    let oom = |bytes: usize| HostOom { op, bytes };
    let bytes = bytes.ok_or_else(|| oom(usize::MAX))?;
    check_host_bytes(op, bytes)?;
    {
        let mut pool = lock(&POOL);
        let p = pool.get_or_insert_with(Pool::default);
        let entry = p.free.entry(key::<T>(n)).or_default();
        entry.live += 1;
        entry.peak = entry.peak.max(entry.live);
        if let Some(buf) = entry.bufs.pop() {
            p.bytes -= bytes;
            if let Ok(v) = buf.downcast::<Vec<T>>() {
                return Ok(*v);
            }
        }
    }
    let mut v = Vec::new();
    if !reserve(&mut v, n) {
        // Nothing was handed out: the demand counted above is taken back.
        if let Some(entry) = lock(&POOL)
            .as_mut()
            .and_then(|p| p.free.get_mut(&key::<T>(n)))
        {
            entry.live = entry.live.saturating_sub(1);
        }
        return Err(oom(bytes));
    }
    Ok(v)
}

/// Reserves exactly `n` elements for the empty `v`; if the allocator refuses, frees the cache
/// (whose buffers are of other lengths) and asks once more.
fn reserve<T>(v: &mut Vec<T>, n: usize) -> bool {
    if v.try_reserve_exact(n).is_ok() {
        return true;
    }
    if cached_bytes() == 0 {
        return false;
    }
    free_cached();
    v.try_reserve_exact(n).is_ok()
}

/// Checks that `bytes` more can be asked of the host (see [`alloc`]), for buffers that are
/// allocated by code kusari does not control.
pub(crate) fn check_host_bytes(op: &'static str, bytes: usize) -> Result<()> {
    if bytes > host_memory_bytes() {
        return Err(HostOom { op, bytes });
    }
    Ok(())
}

/// Checks that `bytes` more could be allocated now, for a library that allocates them itself
/// and aborts if refused: [`check_host_bytes`], then the bytes reserved and released at once
/// (address space only, never touched). Below [`MIN_POOLED_BYTES`] it is skipped, as in
/// [`alloc`]: a refusal of so little means the process is out of memory anyway.
pub(crate) fn probe_host_bytes(op: &'static str, bytes: usize) -> Result<()> {
    if bytes < MIN_POOLED_BYTES {
        return Ok(());
    }
    check_host_bytes(op, bytes)?;
    match reserve(&mut Vec::<u8>::new(), bytes) {
        true => Ok(()),
        false => Err(HostOom { op, bytes }),
    }
}

/// Physical memory plus swap, the most any allocation could get (`usize::MAX` where unknown).
fn host_memory_bytes() -> usize {
    static BYTES: OnceLock<usize> = OnceLock::new();
    *BYTES.get_or_init(|| {
        let Ok(info) = std::fs::read_to_string("/proc/meminfo") else {
            return usize::MAX;
        };
        let field = |name: &str| {
            info.lines()
                .find_map(|l| l.strip_prefix(name))
                .and_then(|rest| rest.trim().strip_suffix("kB"))
                .and_then(|kb| kb.trim().parse::<usize>().ok())
                .map(|kb| kb.saturating_mul(1024))
        };
        match (field("MemTotal:"), field("SwapTotal:")) {
            (Some(mem), swap) => mem.saturating_add(swap.unwrap_or(0)),
            _ => usize::MAX,
        }
    })
}

/// Takes a dropped array's buffer into the pool if it is large, the pool has room, and the
/// pool holds fewer buffers of its dtype and length than [`alloc`] has had out at once.
pub(crate) fn recycle<T: Element>(mut v: Vec<T>) {
    let n = v.capacity();
    let bytes = n * std::mem::size_of::<T>();
    if bytes < MIN_POOLED_BYTES {
        return;
    }
    let mut pool = lock(&POOL);
    let p = pool.get_or_insert_with(Pool::default);
    let full = p.bytes + bytes > LIMIT.load(Ordering::Relaxed);
    let Some(entry) = p.free.get_mut(&key::<T>(n)) else {
        // No array of this dtype and length was ever allocated here: nothing would reuse it.
        return;
    };
    entry.live = entry.live.saturating_sub(1);
    if full || entry.bufs.len() + entry.live >= entry.peak {
        return;
    }
    v.clear();
    p.bytes += bytes;
    entry.bufs.push(Box::new(v));
}

/// Bytes held by cached host buffers.
pub fn cached_bytes() -> usize {
    lock(&POOL).as_ref().map_or(0, |p| p.bytes)
}

/// Returns every cached host buffer to the system allocator.
pub fn free_cached() {
    if let Some(p) = lock(&POOL).as_mut() {
        // The demand of each dtype and length stays: the arrays that are out come back.
        p.free.values_mut().for_each(|e| e.bufs.clear());
        p.bytes = 0;
    }
}

/// Caps the bytes kept in the host buffer cache (0 disables caching); frees the cache if it is
/// over the new cap. The default is 1 GiB.
pub fn set_cache_limit(bytes: usize) {
    LIMIT.store(bytes, Ordering::Relaxed);
    if cached_bytes() > bytes {
        free_cached();
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// Cached buffers of `T` and length `n`.
    fn cached<T: 'static>(n: usize) -> usize {
        lock(&POOL)
            .as_ref()
            .map_or(0, |p| p.free.get(&key::<T>(n)).map_or(0, |e| e.bufs.len()))
    }

    /// Held by the tests of this module: the first changes the pool's limit, which the others
    /// would see.
    static SERIAL: Mutex<()> = Mutex::new(());

    // Other tests of this binary may pool buffers at the same time: this one's length is its own.
    #[test]
    fn a_dropped_large_buffer_is_reused_and_the_cap_is_honoured() {
        let _serial = lock(&SERIAL);
        let n = MIN_POOLED_BYTES / 4 + 13;
        let v: Vec<f32> = alloc("test", n).unwrap();
        let ptr = v.as_ptr();
        recycle(v);
        assert_eq!(cached::<f32>(n), 1);
        assert!(cached_bytes() >= n * 4);
        let again: Vec<f32> = alloc("test", n).unwrap();
        assert_eq!(
            again.as_ptr(),
            ptr,
            "same dtype and length reuse the buffer"
        );
        assert_eq!((again.len(), again.capacity()), (0, n));
        assert_eq!(cached::<f32>(n), 0);
        let other: Vec<f64> = alloc("test", n).unwrap();
        assert_ne!(
            other.as_ptr().cast::<f32>(),
            ptr,
            "another dtype does not take it"
        );

        set_cache_limit(0);
        recycle(again);
        assert_eq!(cached::<f32>(n), 0, "a zero cap caches nothing");
        set_cache_limit(DEFAULT_LIMIT);
        let small: Vec<f32> = alloc("test", 17).unwrap();
        recycle(small);
        assert_eq!(cached::<f32>(17), 0, "small buffers are never cached");
        let below: Vec<f32> = alloc("test", MIN_POOLED_BYTES / 4 - 1).unwrap();
        recycle(below);
        assert_eq!(cached::<f32>(MIN_POOLED_BYTES / 4 - 1), 0);
    }

    /// A loop that drops, each step, one buffer more than it allocates here (an array made from
    /// its own `Vec`: a batch of input data) keeps as many buffers as it had out at once, not
    /// one more every step (the pool held them all up to its 1 GiB limit).
    #[test]
    fn buffers_beyond_the_most_allocated_at_once_go_back_to_the_allocator() {
        let _serial = lock(&SERIAL);
        let n = MIN_POOLED_BYTES / 4 + 29;
        recycle(Vec::<f32>::with_capacity(n));
        assert_eq!(
            cached::<f32>(n),
            0,
            "nothing of this length was ever allocated"
        );
        for step in 0..10 {
            let a: Vec<f32> = alloc("test", n).unwrap();
            let b: Vec<f32> = alloc("test", n).unwrap();
            let own = Vec::<f32>::with_capacity(n);
            recycle(own);
            recycle(a);
            recycle(b);
            assert_eq!(cached::<f32>(n), 2, "step {step}: two were out at once");
        }
        // Three out at once: the pool keeps three.
        let bufs: Vec<Vec<f32>> = (0..3).map(|_| alloc("test", n).unwrap()).collect();
        bufs.into_iter().for_each(recycle);
        assert_eq!(cached::<f32>(n), 3);
        recycle(Vec::<f32>::with_capacity(n));
        assert_eq!(cached::<f32>(n), 3);
    }
}
