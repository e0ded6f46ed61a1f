//! [`Communicator`]: the ranks of a job, the collectives on [`Array`]s and on serializable
//! values, and the gradient exchange of data-parallel training (ChainerMN's communicators).
//!
//! See [`create_communicator_with`] for what each communicator does.

use std::collections::BTreeMap;
use std::sync::Arc;

use kusari::link::{Link, Parameter};
use kusari::{Array, DType, Device};
use serde::Serialize;
use serde::de::DeserializeOwned;

use crate::abort::panic_message;
use crate::error::{Error, Result};
use crate::payload;
use crate::thread::{ThreadTransport, decode_parts, encode_parts};
use crate::transport::Transport;

/// How gradients are averaged across ranks (see the table of [`create_communicator_with`]).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Algorithm {
    /// One all-reduce per parameter.
    Naive,
    /// Buckets of packed gradients, in reverse parameter order.
    Flat,
    /// Buckets packed on the GPU, one NCCL all-reduce each (feature `nccl`).
    PureNccl,
}

/// What a communicator is built with besides its transport and algorithm.
#[derive(Clone, Debug, PartialEq)]
pub struct Options {
    /// The dtype gradients travel in (ChainerMN's `allreduce_grad_dtype`): `None` sends
    /// float64 parameters' gradients as float64 and all others as float32; `Some(F32)` or
    /// `Some(F64)` sends every gradient in that dtype; `pure_nccl` also takes `Some(F16)` and
    /// `Some(BF16)` (half the bytes; each rank's gradient is scaled by 1/size before the sum,
    /// NCCL's `ncclAvg`, so the sum does not overflow).
    pub allreduce_grad_dtype: Option<DType>,
    /// The largest bucket, in bytes of the exchange dtype (PyTorch DDP's `bucket_cap_mb`: 25 MiB).
    /// A parameter larger than this travels alone.
    pub bucket_cap_bytes: usize,
    /// The first bucket's cap (DDP's 1 MiB): the last parameters' gradients, produced first by
    /// backward, leave early.
    pub first_bucket_cap_bytes: usize,
    /// Whether the multi-node optimizer exchanges each bucket during backward, as soon as its
    /// gradients are complete (PyTorch DDP's overlap), rather than all after backward. Used by
    /// `pure_nccl` (on NCCL's own stream) and by `flat` on a transport that allows it
    /// ([`Transport::concurrent`]); `naive` never does.
    pub overlap: bool,
}

impl Default for Options {
    fn default() -> Self {
        Options {
            allreduce_grad_dtype: None,
            bucket_cap_bytes: 25 << 20,
            first_bucket_cap_bytes: 1 << 20,
            overlap: true,
        }
    }
}

/// One all-reduce of [`Communicator::buckets`]: parameters whose gradients travel together.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Bucket {
    /// The parameters' paths, in the order they are packed (reverse parameter order).
    pub params: Vec<String>,
    /// The dtype the bucket travels in.
    pub dtype: DType,
    /// The number of elements.
    pub len: usize,
}

/// The ranks of a job and what they exchange (ChainerMN's `CommunicatorBase`). Cheap to clone:
/// clones share the transport.
///
/// ```
/// use kusari::Array;
/// use kusari_mn::run_threads;
///
/// // Three ranks as threads of this process, each with its own value.
/// let sums = run_threads(3, "flat", |comm| {
///     let x = Array::from_vec(vec![comm.rank() as f32, 1.0], &[2])?;
///     Ok(comm.allreduce(&x)?.to_vec::<f32>()?)
/// });
/// for sum in sums {
///     assert_eq!(sum.unwrap(), vec![3.0, 3.0]);
/// }
/// ```
#[derive(Clone)]
pub struct Communicator {
    inner: Arc<Inner>,
}

struct Inner {
    transport: Box<dyn Transport>,
    name: &'static str,
    algorithm: Algorithm,
    options: Options,
    /// `pure_nccl`'s NCCL communicator, on this rank's GPU.
    #[cfg(feature = "nccl")]
    nccl: Option<kusari::nccl::NcclComm>,
}

/// A communicator of `name` (`naive`, `flat`, `pure_nccl` or `single`) on MPI's world: the
/// program must be started with `mpirun` (`single` needs neither MPI nor `mpirun`).
#[cfg(feature = "mpi")]
pub fn create_communicator(name: &str) -> Result<Communicator> {
    if name == "single" {
        return Ok(Communicator::single());
    }
    let transport = crate::mpi::MpiTransport::world()?;
    create_communicator_with(name, Box::new(transport), Options::default())
}

