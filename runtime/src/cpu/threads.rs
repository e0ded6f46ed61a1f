//! The host's worker threads: rayon's global pool, which kusari starts itself the first time it
//! runs work across threads, with as many threads as the process can start.
//!
//! rayon starts its global pool on first use with `RAYON_NUM_THREADS` threads, else one per CPU,
//! and panics for good if one of them cannot start ("The global thread pool has not been
//! initialized"). Threads are refused where their stacks do not fit under an address-space
//! limit (`ulimit -v`, a batch scheduler's `h_vmem`) or a limit on threads is reached: in a
//! child process under 1 GiB on a 16-CPU machine, the first matrix product panicked there. So
//! the first parallel operation tries that number of threads in a pool of its own, halves it
//! until they all start, and starts the global pool with the number that did. Where the program
//! started the global pool itself, first, its pool is used as it is.
//!
//! Each pool thread starts on its own ([`spawn_started`]): the standard library sets up a new
//! thread's signal stack inside that thread and aborts the whole process when it cannot, so a
//! thread whose stack still fitted while the threads started before it took the rest of the
//! room would abort, not fail to start. A thread is only spawned once the previous one runs and
//! the room for two more stacks can be reserved.

use std::io;
use std::sync::Once;
use std::sync::mpsc::sync_channel;
use std::thread::JoinHandle;

/// Starts the global pool if nobody has (see the module's doc); cheap after the first call.
pub(crate) fn start() {
    static STARTED: Once = Once::new();
    STARTED.call_once(|| {
        let mut n = wanted();
        while n > 1 && !can_start(n) {
            n /= 2;
        }
        // Err: the program started the global pool first (its size stands), or even this many
        // could not start a second time (rayon then says so at its first use).
        let _ = rayon::ThreadPoolBuilder::new()
            .num_threads(n)
            .spawn_handler(|thread| spawn_started(thread).map(drop))
            .build_global();
    });
}

/// The number of threads work is split across: the current pool's (the global one, started
/// here first, or the pool of a program's `install`).
pub(crate) fn count() -> usize {
    start();
    rayon::current_num_threads()
}

/// What rayon would start: `RAYON_NUM_THREADS` when it is a positive number, else the CPUs.
fn wanted() -> usize {
    std::env::var("RAYON_NUM_THREADS")
        .ok()
        .and_then(|v| v.trim().parse::<usize>().ok())
        .filter(|&n| n > 0)
        .unwrap_or_else(|| std::thread::available_parallelism().map_or(1, |n| n.get()))
}

/// Whether `n` threads can start: a pool of `n` is started and stopped, and its threads joined
/// (so that their stacks are given back before the global pool asks for them again).
fn can_start(n: usize) -> bool {
    let mut handles = Vec::with_capacity(n);
    let pool = rayon::ThreadPoolBuilder::new()
        .num_threads(n)
        .spawn_handler(|thread| {
            handles.push(spawn_started(thread)?);
            Ok(())
        })
        .build();
    let started = pool.is_ok();
    drop(pool);
    // A failed build has already told the threads it started to stop.
    for h in handles {
        let _ = h.join();
    }
    started
}

/// Starts a pool thread and returns once it runs (its signal stack is set up), or refuses to
/// start it where the room for two more stacks cannot be reserved (see the module's doc).
fn spawn_started(thread: rayon::ThreadBuilder) -> io::Result<JoinHandle<()>> {
    if !room_for_a_thread() {
        return Err(io::Error::new(
            io::ErrorKind::OutOfMemory,
            "no room for another thread's stacks",
        ));
    }
    let (running, started) = sync_channel(1);
    let handle = std::thread::Builder::new().spawn(move || {
        let _ = running.send(());
        thread.run();
    })?;
    let _ = started.recv();
    Ok(handle)
}

/// Whether two more threads' stacks (the standard library's size, `RUST_MIN_STACK` or 2 MiB)
/// and a MiB more can be reserved now; the reservation is given back at once.
fn room_for_a_thread() -> bool {
    let stack = std::env::var("RUST_MIN_STACK")
        .ok()
        .and_then(|v| v.trim().parse::<usize>().ok())
        .unwrap_or(2 << 20);
    let bytes = stack.saturating_mul(2).saturating_add(1 << 20);
    let mut probe = Vec::<u8>::new();
    let room = probe.try_reserve_exact(bytes).is_ok();
    // Kept observable, so the allocation is not optimized away.
    std::hint::black_box(&mut probe);
    room
}

#[cfg(test)]
mod tests {
    #[test]
    fn a_pool_that_fits_starts_and_its_threads_are_joined() {
        assert!(super::can_start(2));
        assert!(super::count() >= 1);
    }
}
