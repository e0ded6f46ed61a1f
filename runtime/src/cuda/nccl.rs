//! NCCL communicators on device buffers (feature `nccl`): what `crate::nccl` puts arrays on.
//! Each call goes through the driver seam, to the NCCL library on a GPU or to the stand-in on
//! the emulated device.

use std::sync::{Arc, Mutex, PoisonError};

use super::device::{CudaDevice, device};
use super::driver::DevicePtr;
use super::driver::nccl::{Collective, Comm, Issued, NcclType, P2p, Side, UniqueId};
use super::memory::CudaStorage;
use crate::DType;
use crate::error::{Error, Result};

pub use super::driver::nccl::ReduceOp;
pub(crate) use super::driver::nccl::UNIQUE_ID_BYTES;

/// The NCCL element type `dtype`'s elements reduce in, or `None` (bool, int16, uint16: moved
/// as bytes, never reduced).
pub(crate) fn nccl_type(dtype: DType) -> Option<NcclType> {
    Some(match dtype {
        DType::I8 => NcclType::I8,
        DType::U8 => NcclType::U8,
        DType::I32 => NcclType::I32,
        DType::U32 => NcclType::U32,
        DType::I64 => NcclType::I64,
        DType::U64 => NcclType::U64,
        DType::F16 => NcclType::F16,
        DType::F32 => NcclType::F32,
        DType::F64 => NcclType::F64,
        DType::BF16 => NcclType::BF16,
        _ => return None,
    })
}

/// How `count` elements of `dtype` travel when they are only moved: in their own type, or as
/// bytes.
fn moved(dtype: DType, count: usize) -> (NcclType, usize) {
    match nccl_type(dtype) {
        Some(t) => (t, count),
        None => (NcclType::U8, count * dtype.size_in_bytes()),
    }
}

/// Why NCCL cannot run on this process's devices, or `None` when it can: the stand-in runs
/// wherever the emulated device does; a GPU needs `libnccl`.
pub(crate) fn unavailable_reason() -> Option<String> {
    if let Some(why) = super::device::unavailable_reason() {
        return Some(why);
    }
    if super::driver::is_emulated() {
        None
    } else {
        super::driver::nccl::real_unavailable_reason()
    }
}

/// A new unique id, for the devices of this process's driver.
pub(crate) fn unique_id(op: &str) -> Result<UniqueId> {
    if let Some(reason) = unavailable_reason() {
        return Err(Error::CudaUnavailable {
            op: op.to_string(),
            reason,
        });
    }
    super::driver::nccl::unique_id(super::driver::is_emulated()).map_err(|msg| Error::Cuda {
        op: op.to_string(),
        msg,
    })
}

/// The all-reduce of `count` elements of `x` from element `at` into `out`. `x`'s dtype must
/// have an NCCL type.
pub(crate) fn all_reduce_call(
    (x, at): (&CudaStorage, usize),
    count: usize,
    out: &CudaStorage,
    op: ReduceOp,
) -> Collective {
    Collective::AllReduce {
        send: x.ptr_at(at),
        recv: out.ptr_at(0),
        count,
        ty: nccl_type(x.dtype()).expect("the caller checked the dtype"),
        op,
    }
}

/// One rank of an NCCL communicator, on its device. Calls are serialised: NCCL allows one at a
/// time on a communicator.
pub(crate) struct CudaComm {
    device: Arc<CudaDevice>,
    comm: Arc<Mutex<Comm>>,
    /// The communicator's own stream, made by its first asynchronous call.
    side: Mutex<Option<Arc<Side>>>,
    rank: usize,
    size: usize,
}

/// A collective issued on a communicator's own stream ([`CudaComm::start`]). Its
/// buffers must live until it is [waited for](AsyncWork::wait); dropped, it waits.
pub(crate) struct AsyncWork {
    device: Arc<CudaDevice>,
    side: Arc<Side>,
    issued: Option<Issued>,
    op: String,
}

impl AsyncWork {
    /// Orders the device's stream after the collective: kernels queued from now on see its
    /// result (on the emulated device, returns once it is done). Its error, where the driver
    /// reports it here.
    pub(crate) fn wait(mut self) -> Result<()> {
        let issued = self.issued.take().expect("waited once");
        let r = self.side.join(&self.device.backend, &issued);
        self.device.check(r, || self.op.clone())
    }
}

impl Drop for AsyncWork {
    fn drop(&mut self) {
        if let Some(issued) = self.issued.take() {
            // The buffers are freed on the device's stream after this: it must wait first.
            let _ = self.side.join(&self.device.backend, &issued);
        }
    }
}

impl CudaComm {
    /// Joins communicator `id` as `rank` of `size` on `cuda:{ordinal}`; returns once every rank
    /// has joined.
    pub(crate) fn init(
        op: &str,
        ordinal: usize,
        size: usize,
        rank: usize,
        id: &UniqueId,
    ) -> Result<CudaComm> {
        if let Some(reason) = unavailable_reason() {
            return Err(Error::CudaUnavailable {
                op: op.to_string(),
                reason,
            });
        }
        let device = device(ordinal, op)?;
        let comm =
            Comm::init(&device.backend, ordinal, size, rank, id).map_err(|msg| Error::Cuda {
                op: op.to_string(),
                msg,
            })?;
        Ok(CudaComm {
            device,
            comm: Arc::new(Mutex::new(comm)),
            side: Mutex::new(None),
            rank,
            size,
        })
    }

