//! [`Transport`]: what carries the bytes between ranks. A [`Communicator`](crate::Communicator)
//! builds every collective, the gradient algorithms included, on these few operations.
//!
//! Two transports exist: [`ThreadTransport`](crate::ThreadTransport) (threads of one process as
//! ranks, for tests and for trying a training loop without MPI) and, with the `mpi` feature,
//! [`MpiTransport`](crate::MpiTransport) (`MPI_COMM_WORLD` under `mpirun`).
//!
//! Every operation is collective over the transport's ranks except `send` and `recv`: each rank
//! must call the same operations in the same order, as MPI requires. The thread transport checks
//! that rule (a rank calling another collective is an [`Error::Mismatch`](crate::Error)); MPI
//! does not, so a program that breaks it may hang there, which is why `mpirun` is given a time
//! limit in the tests.

use crate::error::Result;

/// The byte-level operations under a communicator. Payloads are opaque bytes; the reductions
/// work on `f32` and `f64` buffers in place.
pub trait Transport: Send + Sync {
    /// This process's (or thread's) rank, `0..size()`.
    fn rank(&self) -> usize;
    /// The number of ranks.
    fn size(&self) -> usize;
    /// The rank among the ranks on this node (MPI: `MPI_COMM_TYPE_SHARED`); the GPU a rank
    /// takes is `cuda:{intra_rank}`.
    fn intra_rank(&self) -> usize;
    /// The number of ranks on this node.
    fn intra_size(&self) -> usize;
    /// A short name for messages and logs (`threads`, `mpi`).
    fn name(&self) -> &'static str;

    /// Sums `buf` elementwise over the ranks, in place; every rank gets the same bits.
    fn allreduce_sum_f32(&self, op: &str, buf: &mut [f32]) -> Result<()>;
    /// Sums `buf` elementwise over the ranks, in place; every rank gets the same bits.
    fn allreduce_sum_f64(&self, op: &str, buf: &mut [f64]) -> Result<()>;
    /// Root's `buf` on every rank (the others' `buf` is replaced, whatever its length).
    fn bcast(&self, op: &str, buf: &mut Vec<u8>, root: usize) -> Result<()>;
    /// Every rank's `mine`, in rank order.
    fn allgather(&self, op: &str, mine: &[u8]) -> Result<Vec<Vec<u8>>>;
    /// Every rank's `mine` on `root` (in rank order), `None` elsewhere.
    fn gather(&self, op: &str, mine: &[u8], root: usize) -> Result<Option<Vec<Vec<u8>>>>;
    /// Part `i` of root's `parts` on rank `i` (the others pass `None`).
    fn scatter(&self, op: &str, parts: Option<&[Vec<u8>]>, root: usize) -> Result<Vec<u8>>;
    /// Part `j` of rank `i`'s `parts` arrives at rank `j` as part `i` of its result.
    fn alltoall(&self, op: &str, parts: &[Vec<u8>]) -> Result<Vec<Vec<u8>>>;
    /// Sends `bytes` to `dest` under `tag` (buffered: returns before `dest` receives).
    fn send(&self, op: &str, bytes: &[u8], dest: usize, tag: u16) -> Result<()>;
    /// The next message from `source` under `tag`, waiting for it.
    fn recv(&self, op: &str, source: usize, tag: u16) -> Result<Vec<u8>>;
    /// A transport over the ranks that passed the same `color`, ordered by `key` then by rank
    /// (MPI's `MPI_Comm_split`). Collective.
    fn split(&self, op: &str, color: u32, key: u32) -> Result<Box<dyn Transport>>;
    /// Whether this transport may be used by one thread while another uses a transport split
    /// from the same world (MPI: `MPI_THREAD_MULTIPLE`). The multi-node optimizer overlaps the
    /// gradients' exchange with backward only where it may.
    fn concurrent(&self) -> bool {
        true
    }
    /// Ends the whole job: every rank stops, the launcher exits with `code`.
    fn abort(&self, code: i32) -> !;
}
