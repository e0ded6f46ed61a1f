//! kusari-mn: training a kusari model on several processes, the role ChainerMN plays for
//! Chainer. Processes are started by MPI (`mpirun`) and exchange over it; the model code stays
//! the one-process code with two additions: a [`Communicator`] and an optimizer wrapped by
//! [`create_multi_node_optimizer`].
//!
//! ```
//! use kusari::link::optimizers::{Optimizer, SGD};
//! use kusari::link::{Link, Linear};
//! use kusari::prelude::*;
//! use kusari_mn::{create_multi_node_optimizer, run_threads, scatter_index};
//!
//! // Two ranks as threads (`create_communicator("flat")` under mpirun does the same over MPI).
//! let losses = run_threads(2, "flat", |comm| {
//!     let model = Linear::new(Some(3), 1, false, DType::F64)?;
//!     let mut opt = create_multi_node_optimizer(SGD::new().lr(0.1), &comm);
//!     let xs: Vec<f64> = (0..24).map(|i| (i as f64 * 0.37).sin()).collect();
//!     let mine = scatter_index(&comm, 8, Some(0))?; // this rank's 4 of the 8 examples
//!     let rows: Vec<f64> = mine.iter().flat_map(|&i| xs[3 * i..3 * i + 3].to_vec()).collect();
//!     let x = Variable::constant(Array::from_vec(rows, &[4, 3])?);
//!     let mut loss = 0.0;
//!     for _ in 0..5 {
//!         let y = model.forward(&x)?;
//!         let l = F::sum(&(&y * &y)?)?;
//!         model.cleargrads();
//!         l.backward()?;
//!         opt.update(&model)?; // rank 0's weights, then the mean gradient
//!         loss = l.array().item::<f64>()?;
//!     }
//!     Ok(loss)
//! });
//! assert!(losses.iter().all(Result::is_ok));
//! ```
//!
//! What is here:
//! - [`Communicator`]: rank, size, `intra_rank` (the GPU a rank takes), `split`, and the
//!   collectives on [`kusari::Array`]s (`bcast`, `allreduce`, `allgather`, `gather`, `scatter`,
//!   `alltoall`, `send`/`recv`) and on serializable values (`*_obj`); the parameters'
//!   broadcast and the gradients' mean, by the `naive` or `flat` algorithm
//!   (`create_communicator`, with the feature `mpi`; [`create_communicator_with`]).
//! - [`create_multi_node_optimizer`]: rank 0's parameters at `setup` or the first update, then
//!   the mean gradient at each, bucket by bucket during backward ([`OverlapStats`]),
//!   `no_sync` for gradient accumulation, and double buffering.
//! - [`MultiNodeBatchNormalization`] (statistics of the global batch) and [`functions`]:
//!   differentiable `allreduce`, `send` and `recv`, and [`MultiNodeChainList`], a model whose
//!   links are placed on several ranks (model parallelism).
//! - [`scatter_index`] and [`scatter_dataset`]: each rank's equal share of the data;
//!   [`Communicator::mean_metrics`] for evaluation.
//! - [`run_or_abort`]: a rank that fails ends the job with a message naming it.
//! - Transports ([`Transport`]): [`ThreadTransport`] (threads as ranks, checking that every rank
//!   calls the same collectives: the tests' stand-in for MPI) and, with the `mpi` feature,
//!   `MpiTransport`.
//!
//! How to install MPI and start a job: the guide's chapter "Training on several processes".

mod abort;
mod chain_list;
pub mod check;
mod communicator;
mod dataset;
mod error;
pub mod functions;
mod links;
#[cfg(feature = "mpi")]
mod mpi;
#[cfg(feature = "nccl")]
mod nccl;
mod optimizer;
mod overlap;
mod payload;
mod thread;
mod transport;

pub use abort::run_or_abort;
pub use chain_list::{CHAIN_TAG, MultiNodeChainList};
#[cfg(feature = "mpi")]
pub use communicator::create_communicator;
pub use communicator::{
    Algorithm, Bucket, Communicator, Options, create_communicator_with, run_threads,
    run_threads_with,
};
pub use dataset::{scatter_dataset, scatter_index};
pub use error::{Error, Result};
pub use links::MultiNodeBatchNormalization;
#[cfg(feature = "mpi")]
pub use mpi::MpiTransport;
pub use optimizer::{MultiNodeOptimizer, NoSync, create_multi_node_optimizer};
pub use overlap::OverlapStats;
pub use thread::{DEFAULT_TIMEOUT, ThreadTransport};
pub use transport::Transport;

/// The guide's chapter "Training on several processes" (docs/guide/multi-node.md), its Rust
/// blocks compiled and run as doc tests.
#[doc = include_str!("../../docs/guide/multi-node.md")]
#[cfg(doctest)]
pub struct GuideMultiNode;
