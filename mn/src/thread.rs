//! [`ThreadTransport`]: the threads of one process as ranks.

use std::collections::{HashMap, VecDeque};
use std::sync::{Arc, Condvar, Mutex, MutexGuard, PoisonError};
use std::time::{Duration, Instant};

use crate::error::{Error, Result};
use crate::transport::Transport;

/// The default longest wait of one rank for the others.
pub const DEFAULT_TIMEOUT: Duration = Duration::from_secs(60);

/// One rank of a world of threads: the threads of one process as ranks. It is MPI's stand-in
/// where no MPI is installed (the default `cargo test --workspace`, a first try of a training
/// loop), and stricter than MPI about what a program must do:
///
/// - every collective checks that all ranks called the same operation with the same root and
///   length at the same point; a rank that calls another one gets an [`Error::Mismatch`] naming
///   what each rank called, where MPI would hang or corrupt memory;
/// - a rank that returns or panics before a collective the others wait in makes their call an
///   [`Error::Transport`] naming it;
/// - no wait is longer than the world's time limit (60 s unless set with
///   [`ThreadTransport::world_with`]).
///
/// Reductions add the ranks' values in rank order, so every rank gets the same bits.
///
/// ```
/// use kusari_mn::{ThreadTransport, Transport};
///
/// let ranks = ThreadTransport::world(3);
/// let sums: Vec<Vec<f64>> = std::thread::scope(|s| {
///     let handles: Vec<_> = ranks
///         .into_iter()
///         .map(|t| {
///             s.spawn(move || {
///                 let mut buf = vec![t.rank() as f64, 1.0];
///                 t.allreduce_sum_f64("allreduce", &mut buf).unwrap();
///                 buf
///             })
///         })
///         .collect();
///     handles.into_iter().map(|h| h.join().unwrap()).collect()
/// });
/// assert!(sums.iter().all(|s| s == &[3.0, 3.0]));
/// ```
pub struct ThreadTransport {
    world: Arc<World>,
    rank: usize,
}

struct World {
    size: usize,
    ranks_per_node: usize,
    timeout: Duration,
    state: Mutex<State>,
    arrived: Condvar,
}

struct State {
    /// The number of collectives each rank has entered.
    next_seq: Vec<u64>,
    rounds: HashMap<u64, Round>,
    /// Messages in flight, by (source, destination, tag).
    mail: HashMap<(usize, usize, u16), VecDeque<Vec<u8>>>,
    /// Why a rank left (returned or panicked), once it has.
    left: Vec<Option<&'static str>>,
    aborted: Option<String>,
    /// Worlds made by `split`, by (collective number, color), with how many ranks have yet to
    /// take theirs.
    splits: HashMap<(u64, u32), (Arc<World>, usize)>,
}

/// One collective: what each rank called and gave.
struct Round {
    calls: Vec<Option<String>>,
    data: Vec<Option<Arc<Vec<u8>>>>,
    taken: usize,
}

impl World {
    fn new(size: usize, ranks_per_node: usize, timeout: Duration) -> World {
        World {
            size,
            ranks_per_node,
            timeout,
            state: Mutex::new(State {
                next_seq: vec![0; size],
                rounds: HashMap::new(),
                mail: HashMap::new(),
                left: vec![None; size],
                aborted: None,
                splits: HashMap::new(),
            }),
            arrived: Condvar::new(),
        }
    }

    fn lock(&self) -> MutexGuard<'_, State> {
        self.state.lock().unwrap_or_else(PoisonError::into_inner)
    }
}

impl ThreadTransport {
    /// `size` ranks on one node, each to be moved to its own thread, waiting at most
    /// [`DEFAULT_TIMEOUT`] for each other.
    pub fn world(size: usize) -> Vec<ThreadTransport> {
        Self::world_with(size, size, DEFAULT_TIMEOUT)
    }

