//! The NCCL stand-in of the emulated device: **a test double of NCCL**, not NCCL. The ranks of
//! a communicator are threads of this process, each on its own emulated device; the data moves
//! between the emulated devices' buffers (host memory) when every rank a transfer needs has
//! issued it.
//!
//! It is stricter than NCCL, whose misuse hangs a GPU or corrupts memory: every rule below is
//! checked, and a broken one is an error on **every** rank of the communicator, which stays
//! broken (every later call fails with the same message), as after `ncclCommAbort`:
//! - one rank of a communicator a device, every rank joining with the same size;
//! - every rank issues the same collectives in the same order, with the same count, type,
//!   reduction and root;
//! - buffers are memory of the rank's own device, large enough, and the send and receive
//!   buffers of a call are either the same (in place; for an all-gather, the rank's own slot of
//!   the receive buffer) or disjoint;
//! - a send is matched, in order, by the peer's receive of the same count and type;
//! - one call at a time on a communicator;
//! - when every rank waits and none can go on (two ranks each sending to the other outside a
//!   group, a collective on one rank while another waits in a transfer), that is the hang a GPU
//!   would have, and the error names what each rank waits in.
//!
//! Reductions run in rank order, in the element type (float16 and bfloat16 rounded after every
//! step, as NCCL's kernels do); `Avg` scales floating-point values by 1/size before summing,
//! as NCCL's does. A rank that never calls makes the others fail after [`WAIT`].

use std::collections::HashMap;
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::{Arc, Condvar, Mutex, MutexGuard, OnceLock, PoisonError};
use std::time::{Duration, Instant};

use half::{bf16, f16};

use super::memory;
use crate::cuda::driver::nccl_types::{
    Collective, NcclType, P2p, ReduceOp, UNIQUE_ID_BYTES, UniqueId,
};
use crate::cuda::driver::types::{DevicePtr, DriverResult};

/// How long a rank waits for the others before its call fails.
pub(crate) const WAIT: Duration = Duration::from_secs(120);

/// What the stand-in's unique ids start with.
const MAGIC: &[u8; 16] = b"kusari-nccl-sim\0";

/// A new unique id: the magic, this process and a counter.
pub(crate) fn unique_id() -> UniqueId {
    static NEXT: AtomicU64 = AtomicU64::new(1);
    let mut id = [0u8; UNIQUE_ID_BYTES];
    id[..16].copy_from_slice(MAGIC);
    id[16..20].copy_from_slice(&std::process::id().to_le_bytes());
    id[20..28].copy_from_slice(&NEXT.fetch_add(1, Ordering::Relaxed).to_le_bytes());
    id
}

/// The communicators being formed, by id; a communicator leaves once every rank has joined.
fn forming() -> &'static Mutex<HashMap<UniqueId, Arc<Clique>>> {
    static FORMING: OnceLock<Mutex<HashMap<UniqueId, Arc<Clique>>>> = OnceLock::new();
    FORMING.get_or_init(Default::default)
}

fn lock<T>(m: &Mutex<T>) -> MutexGuard<'_, T> {
    m.lock().unwrap_or_else(PoisonError::into_inner)
}

/// One communicator.
struct Clique {
    size: usize,
    state: Mutex<State>,
    changed: Condvar,
}

/// A rank's current call.
enum Posted {
    Collective(Collective),
    /// The group's transfers, each with whether it has been matched.
    Group(Vec<(P2p, bool)>),
}

struct State {
    devices: Vec<Option<usize>>,
    left: Vec<bool>,
    posted: Vec<Option<Posted>>,
    done: Vec<bool>,
    /// Set once a rule is broken: the communicator's error, on every rank, from then on.
    failed: Option<String>,
}

/// One rank's membership (`ncclComm_t`).
pub(crate) struct Member {
    clique: Arc<Clique>,
    rank: usize,
    ordinal: usize,
}

impl State {
    fn fail(&mut self, msg: String) -> String {
        self.failed.get_or_insert(msg).clone()
    }
}

impl Clique {
    /// Breaks the communicator with `msg` (the first failure is kept) and wakes every rank.
    fn break_with(&self, s: &mut State, msg: String) -> String {
        let msg = s.fail(msg);
        self.changed.notify_all();
        msg
    }

