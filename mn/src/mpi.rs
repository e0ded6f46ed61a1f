//! [`MpiTransport`]: MPI through the `mpi` crate.

use std::sync::{Arc, Mutex, MutexGuard, PoisonError, Weak};

use mpi::Threading;
use mpi::collective::SystemOperation;
use mpi::datatype::{Partition, PartitionMut};
use mpi::environment::Universe;
use mpi::topology::{Color, SimpleCommunicator};
use mpi::traits::*;

use crate::error::{Error, Result};
use crate::transport::Transport;

/// One rank of an MPI communicator: `MPI_COMM_WORLD` or a split of it, through the `mpi`
/// crate, for programs started with `mpirun`. MPI is initialised with `MPI_THREAD_MULTIPLE`
/// where the library offers it (at least `MPI_THREAD_SERIALIZED` is required); every call goes
/// through one lock per communicator. MPI is finalised when the last transport is dropped.
pub struct MpiTransport {
    // Declared before `universe`, so that it is freed before MPI is finalised.
    comm: Mutex<Comm>,
    rank: usize,
    size: usize,
    intra_rank: usize,
    intra_size: usize,
    universe: Arc<UniverseHold>,
}

/// The communicator handle. MPI handles are plain integers or pointers that the MPI library
/// lets any thread use once initialised with a threading level above single; the lock around
/// it serialises the calls besides.
struct Comm(SimpleCommunicator);
// SAFETY: see `Comm`: every use of the handle goes through `MpiTransport::comm`'s mutex, and
// MPI was initialised by `MpiTransport::world` with at least MPI_THREAD_SERIALIZED.
unsafe impl Send for Comm {}

/// MPI's universe (finalised on drop) and the threading level it was initialised with.
struct UniverseHold(#[allow(dead_code)] Universe, Threading);
// SAFETY: the universe is only dropped (MPI_Finalize), once, when the last transport goes.
unsafe impl Send for UniverseHold {}
// SAFETY: as above; nothing reads it.
unsafe impl Sync for UniverseHold {}

static UNIVERSE: Mutex<Weak<UniverseHold>> = Mutex::new(Weak::new());

fn mpi_error(op: &str, rank: usize, msg: impl Into<String>) -> Error {
    Error::Transport {
        op: op.into(),
        rank,
        msg: msg.into(),
    }
}

fn count(op: &str, rank: usize, n: usize) -> Result<i32> {
    i32::try_from(n).map_err(|_| {
        mpi_error(
            op,
            rank,
            format!("a message of {n} elements is over MPI's 2^31 limit"),
        )
    })
}

fn displacements(counts: &[i32]) -> Vec<i32> {
    counts
        .iter()
        .scan(0, |at, &c| {
            let d = *at;
            *at += c;
            Some(d)
        })
        .collect()
}

impl MpiTransport {
    /// `MPI_COMM_WORLD`, initialising MPI the first time. Started without `mpirun`, it is a
    /// world of one rank (MPI's singleton start).
    pub fn world() -> Result<MpiTransport> {
        let mut hold = UNIVERSE.lock().unwrap_or_else(PoisonError::into_inner);
        let universe = match hold.upgrade() {
            Some(u) => u,
            None => {
                let (universe, threading) = mpi::initialize_with_threading(Threading::Multiple)
                    .ok_or_else(|| {
                        mpi_error(
                            "create_communicator",
                            0,
                            "MPI was initialised and finalised already in this process",
                        )
                    })?;
                if threading < Threading::Serialized {
                    return Err(mpi_error(
                        "create_communicator",
                        0,
                        format!("the MPI library offers only {threading:?} threading"),
                    ));
                }
                let u = Arc::new(UniverseHold(universe, threading));
                *hold = Arc::downgrade(&u);
                u
            }
        };
        drop(hold);
        Ok(Self::from_comm(SimpleCommunicator::world(), universe))
    }

    fn from_comm(comm: SimpleCommunicator, universe: Arc<UniverseHold>) -> MpiTransport {
        let rank = comm.rank() as usize;
        let size = comm.size() as usize;
        let shared = comm.split_shared(comm.rank());
        MpiTransport {
            intra_rank: shared.rank() as usize,
            intra_size: shared.size() as usize,
            comm: Mutex::new(Comm(comm)),
            rank,
            size,
            universe,
        }
    }

    fn comm(&self) -> MutexGuard<'_, Comm> {
        self.comm.lock().unwrap_or_else(PoisonError::into_inner)
    }

    fn check_rank(&self, op: &str, what: &str, r: usize) -> Result<()> {
        if r >= self.size {
            return Err(Error::InvalidArgument {
                op: op.into(),
                rank: self.rank,
                msg: format!("{what} {r} is outside the {} ranks", self.size),
            });
        }
        Ok(())
    }

    /// Sums `buf` over the ranks in place (MPI needs a separate send buffer: a copy).
    fn allreduce_sum<T: Equivalence + Clone>(&self, op: &str, buf: &mut [T]) -> Result<()> {
        count(op, self.rank, buf.len())?;
        let send = buf.to_vec();
        self.comm()
            .0
            .all_reduce_into(&send[..], buf, SystemOperation::sum());
        Ok(())
    }

    /// Every rank's length of a varying-size collective.
    fn lengths(&self, op: &str, comm: &SimpleCommunicator, n: usize) -> Result<Vec<i32>> {
        let mine = count(op, self.rank, n)?;
        let mut all = vec![0i32; self.size];
        comm.all_gather_into(&mine, &mut all[..]);
        Ok(all)
    }
}

