//! NCCL between CUDA devices (feature `nccl`): all-reduce, broadcast, all-gather and grouped
//! sends and receives of [`Array`]s, between the ranks of a communicator, one rank a device.
//! What `kusari-mn`'s `pure_nccl` communicator is built on.
//!
//! - On a GPU it calls the NCCL library, loaded at run time (cudarc's `nccl`); every call is
//!   ordered on the device's stream after the kernels that made its inputs.
//!   [`unavailable_reason`] says when `libnccl.so` is missing and how to provide it.
//! - On the [emulated device](crate::cuda::emulate) a **stand-in** runs instead
//!   ([`is_stand_in`]): a test double in this process, each rank a thread on its own emulated
//!   device. It enforces NCCL's rules (matching calls on every rank, one rank a device, buffers
//!   in place or disjoint, sends and receives matched in order) and turns what would hang a GPU
//!   (a rank sending to another that sends back outside a group, ranks calling different
//!   collectives) into an error on every rank, naming what each rank waits in.
//!
//! A communicator is formed from a [`UniqueId`] that one rank makes and sends to the others
//! (`kusari-mn` sends it over MPI); every rank then calls [`NcclComm::new`] with its rank.
//!
//! ```
//! use kusari::nccl::{NcclComm, ReduceOp, UniqueId};
//! use kusari::{Array, Device};
//!
//! kusari::cuda::emulate(2).unwrap();
//! if kusari::nccl::unavailable_reason().is_none() {
//!     let id = UniqueId::new().unwrap();
//!     let sums: Vec<Vec<f32>> = std::thread::scope(|s| {
//!         let ranks: Vec<_> = (0..2)
//!             .map(|rank| {
//!                 s.spawn(move || {
//!                     let comm = NcclComm::new(Device::Cuda(rank), 2, rank, &id).unwrap();
//!                     let x = Array::from_vec(vec![rank as f32 + 1.0; 3], &[3]).unwrap();
//!                     let x = x.to_device(Device::Cuda(rank)).unwrap();
//!                     comm.all_reduce(&x, ReduceOp::Sum).unwrap().to_vec::<f32>().unwrap()
//!                 })
//!             })
//!             .collect();
//!         ranks.into_iter().map(|h| h.join().unwrap()).collect()
//!     });
//!     assert_eq!(sums, vec![vec![3.0; 3], vec![3.0; 3]]);
//! }
//! ```

use crate::array::Array;
use crate::cuda::CudaStorage;
use crate::cuda::nccl::{AsyncWork, CudaComm, UNIQUE_ID_BYTES, all_reduce_call, nccl_type};
use crate::error::{Error, Result};
use crate::layout::Layout;
use crate::storage::Storage;
use crate::{DType, Device};

pub use crate::cuda::nccl::ReduceOp;

/// Why NCCL cannot run on this process's devices (no CUDA device, or on a GPU no `libnccl`),
/// or `None` when it can.
pub fn unavailable_reason() -> Option<String> {
    crate::cuda::nccl::unavailable_reason()
}

/// Whether NCCL reduces `dtype`: every dtype but bool, int16 and uint16 (which NCCL only
/// moves, as bytes).
pub fn reduces(dtype: DType) -> bool {
    nccl_type(dtype).is_some()
}

/// Whether NCCL's calls go to the emulated device's stand-in (a test double), not to NCCL.
pub fn is_stand_in() -> bool {
    crate::cuda::is_emulated()
}

/// Which communicator a rank joins (`ncclUniqueId`): one rank makes it, the others receive its
/// bytes.
#[derive(Clone, Copy, PartialEq, Eq, Hash)]
pub struct UniqueId([u8; UNIQUE_ID_BYTES]);

impl UniqueId {
    /// A new id (`ncclGetUniqueId`; on the emulated device, the stand-in's).
    pub fn new() -> Result<UniqueId> {
        crate::cuda::nccl::unique_id("nccl::UniqueId::new").map(UniqueId)
    }