    /// Waits until `done` has a result; after [`WAIT`], breaks the communicator with what
    /// `late` says.
    fn wait<T>(
        &self,
        mut s: MutexGuard<'_, State>,
        mut done: impl FnMut(&mut State) -> Option<DriverResult<T>>,
        late: impl Fn(&State) -> String,
    ) -> DriverResult<T> {
        let start = Instant::now();
        loop {
            if let Some(r) = done(&mut s) {
                return r;
            }
            let Some(left) = WAIT.checked_sub(start.elapsed()) else {
                let msg = late(&s);
                return Err(self.break_with(&mut s, msg));
            };
            s = self
                .changed
                .wait_timeout(s, left)
                .unwrap_or_else(PoisonError::into_inner)
                .0;
        }
    }
}

impl Member {
    /// `ncclCommInitRank`: joins, and waits until every rank has.
    pub(crate) fn join(
        ordinal: usize,
        size: usize,
        rank: usize,
        id: &UniqueId,
    ) -> DriverResult<Member> {
        const OP: &str = "ncclCommInitRank (NCCL stand-in)";
        if &id[..16] != MAGIC {
            return Err(format!(
                "{OP}: the unique id was not made on an emulated device (ncclGetUniqueId there); \
                 an id from a real NCCL cannot join the stand-in"
            ));
        }
        if id[16..20] != std::process::id().to_le_bytes() {
            return Err(format!(
                "{OP}: the unique id was made by another process; the stand-in connects ranks \
                 that are threads of one process (ranks in several processes need GPUs and NCCL)"
            ));
        }
        if size == 0 || rank >= size {
            return Err(format!(
                "{OP}: rank {rank} of {size} ranks (ncclInvalidArgument)"
            ));
        }
        let clique = {
            let mut forming = lock(forming());
            forming
                .entry(*id)
                .or_insert_with(|| {
                    Arc::new(Clique {
                        size,
                        state: Mutex::new(State {
                            devices: vec![None; size],
                            left: vec![false; size],
                            posted: (0..size).map(|_| None).collect(),
                            done: vec![false; size],
                            failed: None,
                        }),
                        changed: Condvar::new(),
                    })
                })
                .clone()
        };
        let member = Member {
            clique,
            rank,
            ordinal,
        };
        let c = &member.clique;
        let mut s = lock(&c.state);
        if c.size != size {
            return Err(c.break_with(&mut s, format!(
                "{OP}: rank {rank} joins a communicator of {size} ranks, which others joined as \
                 {} ranks",
                c.size
            )));
        }
        if s.devices[rank].is_some() {
            return Err(c.break_with(&mut s, format!("{OP}: rank {rank} joined twice")));
        }
        if let Some(other) = s.devices.iter().position(|d| *d == Some(ordinal)) {
            return Err(c.break_with(&mut s, format!(
                "{OP}: ranks {other} and {rank} of one communicator are both on cuda:{ordinal}; \
                 NCCL allows one rank of a communicator a device (ncclInvalidUsage)"
            )));
        }
        s.devices[rank] = Some(ordinal);
        c.changed.notify_all();
        c.wait(
            s,
            |s| {
                // Joined is joined: a rank that has already failed the communicator in a call
                // fails this rank's first call, not its join.
                if s.devices.iter().all(Option::is_some) {
                    lock(forming()).remove(id);
                    return Some(Ok(()));
                }
                s.failed.clone().map(Err)
            },
            |s| {
                let missing: Vec<usize> = (0..size).filter(|r| s.devices[*r].is_none()).collect();
                format!(
                    "{OP}: rank {rank} waited {} s for ranks {missing:?} to join",
                    WAIT.as_secs()
                )
            },
        )?;
        Ok(member)
    }

    /// A call's buffer must be `bytes` bytes of this rank's device.
    fn check(&self, what: &str, ptr: DevicePtr, bytes: usize) -> Result<(), String> {
        memory::check_range(self.ordinal, ptr, bytes, what)
    }

    /// # Safety
    /// The buffers stay alive until this returns (the emulated device runs the call now).
    pub(crate) unsafe fn collective(&self, c: &Collective) -> DriverResult<()> {
        let checked = self.check_collective(c);
        self.post(Posted::Collective(*c), checked)
    }

