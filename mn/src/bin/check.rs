//! `kusari-mn-check`: what the MPI integration tests start with `mpirun`.
//!
//! ```text
//! mpirun -np 2 kusari-mn-check collectives
//! mpirun -np 2 kusari-mn-check equivalence naive|flat|pure_nccl
//! mpirun -np 2 kusari-mn-check fail-rank R       # rank R fails after a collective
//! mpirun -np 2 kusari-mn-check mismatch          # rank 1's model has another layer
//! ```
//!
//! Each check prints `rank R: ok ...` when it passes; a failure aborts the job through
//! `run_or_abort`, so `mpirun` exits with an error and every rank stops.

use kusari::Array;
use kusari::link::Linear;
use kusari::link::optimizers::{Optimizer, SGD};
use kusari::prelude::*;
use kusari_mn::{Communicator, Error, check, create_communicator, create_multi_node_optimizer};

/// The model of rank 1 in `mismatch`: the others' with one more layer.
#[derive(kusari::Link)]
struct Bigger {
    net: check::Net,
    extra: Linear,
}

/// Steps of the equivalence check, and its global batch.
const STEPS: usize = 6;
const BATCH: usize = 24;

fn main() {
    let args: Vec<String> = std::env::args().skip(1).collect();
    let name = match args.first().map(String::as_str) {
        Some("equivalence") => args.get(1).map(String::as_str).unwrap_or("flat"),
        _ => "flat",
    };
    let comm = create_communicator(name).unwrap_or_else(|e| {
        eprintln!("kusari-mn-check: {e}");
        std::process::exit(2);
    });
    kusari_mn::run_or_abort(&comm, || run(&comm, &args));
}

fn run(comm: &Communicator, args: &[String]) -> kusari_mn::Result<()> {
    let r = comm.rank();
    match args.first().map(String::as_str) {
        Some("collectives") => {
            check::collectives(comm)?;
            println!("rank {r}: ok collectives over {} ranks", comm.size());
        }
        Some("equivalence") => {
            // `pure_nccl` averages gradients on each rank's GPU: the model lives there.
            let _on = match comm.algorithm() {
                kusari_mn::Algorithm::PureNccl => Some(kusari::using_device(comm.device())?),
                _ => None,
            };
            let rel = check::equivalence(comm, STEPS, BATCH)?;
            println!(
                "rank {r}: ok equivalence {} relative difference {rel:e}",
                comm.name()
            );
            if rel > 1e-12 {
                return Err(Error::Mismatch {
                    op: "equivalence".into(),
                    rank: r,
                    detail: format!("parameters differ from one process by {rel:e}"),
                });
            }
        }
        Some("fail-rank") => {
            let bad: usize = args.get(1).and_then(|a| a.parse().ok()).unwrap_or(1);
            comm.allreduce(&Array::from_vec(vec![1.0f32], &[1])?)?;
            if r == bad {
                return Err(Error::InvalidArgument {
                    op: "fail-rank".into(),
                    rank: r,
                    msg: "this rank fails on purpose".into(),
                });
            }
            // The others wait in a collective the failed rank never calls: the abort ends it.
            comm.allreduce(&Array::from_vec(vec![1.0f32], &[1])?)?;
            println!("rank {r}: ok (should not be reached)");
        }
        Some("mismatch") => {
            let mut opt = create_multi_node_optimizer(SGD::new(), comm);
            if r == 1 {
                // A different model: the first update's check must say so on every rank.
                let model = Bigger {
                    net: check::Net::new(1)?,
                    extra: Linear::new(Some(2), 2, false, DType::F64)?,
                };
                opt.update(&model)?;
            } else {
                opt.update(&check::Net::new(1)?)?;
            }
            println!("rank {r}: ok (should not be reached)");
        }
        other => {
            return Err(Error::InvalidArgument {
                op: "kusari-mn-check".into(),
                rank: r,
                msg: format!(
                    "unknown check {other:?}; expected collectives, equivalence, fail-rank, mismatch"
                ),
            });
        }
    }
    Ok(())
}