    /// Its 128 bytes, to send to the other ranks.
    pub fn as_bytes(&self) -> &[u8] {
        &self.0
    }

    /// The id whose [`as_bytes`](Self::as_bytes) another rank sent.
    pub fn from_bytes(bytes: &[u8]) -> Result<UniqueId> {
        let id = bytes.try_into().map_err(|_| Error::InvalidArgument {
            op: "nccl::UniqueId::from_bytes".into(),
            msg: format!(
                "an NCCL unique id has {UNIQUE_ID_BYTES} bytes, not {}",
                bytes.len()
            ),
        })?;
        Ok(UniqueId(id))
    }
}

impl std::fmt::Debug for UniqueId {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(f, "UniqueId(")?;
        for b in &self.0[..12] {
            write!(f, "{b:02x}")?;
        }
        write!(f, "..)")
    }
}

/// One rank of an NCCL communicator, on one CUDA device (`ncclComm_t`). Calls from several
/// threads are serialised. Every rank must issue the same collectives in the same order.
pub struct NcclComm {
    inner: CudaComm,
}

impl std::fmt::Debug for NcclComm {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(
            f,
            "NcclComm(rank {} of {} on cuda:{})",
            self.rank(),
            self.size(),
            self.inner.ordinal()
        )
    }
}

/// An input of a call: its device buffer and first element, contiguous.
struct Input {
    array: Array,
    at: usize,
}

impl Input {
    fn buffer(&self) -> &CudaStorage {
        self.array
            .storage()
            .cuda_buffer()
            .expect("the device was checked")
    }
}

impl NcclComm {
    /// Joins communicator `id` as `rank` of `size` on `device` (`ncclCommInitRank`); returns
    /// once every rank has joined. Each rank of a communicator needs its own device.
    pub fn new(device: Device, size: usize, rank: usize, id: &UniqueId) -> Result<NcclComm> {
        let op = format!("NcclComm::new(rank {rank} of {size} on {device})");
        let Device::Cuda(ordinal) = device else {
            return Err(Error::InvalidArgument {
                op,
                msg: "NCCL runs on CUDA devices; the host is not one".into(),
            });
        };
        if rank >= size {
            return Err(Error::InvalidArgument {
                op,
                msg: format!("rank {rank} is not below the size {size}"),
            });
        }
        let inner = CudaComm::init(&op, ordinal, size, rank, &id.0)?;
        Ok(NcclComm { inner })
    }

    /// This rank.
    pub fn rank(&self) -> usize {
        self.inner.rank()
    }

    /// The number of ranks.
    pub fn size(&self) -> usize {
        self.inner.size()
    }

    /// The device this rank's arrays must be on.
    pub fn device(&self) -> Device {
        Device::Cuda(self.inner.ordinal())
    }

    fn input(&self, op: &str, x: &Array) -> Result<Input> {
        if x.device() != self.device() {
            return Err(Error::DeviceMismatch {
                op: format!("{op} (rank {} of NCCL's communicator)", self.rank()),
                lhs: x.device(),
                rhs: self.device(),
            });
        }
        let array = if x.is_contiguous() {
            x.clone()
        } else {
            x.contiguous()?
        };
        let at = array.layout().offset();
        Ok(Input { array, at })
    }

    /// Whether `x` can be reduced in its own buffer: the only array holding it, contiguous
    /// from its start, on this communicator's device.
    fn reduces_in_place(&self, x: &Array) -> bool {
        x.owns_buffer()
            && x.is_contiguous()
            && x.layout().offset() == 0
            && x.device() == self.device()
    }

    fn reducible(&self, op: &'static str, x: &Array) -> Result<()> {
        if reduces(x.dtype()) {
            return Ok(());
        }
        Err(Error::UnsupportedDType {
            op,
            dtype: x.dtype(),
            shape: x.shape().to_vec(),
            expected: "a dtype NCCL reduces: int8, uint8, int32, uint32, int64, uint64, \
                       float16, bfloat16, float32 or float64",
        })
    }

