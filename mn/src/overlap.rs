//! The gradients' exchange overlapped with backward, as PyTorch's `DistributedDataParallel`
//! does it: a gradient-ready hook on every parameter ([`kusari::Variable::on_grad_ready`])
//! marks it done; once every parameter of the next bucket is done, the bucket is packed and
//! handed to a communication thread, which averages it over the ranks while backward goes on;
//! the last bucket, complete only as backward ends, is averaged by the update itself, on the
//! caller's thread (unless double buffering lets the update go on without it).
//! Buckets start in the one order of [`Communicator::buckets`] on every rank, whatever order
//! their gradients complete in, so the all-reduces pair up. The exchange uses its own
//! communicator (a split of the optimizer's), so that collectives of the training loop itself
//! (a [`MultiNodeBatchNormalization`](crate::MultiNodeBatchNormalization)'s) never interleave
//! with it.
//!
//! Two engines carry a bucket:
//! - `flat`: the bucket is packed on the host and a communication thread all-reduces it over
//!   the transport;
//! - `pure_nccl` (feature `nccl`): the bucket is packed on the GPU and its NCCL all-reduce
//!   started on the NCCL communicator's own stream ([`kusari::nccl::NcclComm::start_all_reduce`]),
//!   after the kernels that computed its gradients, while backward's kernels go on on the
//!   device's stream. No thread: the calls only queue work. The update orders the device's
//!   stream after them.

use std::sync::mpsc::{Receiver, Sender, channel};
use std::sync::{Arc, Condvar, Mutex, MutexGuard, PoisonError};
use std::thread::JoinHandle;
use std::time::{Duration, Instant};

use kusari::link::Link;
use kusari::{Array, DType, GradReadyHook, Variable};

use crate::communicator::{Communicator, Packed, set_grad};
use crate::error::{Error, Result};

const OP: &str = "MultiNodeOptimizer (overlapped exchange)";

/// How much of the exchange backward hid, over the updates so far
/// ([`MultiNodeOptimizer::overlap_stats`](crate::MultiNodeOptimizer::overlap_stats)).
#[derive(Clone, Copy, Debug, Default, PartialEq)]
pub struct OverlapStats {
    /// Updates whose gradients were exchanged during backward.
    pub rounds: u64,
    /// Time spent in all-reduces (`flat`): the communication thread's, and the update's own of
    /// the last bucket. Zero for `pure_nccl`, whose all-reduces run on the GPU, where the host
    /// does not time them.
    pub allreduce: Duration,
    /// Time `update` waited for all-reduces to finish after backward, its own of the last
    /// bucket included: the part not hidden.
    /// For `pure_nccl` on a GPU, the time to order the device's stream after them (the wait
    /// itself is the GPU's); on the emulated device, the host's wait for the stand-in.
    pub exposed: Duration,
}

impl OverlapStats {
    /// The share of the all-reduce time hidden behind backward (0 when nothing was exchanged).
    pub fn hidden_share(&self) -> f64 {
        let total = self.allreduce.as_secs_f64();
        if total == 0.0 {
            return 0.0;
        }
        (1.0 - self.exposed.as_secs_f64() / total).clamp(0.0, 1.0)
    }
}

/// One bucket: which parameters (indices into `Overlap::vars`), and its exchange dtype.
struct Plan {
    members: Vec<usize>,
    dtype: DType,
}

struct Round {
    /// Per parameter: its gradient is complete in this round.
    ready: Vec<bool>,
    /// Per bucket: how many of its parameters are not ready.
    pending: Vec<usize>,
    /// The next bucket to start (all before it have started).
    next: usize,
    /// The number of rounds finished (updates); this round's results go to slot `count % 2`.
    count: u64,
    /// Per slot, per bucket: the mean, once the communication thread has it (`flat`), or the
    /// all-reduce started (`pure_nccl`). Two slots, so that with double buffering a round's
    /// exchange runs on while the next round starts.
    results: [Vec<Option<Mean>>; 2],
    /// A parameter completed twice before an update (two backward passes outside `no_sync`):
    /// the buckets already sent were partial, so the update exchanges again.
    dirty: bool,
    /// Hooks do nothing while false (`no_sync`).
    enabled: bool,
    error: Option<Error>,
    stats: OverlapStats,
}

