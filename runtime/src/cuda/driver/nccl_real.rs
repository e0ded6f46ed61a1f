//! NCCL on a GPU: the NCCL library through cudarc (feature `nccl`), loaded at run time.
//!
//! cudarc looks for `libnccl.so` (and a few versioned names, not `libnccl.so.2`) and panics when
//! none loads, so [`unavailable_reason`] probes first and says how to provide it. Every call is
//! ordered on the device's stream, after the kernels that produced its buffers.

use std::ffi::c_void;
use std::sync::OnceLock;

use cudarc::nccl::result as nccl;
use cudarc::nccl::sys;

use super::nccl_types::{Collective, NcclType, P2p, ReduceOp, UNIQUE_ID_BYTES, UniqueId};
use super::real::RealDevice;
use super::types::DriverResult;

/// Why the NCCL library cannot be loaded, with the fix; `None` when it can.
pub(crate) fn unavailable_reason() -> Option<String> {
    static PRESENT: OnceLock<bool> = OnceLock::new();
    // SAFETY: only tries to open the shared library; no NCCL function is called.
    let present = *PRESENT.get_or_init(|| unsafe { sys::is_culib_present() });
    (!present).then(|| {
        "the NCCL library (libnccl.so) could not be loaded: install it (`pip install \
         nvidia-nccl-cu13`, or the distribution's libnccl2) and put a folder holding `libnccl.so` \
         on LD_LIBRARY_PATH (pip's wheel ships `libnccl.so.2`: link `libnccl.so` to it)"
            .to_string()
    })
}

fn err(what: &str, e: nccl::NcclError) -> String {
    format!("{what} failed: {e:?}")
}

fn loaded() -> DriverResult<()> {
    match unavailable_reason() {
        None => Ok(()),
        Some(why) => Err(why),
    }
}

/// `ncclGetUniqueId`.
pub(crate) fn unique_id() -> DriverResult<UniqueId> {
    loaded()?;
    let id = nccl::get_uniqueid().map_err(|e| err("ncclGetUniqueId", e))?;
    let mut out = [0u8; UNIQUE_ID_BYTES];
    for (o, c) in out.iter_mut().zip(id.internal) {
        *o = c as u8;
    }
    Ok(out)
}

fn ty(t: NcclType) -> sys::ncclDataType_t {
    use sys::ncclDataType_t as T;
    match t {
        NcclType::I8 => T::ncclInt8,
        NcclType::U8 => T::ncclUint8,
        NcclType::I32 => T::ncclInt32,
        NcclType::U32 => T::ncclUint32,
        NcclType::I64 => T::ncclInt64,
        NcclType::U64 => T::ncclUint64,
        NcclType::F16 => T::ncclFloat16,
        NcclType::F32 => T::ncclFloat32,
        NcclType::F64 => T::ncclFloat64,
        NcclType::BF16 => T::ncclBfloat16,
    }
}

fn red(op: ReduceOp) -> sys::ncclRedOp_t {
    use sys::ncclRedOp_t as R;
    match op {
        ReduceOp::Sum => R::ncclSum,
        ReduceOp::Prod => R::ncclProd,
        ReduceOp::Max => R::ncclMax,
        ReduceOp::Min => R::ncclMin,
        ReduceOp::Avg => R::ncclAvg,
    }
}

/// An `ncclComm_t`, destroyed on drop.
pub(crate) struct RealComm(sys::ncclComm_t);

// SAFETY: NCCL allows a communicator to be used from any thread, one call at a time; kusari's
// `NcclComm` serialises its calls.
unsafe impl Send for RealComm {}
// SAFETY: as above.
unsafe impl Sync for RealComm {}

impl RealComm {
    /// `ncclCommInitRank` on `device` (whose context is made current first).
    pub(crate) fn init(
        device: &RealDevice,
        size: usize,
        rank: usize,
        id: &UniqueId,
    ) -> DriverResult<RealComm> {
        loaded()?;
        device.bind()?;
        let mut uid = sys::ncclUniqueId { internal: [0; 128] };
        for (o, b) in uid.internal.iter_mut().zip(id) {
            *o = *b as std::ffi::c_char;
        }
        let mut comm: sys::ncclComm_t = std::ptr::null_mut();
        let (size, rank) = (to_int(size)?, to_int(rank)?);
        // SAFETY: `comm` is valid for writes; the id is the one every rank was given.
        unsafe { nccl::comm_init_rank(&mut comm, size, uid, rank) }
            .map_err(|e| err("ncclCommInitRank", e))?;
        Ok(RealComm(comm))
    }