    fn output(&self, op: &str, shape: &[usize], dtype: DType) -> Result<(CudaStorage, Layout)> {
        let len = shape
            .iter()
            .try_fold(1usize, |n, d| n.checked_mul(*d))
            .ok_or_else(|| Error::InvalidArgument {
                op: op.to_string(),
                msg: format!("the shape {shape:?} overflows"),
            })?;
        Ok((self.inner.alloc(len, dtype)?, Layout::contiguous(shape)))
    }

    /// `x` reduced with `op` over the ranks, elementwise, in a new array on every rank. Every
    /// rank's `x` has one shape and dtype (bool, int16 and uint16 are not reduced by NCCL).
    pub fn all_reduce(&self, x: &Array, op: ReduceOp) -> Result<Array> {
        const OP: &str = "NcclComm::all_reduce";
        self.reducible(OP, x)?;
        let input = self.input(OP, x)?;
        let (out, layout) = self.output(OP, x.shape(), x.dtype())?;
        self.inner
            .all_reduce(OP, (input.buffer(), input.at), x.size(), &out, op)?;
        Ok(Array::from_storage(Storage::Cuda(out), layout))
    }

    /// As [`all_reduce`](Self::all_reduce), in `x`'s own buffer when `x` is the only array
    /// holding it (a packed gradient bucket): no second buffer.
    pub fn all_reduce_owned(&self, x: Array, op: ReduceOp) -> Result<Array> {
        const OP: &str = "NcclComm::all_reduce_owned";
        if !self.reduces_in_place(&x) {
            return self.all_reduce(&x, op);
        }
        self.reducible(OP, &x)?;
        let buf = x.storage().cuda_buffer().expect("the device was checked");
        self.inner.all_reduce(OP, (buf, 0), x.size(), buf, op)?;
        Ok(x)
    }

    /// Starts [`all_reduce`](Self::all_reduce) on the communicator's own stream and returns at
    /// once: the all-reduce waits for the work queued so far on the device's stream (the
    /// kernels that computed `x`), and the device's stream goes on beside it (PyTorch's NCCL
    /// stream; how `kusari-mn`'s `pure_nccl` overlaps the gradients' exchange with backward).
    /// [`PendingAllReduce::wait`] gives the result. In place when `x` is the only array holding
    /// its buffer, as [`all_reduce_owned`](Self::all_reduce_owned); `x` is kept until the wait
    /// either way, so that its buffer outlives the all-reduce.
    ///
    /// Every rank must start and call its collectives in the same order, as always; a
    /// blocking call on this communicator first orders the device's stream after the
    /// all-reduces started. On the emulated device the stand-in runs the all-reduce on a
    /// thread of its own while the caller goes on.
    ///
    /// ```
    /// use kusari::nccl::{NcclComm, ReduceOp, UniqueId};
    /// use kusari::{Array, Device};
    ///
    /// kusari::cuda::emulate(2).unwrap();
    /// if kusari::nccl::unavailable_reason().is_none() {
    ///     let id = UniqueId::new().unwrap();
    ///     std::thread::scope(|s| {
    ///         for rank in 0..2 {
    ///             s.spawn(move || {
    ///                 let comm = NcclComm::new(Device::Cuda(rank), 2, rank, &id).unwrap();
    ///                 let x = Array::from_vec(vec![rank as f32; 4], &[4]).unwrap();
    ///                 let x = x.to_device(Device::Cuda(rank)).unwrap();
    ///                 let pending = comm.start_all_reduce(x, ReduceOp::Avg).unwrap();
    ///                 // ... more work on the device's stream here ...
    ///                 let mean = pending.wait().unwrap();
    ///                 assert_eq!(mean.to_vec::<f32>().unwrap(), vec![0.5; 4]);
    ///             });
    ///         }
    ///     });
    /// }
    /// ```
    pub fn start_all_reduce(&self, x: Array, op: ReduceOp) -> Result<PendingAllReduce> {
        const OP: &str = "NcclComm::start_all_reduce";
        self.reducible(OP, &x)?;
        let in_place = self.reduces_in_place(&x);
        let input = self.input(OP, &x)?;
        let output = if in_place {
            None
        } else {
            Some(self.output(OP, x.shape(), x.dtype())?)
        };
        let out_buf = match &output {
            Some((out, _)) => out,
            None => input.buffer(),
        };
        // SAFETY: `PendingAllReduce` keeps the input and the output, which no other array
        // holds (the output is new; the input is either read only or this array's alone),
        // until its wait.
        let call = all_reduce_call((input.buffer(), input.at), x.size(), out_buf, op);
        let work = unsafe { self.inner.start(OP, call) }?;
        let result = match output {
            Some((out, layout)) => Array::from_storage(Storage::Cuda(out), layout),
            None => input.array.clone(),
        };
        drop(x);
        Ok(PendingAllReduce {
            work,
            result,
            _input: input.array,
        })
    }

