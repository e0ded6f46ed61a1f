//! The `pure_nccl` communicator's NCCL half (feature `nccl`): forming the NCCL communicator
//! over the transport, the mean gradient as one NCCL all-reduce of each packed bucket on the
//! device, and the collectives NCCL has (all-reduce, broadcast, all-gather) on CUDA arrays.
//! Everything else (objects, gather, scatter, all-to-all, send/recv, host arrays) goes through
//! the transport, as in ChainerMN's `PureNcclCommunicator`.

use kusari::link::Parameter;
use kusari::nccl::{NcclComm, ReduceOp, UniqueId};
use kusari::{Array, DType, Device};

use crate::error::{Error, Result};
use crate::transport::Transport;

const JOIN: &str = "create_communicator(\"pure_nccl\")";

/// Forms the NCCL communicator of `transport`'s ranks, this rank on `cuda:{ordinal}`: every
/// rank first says whether it can (an error on any rank is an error on every rank, naming it),
/// then rank 0 makes the unique id and sends it over the transport.
pub(crate) fn join(transport: &dyn Transport, ordinal: usize) -> Result<NcclComm> {
    let rank = transport.rank();
    let mine = match kusari::nccl::unavailable_reason() {
        Some(why) => format!("NCCL cannot run: {why}"),
        None if kusari::nccl::is_stand_in() && transport.name() != "threads" => format!(
            "its devices are emulated, and the emulated device's NCCL stand-in connects ranks \
             that are threads of one process, not {} processes: run `pure_nccl` on GPUs, or \
             try it with threads as ranks (`run_threads`)",
            transport.name()
        ),
        None if ordinal >= kusari::cuda::device_count() => format!(
            "it takes cuda:{ordinal} (its rank on the node), but the node has {} CUDA device(s): \
             start at most that many ranks a node",
            kusari::cuda::device_count()
        ),
        None => String::new(),
    };
    let all = transport.allgather(JOIN, mine.as_bytes())?;
    if let Some((r, why)) = all.iter().enumerate().find(|(_, w)| !w.is_empty()) {
        return Err(Error::InvalidArgument {
            op: JOIN.into(),
            rank,
            msg: format!("rank {r} cannot join: {}", String::from_utf8_lossy(why)),
        });
    }
    let mut id = if rank == 0 {
        match UniqueId::new() {
            Ok(id) => id.as_bytes().to_vec(),
            Err(e) => format!("!{e}").into_bytes(),
        }
    } else {
        Vec::new()
    };
    transport.bcast(JOIN, &mut id, 0)?;
    let id = UniqueId::from_bytes(&id).map_err(|_| Error::InvalidArgument {
        op: JOIN.into(),
        rank,
        msg: format!(
            "rank 0 could not make NCCL's unique id: {}",
            String::from_utf8_lossy(id.get(1..).unwrap_or_default())
        ),
    })?;
    Ok(NcclComm::new(
        Device::Cuda(ordinal),
        transport.size(),
        rank,
        &id,
    )?)
}

/// The mean over the ranks of the gradients of `members` (one bucket, `dtype` on the wire):
/// packed on the device, one `ncclAllReduce` with `ncclAvg` in place, unpacked. Every member
/// must be on the communicator's device.
pub(crate) fn mean_bucket(
    nccl: &NcclComm,
    op: &str,
    rank: usize,
    members: &[(&str, &Parameter)],
    dtype: DType,
) -> Result<Vec<Array>> {
    check_devices(nccl, op, rank, members)?;
    let grads: Vec<Option<Array>> = members.iter().map(|(_, p)| p.grad()).collect();
    let shapes: Vec<Vec<usize>> = members
        .iter()
        .map(|(_, p)| p.shape().unwrap_or_default())
        .collect();
    let packed = pack(nccl.device(), &grads, &shapes, dtype)?;
    let mean = nccl.all_reduce_owned(packed, ReduceOp::Avg)?;
    unpack(&mean, &shapes)
}

/// An error naming the first of `members` that is not on the communicator's device.
pub(crate) fn check_devices(
    nccl: &NcclComm,
    op: &str,
    rank: usize,
    members: &[(&str, &Parameter)],
) -> Result<()> {
    let device = nccl.device();
    match members.iter().find(|(_, p)| p.device() != device) {
        None => Ok(()),
        Some((path, p)) => Err(Error::InvalidArgument {
            op: op.into(),
            rank,
            msg: format!(
                "`pure_nccl` averages gradients on this rank's GPU ({device}), but parameter \
                 {path} is on {}: move the model there (`comm.device()`), or use `flat`",
                p.device()
            ),
        }),
    }
}

/// `grads` (zeros for a missing one) of `shapes`, in `dtype`, one after the other in one new
/// array on `device` (the only holder of its buffer, for an in-place all-reduce).
pub(crate) fn pack(
    device: Device,
    grads: &[Option<Array>],
    shapes: &[Vec<usize>],
    dtype: DType,
) -> Result<Array> {
    let mut pieces = Vec::with_capacity(grads.len());
    for (g, shape) in grads.iter().zip(shapes) {
        let n = shape.iter().product();
        pieces.push(match g {
            Some(g) => g.astype(dtype)?.reshape(&[n])?,
            None => Array::zeros_on(&[n], dtype, device)?,
        });
    }
    let refs: Vec<&Array> = pieces.iter().collect();
    Ok(Array::concat(&refs, 0)?)
}

/// `packed` cut into arrays of `shapes` (views of its buffer).
pub(crate) fn unpack(packed: &Array, shapes: &[Vec<usize>]) -> Result<Vec<Array>> {
    let mut at = 0;
    let mut out = Vec::with_capacity(shapes.len());
    for shape in shapes {
        let n: usize = shape.iter().product();
        out.push(
            packed
                .slice_axis(0, at as isize, (at + n) as isize, 1)?
                .reshape(shape)?,
        );
        at += n;
    }
    Ok(out)
}

/// The sum over the ranks of `x` (on the communicator's device on every rank).
pub(crate) fn allreduce(nccl: &NcclComm, x: &Array) -> Result<Array> {
    Ok(nccl.all_reduce(x, ReduceOp::Sum)?)
}

/// Root's array of `shape` and `dtype` on every rank's device; `x` is the root's.
pub(crate) fn bcast(
    nccl: &NcclComm,
    x: Option<&Array>,
    shape: &[usize],
    dtype: DType,
    root: usize,
) -> Result<Array> {
    let buf = match x {
        Some(x) => x.clone(),
        None => Array::zeros_on(shape, dtype, nccl.device())?,
    };
    Ok(nccl.broadcast(&buf, root)?)
}

/// Every rank's `x` (one shape on every rank), in rank order.
pub(crate) fn allgather(nccl: &NcclComm, x: &Array) -> Result<Vec<Array>> {
    let all = nccl.all_gather(x)?;
    (0..nccl.size())
        .map(|r| {
            Ok(all
                .slice_axis(0, r as isize, r as isize + 1, 1)?
                .reshape(x.shape())?)
        })
        .collect()
}