/// A communicator of `name` on `transport`, with `options`:
///
/// | name | gradients | for |
/// |---|---|---|
/// | `naive` | one all-reduce per parameter, through the host | checking the others; few, large parameters |
/// | `flat` | packed into buckets (about 25 MiB, a small first one) in reverse parameter order, one all-reduce per bucket, through the host, during backward | MPI between processes, CPU or GPU ranks |
/// | `pure_nccl` | packed into buckets on each rank's GPU (`cuda:{intra_rank}`), one NCCL all-reduce each, in float32, float64, float16 or bfloat16 ([`Options::allreduce_grad_dtype`]), on NCCL's own stream during backward | GPUs, on one node or several (feature `nccl`) |
/// | `single` | nothing to exchange: one rank | running the same program without `mpirun` |
///
/// `pure_nccl` forms its NCCL communicator here (collective): rank 0 makes NCCL's unique id
/// and sends it over the transport; a rank that cannot join (no GPU for it, no NCCL library)
/// makes it an error on every rank. Its collectives on arrays on the rank's GPU go through
/// NCCL where NCCL has them (`allreduce`, `bcast`, `allgather`); objects, `gather`, `scatter`,
/// `alltoall`, `send`/`recv` and host arrays go through the transport. On the emulated device
/// (`KUSARI_CUDA_EMULATE`), NCCL is kusari's stand-in, a test double that enforces NCCL's
/// rules (`kusari::nccl`, kusari's feature `nccl`). ChainerMN's other names
/// (`hierarchical`, `two_dimensional`, `non_cuda_aware`) are errors that say to use
/// `pure_nccl` or `flat`.
pub fn create_communicator_with(
    name: &str,
    transport: Box<dyn Transport>,
    options: Options,
) -> Result<Communicator> {
    let ordinal = transport.intra_rank();
    create_on(name, transport, options, ordinal)
}

/// [`create_communicator_with`], `pure_nccl` on `cuda:{ordinal}`.
fn create_on(
    name: &str,
    transport: Box<dyn Transport>,
    options: Options,
    ordinal: usize,
) -> Result<Communicator> {
    let invalid = |msg: String| Error::InvalidArgument {
        op: "create_communicator".into(),
        rank: transport.rank(),
        msg,
    };
    let (name, algorithm) = match name {
        "naive" => ("naive", Algorithm::Naive),
        "flat" => ("flat", Algorithm::Flat),
        "single" if transport.size() == 1 => ("single", Algorithm::Flat),
        "single" => {
            return Err(invalid(format!(
                "`single` is one rank, but the transport has {}",
                transport.size()
            )));
        }
        #[cfg(feature = "nccl")]
        "pure_nccl" => ("pure_nccl", Algorithm::PureNccl),
        #[cfg(not(feature = "nccl"))]
        "pure_nccl" => {
            return Err(invalid(
                "the `pure_nccl` communicator needs kusari-mn's feature `nccl` (and kusari's \
                 CUDA backend); without it use `flat`, which carries CUDA gradients through the \
                 host"
                    .into(),
            ));
        }
        "hierarchical" | "two_dimensional" | "non_cuda_aware" => {
            return Err(invalid(format!(
                "the `{name}` communicator is not built; use `pure_nccl` (NCCL between GPUs, \
                 feature `nccl`) or `flat`"
            )));
        }
        other => {
            return Err(invalid(format!(
                "unknown communicator {other:?}; expected \"naive\", \"flat\", \"pure_nccl\" \
                 or \"single\""
            )));
        }
    };
    match (options.allreduce_grad_dtype, algorithm) {
        (None | Some(DType::F32 | DType::F64), _)
        | (Some(DType::F16 | DType::BF16), Algorithm::PureNccl) => {}
        (Some(other), Algorithm::PureNccl) => {
            return Err(invalid(format!(
                "allreduce_grad_dtype {other} is not float16, bfloat16, float32 or float64"
            )));
        }
        (Some(other), _) => {
            return Err(invalid(format!(
                "allreduce_grad_dtype {other} is not float32 or float64 (float16 and bfloat16 \
                 travel with `pure_nccl`)"
            )));
        }
    }
    if options.bucket_cap_bytes == 0 || options.first_bucket_cap_bytes == 0 {
        return Err(invalid("bucket caps must be at least one byte".into()));
    }
    #[cfg(feature = "nccl")]
    let nccl = match algorithm {
        Algorithm::PureNccl => Some(crate::nccl::join(transport.as_ref(), ordinal)?),
        _ => None,
    };
    #[cfg(not(feature = "nccl"))]
    let _ = ordinal;
    Ok(Communicator {
        inner: Arc::new(Inner {
            transport,
            name,
            algorithm,
            options,
            #[cfg(feature = "nccl")]
            nccl,
        }),
    })
}

/// Runs `f` on `size` ranks, each a thread of this process with a communicator of `name` on a
/// [`ThreadTransport`], and returns each rank's result in rank order. A rank that panics gives
/// an error with the panic's message; the others' collectives then fail instead of waiting.
pub fn run_threads<T: Send>(
    size: usize,
    name: &str,
    f: impl Fn(Communicator) -> Result<T> + Sync,
) -> Vec<Result<T>> {
    run_threads_with(ThreadTransport::world(size), name, Options::default(), f)
}