    fn check_collective(&self, c: &Collective) -> Result<(), String> {
        let name = collective_name(c);
        let (send, recv, count, ty) = c.parts();
        let send_bytes = count * ty.size();
        // An all-gather's receive buffer holds every rank's part; in place, this rank's part
        // is already at its slot.
        let (recv_bytes, in_place_at) = match c {
            Collective::AllGather { .. } => (
                send_bytes * self.clique.size,
                recv + (self.rank * send_bytes) as u64,
            ),
            _ => (send_bytes, recv),
        };
        if let Collective::Broadcast { root, .. } = *c
            && root >= self.clique.size
        {
            return Err(format!(
                "{name}: root {root} is not a rank of this communicator of {} ranks",
                self.clique.size
            ));
        }
        self.check(&format!("{name} sendbuff"), send, send_bytes)?;
        self.check(&format!("{name} recvbuff"), recv, recv_bytes)?;
        let disjoint = send + send_bytes as u64 <= recv || recv + recv_bytes as u64 <= send;
        if send != in_place_at && !disjoint && send_bytes > 0 {
            return Err(format!(
                "{name}: sendbuff {send:#x} overlaps recvbuff {recv:#x} without being in place \
                 (in place is sendbuff == {in_place_at:#x}); NCCL's result would be undefined"
            ));
        }
        Ok(())
    }

    /// # Safety
    /// As [`Member::collective`].
    pub(crate) unsafe fn group(&self, ops: &[P2p]) -> DriverResult<()> {
        let checked = ops.iter().try_for_each(|op| {
            let (what, buf, count, ty, peer) = match *op {
                P2p::Send {
                    buf,
                    count,
                    ty,
                    peer,
                } => ("ncclSend sendbuff", buf, count, ty, peer),
                P2p::Recv {
                    buf,
                    count,
                    ty,
                    peer,
                } => ("ncclRecv recvbuff", buf, count, ty, peer),
            };
            if peer >= self.clique.size {
                return Err(format!(
                    "{}: peer {peer} is not a rank of this communicator of {} ranks",
                    p2p_name(op),
                    self.clique.size
                ));
            }
            self.check(what, buf, count * ty.size())
        });
        let ops = ops.iter().map(|op| (*op, false)).collect();
        self.post(Posted::Group(ops), checked)
    }

    /// Posts this rank's call (or, when `checked` failed, breaks the communicator with its
    /// error) and waits until it is done.
    fn post(&self, call: Posted, checked: Result<(), String>) -> DriverResult<()> {
        let c = &self.clique;
        let mut s = lock(&c.state);
        if let Some(msg) = &s.failed {
            return Err(msg.clone());
        }
        if let Err(e) = checked {
            return Err(c.break_with(&mut s, format!("rank {}: {e}", self.rank)));
        }
        if let Some(r) = s.left.iter().position(|l| *l) {
            return Err(c.break_with(
                &mut s,
                format!(
                    "rank {} calls {} but rank {r} has destroyed its communicator",
                    self.rank,
                    describe(&call)
                ),
            ));
        }
        if let Some(previous) = s.posted[self.rank].as_ref().map(describe) {
            return Err(c.break_with(
                &mut s,
                format!(
                    "rank {} calls {} while its call {previous} has not returned: one communicator \
                 used by two threads at once (NCCL forbids it)",
                    self.rank,
                    describe(&call),
                ),
            ));
        }
        s.posted[self.rank] = Some(call);
        s.done[self.rank] = false;
        progress(&mut s, c.size);
        c.changed.notify_all();
        let rank = self.rank;
        c.wait(
            s,
            |s| {
                if s.done[rank] {
                    s.done[rank] = false;
                    return Some(Ok(()));
                }
                s.failed.clone().map(Err)
            },
            |s| {
                let idle: Vec<usize> = (0..c.size).filter(|r| s.posted[*r].is_none()).collect();
                let what = s.posted[rank].as_ref().map_or_else(String::new, describe);
                format!(
                    "rank {rank} waited {} s in {what}; ranks {idle:?} issued nothing",
                    WAIT.as_secs()
                )
            },
        )
    }
}