impl Transport for MpiTransport {
    fn rank(&self) -> usize {
        self.rank
    }

    fn size(&self) -> usize {
        self.size
    }

    fn intra_rank(&self) -> usize {
        self.intra_rank
    }

    fn intra_size(&self) -> usize {
        self.intra_size
    }

    fn name(&self) -> &'static str {
        "mpi"
    }

    fn allreduce_sum_f32(&self, op: &str, buf: &mut [f32]) -> Result<()> {
        self.allreduce_sum(op, buf)
    }

    fn allreduce_sum_f64(&self, op: &str, buf: &mut [f64]) -> Result<()> {
        self.allreduce_sum(op, buf)
    }

    fn bcast(&self, op: &str, buf: &mut Vec<u8>, root: usize) -> Result<()> {
        self.check_rank(op, "root", root)?;
        let guard = self.comm();
        let process = guard.0.process_at_rank(root as i32);
        let mut len = buf.len() as u64;
        process.broadcast_into(&mut len);
        count(op, self.rank, len as usize)?;
        buf.resize(len as usize, 0);
        process.broadcast_into(&mut buf[..]);
        Ok(())
    }

    fn allgather(&self, op: &str, mine: &[u8]) -> Result<Vec<Vec<u8>>> {
        let guard = self.comm();
        let counts = self.lengths(op, &guard.0, mine.len())?;
        let displs = displacements(&counts);
        let total: usize = counts.iter().map(|&c| c as usize).sum();
        let mut all = vec![0u8; total];
        let mut part = PartitionMut::new(&mut all[..], &counts[..], &displs[..]);
        guard.0.all_gather_varcount_into(mine, &mut part);
        Ok(split_at(&all, &counts))
    }

    fn gather(&self, op: &str, mine: &[u8], root: usize) -> Result<Option<Vec<Vec<u8>>>> {
        self.check_rank(op, "root", root)?;
        let guard = self.comm();
        let counts = self.lengths(op, &guard.0, mine.len())?;
        let process = guard.0.process_at_rank(root as i32);
        if self.rank != root {
            process.gather_varcount_into(mine);
            return Ok(None);
        }
        let displs = displacements(&counts);
        let total: usize = counts.iter().map(|&c| c as usize).sum();
        let mut all = vec![0u8; total];
        let mut part = PartitionMut::new(&mut all[..], &counts[..], &displs[..]);
        process.gather_varcount_into_root(mine, &mut part);
        Ok(Some(split_at(&all, &counts)))
    }

    fn scatter(&self, op: &str, parts: Option<&[Vec<u8>]>, root: usize) -> Result<Vec<u8>> {
        self.check_rank(op, "root", root)?;
        let guard = self.comm();
        let process = guard.0.process_at_rank(root as i32);
        // The root's problem with its arguments is every rank's: the others learn of it from
        // the lengths it sends (-1), instead of waiting for parts that never come.
        let mut counts = vec![0i32; self.size];
        let mut problem = None;
        if self.rank == root {
            match parts {
                Some(p) if p.len() == self.size => {
                    for (c, part) in counts.iter_mut().zip(p) {
                        *c = count(op, self.rank, part.len())?;
                    }
                }
                Some(p) => problem = Some(format!("{} parts for {} ranks", p.len(), self.size)),
                None => problem = Some("the root must give the parts".to_string()),
            }
            if problem.is_some() {
                counts.fill(-1);
            }
        }
        process.broadcast_into(&mut counts[..]);
        if counts.iter().any(|&c| c < 0) {
            return Err(Error::InvalidArgument {
                op: op.into(),
                rank: self.rank,
                msg: problem.unwrap_or_else(|| format!("rank {root} gave no valid parts")),
            });
        }
        let mut mine = vec![0u8; counts[self.rank] as usize];
        if self.rank == root {
            let flat: Vec<u8> = parts.unwrap_or_default().concat();
            let displs = displacements(&counts);
            let part = Partition::new(&flat[..], &counts[..], &displs[..]);
            process.scatter_varcount_into_root(&part, &mut mine[..]);
        } else {
            process.scatter_varcount_into(&mut mine[..]);
        }
        Ok(mine)
    }

    fn alltoall(&self, op: &str, parts: &[Vec<u8>]) -> Result<Vec<Vec<u8>>> {
        if parts.len() != self.size {
            return Err(Error::InvalidArgument {
                op: op.into(),
                rank: self.rank,
                msg: format!("{} parts for {} ranks", parts.len(), self.size),
            });
        }
        let guard = self.comm();
        let send_counts = parts
            .iter()
            .map(|p| count(op, self.rank, p.len()))
            .collect::<Result<Vec<i32>>>()?;
        let mut recv_counts = vec![0i32; self.size];
        guard
            .0
            .all_to_all_into(&send_counts[..], &mut recv_counts[..]);
        let flat: Vec<u8> = parts.concat();
        let send_displs = displacements(&send_counts);
        let recv_displs = displacements(&recv_counts);
        let total: usize = recv_counts.iter().map(|&c| c as usize).sum();
        let mut all = vec![0u8; total];
        let send = Partition::new(&flat[..], &send_counts[..], &send_displs[..]);
        let mut recv = PartitionMut::new(&mut all[..], &recv_counts[..], &recv_displs[..]);
        guard.0.all_to_all_varcount_into(&send, &mut recv);
        Ok(split_at(&all, &recv_counts))
    }

    fn send(&self, op: &str, bytes: &[u8], dest: usize, tag: u16) -> Result<()> {
        self.check_rank(op, "destination", dest)?;
        count(op, self.rank, bytes.len())?;
        self.comm()
            .0
            .process_at_rank(dest as i32)
            .send_with_tag(bytes, i32::from(tag));
        Ok(())
    }

    fn recv(&self, op: &str, source: usize, tag: u16) -> Result<Vec<u8>> {
        self.check_rank(op, "source", source)?;
        let (bytes, _) = self
            .comm()
            .0
            .process_at_rank(source as i32)
            .receive_vec_with_tag::<u8>(i32::from(tag));
        Ok(bytes)
    }

    fn split(&self, op: &str, color: u32, key: u32) -> Result<Box<dyn Transport>> {
        let to_i32 = |v: u32| {
            i32::try_from(v)
                .map_err(|_| mpi_error(op, self.rank, format!("color or key {v} is over 2^31")))
        };
        let (color, key) = (to_i32(color)?, to_i32(key)?);
        let comm = self
            .comm()
            .0
            .split_by_color_with_key(Color::with_value(color), key)
            .ok_or_else(|| mpi_error(op, self.rank, "MPI gave no communicator"))?;
        Ok(Box::new(Self::from_comm(comm, self.universe.clone())))
    }

    fn concurrent(&self) -> bool {
        self.universe.1 == Threading::Multiple
    }

    fn abort(&self, code: i32) -> ! {
        // Not through the lock: a thread of this rank may hold it inside a collective that
        // will never end, which is why the job is being aborted.
        let world = SimpleCommunicator::world();
        world.abort(code)
    }
}

fn split_at(all: &[u8], counts: &[i32]) -> Vec<Vec<u8>> {
    let mut out = Vec::with_capacity(counts.len());
    let mut at = 0;
    for &c in counts {
        out.push(all[at..at + c as usize].to_vec());
        at += c as usize;
    }
    out
}