/// [`run_threads`] on given thread ranks (see [`ThreadTransport::world_with`]) with `options`.
pub fn run_threads_with<T: Send>(
    ranks: Vec<ThreadTransport>,
    name: &str,
    options: Options,
    f: impl Fn(Communicator) -> Result<T> + Sync,
) -> Vec<Result<T>> {
    std::thread::scope(|s| {
        let handles: Vec<_> = ranks
            .into_iter()
            .map(|t| {
                let rank = t.rank();
                let (f, options) = (&f, options.clone());
                let handle = s.spawn(move || {
                    let comm = create_communicator_with(name, Box::new(t), options)?;
                    f(comm)
                });
                (rank, handle)
            })
            .collect();
        handles
            .into_iter()
            .map(|(rank, h)| {
                h.join().unwrap_or_else(|panic| {
                    Err(Error::Transport {
                        op: "run_threads".into(),
                        rank,
                        msg: format!("the rank panicked: {}", panic_message(panic.as_ref())),
                    })
                })
            })
            .collect()
    })
}

impl Communicator {
    /// One rank, no MPI (ChainerMN's dummy communicator): every collective returns this rank's
    /// own data, gradients are left as they are.
    pub fn single() -> Communicator {
        let t = ThreadTransport::world(1).pop().expect("one rank");
        create_communicator_with("single", Box::new(t), Options::default())
            .expect("single on one rank")
    }

    fn t(&self) -> &dyn Transport {
        self.inner.transport.as_ref()
    }

    /// This rank, `0..size()`.
    pub fn rank(&self) -> usize {
        self.t().rank()
    }

    /// The number of ranks.
    pub fn size(&self) -> usize {
        self.t().size()
    }

    /// The rank among those on this node: the GPU this rank takes is `cuda:{intra_rank}`.
    pub fn intra_rank(&self) -> usize {
        self.t().intra_rank()
    }

    /// The number of ranks on this node.
    pub fn intra_size(&self) -> usize {
        self.t().intra_size()
    }