impl Drop for Member {
    fn drop(&mut self) {
        let c = &self.clique;
        let mut s = lock(&c.state);
        s.left[self.rank] = true;
        if s.failed.is_none() && s.posted.iter().any(Option::is_some) {
            s.fail(format!(
                "rank {} destroyed its communicator while other ranks wait in a call",
                self.rank
            ));
        }
        c.changed.notify_all();
    }
}

/// Runs what can run: a collective every rank has issued, the transfers whose peers have
/// issued theirs; and fails the communicator when every rank waits and nothing can.
fn progress(s: &mut State, size: usize) {
    let mut moved = false;
    if s.posted
        .iter()
        .all(|p| matches!(p, Some(Posted::Collective(_))))
    {
        let calls: Vec<Collective> = s
            .posted
            .iter()
            .map(|p| match p {
                Some(Posted::Collective(c)) => *c,
                _ => unreachable!("checked above"),
            })
            .collect();
        if let Some(r) = (1..size).find(|r| !same_call(&calls[0], &calls[*r])) {
            s.fail(format!(
                "the ranks issue different collectives: rank 0 calls {}, rank {r} calls {}",
                describe_collective(&calls[0]),
                describe_collective(&calls[r])
            ));
            return;
        }
        // SAFETY: every buffer was checked against its device when posted, and its rank waits.
        unsafe { run_collective(&calls) };
        for r in 0..size {
            s.posted[r] = None;
            s.done[r] = true;
        }
        return;
    }
    // Transfers: the k-th send from a to b meets the k-th receive of b from a.
    for a in 0..size {
        let Some(Posted::Group(ops)) = &s.posted[a] else {
            continue;
        };
        for i in 0..ops.len() {
            let Some(Posted::Group(ops)) = &s.posted[a] else {
                break;
            };
            let (
                P2p::Send {
                    buf,
                    count,
                    ty,
                    peer: b,
                },
                false,
            ) = ops[i]
            else {
                continue;
            };
            let Some(Posted::Group(theirs)) = &s.posted[b] else {
                continue;
            };
            let Some(j) = theirs.iter().position(|(op, matched)| {
                !matched && matches!(op, P2p::Recv { peer, .. } if *peer == a)
            }) else {
                continue;
            };
            let P2p::Recv {
                buf: dst,
                count: rcount,
                ty: rty,
                ..
            } = theirs[j].0
            else {
                unreachable!("matched a receive");
            };
            if (rcount, rty) != (count, ty) {
                s.fail(format!(
                    "rank {a} sends {count} {} to rank {b}, which receives {rcount} {} from \
                     rank {a}",
                    ty.name(),
                    rty.name()
                ));
                return;
            }
            // SAFETY: both buffers were checked when posted; their ranks wait; `copy` allows
            // a rank's send to itself from an overlapping buffer.
            unsafe {
                std::ptr::copy(buf as *const u8, dst as *mut u8, count * ty.size());
            }
            if let Some(Posted::Group(ops)) = &mut s.posted[a] {
                ops[i].1 = true;
            }
            if let Some(Posted::Group(theirs)) = &mut s.posted[b] {
                theirs[j].1 = true;
            }
            moved = true;
        }
    }
    for r in 0..size {
        if let Some(Posted::Group(ops)) = &s.posted[r]
            && ops.iter().all(|(_, matched)| *matched)
        {
            s.posted[r] = None;
            s.done[r] = true;
            moved = true;
        }
    }
    if !moved && s.posted.iter().all(Option::is_some) {
        let each: Vec<String> = s
            .posted
            .iter()
            .enumerate()
            .map(|(r, p)| {
                format!(
                    "rank {r} in {}",
                    p.as_ref().map_or_else(String::new, describe)
                )
            })
            .collect();
        s.fail(format!(
            "every rank waits and none can go on (on a GPU this hangs): {}; transfers that \
             must run together belong in one group (ncclGroupStart/ncclGroupEnd), and every \
             rank must issue the same collectives in the same order",
            each.join(", ")
        ));
    }
}