    /// `size` ranks, counted as nodes of `ranks_per_node` ranks each (for
    /// [`intra_rank`](Transport::intra_rank)), each wait limited to `timeout`.
    /// `ranks_per_node` is taken as at least 1.
    pub fn world_with(size: usize, ranks_per_node: usize, timeout: Duration) -> Vec<Self> {
        let world = Arc::new(World::new(size, ranks_per_node.max(1), timeout));
        (0..size)
            .map(|rank| ThreadTransport {
                world: world.clone(),
                rank,
            })
            .collect()
    }

    fn transport_error(&self, op: &str, msg: String) -> Error {
        Error::Transport {
            op: op.into(),
            rank: self.rank,
            msg,
        }
    }

    /// Waits on the world's condition variable until `ready` gives a value, failing on an abort,
    /// on a rank of `waiting_for` that left, and at the time limit.
    fn wait<T>(
        &self,
        op: &str,
        mut st: MutexGuard<'_, State>,
        mut ready: impl FnMut(&mut State) -> Option<T>,
        waiting_for: impl Fn(&State) -> Vec<usize>,
    ) -> Result<T> {
        let deadline = Instant::now() + self.world.timeout;
        loop {
            if let Some(why) = &st.aborted {
                return Err(self.transport_error(op, format!("the job was aborted: {why}")));
            }
            if let Some(v) = ready(&mut st) {
                return Ok(v);
            }
            let missing = waiting_for(&st);
            if let Some((r, why)) = missing.iter().find_map(|&r| st.left[r].map(|why| (r, why))) {
                return Err(self.transport_error(
                    op,
                    format!("rank {r} {why} without calling {op}, which this rank waits in"),
                ));
            }
            let now = Instant::now();
            if now >= deadline {
                return Err(self.transport_error(
                    op,
                    format!(
                        "waited {:?} for rank(s) {missing:?} to call {op}",
                        self.world.timeout
                    ),
                ));
            }
            st = self
                .world
                .arrived
                .wait_timeout(st, deadline - now)
                .unwrap_or_else(PoisonError::into_inner)
                .0;
        }
    }

    /// The collective under everything else: each rank gives `call` (what it calls, with the
    /// arguments every rank must agree on) and `data`, and gets every rank's data in rank order.
    fn exchange(&self, op: &str, call: String, data: Vec<u8>) -> Result<Vec<Arc<Vec<u8>>>> {
        let size = self.world.size;
        let mut st = self.world.lock();
        let seq = st.next_seq[self.rank];
        st.next_seq[self.rank] += 1;
        let round = st.rounds.entry(seq).or_insert_with(|| Round {
            calls: vec![None; size],
            data: vec![None; size],
            taken: 0,
        });
        round.calls[self.rank] = Some(call);
        round.data[self.rank] = Some(Arc::new(data));
        self.world.arrived.notify_all();
        let result = self.wait(
            op,
            st,
            |st| {
                let round = &st.rounds[&seq];
                round.data.iter().all(Option::is_some).then_some(())
            },
            |st| {
                let round = &st.rounds[&seq];
                (0..size).filter(|&r| round.data[r].is_none()).collect()
            },
        );
        let mut st = self.world.lock();
        let round = st
            .rounds
            .get_mut(&seq)
            .expect("a round lives until all took it");
        round.taken += 1;
        let outcome = result.and_then(|()| {
            let calls: Vec<&str> = round.calls.iter().flatten().map(String::as_str).collect();
            if calls.iter().any(|c| *c != calls[0]) {
                let detail = calls
                    .iter()
                    .enumerate()
                    .map(|(r, c)| format!("rank {r} called {c}"))
                    .collect::<Vec<_>>()
                    .join(", ");
                return Err(Error::Mismatch {
                    op: op.into(),
                    rank: self.rank,
                    detail,
                });
            }
            Ok(round.data.iter().flatten().cloned().collect())
        });
        if round.taken == size {
            // Everyone has its copy. (A round a rank never joined stays: the job is broken.)
            st.rounds.remove(&seq);
        }
        outcome
    }

    fn check_root(&self, op: &str, root: usize) -> Result<()> {
        if root >= self.world.size {
            return Err(Error::InvalidArgument {
                op: op.into(),
                rank: self.rank,
                msg: format!("root {root} is outside the {} ranks", self.world.size),
            });
        }
        Ok(())
    }