    /// Root's `x` on every rank, in a new array. Every rank passes an array of the root's
    /// shape and dtype; only the root's elements are read.
    pub fn broadcast(&self, x: &Array, root: usize) -> Result<Array> {
        const OP: &str = "NcclComm::broadcast";
        self.check_rank(OP, "root", root)?;
        let input = self.input(OP, x)?;
        let (out, layout) = self.output(OP, x.shape(), x.dtype())?;
        self.inner
            .broadcast(OP, (input.buffer(), input.at), x.size(), &out, root)?;
        Ok(Array::from_storage(Storage::Cuda(out), layout))
    }

    /// Every rank's `x`, stacked in rank order: shape `[size, x's shape...]`. Every rank's `x`
    /// has one shape and dtype.
    pub fn all_gather(&self, x: &Array) -> Result<Array> {
        const OP: &str = "NcclComm::all_gather";
        let input = self.input(OP, x)?;
        let mut shape = vec![self.size()];
        shape.extend_from_slice(x.shape());
        let (out, layout) = self.output(OP, &shape, x.dtype())?;
        self.inner
            .all_gather(OP, (input.buffer(), input.at), x.size(), &out)?;
        Ok(Array::from_storage(Storage::Cuda(out), layout))
    }

    /// Sends `x` to rank `peer`, which must [`recv`](Self::recv) it with its shape and dtype;
    /// returns once it is received. Two ranks that send to each other must use
    /// [`exchange`](Self::exchange) instead (on a GPU, two sends wait for each other forever).
    pub fn send(&self, x: &Array, peer: usize) -> Result<()> {
        self.exchange(&[(peer, x)], &[]).map(|_| ())
    }

    /// The array of `shape` and `dtype` rank `peer` sends.
    pub fn recv(&self, peer: usize, shape: &[usize], dtype: DType) -> Result<Array> {
        let mut got = self.exchange(&[], &[(peer, shape, dtype)])?;
        Ok(got.pop().expect("one receive"))
    }