    /// The communicator's name (`naive`, `flat`, `pure_nccl`, `single`).
    pub fn name(&self) -> &'static str {
        self.inner.name
    }

    /// The transport's name (`threads`, `mpi`).
    pub fn transport_name(&self) -> &'static str {
        self.t().name()
    }

    /// How gradients are averaged.
    pub fn algorithm(&self) -> Algorithm {
        self.inner.algorithm
    }

    /// The options it was built with.
    pub fn options(&self) -> &Options {
        &self.inner.options
    }

    /// `pure_nccl`'s NCCL communicator.
    #[cfg(feature = "nccl")]
    pub(crate) fn nccl(&self) -> Option<&kusari::nccl::NcclComm> {
        self.inner.nccl.as_ref()
    }

    /// This rank's GPU when it has CUDA devices: `cuda:{intra_rank}` (for `pure_nccl`, the
    /// device of its NCCL communicator); the host otherwise.
    pub fn device(&self) -> Device {
        #[cfg(feature = "nccl")]
        if let Some(nccl) = &self.inner.nccl {
            return nccl.device();
        }
        if kusari::cuda::device_count() > 0 {
            Device::Cuda(self.intra_rank())
        } else {
            Device::Cpu
        }
    }

    /// Ends the whole job (MPI_Abort): every rank stops and the launcher exits with `code`.
    pub fn abort(&self, code: i32) -> ! {
        self.t().abort(code)
    }

    /// The ranks that give the same `color`, numbered by `key` then by rank, as a communicator
    /// of the same kind (MPI's `MPI_Comm_split`; for `pure_nccl`, a new NCCL communicator on
    /// each rank's same GPU). Collective.
    pub fn split(&self, color: u32, key: u32) -> Result<Communicator> {
        let transport = self.t().split("split", color, key)?;
        let options = self.inner.options.clone();
        let ordinal = match self.device() {
            Device::Cuda(i) if self.inner.algorithm == Algorithm::PureNccl => i,
            _ => transport.intra_rank(),
        };
        create_on(self.inner.name, transport, options, ordinal)
    }

    /// Every rank's description of `x` (dtype and shape), and whether every rank's `x` can go
    /// through `pure_nccl`'s NCCL (on the rank's GPU, in a dtype NCCL reduces), in one
    /// exchange: every rank learns the same, so all take the same path.
    fn survey(&self, op: &str, x: &Array) -> Result<(Vec<Vec<u8>>, bool)> {
        #[cfg(feature = "nccl")]
        let on_gpu =
            self.inner.nccl.as_ref().is_some_and(|nccl| {
                x.device() == nccl.device() && kusari::nccl::reduces(x.dtype())
            });
        #[cfg(not(feature = "nccl"))]
        let on_gpu = false;
        let mut mine = describe(x).into_bytes();
        mine.push(u8::from(on_gpu));
        let mut all = self.t().allgather(op, &mine)?;
        let all_on_gpu = all.iter().all(|w| w.last() == Some(&1));
        for w in &mut all {
            w.pop();
        }
        Ok((all, all_on_gpu))
    }

    fn invalid(&self, op: &str, msg: impl Into<String>) -> Error {
        Error::InvalidArgument {
            op: op.into(),
            rank: self.rank(),
            msg: msg.into(),
        }
    }

    fn decode(&self, op: &str, bytes: &[u8], device: Device) -> Result<Array> {
        payload::decode(op, self.rank(), bytes, device)
    }

    // ----- collectives on arrays -----

    /// Root's `x` on every rank: the root passes `Some`, the others `None` (what they pass is
    /// not read). The others get it on their [default device](kusari::default_device).
    pub fn bcast(&self, x: Option<&Array>, root: usize) -> Result<Array> {
        #[cfg(feature = "nccl")]
        if let Some(nccl) = &self.inner.nccl {
            // The root says what it sends and whether it is on its GPU.
            let meta = match (self.rank() == root, x) {
                (true, Some(x)) => Some((
                    x.shape().to_vec(),
                    payload::dtype_code(x.dtype()),
                    x.device() == nccl.device() && kusari::nccl::reduces(x.dtype()),
                )),
                (true, None) => None,
                (false, _) => Some(Default::default()),
            };
            let Some(meta) = meta else {
                return Err(self.invalid("bcast", "the root must give the array"));
            };
            let (shape, code, on_gpu): (Vec<usize>, u8, bool) =
                self.bcast_obj(Some(&meta), root)?;
            if on_gpu {
                let dtype = payload::dtype_of(code).ok_or_else(|| Error::Transport {
                    op: "bcast".into(),
                    rank: self.rank(),
                    msg: format!("the root's dtype code {code} is not a dtype"),
                })?;
                return crate::nccl::bcast(nccl, x, &shape, dtype, root);
            }
        }
        let mut buf = match (self.rank() == root, x) {
            (true, Some(x)) => payload::encode(x)?,
            (true, None) => return Err(self.invalid("bcast", "the root must give the array")),
            (false, _) => Vec::new(),
        };
        self.t().bcast("bcast", &mut buf, root)?;
        match x {
            Some(x) if self.rank() == root => Ok(x.clone()),
            _ => self.decode("bcast", &buf, kusari::default_device()),
        }
    }

    /// The elementwise sum of every rank's `x`, on every rank, on `x`'s device. The ranks'
    /// arrays must have one shape and dtype (an [`Error::Mismatch`] otherwise, on every rank).
    /// float32 and float64 go through the transport's reduction; other dtypes are gathered and
    /// added in rank order (float16 and bfloat16 in float32, rounded once).
    pub fn allreduce(&self, x: &Array) -> Result<Array> {
        const OP: &str = "allreduce";
        let (described, on_gpus) = self.survey(OP, x)?;
        self.agreed(OP, &described)?;
        #[cfg(feature = "nccl")]
        if let (Some(nccl), true) = (&self.inner.nccl, on_gpus) {
            return crate::nccl::allreduce(nccl, x);
        }
        #[cfg(not(feature = "nccl"))]
        let _ = on_gpus;
        match x.dtype() {
            DType::F32 | DType::F64 | DType::F16 | DType::BF16 => {
                // float64 travels as itself, the others as float32 (half types rounded once).
                let wire = if x.dtype() == DType::F64 {
                    DType::F64
                } else {
                    DType::F32
                };
                let shape = [x.shape().to_vec()];
                let mut packed = Packed::pack(wire, &[Some(x.clone())], &shape)?;
                self.sum_in_place(OP, &mut packed)?;
                let sum = packed.unpack(&shape)?.pop().expect("one array");
                Ok(sum.astype(x.dtype())?.to_device(x.device())?)
            }
            _ => {
                let all = self.allgather(x)?;
                let mut sum = all[0].clone();
                for a in &all[1..] {
                    sum = sum.add(a)?;
                }
                Ok(sum)
            }
        }
    }

    /// Every rank's `x`, in rank order, on `x`'s device.
    pub fn allgather(&self, x: &Array) -> Result<Vec<Array>> {
        #[cfg(feature = "nccl")]
        if let Some(nccl) = &self.inner.nccl {
            // NCCL gathers one shape: the ranks first compare theirs.
            let (shapes, on_gpus) = self.survey("allgather", x)?;
            if on_gpus && shapes.iter().all(|s| s == &shapes[0]) {
                return crate::nccl::allgather(nccl, x);
            }
        }
        let all = self.t().allgather("allgather", &payload::encode(x)?)?;
        all.iter()
            .map(|b| self.decode("allgather", b, x.device()))
            .collect()
    }

    /// Every rank's `x` on `root`, in rank order, on `x`'s device; `None` on the others.
    pub fn gather(&self, x: &Array, root: usize) -> Result<Option<Vec<Array>>> {
        let Some(all) = self.t().gather("gather", &payload::encode(x)?, root)? else {
            return Ok(None);
        };
        let arrays = all
            .iter()
            .map(|b| self.decode("gather", b, x.device()))
            .collect::<Result<_>>()?;
        Ok(Some(arrays))
    }

    /// Root's `xs[i]` on rank `i` (the root passes one array per rank, the others `None`), on
    /// the receiver's default device (the root keeps its own part's device).
    pub fn scatter(&self, xs: Option<&[Array]>, root: usize) -> Result<Array> {
        let parts = match (self.rank() == root, xs) {
            (true, Some(xs)) => Some(xs.iter().map(payload::encode).collect::<Result<Vec<_>>>()?),
            (true, None) => return Err(self.invalid("scatter", "the root must give the arrays")),
            (false, _) => None,
        };
        let mine = self.t().scatter("scatter", parts.as_deref(), root)?;
        match xs {
            Some(xs) if self.rank() == root => Ok(xs[root].clone()),
            _ => self.decode("scatter", &mine, kusari::default_device()),
        }
    }

    /// `xs[j]` of rank `i` arrives at rank `j` as element `i` of its result (one array per
    /// rank each way), on the receiver's default device.
    pub fn alltoall(&self, xs: &[Array]) -> Result<Vec<Array>> {
        let parts = xs.iter().map(payload::encode).collect::<Result<Vec<_>>>()?;
        let got = self.t().alltoall("alltoall", &parts)?;
        got.iter()
            .map(|b| self.decode("alltoall", b, kusari::default_device()))
            .collect()
    }

    /// Sends `x` to rank `dest` under `tag`; returns once it is on its way.
    pub fn send(&self, x: &Array, dest: usize, tag: u16) -> Result<()> {
        self.t().send("send", &payload::encode(x)?, dest, tag)
    }

    /// The next array rank `source` sent under `tag`, on this rank's default device.
    pub fn recv(&self, source: usize, tag: u16) -> Result<Array> {
        let bytes = self.t().recv("recv", source, tag)?;
        self.decode("recv", &bytes, kusari::default_device())
    }

    // ----- collectives on serializable values -----

    /// Root's `value` on every rank (the others pass `None`).
    pub fn bcast_obj<T: Serialize + DeserializeOwned>(
        &self,
        value: Option<&T>,
        root: usize,
    ) -> Result<T> {
        let mut buf = match (self.rank() == root, value) {
            (true, Some(v)) => to_bytes("bcast_obj", self.rank(), v)?,
            (true, None) => return Err(self.invalid("bcast_obj", "the root must give the value")),
            (false, _) => Vec::new(),
        };
        self.t().bcast("bcast_obj", &mut buf, root)?;
        from_bytes("bcast_obj", self.rank(), &buf)
    }

    /// Every rank's `value`, in rank order.
    pub fn allgather_obj<T: Serialize + DeserializeOwned>(&self, value: &T) -> Result<Vec<T>> {
        let mine = to_bytes("allgather_obj", self.rank(), value)?;
        let all = self.t().allgather("allgather_obj", &mine)?;
        all.iter()
            .map(|b| from_bytes("allgather_obj", self.rank(), b))
            .collect()
    }

    /// Every rank's `value` on `root`, in rank order; `None` on the others.
    pub fn gather_obj<T: Serialize + DeserializeOwned>(
        &self,
        value: &T,
        root: usize,
    ) -> Result<Option<Vec<T>>> {
        let mine = to_bytes("gather_obj", self.rank(), value)?;
        let Some(all) = self.t().gather("gather_obj", &mine, root)? else {
            return Ok(None);
        };
        let values = all
            .iter()
            .map(|b| from_bytes("gather_obj", self.rank(), b))
            .collect::<Result<_>>()?;
        Ok(Some(values))
    }

    /// Root's `values[i]` on rank `i` (the root passes one value per rank, the others `None`).
    pub fn scatter_obj<T: Serialize + DeserializeOwned>(
        &self,
        values: Option<&[T]>,
        root: usize,
    ) -> Result<T> {
        let parts = match (self.rank() == root, values) {
            (true, Some(vs)) => Some(
                vs.iter()
                    .map(|v| to_bytes("scatter_obj", self.rank(), v))
                    .collect::<Result<Vec<_>>>()?,
            ),
            (true, None) => {
                return Err(self.invalid("scatter_obj", "the root must give the values"));
            }
            (false, _) => None,
        };
        let mine = self.t().scatter("scatter_obj", parts.as_deref(), root)?;
        from_bytes("scatter_obj", self.rank(), &mine)
    }

    /// `values[j]` of rank `i` arrives at rank `j` as element `i` of its result.
    pub fn alltoall_obj<T: Serialize + DeserializeOwned>(&self, values: &[T]) -> Result<Vec<T>> {
        let parts = values
            .iter()
            .map(|v| to_bytes("alltoall_obj", self.rank(), v))
            .collect::<Result<Vec<_>>>()?;
        let got = self.t().alltoall("alltoall_obj", &parts)?;
        got.iter()
            .map(|b| from_bytes("alltoall_obj", self.rank(), b))
            .collect()
    }

    /// Sends `value` to rank `dest` under `tag`.
    pub fn send_obj<T: Serialize>(&self, value: &T, dest: usize, tag: u16) -> Result<()> {
        let bytes = to_bytes("send_obj", self.rank(), value)?;
        self.t().send("send_obj", &bytes, dest, tag)
    }

    /// The next value rank `source` sent under `tag`.
    pub fn recv_obj<T: DeserializeOwned>(&self, source: usize, tag: u16) -> Result<T> {
        let bytes = self.t().recv("recv_obj", source, tag)?;
        from_bytes("recv_obj", self.rank(), &bytes)
    }

    /// The mean over ranks of each named metric (ChainerMN's multi-node evaluator): every rank
    /// must report the same names. One collective: each rank's names and values travel
    /// together, and every rank sums them in rank order, so all get the same bits.
    pub fn mean_metrics(&self, metrics: &BTreeMap<String, f64>) -> Result<BTreeMap<String, f64>> {
        const OP: &str = "mean_metrics";
        let names: Vec<&String> = metrics.keys().collect();
        let values: Vec<f64> = metrics.values().copied().collect();
        let mine = to_bytes(OP, self.rank(), &(format!("{names:?}"), values))?;
        let all: Vec<(String, Vec<f64>)> = self
            .t()
            .allgather(OP, &mine)?
            .iter()
            .map(|bytes| from_bytes(OP, self.rank(), bytes))
            .collect::<Result<_>>()?;
        let described: Vec<Vec<u8>> = all.iter().map(|(d, _)| d.clone().into_bytes()).collect();
        self.agreed(OP, &described)?;
        let n = self.size() as f64;
        Ok(metrics
            .keys()
            .enumerate()
            .map(|(i, name)| {
                let sum: f64 = all.iter().map(|(_, v)| v[i]).sum();
                (name.clone(), sum / n)
            })
            .collect())
    }

    // ----- models -----

    /// Checks that every rank has the same parameters and persistent values (paths, shapes,
    /// dtypes) as rank 0, so that no rank waits in a collective the others never call. The
    /// error, the same on every rank, names the first rank and entry that differ.
    pub fn check_same_params(&self, link: &dyn Link) -> Result<()> {
        let mine: Vec<String> = link
            .named_state()
            .into_iter()
            .map(|(path, p)| describe_param(&path, p))
            .collect();
        let all = self.allgather_obj(&mine)?;
        for (r, theirs) in all.iter().enumerate().skip(1) {
            if theirs == &all[0] {
                continue;
            }
            let i = all[0]
                .iter()
                .zip(theirs)
                .position(|(a, b)| a != b)
                .unwrap_or(all[0].len().min(theirs.len()));
            let at = |list: &[String]| list.get(i).cloned().unwrap_or_else(|| "nothing".into());
            return Err(Error::Mismatch {
                op: "check_same_params".into(),
                rank: self.rank(),
                detail: format!(
                    "rank 0 has {} parameters and persistent values, rank {r} has {}; entry {i} \
                     is {} on rank 0 and {} on rank {r}",
                    all[0].len(),
                    theirs.len(),
                    at(&all[0]),
                    at(theirs)
                ),
            });
        }
        Ok(())
    }

    /// Sets every parameter and persistent value of `link` to rank 0's (ChainerMN's
    /// `bcast_data`), after [`check_same_params`](Self::check_same_params). Each keeps its
    /// device.
    pub fn bcast_data(&self, link: &dyn Link) -> Result<()> {
        self.check_same_params(link)?;
        let state = link.named_state();
        let mut buf = if self.rank() == 0 {
            let parts = state
                .iter()
                .map(|(_, p)| payload::encode(&p.array()?))
                .collect::<Result<Vec<_>>>()?;
            encode_parts(&parts)
        } else {
            Vec::new()
        };
        self.t().bcast("bcast_data", &mut buf, 0)?;
        if self.rank() != 0 {
            for ((_, p), bytes) in state.iter().zip(decode_parts(&buf)) {
                p.set_array(self.decode("bcast_data", &bytes, p.device())?)?;
            }
        }
        Ok(())
    }

    /// Replaces every floating-point persistent value of `link` (a batch normalization's
    /// running averages) by its mean over the ranks (ChainerMN's `allreduce_persistent`), for
    /// example before saving a model whose ranks normalized with their local batches. Integer
    /// and boolean persistent values are left as they are. Collective.
    pub fn allreduce_persistent(&self, link: &dyn Link) -> Result<()> {
        self.check_same_params(link)?;
        let scale = 1.0 / self.size() as f64;
        for (_, p) in link.named_persistents() {
            if !p.dtype().is_float() || !p.is_initialized() {
                continue;
            }
            let sum = self.allreduce(&p.array()?)?;
            p.set_array(sum.mul_scalar(scale)?)?;
        }
        Ok(())
    }

    /// How [`multi_node_mean_grad`](Self::multi_node_mean_grad) groups `link`'s gradients:
    /// one bucket per parameter for `naive`; for `flat`, parameters in reverse order, a bucket
    /// closed when the next parameter would pass its cap or travels in another dtype.
    pub fn buckets(&self, link: &dyn Link) -> Vec<Bucket> {
        let params = link.named_params();
        let mut buckets: Vec<Bucket> = Vec::new();
        let mut open: Option<Bucket> = None;
        for (path, p) in params.iter().rev() {
            let dtype = self.exchange_dtype(p.dtype());
            let len = p.size();
            let bytes = |n: usize| n * dtype.size_in_bytes();
            if let Some(b) = &open {
                let cap = if buckets.is_empty() {
                    self.inner.options.first_bucket_cap_bytes
                } else {
                    self.inner.options.bucket_cap_bytes
                };
                if self.inner.algorithm == Algorithm::Naive
                    || b.dtype != dtype
                    || bytes(b.len + len) > cap
                {
                    buckets.extend(open.take());
                }
            }
            let b = open.get_or_insert_with(|| Bucket {
                params: Vec::new(),
                dtype,
                len: 0,
            });
            b.params.push(path.clone());
            b.len += len;
        }
        buckets.extend(open);
        buckets
    }

    fn exchange_dtype(&self, param: DType) -> DType {
        match (self.inner.options.allreduce_grad_dtype, param) {
            (Some(d), _) => d,
            (None, DType::F64) => DType::F64,
            (None, _) => DType::F32,
        }
    }

    /// Replaces every parameter's gradient by its mean over the ranks (ChainerMN's
    /// `multi_node_mean_grad`), bucket by bucket ([`buckets`](Self::buckets)) in the same order
    /// on every rank. A parameter without a gradient counts as zeros (and gets the mean);
    /// an uninitialised one is an error naming it. Gradients keep their dtype and device.
    pub fn multi_node_mean_grad(&self, link: &dyn Link) -> Result<()> {
        const OP: &str = "multi_node_mean_grad";
        let params: BTreeMap<String, &Parameter> = link.named_params().into_iter().collect();
        for (path, p) in &params {
            if !p.is_initialized() {
                return Err(self.invalid(OP, format!("parameter {path} is not initialised")));
            }
        }
        if self.size() == 1 {
            return Ok(());
        }
        for bucket in self.buckets(link) {
            #[cfg(feature = "nccl")]
            if let Some(nccl) = &self.inner.nccl {
                let members: Vec<(&str, &Parameter)> = bucket
                    .params
                    .iter()
                    .map(|n| (n.as_str(), params[n]))
                    .collect();
                let means =
                    crate::nccl::mean_bucket(nccl, OP, self.rank(), &members, bucket.dtype)?;
                for ((_, p), mean) in members.iter().zip(means) {
                    set_grad(p, mean)?;
                }
                continue;
            }
            let members: Vec<&Parameter> = bucket.params.iter().map(|n| params[n]).collect();
            let grads: Vec<Option<Array>> = members.iter().map(|p| p.grad()).collect();
            let shapes: Vec<Vec<usize>> = members
                .iter()
                .map(|p| p.shape().unwrap_or_default())
                .collect();
            let mut packed = Packed::pack(bucket.dtype, &grads, &shapes)?;
            // The sum, then the mean as each array is cut out of it: one pass over the bucket
            // fewer than `mean_in_place` and `unpack`, with the same products.
            self.sum_in_place(OP, &mut packed)?;
            let means = packed.unpack_scaled(&shapes, 1.0 / self.size() as f64)?;
            for (p, mean) in members.iter().zip(means) {
                set_grad(p, mean)?;
            }
        }
        Ok(())
    }

    /// Replaces `packed` by its sum over the ranks.
    fn sum_in_place(&self, op: &str, packed: &mut Packed) -> Result<()> {
        match packed {
            Packed::F32(buf) => self.t().allreduce_sum_f32(op, buf),
            Packed::F64(buf) => self.t().allreduce_sum_f64(op, buf),
        }
    }

    /// Replaces `packed` by its mean over the ranks: each sum times `1 / size` in the buffer's
    /// dtype, as [`Packed::unpack_scaled`] computes it.
    pub(crate) fn mean_in_place(&self, op: &str, packed: &mut Packed) -> Result<()> {
        self.sum_in_place(op, packed)?;
        let scale = 1.0 / self.size() as f64;
        match packed {
            Packed::F32(buf) => {
                let scale = scale as f32;
                buf.iter_mut().for_each(|v| *v *= scale);
            }
            Packed::F64(buf) => buf.iter_mut().for_each(|v| *v *= scale),
        }
        Ok(())
    }

    /// Whether the transport may be used from another thread while this one uses a split of
    /// it (what overlapping the exchange with backward needs).
    pub(crate) fn concurrent(&self) -> bool {
        self.t().concurrent()
    }

    /// An [`Error::Mismatch`] on every rank when the ranks' descriptions `all` differ.
    fn agreed(&self, op: &str, all: &[Vec<u8>]) -> Result<()> {
        if all.iter().all(|w| w == &all[0]) {
            return Ok(());
        }
        let detail = all
            .iter()
            .enumerate()
            .map(|(r, w)| format!("rank {r} has {}", String::from_utf8_lossy(w)))
            .collect::<Vec<_>>()
            .join(", ");
        Err(Error::Mismatch {
            op: op.into(),
            rank: self.rank(),
            detail,
        })
    }
}