fn same_call(a: &Collective, b: &Collective) -> bool {
    match (*a, *b) {
        (
            Collective::AllReduce {
                count: c1,
                ty: t1,
                op: o1,
                ..
            },
            Collective::AllReduce {
                count: c2,
                ty: t2,
                op: o2,
                ..
            },
        ) => (c1, t1, o1) == (c2, t2, o2),
        (
            Collective::Broadcast {
                count: c1,
                ty: t1,
                root: r1,
                ..
            },
            Collective::Broadcast {
                count: c2,
                ty: t2,
                root: r2,
                ..
            },
        ) => (c1, t1, r1) == (c2, t2, r2),
        (
            Collective::AllGather {
                count: c1, ty: t1, ..
            },
            Collective::AllGather {
                count: c2, ty: t2, ..
            },
        ) => (c1, t1) == (c2, t2),
        _ => false,
    }
}

fn collective_name(c: &Collective) -> &'static str {
    match c {
        Collective::AllReduce { .. } => "ncclAllReduce",
        Collective::Broadcast { .. } => "ncclBroadcast",
        Collective::AllGather { .. } => "ncclAllGather",
    }
}

fn p2p_name(op: &P2p) -> &'static str {
    match op {
        P2p::Send { .. } => "ncclSend",
        P2p::Recv { .. } => "ncclRecv",
    }
}

fn describe_collective(c: &Collective) -> String {
    match *c {
        Collective::AllReduce { count, ty, op, .. } => {
            format!("ncclAllReduce({count} {}, {})", ty.name(), op.name())
        }
        Collective::Broadcast {
            count, ty, root, ..
        } => format!("ncclBroadcast({count} {}, root {root})", ty.name()),
        Collective::AllGather { count, ty, .. } => {
            format!("ncclAllGather({count} {} a rank)", ty.name())
        }
    }
}

fn describe(p: &Posted) -> String {
    match p {
        Posted::Collective(c) => describe_collective(c),
        Posted::Group(ops) => {
            let each: Vec<String> = ops
                .iter()
                .map(|(op, _)| match *op {
                    P2p::Send {
                        count, ty, peer, ..
                    } => format!("ncclSend({count} {} to rank {peer})", ty.name()),
                    P2p::Recv {
                        count, ty, peer, ..
                    } => format!("ncclRecv({count} {} from rank {peer})", ty.name()),
                })
                .collect();
            if ops.len() == 1 {
                format!("{} outside a group", each[0])
            } else {
                format!("a group of {}", each.join(", "))
            }
        }
    }
}

/// Moves and reduces the data of `calls` (one a rank, all the same collective).
///
/// # Safety
/// Every buffer lies in a live allocation as large as its call says.
unsafe fn run_collective(calls: &[Collective]) {
    let n = calls.len();
    let read = |ptr: DevicePtr, bytes: usize| -> Vec<u8> {
        // SAFETY: the caller's contract.
        unsafe { std::slice::from_raw_parts(ptr as *const u8, bytes) }.to_vec()
    };
    let write = |ptr: DevicePtr, data: &[u8]| {
        // SAFETY: the caller's contract.
        unsafe { std::ptr::copy_nonoverlapping(data.as_ptr(), ptr as *mut u8, data.len()) };
        memory::mark_written(ptr, data.len());
    };
    match calls[0] {
        Collective::AllReduce { count, ty, op, .. } => {
            let bytes = count * ty.size();
            let inputs: Vec<Vec<u8>> = calls
                .iter()
                .map(|c| match *c {
                    Collective::AllReduce { send, .. } => read(send, bytes),
                    _ => unreachable!("the same collective on every rank"),
                })
                .collect();
            let out = reduce(ty, op, &inputs);
            for c in calls {
                if let Collective::AllReduce { recv, .. } = *c {
                    write(recv, &out);
                }
            }
        }
        Collective::Broadcast {
            count, ty, root, ..
        } => {
            let Collective::Broadcast { send, .. } = calls[root] else {
                unreachable!("the same collective on every rank");
            };
            let data = read(send, count * ty.size());
            for c in calls {
                if let Collective::Broadcast { recv, .. } = *c {
                    write(recv, &data);
                }
            }
        }
        Collective::AllGather { count, ty, .. } => {
            let bytes = count * ty.size();
            let mut all = Vec::with_capacity(bytes * n);
            for c in calls {
                if let Collective::AllGather { send, .. } = *c {
                    all.extend(read(send, bytes));
                }
            }
            for c in calls {
                if let Collective::AllGather { recv, .. } = *c {
                    write(recv, &all);
                }
            }
        }
    }
}