struct Shared {
    /// This process's rank, for messages.
    rank: usize,
    round: Mutex<Round>,
    arrived: Condvar,
}

impl Shared {
    fn lock(&self) -> MutexGuard<'_, Round> {
        self.round.lock().unwrap_or_else(PoisonError::into_inner)
    }
}

struct Job {
    slot: usize,
    bucket: usize,
    packed: Packed,
}

/// A bucket's mean over the ranks.
enum Mean {
    /// On the host, from the communication thread.
    Host(Packed),
    /// On the GPU, once the all-reduce started on the NCCL stream is waited for.
    #[cfg(feature = "nccl")]
    Device(Box<kusari::nccl::PendingAllReduce>),
}

/// How a complete bucket starts its exchange.
#[derive(Clone)]
enum Starter {
    /// Packed on the host and sent to the communication thread, except the last bucket, which
    /// hooks leave to [`Overlap::finish`]: it is complete only as backward ends, so the thread
    /// could hide nothing of it, and handing it over would only cost the two threads'
    /// switches (and, where a rank has one core, the core the transport's polling takes from
    /// the caller). Without double buffering the update all-reduces it itself, on `comm` (the
    /// thread's communicator), once the thread is done with the others.
    Thread {
        jobs: Sender<Job>,
        comm: Communicator,
    },
    /// Packed on the GPU; its all-reduce started on this NCCL communicator's stream.
    #[cfg(feature = "nccl")]
    Nccl(Arc<Communicator>),
}

/// The machinery of one synchronized parameter list.
pub(crate) struct Overlap {
    shared: Arc<Shared>,
    starter: Option<Starter>,
    worker: Option<JoinHandle<()>>,
    hooks: Vec<GradReadyHook>,
    vars: Arc<Vec<Variable>>,
    plans: Arc<Vec<Plan>>,
}

impl Overlap {
    /// Hooks `link`'s parameters and starts the exchange's engine on a split of `comm`: the
    /// communication thread (`flat`) or NCCL's stream (`pure_nccl`). Collective (the split).
    pub(crate) fn start(comm: &Communicator, link: &dyn Link) -> Result<Overlap> {
        let grad_comm = comm.split(0, comm.rank() as u32)?;
        let named = link.named_params();
        #[cfg(feature = "nccl")]
        if let Some(nccl) = grad_comm.nccl() {
            let members: Vec<(&str, &kusari::link::Parameter)> =
                named.iter().map(|(p, v)| (p.as_str(), *v)).collect();
            crate::nccl::check_devices(nccl, OP, comm.rank(), &members)?;
        }
        let index = |path: &str| named.iter().position(|(p, _)| p == path).expect("a param");
        let plans: Vec<Plan> = comm
            .buckets(link)
            .into_iter()
            .map(|b| Plan {
                members: b.params.iter().map(|p| index(p)).collect(),
                dtype: b.dtype,
            })
            .collect();
        let vars = named
            .iter()
            .map(|(_, p)| p.variable())
            .collect::<kusari::Result<Vec<_>>>()?;
        let shared = Arc::new(Shared {
            rank: comm.rank(),
            round: Mutex::new(Round {
                ready: vec![false; vars.len()],
                pending: plans.iter().map(|p| p.members.len()).collect(),
                next: 0,
                count: 0,
                results: [0, 1].map(|_| plans.iter().map(|_| None).collect()),
                dirty: false,
                enabled: true,
                error: None,
                stats: OverlapStats::default(),
            }),
            arrived: Condvar::new(),
        });
        let (vars, plans) = (Arc::new(vars), Arc::new(plans));
        let (starter, worker) = Self::engine(comm.rank(), grad_comm, &shared)?;
        let mut hooks = Vec::with_capacity(vars.len());
        for (i, var) in vars.iter().enumerate() {
            let (shared, vars, plans, starter) =
                (shared.clone(), vars.clone(), plans.clone(), starter.clone());
            // The hook holds the variables (a cycle through each parameter's node), broken when
            // `hooks` is dropped with this `Overlap`.
            // The bucket holding parameter `i`, found once here rather than at every backward.
            let bucket = plans.iter().position(|p| p.members.contains(&i));
            let hook =
                var.on_grad_ready(move || ready(i, bucket, &shared, &vars, &plans, &starter))?;
            hooks.push(hook);
        }
        Ok(Overlap {
            shared,
            starter: Some(starter),
            worker,
            hooks,
            vars,
            plans,
        })
    }