/// One bucket's gradients, packed in its exchange dtype.
pub(crate) enum Packed {
    F32(Vec<f32>),
    F64(Vec<f64>),
}

impl Packed {
    /// `grads` one after the other in `dtype` (float32 or float64), zeros for a missing one.
    pub(crate) fn pack(
        dtype: DType,
        grads: &[Option<Array>],
        shapes: &[Vec<usize>],
    ) -> Result<Packed> {
        fn fill<T: kusari::Element + Default>(
            dtype: DType,
            grads: &[Option<Array>],
            shapes: &[Vec<usize>],
        ) -> Result<Vec<T>> {
            let len = shapes.iter().map(|s| s.iter().product::<usize>()).sum();
            let mut buf = Vec::with_capacity(len);
            for (g, shape) in grads.iter().zip(shapes) {
                match g {
                    // A host gradient of the exchange dtype is read where it lies; any other
                    // is converted (and fetched from its device) first.
                    Some(g) if g.dtype() == dtype && g.device().is_cpu() => {
                        let view = g.view::<T>()?;
                        match view.as_slice() {
                            Some(s) => buf.extend_from_slice(s),
                            None => buf.extend(view.iter().copied()),
                        }
                    }
                    Some(g) => buf.extend(g.astype(dtype)?.to_vec::<T>()?),
                    None => buf.resize(buf.len() + shape.iter().product::<usize>(), T::default()),
                }
            }
            Ok(buf)
        }
        Ok(match dtype {
            DType::F64 => Packed::F64(fill(dtype, grads, shapes)?),
            _ => Packed::F32(fill(DType::F32, grads, shapes)?),
        })
    }