/// An element NCCL reduces.
trait Elem: Copy {
    const SIZE: usize;
    fn load(b: &[u8]) -> Self;
    fn store(self, b: &mut [u8]);
    fn combine(self, other: Self, op: ReduceOp) -> Self;
    /// What `Avg` does to each input before the sum (floats: times `1/n`).
    fn pre(self, n: usize) -> Self;
    /// What `Avg` does to the sum (integers: divided by `n`).
    fn post(self, n: usize) -> Self;
}

/// An element's size and its little-endian reads and writes.
macro_rules! le_bytes {
    ($t:ty) => {
        const SIZE: usize = std::mem::size_of::<$t>();
        fn load(b: &[u8]) -> Self {
            <$t>::from_le_bytes(b.try_into().expect("element-sized"))
        }
        fn store(self, b: &mut [u8]) {
            b.copy_from_slice(&self.to_le_bytes());
        }
    };
}

macro_rules! int_elem {
    ($($t:ty),*) => {$(
        impl Elem for $t {
            le_bytes!($t);
            fn combine(self, o: Self, op: ReduceOp) -> Self {
                match op {
                    ReduceOp::Sum | ReduceOp::Avg => self.wrapping_add(o),
                    ReduceOp::Prod => self.wrapping_mul(o),
                    ReduceOp::Max => self.max(o),
                    ReduceOp::Min => self.min(o),
                }
            }
            fn pre(self, _: usize) -> Self {
                self
            }
            fn post(self, n: usize) -> Self {
                self / (n as $t)
            }
        }
    )*};
}
int_elem!(i8, u8, i32, u32, i64, u64);

macro_rules! float_elem {
    ($t:ty, $to:expr, $from:expr, $w:ty) => {
        impl Elem for $t {
            le_bytes!($t);
            fn combine(self, o: Self, op: ReduceOp) -> Self {
                let (a, b): ($w, $w) = ($to(self), $to(o));
                $from(match op {
                    ReduceOp::Sum | ReduceOp::Avg => a + b,
                    ReduceOp::Prod => a * b,
                    ReduceOp::Max => a.max(b),
                    ReduceOp::Min => a.min(b),
                })
            }
            fn pre(self, n: usize) -> Self {
                $from($to(self) * (1.0 / n as $w))
            }
            fn post(self, _: usize) -> Self {
                self
            }
        }
    };
}
float_elem!(f32, |x| x, |x| x, f32);
float_elem!(f64, |x| x, |x| x, f64);
float_elem!(f16, f16::to_f32, f16::from_f32, f32);
float_elem!(bf16, bf16::to_f32, bf16::from_f32, f32);

fn reduce_as<T: Elem>(op: ReduceOp, inputs: &[Vec<u8>]) -> Vec<u8> {
    let n = inputs.len();
    let mut out = vec![0u8; inputs[0].len()];
    for (i, slot) in out.chunks_exact_mut(T::SIZE).enumerate() {
        let at = |r: usize| {
            let x = T::load(&inputs[r][i * T::SIZE..(i + 1) * T::SIZE]);
            if op == ReduceOp::Avg { x.pre(n) } else { x }
        };
        let mut acc = at(0);
        for r in 1..n {
            acc = acc.combine(at(r), op);
        }
        if op == ReduceOp::Avg {
            acc = acc.post(n);
        }
        acc.store(slot);
    }
    out
}

fn reduce(ty: NcclType, op: ReduceOp, inputs: &[Vec<u8>]) -> Vec<u8> {
    match ty {
        NcclType::I8 => reduce_as::<i8>(op, inputs),
        NcclType::U8 => reduce_as::<u8>(op, inputs),
        NcclType::I32 => reduce_as::<i32>(op, inputs),
        NcclType::U32 => reduce_as::<u32>(op, inputs),
        NcclType::I64 => reduce_as::<i64>(op, inputs),
        NcclType::U64 => reduce_as::<u64>(op, inputs),
        NcclType::F16 => reduce_as::<f16>(op, inputs),
        NcclType::F32 => reduce_as::<f32>(op, inputs),
        NcclType::F64 => reduce_as::<f64>(op, inputs),
        NcclType::BF16 => reduce_as::<bf16>(op, inputs),
    }
}
