//! NCCL behind the driver seam (feature `nccl`): collectives and point-to-point transfers of
//! device buffers between the ranks of a communicator, one rank a device.
//!
//! - On a GPU, [`nccl_real`](super::nccl_real) calls the NCCL library (`libnccl`, loaded at run
//!   time through cudarc) on the device's stream.
//! - On the emulated device, [`emulated::nccl`](super::emulated) is a **stand-in, a test
//!   double**: the ranks are threads of this process, and it enforces NCCL's rules (every rank
//!   issues the same collectives with the same counts, types, operations and roots; one rank of
//!   a communicator a device; buffers of the communicator's device, either the same (in place) or
//!   disjoint; sends and receives that must run together posted in one group) and turns what
//!   would hang a GPU into an error on every rank.
//!
//! The interface is the pointer-level one NCCL has; `crate::nccl` puts arrays on it.

pub use super::nccl_types::ReduceOp;
pub(crate) use super::nccl_types::{Collective, NcclType, P2p, UNIQUE_ID_BYTES, UniqueId};
use std::sync::{Arc, Mutex, PoisonError};

use super::types::DriverResult;
use super::{Backend, emulated, nccl_real};

/// A new unique id for the driver of `backend`'s kind (on a GPU, `ncclGetUniqueId`).
pub(crate) fn unique_id(emulated: bool) -> DriverResult<UniqueId> {
    if emulated {
        Ok(emulated::nccl::unique_id())
    } else {
        nccl_real::unique_id()
    }
}

/// Why NCCL cannot be used on a GPU here (`libnccl` missing), or `None`.
pub(crate) fn real_unavailable_reason() -> Option<String> {
    nccl_real::unavailable_reason()
}

/// One rank's membership of an NCCL communicator.
pub(crate) enum Comm {
    Real(nccl_real::RealComm),
    StandIn(emulated::nccl::Member),
}

impl Comm {
    /// Joins communicator `id` as `rank` of `size` on `backend`'s device (`ncclCommInitRank`):
    /// returns once every rank has joined.
    pub(crate) fn init(
        backend: &Backend,
        ordinal: usize,
        size: usize,
        rank: usize,
        id: &UniqueId,
    ) -> DriverResult<Comm> {
        match backend {
            Backend::Real(d) => nccl_real::RealComm::init(d, size, rank, id).map(Comm::Real),
            Backend::Emulated(_) => {
                emulated::nccl::Member::join(ordinal, size, rank, id).map(Comm::StandIn)
            }
        }
    }

    /// Issues `c` on the device's stream.
    ///
    /// # Safety
    /// The buffers address as many elements as `c` says, on this communicator's device, and
    /// live until the work is done.
    pub(crate) unsafe fn collective(&self, backend: &Backend, c: &Collective) -> DriverResult<()> {
        match (self, backend) {
            // SAFETY: forwarded contract.
            (Comm::Real(comm), Backend::Real(d)) => unsafe { comm.collective(d, c) },
            // SAFETY: forwarded contract.
            (Comm::StandIn(m), Backend::Emulated(_)) => unsafe { m.collective(c) },
            _ => Err("the communicator belongs to another driver".to_string()),
        }
    }

    /// Issues the transfers `ops` as one group (`ncclGroupStart` .. `ncclGroupEnd`); a single
    /// transfer is a group of its own.
    ///
    /// # Safety
    /// As [`Comm::collective`], for each transfer.
    pub(crate) unsafe fn group(&self, backend: &Backend, ops: &[P2p]) -> DriverResult<()> {
        match (self, backend) {
            // SAFETY: forwarded contract.
            (Comm::Real(comm), Backend::Real(d)) => unsafe { comm.group(d, ops) },
            // SAFETY: forwarded contract.
            (Comm::StandIn(m), Backend::Emulated(_)) => unsafe { m.group(ops) },
            _ => Err("the communicator belongs to another driver".to_string()),
        }
    }
}

/// A stream of a communicator's own beside the device's, on which its collectives run while
/// the device's stream goes on (PyTorch's NCCL stream): on a GPU a CUDA stream, on the emulated
/// device a thread ([`emulated::stream`]).
pub(crate) enum Side {
    Real(Arc<cudarc::driver::CudaStream>),
    Emulated(emulated::stream::SideStream),
}