    /// One group of transfers (`ncclGroupStart` .. `ncclGroupEnd`): each `(peer, x)` of
    /// `sends` sent, each `(peer, shape, dtype)` of `recvs` received, in that order for each
    /// pair of ranks. What gather, scatter and all-to-all are made of. Returns the received
    /// arrays in `recvs`' order.
    pub fn exchange(
        &self,
        sends: &[(usize, &Array)],
        recvs: &[(usize, &[usize], DType)],
    ) -> Result<Vec<Array>> {
        const OP: &str = "NcclComm::exchange";
        let mut inputs = Vec::with_capacity(sends.len());
        for (peer, x) in sends {
            self.check_rank(OP, "peer", *peer)?;
            inputs.push((self.input(OP, x)?, x.size(), *peer));
        }
        let mut outputs = Vec::with_capacity(recvs.len());
        for (peer, shape, dtype) in recvs {
            self.check_rank(OP, "peer", *peer)?;
            outputs.push((self.output(OP, shape, *dtype)?, *peer));
        }
        let send_refs: Vec<_> = inputs
            .iter()
            .map(|(i, n, peer)| (i.buffer(), i.at, *n, *peer))
            .collect();
        let recv_refs: Vec<_> = outputs.iter().map(|((s, _), peer)| (s, *peer)).collect();
        self.inner.group(OP, &send_refs, &recv_refs)?;
        Ok(outputs
            .into_iter()
            .map(|((s, layout), _)| Array::from_storage(Storage::Cuda(s), layout))
            .collect())
    }

    fn check_rank(&self, op: &str, what: &str, r: usize) -> Result<()> {
        if r < self.size() {
            return Ok(());
        }
        Err(Error::InvalidArgument {
            op: op.to_string(),
            msg: format!(
                "{what} {r} is not a rank of this communicator of {}",
                self.size()
            ),
        })
    }
}

/// An all-reduce running on its communicator's own stream: see
/// [`NcclComm::start_all_reduce`]. Dropped without [`wait`](Self::wait), it still waits for the
/// all-reduce (its buffers are freed after it) and discards the result.
#[must_use = "the all-reduce's result comes from `wait`"]
pub struct PendingAllReduce {
    // Dropped first: the buffers below are freed only after the device's stream waits.
    work: AsyncWork,
    result: Array,
    _input: Array,
}

impl PendingAllReduce {
    /// The reduced array, once the device's stream is ordered after the all-reduce: kernels
    /// that use it run after it (on a GPU this returns at once; on the emulated device, once
    /// the stand-in has done it). An error of the all-reduce (on the emulated device, a broken
    /// NCCL rule) is returned here.
    pub fn wait(self) -> Result<Array> {
        let PendingAllReduce {
            work,
            result,
            _input,
        } = self;
        work.wait()?;
        Ok(result)
    }
}

impl std::fmt::Debug for PendingAllReduce {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(
            f,
            "PendingAllReduce({:?} {} on {})",
            self.result.shape(),
            self.result.dtype(),
            self.result.device()
        )
    }
}

#[cfg(test)]
mod tests {
    use std::time::{Duration, Instant};

    use super::*;

    /// Runs `f(rank, comm)` on `n` ranks, each a thread on its own emulated device; `None`
    /// (after saying why) where the emulated device cannot run.
    fn ranks<T: Send>(n: usize, f: impl Fn(usize, &NcclComm) -> T + Sync) -> Option<Vec<T>> {
        if crate::cuda::emulate(4).is_err() && !crate::cuda::is_emulated() {
            eprintln!("SKIPPED: this process uses the CUDA driver, not the emulated device");
            return None;
        }
        if let Some(why) = unavailable_reason() {
            assert!(
                !crate::testing::gpu_required(),
                "NCCL's stand-in cannot run: {why}"
            );
            eprintln!("SKIPPED: {why}");
            return None;
        }
        let id = UniqueId::new().unwrap();
        let f = &f;
        Some(std::thread::scope(|s| {
            let handles: Vec<_> = (0..n)
                .map(|rank| {
                    s.spawn(move || {
                        let comm = NcclComm::new(Device::Cuda(rank), n, rank, &id).unwrap();
                        f(rank, &comm)
                    })
                })
                .collect();
            handles.into_iter().map(|h| h.join().unwrap()).collect()
        }))
    }

    fn on(rank: usize, v: Vec<f32>) -> Array {
        let n = v.len();
        Array::from_vec(v, &[n])
            .unwrap()
            .to_device(Device::Cuda(rank))
            .unwrap()
    }