    fn check_peer(&self, op: &str, peer: usize) -> Result<()> {
        if peer >= self.world.size || peer == self.rank {
            return Err(Error::InvalidArgument {
                op: op.into(),
                rank: self.rank,
                msg: format!(
                    "peer {peer} must be another of the {} ranks",
                    self.world.size
                ),
            });
        }
        Ok(())
    }

    fn allreduce<T: Copy + std::ops::Add<Output = T>, const N: usize>(
        &self,
        op: &str,
        buf: &mut [T],
        dtype: &str,
        to_le: impl Fn(T) -> [u8; N],
        from_le: impl Fn([u8; N]) -> T,
    ) -> Result<()> {
        let bytes: Vec<u8> = buf.iter().flat_map(|&v| to_le(v)).collect();
        let call = format!("{op} (a sum of {} {dtype})", buf.len());
        let all = self.exchange(op, call, bytes)?;
        let value =
            |part: &[u8], i: usize| from_le(part[i * N..(i + 1) * N].try_into().expect("N bytes"));
        for (i, out) in buf.iter_mut().enumerate() {
            let mut sum = value(&all[0], i);
            for part in &all[1..] {
                sum = sum + value(part, i);
            }
            *out = sum;
        }
        Ok(())
    }
}

impl Drop for ThreadTransport {
    fn drop(&mut self) {
        let mut st = self.world.lock();
        st.left[self.rank] = Some(if std::thread::panicking() {
            "panicked"
        } else {
            "returned"
        });
        self.world.arrived.notify_all();
    }
}

impl Transport for ThreadTransport {
    fn rank(&self) -> usize {
        self.rank
    }

    fn size(&self) -> usize {
        self.world.size
    }

    fn intra_rank(&self) -> usize {
        self.rank % self.world.ranks_per_node
    }

    fn intra_size(&self) -> usize {
        let node = self.rank / self.world.ranks_per_node;
        let first = node * self.world.ranks_per_node;
        (self.world.size - first).min(self.world.ranks_per_node)
    }

