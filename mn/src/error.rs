//! The error type of kusari-mn: every message names the collective and the rank that saw it.

/// Alias for `std::result::Result<T, kusari_mn::Error>`.
pub type Result<T, E = Error> = std::result::Result<T, E>;

/// Everything that can go wrong between ranks.
#[derive(Debug, Clone, PartialEq, thiserror::Error)]
#[non_exhaustive]
pub enum Error {
    /// An error of kusari itself (an array operation, a link, an optimizer).
    #[error(transparent)]
    Kusari(#[from] kusari::Error),
    /// An argument the collective cannot take on this rank (a root outside the world, a wrong
    /// number of parts, an unknown communicator name).
    #[error("{op} on rank {rank}: {msg}")]
    InvalidArgument {
        /// The collective or function.
        op: String,
        /// The rank that was given it.
        rank: usize,
        /// What is wrong.
        msg: String,
    },
    /// Ranks that do not agree: different collectives at the same point, arrays of different
    /// shapes or dtypes, different parameter lists. Raised instead of a deadlock.
    #[error("{op} on rank {rank}: the ranks disagree: {detail}")]
    Mismatch {
        /// The collective or function.
        op: String,
        /// The rank reporting it.
        rank: usize,
        /// What each rank has.
        detail: String,
    },
    /// The transport failed: a rank left the job, the wait for the others ran out, a message
    /// could not be decoded, MPI returned an error.
    #[error("{op} on rank {rank}: {msg}")]
    Transport {
        /// The collective or function.
        op: String,
        /// The rank reporting it.
        rank: usize,
        /// What happened.
        msg: String,
    },
}

impl From<Error> for kusari::Error {
    /// For kusari's traits, whose methods return kusari's error (an
    /// [`Optimizer`](kusari::link::optimizers::Optimizer)'s update, a
    /// [`FunctionNode`](kusari::FunctionNode)'s forward): kusari's own errors come back as they
    /// were, the others as `InvalidArgument` with the operation `kusari-mn` and the whole
    /// message (which names the collective and the rank).
    fn from(e: Error) -> kusari::Error {
        match e {
            Error::Kusari(e) => e,
            other => kusari::Error::InvalidArgument {
                op: "kusari-mn".into(),
                msg: other.to_string(),
            },
        }
    }
}