    /// The arrays of `shapes`, on the host, in the exchange dtype.
    pub(crate) fn unpack(&self, shapes: &[Vec<usize>]) -> Result<Vec<Array>> {
        match self {
            Packed::F32(buf) => split(buf, shapes, |v| v),
            Packed::F64(buf) => split(buf, shapes, |v| v),
        }
    }

    /// [`unpack`](Self::unpack) with every element times `scale` (rounded to the buffer's
    /// dtype first, as [`Communicator::mean_in_place`] does).
    pub(crate) fn unpack_scaled(&self, shapes: &[Vec<usize>], scale: f64) -> Result<Vec<Array>> {
        match self {
            Packed::F32(buf) => {
                let scale = scale as f32;
                split(buf, shapes, |v| v * scale)
            }
            Packed::F64(buf) => split(buf, shapes, |v| v * scale),
        }
    }
}

/// `buf` cut into arrays of `shapes`, each element mapped by `f`.
fn split<T: kusari::Element>(
    buf: &[T],
    shapes: &[Vec<usize>],
    f: impl Fn(T) -> T,
) -> Result<Vec<Array>> {
    let mut out = Vec::with_capacity(shapes.len());
    let mut at = 0;
    for shape in shapes {
        let n: usize = shape.iter().product();
        let part: Vec<T> = buf[at..at + n].iter().map(|&v| f(v)).collect();
        out.push(Array::from_vec(part, shape)?);
        at += n;
    }
    Ok(out)
}