    #[test]
    fn nccl_start_all_reduce_returns_before_the_other_ranks_arrive() {
        let Some(got) = ranks(2, |rank, comm| {
            if rank == 1 {
                std::thread::sleep(Duration::from_millis(400));
            }
            let start = Instant::now();
            let pending = comm
                .start_all_reduce(on(rank, vec![rank as f32 + 1.0, 10.0]), ReduceOp::Sum)
                .unwrap();
            let returned = start.elapsed();
            // The device's stream goes on meanwhile.
            let other = on(rank, vec![2.0, 3.0]).mul_scalar(2.0).unwrap();
            let sum = pending.wait().unwrap().to_vec::<f32>().unwrap();
            (returned, sum, other.to_vec::<f32>().unwrap())
        }) else {
            return;
        };
        // Rank 0 started 400 ms before rank 1 joined: a blocking all-reduce would have held it.
        assert!(got[0].0 < Duration::from_millis(200), "{:?}", got[0].0);
        for (_, sum, other) in got {
            assert_eq!(sum, vec![3.0, 20.0]);
            assert_eq!(other, vec![4.0, 6.0]);
        }
    }

    #[test]
    fn nccl_start_all_reduce_in_place_or_beside_a_shared_input() {
        let Some(got) = ranks(3, |rank, comm| {
            let r = rank as f32;
            // Held elsewhere too: reduced into a new buffer, the input left as it was.
            let shared = on(rank, vec![r, -r, 1.0]);
            let kept = shared.clone();
            let mean = comm.start_all_reduce(shared, ReduceOp::Avg).unwrap();
            // The only holder: in place.
            let owned = on(rank, vec![2.0 * r, 5.0]);
            let max = comm.start_all_reduce(owned, ReduceOp::Max).unwrap();
            (
                mean.wait().unwrap().to_vec::<f32>().unwrap(),
                max.wait().unwrap().to_vec::<f32>().unwrap(),
                kept.to_vec::<f32>().unwrap(),
            )
        }) else {
            return;
        };
        for (rank, (mean, max, kept)) in got.into_iter().enumerate() {
            let r = rank as f32;
            assert_eq!(mean, vec![1.0, -1.0, 1.0]);
            assert_eq!(max, vec![4.0, 5.0]);
            assert_eq!(kept, vec![r, -r, 1.0]);
        }
    }

    #[test]
    fn nccl_a_blocking_call_comes_after_the_started_ones_and_errors_reach_the_wait() {
        // Started, then blocking, on every rank: the stand-in would refuse a blocking call
        // that overtook the started one (another count), so this passing shows the order.
        let Some(got) = ranks(2, |rank, comm| {
            let started = comm
                .start_all_reduce(on(rank, vec![1.0; 3]), ReduceOp::Sum)
                .unwrap();
            let blocking = comm.all_reduce(&on(rank, vec![rank as f32; 5]), ReduceOp::Sum);
            let dropped = comm.start_all_reduce(on(rank, vec![1.0; 2]), ReduceOp::Sum);
            drop(dropped);
            (
                started.wait().unwrap().to_vec::<f32>().unwrap(),
                blocking.unwrap().to_vec::<f32>().unwrap(),
            )
        }) else {
            return;
        };
        for (started, blocking) in got {
            assert_eq!(started, vec![2.0; 3]);
            assert_eq!(blocking, vec![1.0; 5]);
        }
        // Ranks that start different counts: each one's wait says so.
        let Some(errors) = ranks(2, |rank, comm| {
            let pending = comm
                .start_all_reduce(on(rank, vec![1.0; 3 + rank]), ReduceOp::Sum)
                .unwrap();
            pending.wait().unwrap_err().to_string()
        }) else {
            return;
        };
        for e in errors {
            assert!(e.contains("NcclComm::start_all_reduce"), "{e}");
            assert!(e.contains("different collectives"), "{e}");
            assert!(e.contains("ncclAllReduce(4 ncclFloat32"), "{e}");
        }
    }
}