    /// The engine on `grad_comm`: NCCL's stream for `pure_nccl`, else the communication
    /// thread.
    fn engine(
        rank: usize,
        grad_comm: Communicator,
        shared: &Arc<Shared>,
    ) -> Result<(Starter, Option<JoinHandle<()>>)> {
        #[cfg(feature = "nccl")]
        if grad_comm.nccl().is_some() {
            return Ok((Starter::Nccl(Arc::new(grad_comm)), None));
        }
        let (tx, rx) = channel::<Job>();
        let (shared, comm) = (shared.clone(), grad_comm.clone());
        let worker = std::thread::Builder::new()
            .name(format!("kusari-mn allreduce, rank {rank}"))
            .spawn(move || communicate(comm, rx, shared))
            .map_err(|e| Error::Transport {
                op: OP.into(),
                rank,
                msg: format!("the communication thread cannot start: {e}"),
            })?;
        let starter = Starter::Thread {
            jobs: tx,
            comm: grad_comm,
        };
        Ok((starter, Some(worker)))
    }

    /// Whether hooks start exchanges (false inside `no_sync`).
    pub(crate) fn set_enabled(&self, enabled: bool) {
        self.shared.lock().enabled = enabled;
    }

    pub(crate) fn stats(&self) -> OverlapStats {
        self.shared.lock().stats
    }

