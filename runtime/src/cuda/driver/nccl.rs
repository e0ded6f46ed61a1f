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