    fn name(&self) -> &'static str {
        "threads"
    }

    fn allreduce_sum_f32(&self, op: &str, buf: &mut [f32]) -> Result<()> {
        self.allreduce(op, buf, "float32", f32::to_le_bytes, f32::from_le_bytes)
    }

    fn allreduce_sum_f64(&self, op: &str, buf: &mut [f64]) -> Result<()> {
        self.allreduce(op, buf, "float64", f64::to_le_bytes, f64::from_le_bytes)
    }

    fn bcast(&self, op: &str, buf: &mut Vec<u8>, root: usize) -> Result<()> {
        self.check_root(op, root)?;
        let mine = if self.rank == root {
            buf.clone()
        } else {
            Vec::new()
        };
        let all = self.exchange(op, format!("{op} (root {root})"), mine)?;
        *buf = all[root].as_ref().clone();
        Ok(())
    }

    fn allgather(&self, op: &str, mine: &[u8]) -> Result<Vec<Vec<u8>>> {
        let all = self.exchange(op, op.to_string(), mine.to_vec())?;
        Ok(all.iter().map(|p| p.as_ref().clone()).collect())
    }

    fn gather(&self, op: &str, mine: &[u8], root: usize) -> Result<Option<Vec<Vec<u8>>>> {
        self.check_root(op, root)?;
        let all = self.exchange(op, format!("{op} (root {root})"), mine.to_vec())?;
        Ok((self.rank == root).then(|| all.iter().map(|p| p.as_ref().clone()).collect()))
    }

    fn scatter(&self, op: &str, parts: Option<&[Vec<u8>]>, root: usize) -> Result<Vec<u8>> {
        self.check_root(op, root)?;
        let mine = if self.rank == root {
            let parts = parts.ok_or_else(|| Error::InvalidArgument {
                op: op.into(),
                rank: self.rank,
                msg: "the root must give the parts".into(),
            })?;
            if parts.len() != self.world.size {
                return Err(Error::InvalidArgument {
                    op: op.into(),
                    rank: self.rank,
                    msg: format!("{} parts for {} ranks", parts.len(), self.world.size),
                });
            }
            encode_parts(parts)
        } else {
            Vec::new()
        };
        let all = self.exchange(op, format!("{op} (root {root})"), mine)?;
        let mut parts = decode_parts(&all[root]);
        Ok(std::mem::take(&mut parts[self.rank]))
    }

    fn alltoall(&self, op: &str, parts: &[Vec<u8>]) -> Result<Vec<Vec<u8>>> {
        if parts.len() != self.world.size {
            return Err(Error::InvalidArgument {
                op: op.into(),
                rank: self.rank,
                msg: format!("{} parts for {} ranks", parts.len(), self.world.size),
            });
        }
        let all = self.exchange(op, op.to_string(), encode_parts(parts))?;
        Ok(all
            .iter()
            .map(|p| std::mem::take(&mut decode_parts(p)[self.rank]))
            .collect())
    }

    fn send(&self, op: &str, bytes: &[u8], dest: usize, tag: u16) -> Result<()> {
        self.check_peer(op, dest)?;
        let mut st = self.world.lock();
        st.mail
            .entry((self.rank, dest, tag))
            .or_default()
            .push_back(bytes.to_vec());
        self.world.arrived.notify_all();
        Ok(())
    }

    fn recv(&self, op: &str, source: usize, tag: u16) -> Result<Vec<u8>> {
        self.check_peer(op, source)?;
        let st = self.world.lock();
        let key = (source, self.rank, tag);
        self.wait(
            op,
            st,
            |st| st.mail.get_mut(&key).and_then(VecDeque::pop_front),
            |_| vec![source],
        )
    }

    fn split(&self, op: &str, color: u32, key: u32) -> Result<Box<dyn Transport>> {
        let seq = self.world.lock().next_seq[self.rank];
        let mine = [color.to_le_bytes(), key.to_le_bytes()].concat();
        let all = self.exchange(op, op.to_string(), mine)?;
        let word = |p: &[u8], at: usize| u32::from_le_bytes(p[at..at + 4].try_into().unwrap());
        let mut group: Vec<(u32, usize)> = all
            .iter()
            .enumerate()
            .filter(|(_, p)| word(p, 0) == color)
            .map(|(r, p)| (word(p, 4), r))
            .collect();
        group.sort_unstable();
        let new_rank = group
            .iter()
            .position(|&(_, r)| r == self.rank)
            .expect("a rank is in its own color");
        let mut st = self.world.lock();
        let entry = st.splits.entry((seq, color)).or_insert_with(|| {
            let n = group.len();
            (Arc::new(World::new(n, n, self.world.timeout)), n)
        });
        let world = entry.0.clone();
        entry.1 -= 1;
        if entry.1 == 0 {
            st.splits.remove(&(seq, color));
        }
        Ok(Box::new(ThreadTransport {
            world,
            rank: new_rank,
        }))
    }

    fn abort(&self, code: i32) -> ! {
        let why = format!("rank {} aborted the job with code {code}", self.rank);
        self.world.lock().aborted = Some(why.clone());
        self.world.arrived.notify_all();
        panic!("{why}");
    }
}

/// Parts as one message: each part's length (8 bytes, little-endian), then its bytes.
pub(crate) fn encode_parts(parts: &[Vec<u8>]) -> Vec<u8> {
    let mut out = Vec::with_capacity(parts.iter().map(|p| p.len() + 8).sum());
    for p in parts {
        out.extend_from_slice(&(p.len() as u64).to_le_bytes());
        out.extend_from_slice(p);
    }
    out
}

/// The parts of [`encode_parts`].
pub(crate) fn decode_parts(mut bytes: &[u8]) -> Vec<Vec<u8>> {
    let mut parts = Vec::new();
    while bytes.len() >= 8 {
        let n = u64::from_le_bytes(bytes[..8].try_into().unwrap()) as usize;
        parts.push(bytes[8..8 + n].to_vec());
        bytes = &bytes[8 + n..];
    }
    parts
}
