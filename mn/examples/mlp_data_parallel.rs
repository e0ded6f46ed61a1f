//! The digits MLP of `11_mlp_digits.rs`, trained data-parallel over MPI: each rank takes an
//! equal share of every epoch's examples (`scatter_index`), computes the gradient of its part
//! of each global batch, and the multi-node optimizer averages the gradients before Adam's
//! step, so every rank keeps the same weights.
//!
//! ```text
//! cargo build --release -p kusari-mn --features mpi --example mlp_data_parallel
//! mpirun -np 2 target/release/examples/mlp_data_parallel --communicator flat
//! ```
//!
//! Options: `--communicator naive|flat|single` (default `flat`; `single` runs without
//! `mpirun`), `--epochs N` (default 10), `--batch-size B` (the global batch, default 64, split
//! evenly over the ranks), `--no-overlap` (exchange the gradients after backward instead of
//! during it). Rank 0 prints each epoch's mean loss and test accuracy (both averaged over the
//! ranks) and its time, and at the end how much of the all-reduce time backward hid.

use std::collections::BTreeMap;
use std::time::Instant;

use kusari::link::Link;
use kusari::link::optimizers::{Adam, Optimizer};
use kusari::prelude::*;
use kusari::{config, random};
use kusari_examples::Digits;
use kusari_examples::mlp_digits::Mlp;
use kusari_mn::{
    Communicator, MpiTransport, Options, create_communicator_with, create_multi_node_optimizer,
    scatter_index,
};

const SEED: u64 = 0;
const HIDDEN: usize = 64;

struct Args {
    communicator: String,
    epochs: usize,
    batch_size: usize,
    overlap: bool,
}

fn parse_args() -> std::result::Result<Args, String> {
    let mut args = Args {
        communicator: "flat".into(),
        epochs: 10,
        batch_size: 64,
        overlap: true,
    };
    let mut it = std::env::args().skip(1);
    while let Some(flag) = it.next() {
        let mut value = || it.next().ok_or(format!("{flag} needs a value"));
        match flag.as_str() {
            "--communicator" => args.communicator = value()?,
            "--epochs" => args.epochs = value()?.parse().map_err(|e| format!("--epochs: {e}"))?,
            "--batch-size" => {
                args.batch_size = value()?.parse().map_err(|e| format!("--batch-size: {e}"))?
            }
            "--no-overlap" => args.overlap = false,
            other => {
                return Err(format!(
                    "unknown option {other}; expected --communicator, --epochs, --batch-size, \
                     --no-overlap"
                ));
            }
        }
    }
    Ok(args)
}

fn main() {
    let args = parse_args().unwrap_or_else(|e| {
        eprintln!("mlp_data_parallel: {e}");
        std::process::exit(2);
    });
    let comm = communicator(&args).unwrap_or_else(|e| {
        eprintln!("mlp_data_parallel: {e}");
        std::process::exit(2);
    });
    kusari_mn::run_or_abort(&comm, || train(&comm, &args));
}

/// The communicator named on the command line, over MPI's world unless it is `single`.
fn communicator(args: &Args) -> kusari_mn::Result<Communicator> {
    if args.communicator == "single" {
        return Ok(Communicator::single());
    }
    let options = Options {
        overlap: args.overlap,
        ..Options::default()
    };
    let world = Box::new(MpiTransport::world()?);
    create_communicator_with(&args.communicator, world, options)
}

fn train(comm: &Communicator, args: &Args) -> kusari_mn::Result<()> {
    if !args.batch_size.is_multiple_of(comm.size()) {
        return Err(kusari_mn::Error::InvalidArgument {
            op: "mlp_data_parallel".into(),
            rank: comm.rank(),
            msg: format!(
                "the batch size {} does not split over {} ranks",
                args.batch_size,
                comm.size()
            ),
        });
    }
    let local_batch = args.batch_size / comm.size();
    let device = comm.device();
    let (train, test) = Digits::load()?.split(0.2, SEED);
    // The same initial weights everywhere would come from the first update's broadcast anyway;
    // the dropout masks differ per rank, as they would over one large batch.
    random::seed(SEED + comm.rank() as u64);
    let model = Mlp::new(HIDDEN)?;
    model.to_device(device)?;
    let mut optimizer = create_multi_node_optimizer(Adam::new().alpha(0.005), comm);
    // The first layer is sized by the first batch: one forward pass initialises it, so that
    // the optimizer can broadcast rank 0's weights before the first step.
    model.forward(&Variable::constant(train.batch(&[0])?.0.to_device(device)?))?;
    optimizer.setup(&model)?;
    if comm.rank() == 0 {
        println!(
            "{} rank(s), communicator {} over {}, device {device}, global batch {} ({} per rank)",
            comm.size(),
            comm.name(),
            comm.transport_name(),
            args.batch_size,
            local_batch
        );
    }
    let test_part = scatter_index(comm, test.len(), None)?;
    let started = Instant::now();
    for epoch in 0..args.epochs {
        let epoch_start = Instant::now();
        let mine = scatter_index(comm, train.len(), Some(SEED + epoch as u64))?;
        let mut total = 0.0;
        for batch in mine.chunks(local_batch) {
            let (x, t) = train.batch(batch)?;
            let x = Variable::constant(x.to_device(device)?);
            let loss = F::softmax_cross_entropy(&model.forward(&x)?, &t)?;
            model.cleargrads();
            loss.backward()?;
            optimizer.update(&model)?;
            total += f64::from(loss.array().item::<f32>()?) * batch.len() as f64;
        }
        let metrics = BTreeMap::from([
            ("loss".to_string(), total / mine.len() as f64),
            (
                "accuracy".to_string(),
                accuracy(&model, &test, &test_part, device)?,
            ),
        ]);
        let mean = comm.mean_metrics(&metrics)?;
        if comm.rank() == 0 {
            println!(
                "epoch {:2}  loss {:.4}  test accuracy {:.3}  {:.3} s",
                epoch + 1,
                mean["loss"],
                mean["accuracy"],
                epoch_start.elapsed().as_secs_f64()
            );
        }
    }
    if comm.rank() == 0 {
        println!(
            "trained {} epochs in {:.3} s ({} steps of the optimizer)",
            args.epochs,
            started.elapsed().as_secs_f64(),
            optimizer.t()
        );
        if let Some(stats) = optimizer.overlap_stats() {
            println!(
                "all-reduce {:.3} s, of which {:.0}% hidden behind backward",
                stats.allreduce.as_secs_f64(),
                100.0 * stats.hidden_share()
            );
        }
    }
    Ok(())
}

/// The share of `indices` of `data` the model classifies right.
fn accuracy(model: &Mlp, data: &Digits, indices: &[usize], device: Device) -> Result<f64> {
    let _eval = config::using_config(config::Config {
        train: false,
        enable_backprop: false,
        ..config::current()
    });
    let (x, t) = data.batch(indices)?;
    let scores = model.forward(&Variable::constant(x.to_device(device)?))?;
    let scores = scores.array().to_vec::<f32>()?;
    let labels = t.to_vec::<i32>()?;
    let correct = scores
        .chunks(Digits::CLASSES)
        .zip(&labels)
        .filter(|(row, t)| {
            let best = (0..row.len()).fold(0, |b, c| if row[c] > row[b] { c } else { b });
            best as i32 == **t
        })
        .count();
    Ok(correct as f64 / indices.len() as f64)
}