    /// Ends the round: starts the buckets not started yet, waits for the means of this round
    /// (or, with `double_buffering`, of the previous one, while this one's go on) and writes
    /// them into the gradients. Returns what the update does next.
    pub(crate) fn finish(&self, link: &dyn Link, double_buffering: bool) -> Result<Finish> {
        let waited = Instant::now();
        let mut round = self.shared.lock();
        let slot = (round.count % 2) as usize;
        // Without double buffering the update needs every mean now: the buckets not started
        // (the last one, which the hooks leave here, or all of them after `no_sync`) are
        // all-reduced on this thread, after the communication thread's, in bucket order.
        let on_caller = match self.starter() {
            Starter::Thread { comm, .. }
                if !double_buffering && !round.dirty && round.error.is_none() =>
            {
                Some(comm)
            }
            _ => None,
        };
        if let Some(comm) = on_caller {
            let first = round.next;
            while round.error.is_none() && round.results[slot][..first].iter().any(Option::is_none)
            {
                round = self
                    .shared
                    .arrived
                    .wait(round)
                    .unwrap_or_else(PoisonError::into_inner);
            }
            round.next = self.plans.len();
            drop(round);
            for bucket in first..self.plans.len() {
                let start = Instant::now();
                let mean = pack_bucket(&self.vars, &self.plans[bucket]).and_then(|mut packed| {
                    comm.mean_in_place(OP, &mut packed)?;
                    Ok(packed)
                });
                let mut round = self.shared.lock();
                round.stats.allreduce += start.elapsed();
                match mean {
                    Ok(packed) => round.results[slot][bucket] = Some(Mean::Host(packed)),
                    Err(e) => {
                        round.error.get_or_insert(e);
                        break;
                    }
                }
            }
            round = self.shared.lock();
        }
        while round.next < self.plans.len() {
            let bucket = round.next;
            round.next += 1;
            let started = start_bucket(
                &self.shared,
                self.starter(),
                &self.vars,
                &self.plans,
                bucket,
                slot,
            )?;
            if let Some(mean) = started {
                round.results[slot][bucket] = Some(mean);
            }
        }
        if double_buffering && round.dirty {
            return Err(Error::InvalidArgument {
                op: OP.into(),
                rank: self.shared.rank,
                msg: "two backward passes before an update with double buffering: run all but \
                      the last under `no_sync()`"
                    .into(),
            });
        }
        let dirty = round.dirty;
        round.ready.fill(false);
        for (pending, plan) in round.pending.iter_mut().zip(self.plans.iter()) {
            *pending = plan.members.len();
        }
        round.next = 0;
        round.dirty = false;
        round.count += 1;
        // The round whose means this update uses.
        let used = match (double_buffering, round.count) {
            (true, 1) => return Ok(Finish::Skip),
            (true, _) => 1 - slot,
            (false, _) => slot,
        };
        while round.error.is_none() && round.results[used].iter().any(Option::is_none) {
            round = self
                .shared
                .arrived
                .wait(round)
                .unwrap_or_else(PoisonError::into_inner);
        }
        if let Some(e) = round.error.clone() {
            return Err(e);
        }
        round.stats.rounds += 1;
        let results: Vec<Mean> = round.results[used]
            .iter_mut()
            .map(|r| r.take().expect("waited for"))
            .collect();
        drop(round);
        // The device's stream waits for NCCL's all-reduces here (dropped, they wait too).
        let results = results
            .into_iter()
            .map(Mean::ready)
            .collect::<Result<Vec<_>>>()?;
        self.shared.lock().stats.exposed += waited.elapsed();
        if dirty {
            return Ok(Finish::Exchange);
        }
        let params = link.named_params();
        for (plan, mean) in self.plans.iter().zip(results) {
            let shapes: Vec<Vec<usize>> = plan
                .members
                .iter()
                .map(|&i| self.vars[i].shape().to_vec())
                .collect();
            for (&i, mean) in plan.members.iter().zip(mean.unpack(&shapes)?) {
                set_grad(params[i].1, mean)?;
            }
        }
        Ok(Finish::Step)
    }

    fn starter(&self) -> &Starter {
        self.starter.as_ref().expect("open until drop")
    }
}

/// A bucket's mean, ready to unpack.
enum Ready {
    Host(Packed),
    #[cfg(feature = "nccl")]
    Device(Array),
}

impl Mean {
    /// The mean, the device's stream ordered after its all-reduce.
    fn ready(self) -> Result<Ready> {
        Ok(match self {
            Mean::Host(p) => Ready::Host(p),
            #[cfg(feature = "nccl")]
            Mean::Device(pending) => Ready::Device(pending.wait()?),
        })
    }
}

impl Ready {
    /// The members' means, of `shapes`, in the exchange dtype.
    fn unpack(&self, shapes: &[Vec<usize>]) -> Result<Vec<Array>> {
        match self {
            Ready::Host(p) => p.unpack(shapes),
            #[cfg(feature = "nccl")]
            Ready::Device(mean) => crate::nccl::unpack(mean, shapes),
        }
    }
}

/// What an update does after [`Overlap::finish`].
pub(crate) enum Finish {
    /// The gradients hold the means: step.
    Step,
    /// The round was dirty (two backward passes outside `no_sync`): exchange the whole
    /// gradients after backward, then step.
    Exchange,
    /// Double buffering's first update: no means yet, no step.
    Skip,
}

impl Drop for Overlap {
    fn drop(&mut self) {
        // The hooks hold senders of the channel too: unregistered, they let it close.
        self.hooks.clear();
        self.starter.take();
        if let Some(worker) = self.worker.take() {
            let _ = worker.join();
        }
    }
}