    pub(crate) fn ordinal(&self) -> usize {
        self.device.ordinal
    }

    pub(crate) fn rank(&self) -> usize {
        self.rank
    }

    pub(crate) fn size(&self) -> usize {
        self.size
    }

    /// `len` uninitialised elements of `dtype` on the communicator's device.
    pub(crate) fn alloc(&self, len: usize, dtype: DType) -> Result<CudaStorage> {
        CudaStorage::alloc(&self.device, len, dtype)
    }

    fn fail(op: &str) -> impl FnOnce(String) -> Error + '_ {
        move |msg| Error::Cuda {
            op: op.to_string(),
            msg,
        }
    }

    /// Orders the device's stream after the communicator's asynchronous calls so far, so that
    /// a call on the device's stream comes after them.
    fn after_async(&self, op: &str) -> Result<()> {
        let side = self
            .side
            .lock()
            .unwrap_or_else(PoisonError::into_inner)
            .clone();
        match side {
            Some(side) => side.join_all(&self.device.backend).map_err(Self::fail(op)),
            None => Ok(()),
        }
    }

    fn collective(&self, op: &str, c: Collective) -> Result<()> {
        self.after_async(op)?;
        let comm = self.comm.lock().unwrap_or_else(PoisonError::into_inner);
        // SAFETY: the callers pass buffers of this device as large as `c` says, which they
        // hold until the work is done (a later use is ordered after it on the stream).
        unsafe { comm.collective(&self.device.backend, &c) }.map_err(Self::fail(op))
    }

    /// `count` elements of `x` from element `at` reduced with `op` into `out` (which may be
    /// `x` itself at `at == 0`: in place). `x`'s dtype must have an NCCL type.
    pub(crate) fn all_reduce(
        &self,
        op_name: &str,
        (x, at): (&CudaStorage, usize),
        count: usize,
        out: &CudaStorage,
        op: ReduceOp,
    ) -> Result<()> {
        self.collective(op_name, all_reduce_call((x, at), count, out, op))
    }

    /// Issues `c` ([`all_reduce_call`]) on the communicator's own stream, once the work
    /// queued on the device's stream so far is done, while the device's stream goes on.
    ///
    /// # Safety
    /// `c`'s buffers live, nothing writes its send buffer and nothing reads or writes its
    /// receive buffer, until the returned work is waited for.
    pub(crate) unsafe fn start(&self, op_name: &str, c: Collective) -> Result<AsyncWork> {
        let side = {
            let mut side = self.side.lock().unwrap_or_else(PoisonError::into_inner);
            match &*side {
                Some(s) => s.clone(),
                None => {
                    let made = Side::new(&self.device.backend, self.device.ordinal)
                        .map_err(Self::fail(op_name))?;
                    side.insert(Arc::new(made)).clone()
                }
            }
        };
        // SAFETY: the caller's contract: the buffers live and are left alone until the wait.
        let issued = unsafe { side.collective(&self.device.backend, &self.comm, c) }
            .map_err(Self::fail(op_name))?;
        Ok(AsyncWork {
            device: self.device.clone(),
            side,
            issued: Some(issued),
            op: op_name.to_string(),
        })
    }

    /// Root's `count` elements of `x` (from element `at`) into every rank's `out`.
    pub(crate) fn broadcast(
        &self,
        op_name: &str,
        (x, at): (&CudaStorage, usize),
        count: usize,
        out: &CudaStorage,
        root: usize,
    ) -> Result<()> {
        let (ty, count) = moved(x.dtype(), count);
        self.collective(
            op_name,
            Collective::Broadcast {
                send: x.ptr_at(at),
                recv: out.ptr_at(0),
                count,
                ty,
                root,
            },
        )
    }

    /// Every rank's `count` elements of `x` (from element `at`), in rank order, into `out`.
    pub(crate) fn all_gather(
        &self,
        op_name: &str,
        (x, at): (&CudaStorage, usize),
        count: usize,
        out: &CudaStorage,
    ) -> Result<()> {
        let (ty, count) = moved(x.dtype(), count);
        self.collective(
            op_name,
            Collective::AllGather {
                send: x.ptr_at(at),
                recv: out.ptr_at(0),
                count,
                ty,
            },
        )
    }

    /// One group of transfers: each `(buffer, first element, count, peer)` of `sends` sent,
    /// each of `recvs` received (whole buffers).
    pub(crate) fn group(
        &self,
        op_name: &str,
        sends: &[(&CudaStorage, usize, usize, usize)],
        recvs: &[(&CudaStorage, usize)],
    ) -> Result<()> {
        let buf = |s: &CudaStorage, at: usize| -> DevicePtr { s.ptr_at(at) };
        let mut ops = Vec::with_capacity(sends.len() + recvs.len());
        for &(s, at, count, peer) in sends {
            let (ty, count) = moved(s.dtype(), count);
            ops.push(P2p::Send {
                buf: buf(s, at),
                count,
                ty,
                peer,
            });
        }
        for &(r, peer) in recvs {
            let (ty, count) = moved(r.dtype(), r.len());
            ops.push(P2p::Recv {
                buf: buf(r, 0),
                count,
                ty,
                peer,
            });
        }
        if ops.is_empty() {
            return Ok(());
        }
        self.after_async(op_name)?;
        let comm = self.comm.lock().unwrap_or_else(PoisonError::into_inner);
        // SAFETY: as in `collective`.
        unsafe { comm.group(&self.device.backend, &ops) }.map_err(Self::fail(op_name))
    }
}