/// A collective issued on a [`Side`] stream: what the device's stream waits for.
pub(crate) enum Issued {
    /// An event recorded on the side stream after the collective.
    Real(cudarc::driver::CudaEvent),
    /// The side stream's ticket of the collective.
    Emulated(u64),
}

fn event_err(e: cudarc::driver::DriverError) -> String {
    e.to_string()
}

impl Side {
    /// A new side stream on `backend`'s device (`cuda:{ordinal}`, for names).
    pub(crate) fn new(backend: &Backend, ordinal: usize) -> DriverResult<Side> {
        match backend {
            Backend::Real(d) => d.new_side_stream().map(Side::Real),
            Backend::Emulated(_) => {
                emulated::stream::SideStream::new(format!("kusari NCCL stream, cuda:{ordinal}"))
                    .map(Side::Emulated)
            }
        }
    }

    /// Issues `c` of `comm` on this stream, after the work queued on the device's stream so far
    /// (the kernels that wrote its buffers); returns at once.
    ///
    /// # Safety
    /// As [`Comm::collective`]; the buffers live, and nothing else writes them or (for the
    /// receive buffer) reads them, until [`Side::join`] of what this returns.
    pub(crate) unsafe fn collective(
        &self,
        backend: &Backend,
        comm: &Arc<Mutex<Comm>>,
        c: Collective,
    ) -> DriverResult<Issued> {
        match (self, backend) {
            (Side::Real(side), Backend::Real(d)) => {
                let flags = Some(cudarc::driver::sys::CUevent_flags::CU_EVENT_DISABLE_TIMING);
                let inputs_ready = d.stream().record_event(flags).map_err(event_err)?;
                side.wait(&inputs_ready).map_err(event_err)?;
                let guard = comm.lock().unwrap_or_else(PoisonError::into_inner);
                let Comm::Real(rc) = &*guard else {
                    return Err("the communicator belongs to another driver".to_string());
                };
                let stream = side.cu_stream() as cudarc::nccl::sys::cudaStream_t;
                // SAFETY: forwarded contract; the side stream waits for the device's.
                unsafe { rc.collective_on(d, stream, &c) }?;
                side.record_event(flags)
                    .map(Issued::Real)
                    .map_err(event_err)
            }
            (Side::Emulated(side), Backend::Emulated(_)) => {
                let comm = comm.clone();
                side.submit(Box::new(move || {
                    let guard = comm.lock().unwrap_or_else(PoisonError::into_inner);
                    match &*guard {
                        // SAFETY: forwarded contract: the buffers live until the wait.
                        Comm::StandIn(m) => unsafe { m.collective(&c) },
                        Comm::Real(_) => {
                            Err("the communicator belongs to another driver".to_string())
                        }
                    }
                }))
                .map(Issued::Emulated)
            }
            _ => Err("the stream belongs to another driver".to_string()),
        }
    }

    /// Orders the device's stream after `issued` (on the emulated device, waits for it); the
    /// collective's error, where the driver reports it here.
    pub(crate) fn join(&self, backend: &Backend, issued: &Issued) -> DriverResult<()> {
        match (self, backend, issued) {
            (Side::Real(_), Backend::Real(d), Issued::Real(event)) => {
                d.stream().wait(event).map_err(event_err)
            }
            (Side::Emulated(side), Backend::Emulated(_), Issued::Emulated(ticket)) => {
                side.wait(*ticket)
            }
            _ => Err("the work belongs to another driver".to_string()),
        }
    }

    /// Orders the device's stream after everything issued on this one so far: a call the
    /// communicator then makes on the device's stream comes after them, as NCCL needs one
    /// communicator's calls in one order.
    pub(crate) fn join_all(&self, backend: &Backend) -> DriverResult<()> {
        match (self, backend) {
            (Side::Real(side), Backend::Real(d)) => d.stream().join(side).map_err(event_err),
            (Side::Emulated(side), Backend::Emulated(_)) => {
                side.drain();
                Ok(())
            }
            _ => Err("the stream belongs to another driver".to_string()),
        }
    }
}