/// Starts the exchange of `bucket` (of round slot `slot`): hands it to the communication
/// thread, whose mean arrives in the round later (`None`), or starts its NCCL all-reduce
/// (`Some`, to put in the round).
fn start_bucket(
    shared: &Shared,
    starter: &Starter,
    vars: &[Variable],
    plans: &[Plan],
    bucket: usize,
    slot: usize,
) -> Result<Option<Mean>> {
    let plan = &plans[bucket];
    match starter {
        Starter::Thread { jobs, .. } => {
            let job = Job {
                slot,
                bucket,
                packed: pack_bucket(vars, plan)?,
            };
            jobs.send(job).map_err(|_| Error::Transport {
                op: OP.into(),
                rank: shared.rank,
                msg: "the communication thread has stopped".into(),
            })?;
            Ok(None)
        }
        #[cfg(feature = "nccl")]
        Starter::Nccl(comm) => {
            let (grads, shapes) = gradients(vars, plan);
            let nccl = comm.nccl().expect("an NCCL engine's communicator");
            let packed = crate::nccl::pack(nccl.device(), &grads, &shapes, plan.dtype)?;
            let pending = nccl.start_all_reduce(packed, kusari::nccl::ReduceOp::Avg)?;
            Ok(Some(Mean::Device(Box::new(pending))))
        }
    }
}

/// The gradients of `plan`'s members (`None` where a parameter has none) and their shapes.
fn gradients(vars: &[Variable], plan: &Plan) -> (Vec<Option<Array>>, Vec<Vec<usize>>) {
    let grads = plan.members.iter().map(|&i| vars[i].grad_array()).collect();
    let shapes = plan
        .members
        .iter()
        .map(|&i| vars[i].shape().to_vec())
        .collect();
    (grads, shapes)
}

/// `plan`'s gradients packed on the host, to all-reduce over the transport.
fn pack_bucket(vars: &[Variable], plan: &Plan) -> Result<Packed> {
    let (grads, shapes) = gradients(vars, plan);
    Packed::pack(plan.dtype, &grads, &shapes)
}

/// Parameter `i`'s gradient (in `bucket`) is complete: start every bucket now ready, in order.
fn ready(
    i: usize,
    bucket: Option<usize>,
    shared: &Shared,
    vars: &[Variable],
    plans: &[Plan],
    starter: &Starter,
) {
    let mut round = shared.lock();
    if !round.enabled || round.error.is_some() {
        return;
    }
    if round.ready[i] {
        round.dirty = true;
        return;
    }
    round.ready[i] = true;
    if let Some(b) = bucket {
        round.pending[b] -= 1;
    }
    while round.next < plans.len() && round.pending[round.next] == 0 {
        // The thread engine's last bucket is the update's (see `Starter::Thread`).
        if matches!(starter, Starter::Thread { .. }) && round.next + 1 == plans.len() {
            break;
        }
        let bucket = round.next;
        round.next += 1;
        let slot = (round.count % 2) as usize;
        match start_bucket(shared, starter, vars, plans, bucket, slot) {
            Ok(Some(mean)) => round.results[slot][bucket] = Some(mean),
            Ok(None) => {}
            Err(e) => {
                round.error = Some(e);
                shared.arrived.notify_all();
                return;
            }
        }
    }
}

/// The communication thread: averages each bucket in the order sent.
fn communicate(comm: Communicator, jobs: Receiver<Job>, shared: Arc<Shared>) {
    for Job {
        slot,
        bucket,
        mut packed,
    } in jobs
    {
        let start = Instant::now();
        let result = comm.mean_in_place(OP, &mut packed);
        let mut round = shared.lock();
        round.stats.allreduce += start.elapsed();
        match result {
            Ok(()) => round.results[slot][bucket] = Some(Mean::Host(packed)),
            Err(e) => round.error = Some(e),
        }
        shared.arrived.notify_all();
    }
}