/// Sets `p`'s gradient to `g`, in the parameter's dtype and on its device.
pub(crate) fn set_grad(p: &Parameter, g: Array) -> Result<()> {
    let g = g.astype(p.dtype())?.to_device(p.device())?;
    Ok(p.variable()?.set_grad_array(g)?)
}

fn describe(x: &Array) -> String {
    format!("{} {:?}", x.dtype(), x.shape())
}

fn describe_param(path: &str, p: &Parameter) -> String {
    match p.shape() {
        Some(shape) => format!("{path} ({} {shape:?})", p.dtype()),
        None => format!("{path} ({}, not initialised)", p.dtype()),
    }
}

fn to_bytes<T: Serialize + ?Sized>(op: &str, rank: usize, value: &T) -> Result<Vec<u8>> {
    postcard::to_stdvec(value).map_err(|e| Error::Transport {
        op: op.into(),
        rank,
        msg: format!("the value cannot be serialized: {e}"),
    })
}

fn from_bytes<T: DeserializeOwned>(op: &str, rank: usize, bytes: &[u8]) -> Result<T> {
    postcard::from_bytes(bytes).map_err(|e| Error::Transport {
        op: op.into(),
        rank,
        msg: format!("a received value cannot be read as the type asked for: {e}"),
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    /// Packing reads host gradients of the exchange dtype where they lie, in C order whatever
    /// their strides, converts the others, and fills a missing one with zeros; unpacking with
    /// a scale gives each element times the scale rounded to the buffer's dtype.
    #[test]
    fn pack_and_unpack_scaled() {
        let a = Array::from_vec(vec![1.0f32, 2.0, 3.0, 4.0, 5.0, 6.0], &[2, 3]).unwrap();
        let transposed = a.t(); // [[1, 4], [2, 5], [3, 6]], not C-contiguous
        let wide = Array::from_vec(vec![0.1f64, 0.2], &[2]).unwrap();
        let grads = [Some(a), Some(transposed), None, Some(wide)];
        let shapes = [vec![2, 3], vec![3, 2], vec![2], vec![2]];
        let packed = Packed::pack(DType::F32, &grads, &shapes).unwrap();
        let expected = [
            1.0f32, 2.0, 3.0, 4.0, 5.0, 6.0, // a
            1.0, 4.0, 2.0, 5.0, 3.0, 6.0, // its transpose, in C order
            0.0, 0.0, // the missing gradient
            0.1, 0.2, // float64 rounded to float32
        ];
        match &packed {
            Packed::F32(buf) => assert_eq!(buf, &expected),
            Packed::F64(_) => panic!("float32 exchange packed as float64"),
        }
        let parts = packed.unpack_scaled(&shapes, 1.0 / 3.0).unwrap();
        let third = (1.0f64 / 3.0) as f32;
        let mut at = 0;
        for (part, shape) in parts.iter().zip(&shapes) {
            assert_eq!(part.shape(), &shape[..]);
            let n: usize = shape.iter().product();
            let want: Vec<f32> = expected[at..at + n].iter().map(|v| v * third).collect();
            assert_eq!(part.to_vec::<f32>().unwrap(), want);
            at += n;
        }
    }
}
