//! The emulated device's side streams: work a GPU would queue on a stream of its own, beside
//! the device's stream (an NCCL communicator's asynchronous collectives), runs on a thread of
//! its own, in the order issued, while the caller goes on. The device's own stream needs no
//! such thread: the emulated device does its work when it is issued.
//!
//! Each piece of work gets a ticket; [`SideStream::wait`] is the device's stream waiting for
//! an event recorded after it (`cuStreamWaitEvent`), which on the emulated device means the
//! host waiting until the work is done. A piece of work's error is returned by the wait for
//! its ticket.

use std::collections::HashMap;
use std::sync::mpsc::{Sender, channel};
use std::sync::{Arc, Condvar, Mutex, MutexGuard, PoisonError};

use crate::cuda::driver::types::DriverResult;

/// A piece of work on a side stream.
pub(crate) type Work = Box<dyn FnOnce() -> DriverResult<()> + Send>;

#[derive(Default)]
struct Progress {
    /// Tickets handed out: the last one issued.
    issued: u64,
    /// Every ticket up to this one is done.
    done: u64,
    /// The errors of finished work not yet waited for, by ticket.
    errors: HashMap<u64, String>,
}

struct Shared {
    progress: Mutex<Progress>,
    finished: Condvar,
}

impl Shared {
    fn lock(&self) -> MutexGuard<'_, Progress> {
        self.progress.lock().unwrap_or_else(PoisonError::into_inner)
    }
}

/// A stream beside the device's: a thread that runs the work given to it in order.
pub(crate) struct SideStream {
    /// Held under the lock that numbers the tickets, so that the thread takes work in their
    /// order.
    work: Mutex<Sender<(u64, Work)>>,
    shared: Arc<Shared>,
}

impl SideStream {
    /// A new stream; `name` names its thread.
    pub(crate) fn new(name: String) -> DriverResult<SideStream> {
        let shared = Arc::new(Shared {
            progress: Mutex::new(Progress::default()),
            finished: Condvar::new(),
        });
        let (tx, rx) = channel::<(u64, Work)>();
        let worker = shared.clone();
        std::thread::Builder::new()
            .name(name)
            .spawn(move || {
                // The thread ends when the stream is dropped (its sender with it). Work still
                // queued then has nobody to wait for it; the owners of its buffers wait before
                // they drop them, so none is.
                for (ticket, work) in rx {
                    let result = work();
                    let mut p = worker.lock();
                    if let Err(e) = result {
                        p.errors.insert(ticket, e);
                    }
                    p.done = ticket;
                    worker.finished.notify_all();
                }
            })
            .map_err(|e| format!("the emulated device cannot start a stream's thread: {e}"))?;
        Ok(SideStream {
            work: Mutex::new(tx),
            shared,
        })
    }

    /// Queues `work`; returns its ticket.
    pub(crate) fn submit(&self, work: Work) -> DriverResult<u64> {
        let tx = self.work.lock().unwrap_or_else(PoisonError::into_inner);
        let ticket = {
            let mut p = self.shared.lock();
            p.issued += 1;
            p.issued
        };
        tx.send((ticket, work)).map_err(|_| {
            // The thread is gone (it panicked): nothing more runs on this stream.
            "the emulated device's stream thread has stopped".to_string()
        })?;
        Ok(ticket)
    }

    /// Waits until the work of `ticket` is done; its error, if it failed.
    pub(crate) fn wait(&self, ticket: u64) -> DriverResult<()> {
        match self.done_up_to(|_| ticket).errors.remove(&ticket) {
            Some(e) => Err(e),
            None => Ok(()),
        }
    }

    /// Waits until every piece of work issued so far is done (errors stay for their waits).
    pub(crate) fn drain(&self) {
        drop(self.done_up_to(|p| p.issued));
    }

    /// The progress, once every ticket up to the one `last` picks is done.
    fn done_up_to(&self, last: impl FnOnce(&Progress) -> u64) -> MutexGuard<'_, Progress> {
        let mut p = self.shared.lock();
        let last = last(&p);
        while p.done < last {
            p = self
                .shared
                .finished
                .wait(p)
                .unwrap_or_else(PoisonError::into_inner);
        }
        p
    }
}

#[cfg(test)]
mod tests {
    use std::sync::atomic::{AtomicUsize, Ordering};

    use super::*;

    #[test]
    fn nccl_side_stream_runs_work_in_order_beside_the_caller_and_each_wait_gets_its_error() {
        let stream = SideStream::new("test stream".into()).unwrap();
        let log = Arc::new(Mutex::new(Vec::new()));
        let gate = Arc::new((Mutex::new(false), Condvar::new()));
        let mut tickets = Vec::new();
        for i in 0..5usize {
            let (log, gate) = (log.clone(), gate.clone());
            tickets.push(
                stream
                    .submit(Box::new(move || {
                        if i == 0 {
                            // The first piece waits for the caller: the caller runs on while
                            // the stream's work is pending.
                            let mut open = gate.0.lock().unwrap();
                            while !*open {
                                open = gate.1.wait(open).unwrap();
                            }
                        }
                        log.lock().unwrap().push(i);
                        if i == 3 {
                            Err(format!("piece {i} failed"))
                        } else {
                            Ok(())
                        }
                    }))
                    .unwrap(),
            );
        }
        assert_eq!(tickets, vec![1, 2, 3, 4, 5]);
        assert!(
            log.lock().unwrap().is_empty(),
            "nothing ran before the gate opened"
        );
        *gate.0.lock().unwrap() = true;
        gate.1.notify_all();
        assert_eq!(stream.wait(tickets[4]), Ok(()));
        assert_eq!(*log.lock().unwrap(), vec![0, 1, 2, 3, 4]);
        assert_eq!(stream.wait(tickets[3]), Err("piece 3 failed".to_string()));
        // An error is returned once, to the wait for its ticket.
        assert_eq!(stream.wait(tickets[3]), Ok(()));
        assert_eq!(stream.wait(tickets[1]), Ok(()));
        let count = Arc::new(AtomicUsize::new(0));
        for _ in 0..3 {
            let count = count.clone();
            stream
                .submit(Box::new(move || {
                    std::thread::sleep(std::time::Duration::from_millis(5));
                    count.fetch_add(1, Ordering::SeqCst);
                    Ok(())
                }))
                .unwrap();
        }
        stream.drain();
        assert_eq!(count.load(Ordering::SeqCst), 3);
    }
}
