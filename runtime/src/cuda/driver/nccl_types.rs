//! The types NCCL's two implementations share (a leaf, as `types.rs` is): the switch
//! (`nccl.rs`), the library's driver (`nccl_real.rs`) and the stand-in (`emulated/nccl.rs`)
//! import it, and it imports neither.

use super::types::DevicePtr;

/// The bytes of an `ncclUniqueId`: made by one rank, sent to the others (by MPI, a file, ...),
/// given to every rank's [`Comm::init`].
pub(crate) const UNIQUE_ID_BYTES: usize = 128;

/// An element type NCCL moves and reduces (`ncclDataType_t`).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) enum NcclType {
    I8,
    U8,
    I32,
    U32,
    I64,
    U64,
    F16,
    F32,
    F64,
    BF16,
}

impl NcclType {
    pub(crate) fn size(self) -> usize {
        match self {
            NcclType::I8 | NcclType::U8 => 1,
            NcclType::F16 | NcclType::BF16 => 2,
            NcclType::I32 | NcclType::U32 | NcclType::F32 => 4,
            NcclType::I64 | NcclType::U64 | NcclType::F64 => 8,
        }
    }

    pub(crate) fn name(self) -> &'static str {
        match self {
            NcclType::I8 => "ncclInt8",
            NcclType::U8 => "ncclUint8",
            NcclType::I32 => "ncclInt32",
            NcclType::U32 => "ncclUint32",
            NcclType::I64 => "ncclInt64",
            NcclType::U64 => "ncclUint64",
            NcclType::F16 => "ncclFloat16",
            NcclType::F32 => "ncclFloat32",
            NcclType::F64 => "ncclFloat64",
            NcclType::BF16 => "ncclBfloat16",
        }
    }
}

/// A reduction (`ncclRedOp_t`).
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub enum ReduceOp {
    /// The sum.
    Sum,
    /// The product.
    Prod,
    /// The largest value.
    Max,
    /// The smallest value.
    Min,
    /// The mean (NCCL's `ncclAvg`): floating-point values are each scaled by 1/size, then
    /// summed, so that a sum of float16 gradients does not overflow; integers are summed, then
    /// divided.
    Avg,
}

impl ReduceOp {
    pub(crate) fn name(self) -> &'static str {
        match self {
            ReduceOp::Sum => "ncclSum",
            ReduceOp::Prod => "ncclProd",
            ReduceOp::Max => "ncclMax",
            ReduceOp::Min => "ncclMin",
            ReduceOp::Avg => "ncclAvg",
        }
    }
}

/// One collective call, as every rank of the communicator must issue it.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) enum Collective {
    /// `ncclAllReduce`: `count` elements from `send` reduced into `recv`.
    AllReduce {
        send: DevicePtr,
        recv: DevicePtr,
        count: usize,
        ty: NcclType,
        op: ReduceOp,
    },
    /// `ncclBroadcast`: root's `count` elements of `send` into every rank's `recv`.
    Broadcast {
        send: DevicePtr,
        recv: DevicePtr,
        count: usize,
        ty: NcclType,
        root: usize,
    },
    /// `ncclAllGather`: each rank's `count` elements of `send` at `rank * count` of `recv`.
    AllGather {
        send: DevicePtr,
        recv: DevicePtr,
        count: usize,
        ty: NcclType,
    },
}

impl Collective {
    /// The send buffer, the receive buffer, the count (a rank's) and the type.
    pub(crate) fn parts(&self) -> (DevicePtr, DevicePtr, usize, NcclType) {
        match *self {
            Collective::AllReduce {
                send,
                recv,
                count,
                ty,
                ..
            }
            | Collective::Broadcast {
                send,
                recv,
                count,
                ty,
                ..
            }
            | Collective::AllGather {
                send,
                recv,
                count,
                ty,
            } => (send, recv, count, ty),
        }
    }
}

/// One point-to-point transfer (`ncclSend`, `ncclRecv`) of a group.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) enum P2p {
    Send {
        buf: DevicePtr,
        count: usize,
        ty: NcclType,
        peer: usize,
    },
    Recv {
        buf: DevicePtr,
        count: usize,
        ty: NcclType,
        peer: usize,
    },
}

/// A unique id: which communicator a rank joins.
pub(crate) type UniqueId = [u8; UNIQUE_ID_BYTES];