    fn stream(device: &RealDevice) -> sys::cudaStream_t {
        device.stream().cu_stream() as sys::cudaStream_t
    }

    /// # Safety
    /// See `Comm::collective`.
    pub(crate) unsafe fn collective(
        &self,
        device: &RealDevice,
        c: &Collective,
    ) -> DriverResult<()> {
        // SAFETY: forwarded contract; the device's own stream.
        unsafe { self.collective_on(device, Self::stream(device), c) }
    }

    /// `c` issued on `stream`, a stream of `device`.
    ///
    /// # Safety
    /// See `Comm::collective`; the buffers' last writes are ordered before `stream`'s work.
    pub(crate) unsafe fn collective_on(
        &self,
        device: &RealDevice,
        stream: sys::cudaStream_t,
        c: &Collective,
    ) -> DriverResult<()> {
        device.bind()?;
        let p = |ptr: u64| ptr as *mut c_void;
        // SAFETY: the caller's contract: the buffers are this device's and large enough.
        unsafe {
            match *c {
                Collective::AllReduce {
                    send,
                    recv,
                    count,
                    ty: t,
                    op,
                } => nccl::all_reduce(p(send), p(recv), count, ty(t), red(op), self.0, stream)
                    .map_err(|e| err("ncclAllReduce", e)),
                Collective::Broadcast {
                    send,
                    recv,
                    count,
                    ty: t,
                    root,
                } => nccl::broadcast(
                    p(send),
                    p(recv),
                    count,
                    ty(t),
                    to_int(root)?,
                    self.0,
                    stream,
                )
                .map_err(|e| err("ncclBroadcast", e)),
                Collective::AllGather {
                    send,
                    recv,
                    count,
                    ty: t,
                } => nccl::all_gather(p(send), p(recv), count, ty(t), self.0, stream)
                    .map_err(|e| err("ncclAllGather", e)),
            }
        }
        .map(|_| ())
    }

    /// # Safety
    /// See `Comm::group`.
    pub(crate) unsafe fn group(&self, device: &RealDevice, ops: &[P2p]) -> DriverResult<()> {
        device.bind()?;
        let stream = Self::stream(device);
        nccl::group_start().map_err(|e| err("ncclGroupStart", e))?;
        let mut first_error = None;
        for op in ops {
            // SAFETY: the caller's contract.
            let r = unsafe {
                match *op {
                    P2p::Send {
                        buf,
                        count,
                        ty: t,
                        peer,
                    } => nccl::send(
                        buf as *const c_void,
                        count,
                        ty(t),
                        to_int(peer)?,
                        self.0,
                        stream,
                    )
                    .map_err(|e| err("ncclSend", e)),
                    P2p::Recv {
                        buf,
                        count,
                        ty: t,
                        peer,
                    } => nccl::recv(
                        buf as *mut c_void,
                        count,
                        ty(t),
                        to_int(peer)?,
                        self.0,
                        stream,
                    )
                    .map_err(|e| err("ncclRecv", e)),
                }
            };
            if let Err(e) = r {
                first_error.get_or_insert(e);
            }
        }
        // The group is always closed, so that a failed call leaves no group open on the thread.
        let end = nccl::group_end().map_err(|e| err("ncclGroupEnd", e));
        match first_error {
            Some(e) => Err(e),
            None => end.map(|_| ()),
        }
    }
}

impl Drop for RealComm {
    fn drop(&mut self) {
        // SAFETY: the communicator was made by `init` and is destroyed once.
        let _ = unsafe { nccl::comm_destroy(self.0) };
    }
}

fn to_int(n: usize) -> DriverResult<std::ffi::c_int> {
    std::ffi::c_int::try_from(n).map_err(|_| format!("{n} does not fit NCCL's int"))
}
