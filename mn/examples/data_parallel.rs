//! The digits classifiers of `11_mlp_digits.rs` and `13_cnn_digits.rs`, trained data-parallel
//! over MPI: each rank takes an equal share of every epoch's examples (`scatter_index`),
//! computes the gradient of its part of each global batch, and the multi-node optimizer
//! averages the gradients (during backward) before Adam's step, so every rank keeps the same
//! weights. The CNN normalizes with `MultiNodeBatchNormalization`: the statistics of the
//! global batch, as one process with the whole batch would have them.
//!
//! ```text
//! cargo build --release -p kusari-mn --features mpi --example data_parallel
//! mpirun -np 2 target/release/examples/data_parallel --communicator flat
//! mpirun -np 2 target/release/examples/data_parallel --model cnn
//! # GPUs: one rank a GPU, gradients by NCCL; several machines: a hostfile
//! cargo build --release -p kusari-mn --features mpi,nccl --example data_parallel
//! mpirun -np 8 --hostfile hosts target/release/examples/data_parallel --communicator pure_nccl
//! ```
//!
//! Options: `--model mlp|cnn` (default `mlp`), `--communicator naive|flat|pure_nccl|single`
//! (default `flat`; `pure_nccl` needs the feature `nccl` and a GPU a rank; `single` runs
//! without `mpirun`), `--epochs N` (default 10), `--batch-size B` (the
//! global batch, default 64, split evenly over the ranks), `--no-overlap` (exchange the
//! gradients after backward instead of during it), `--double-buffering` (step with the
//! previous update's mean gradients), `--log-every N` (default 1: print every N-th epoch and
//! the last). Rank 0 prints each such epoch's mean loss and test accuracy (both averaged over
//! the ranks, computed every epoch) and its time, and at the end how much of the all-reduce
//! time backward hid. Under `mpirun` every printed line wakes `mpirun` to forward it; with
//! epochs of a few milliseconds, as in `mn/benches/data_parallel.py`, that steals a core from
//! a rank when the ranks fill the machine, so the bench prints the last epoch only.

use std::collections::BTreeMap;
use std::time::Instant;

use kusari::functions::{ConvOptions, PoolOptions};
use kusari::link::optimizers::{Adam, Optimizer};
use kusari::link::{Convolution2D, Linear, Link, Parameter};
use kusari::prelude::*;
use kusari::{config, random};
use kusari_examples::Digits;
use kusari_examples::mlp_digits::Mlp;
use kusari_mn::{
    Communicator, MpiTransport, MultiNodeBatchNormalization, Options, create_communicator_with,
    create_multi_node_optimizer, scatter_index,
};

const SEED: u64 = 0;
const HIDDEN: usize = 64;
const CHANNELS: usize = 16;

/// The model trained: `Mlp` from the examples, or the CNN below.
enum Model {
    Mlp(Box<Mlp>),
    Cnn(Box<Cnn>),
}

impl Model {
    fn forward(&self, x: &Variable) -> Result<Variable> {
        match self {
            Model::Mlp(m) => m.forward(x),
            Model::Cnn(m) => m.forward(x),
        }
    }
}

impl Link for Model {
    fn visit_params<'a>(&'a self, prefix: &str, f: &mut dyn FnMut(String, &'a Parameter)) {
        match self {
            Model::Mlp(m) => m.visit_params(prefix, f),
            Model::Cnn(m) => m.visit_params(prefix, f),
        }
    }
}

/// A convolution, batch normalization over the global batch, ReLU and 2×2 max pooling.
#[derive(kusari::Link)]
struct Block {
    conv: Convolution2D,
    bn: MultiNodeBatchNormalization,
}

impl Block {
    fn new(comm: &Communicator, in_channels: usize, out_channels: usize) -> Result<Self> {
        let same = ConvOptions::default().pad(1);
        Ok(Block {
            conv: Convolution2D::new(Some(in_channels), out_channels, 3, same, true, DType::F32)?,
            bn: MultiNodeBatchNormalization::new(&[out_channels], comm, 0.9, 2e-5, DType::F32)?,
        })
    }

    fn forward(&self, x: &Variable) -> Result<Variable> {
        let h = F::relu(&self.bn.forward(&self.conv.forward(x)?)?)?;
        F::max_pooling_2d(&h, &PoolOptions::new(2))
    }
}

/// The CNN of `13_cnn_digits.rs`, its batch normalization over every rank's examples.
#[derive(kusari::Link)]
struct Cnn {
    b1: Block,
    b2: Block,
    out: Linear,
}

impl Cnn {
    fn new(comm: &Communicator, channels: usize) -> Result<Self> {
        let flat = 2 * channels * 2 * 2;
        Ok(Cnn {
            b1: Block::new(comm, 1, channels)?,
            b2: Block::new(comm, channels, 2 * channels)?,
            out: Linear::new(Some(flat), Digits::CLASSES, false, DType::F32)?,
        })
    }

    fn forward(&self, x: &Variable) -> Result<Variable> {
        let x = F::reshape(x, &[x.shape()[0], 1, 8, 8])?;
        self.out.forward(&self.b2.forward(&self.b1.forward(&x)?)?)
    }
}

struct Args {
    model: String,
    communicator: String,
    epochs: usize,
    batch_size: usize,
    overlap: bool,
    double_buffering: bool,
    log_every: usize,
}

fn parse_args() -> std::result::Result<Args, String> {
    let mut args = Args {
        model: "mlp".into(),
        communicator: "flat".into(),
        epochs: 10,
        batch_size: 64,
        overlap: true,
        double_buffering: false,
        log_every: 1,
    };
    let mut it = std::env::args().skip(1);
    while let Some(flag) = it.next() {
        let mut value = || it.next().ok_or(format!("{flag} needs a value"));
        match flag.as_str() {
            "--model" => args.model = value()?,
            "--communicator" => args.communicator = value()?,
            "--epochs" => args.epochs = value()?.parse().map_err(|e| format!("--epochs: {e}"))?,
            "--batch-size" => {
                args.batch_size = value()?.parse().map_err(|e| format!("--batch-size: {e}"))?
            }
            "--no-overlap" => args.overlap = false,
            "--double-buffering" => args.double_buffering = true,
            "--log-every" => {
                args.log_every = value()?
                    .parse()
                    .ok()
                    .filter(|&n| n > 0)
                    .ok_or("--log-every needs a positive number of epochs")?
            }
            other => {
                return Err(format!(
                    "unknown option {other}; expected --model, --communicator, --epochs, \
                     --batch-size, --no-overlap, --double-buffering, --log-every"
                ));
            }
        }
    }
    Ok(args)
}

fn main() {
    let args = parse_args().unwrap_or_else(|e| {
        eprintln!("data_parallel: {e}");
        std::process::exit(2);
    });
    let comm = communicator(&args).unwrap_or_else(|e| {
        eprintln!("data_parallel: {e}");
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
            op: "data_parallel".into(),
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
    let model = match args.model.as_str() {
        "mlp" => Model::Mlp(Box::new(Mlp::new(HIDDEN)?)),
        "cnn" => Model::Cnn(Box::new(Cnn::new(comm, CHANNELS)?)),
        other => {
            return Err(kusari_mn::Error::InvalidArgument {
                op: "data_parallel".into(),
                rank: comm.rank(),
                msg: format!("unknown model {other:?}; expected \"mlp\" or \"cnn\""),
            });
        }
    };
    model.to_device(device)?;
    // The learning rates of the one-process examples.
    let alpha = if matches!(model, Model::Cnn(_)) {
        0.002
    } else {
        0.005
    };
    let mut optimizer = create_multi_node_optimizer(Adam::new().alpha(alpha), comm)
        .double_buffering(args.double_buffering);
    // The first layer is sized by the first batch: one forward pass initialises it, so that
    // the optimizer can broadcast rank 0's weights before the first step.
    model.forward(&Variable::constant(train.batch(&[0])?.0.to_device(device)?))?;
    optimizer.setup(&model)?;
    if comm.rank() == 0 {
        println!(
            "{}: {} rank(s), communicator {} over {}, device {device}, global batch {} ({} per \
             rank)",
            args.model,
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
        let logged = (epoch + 1) % args.log_every == 0 || epoch + 1 == args.epochs;
        if comm.rank() == 0 && logged {
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
        match optimizer.overlap_stats() {
            // `pure_nccl`: the all-reduces ran on NCCL's stream, untimed by the host.
            Some(stats) if stats.allreduce.is_zero() => println!(
                "all-reduces started during backward on NCCL's stream; the updates waited {:.3} \
                 s for them",
                stats.exposed.as_secs_f64()
            ),
            Some(stats) => println!(
                "all-reduce {:.3} s, of which {:.0}% hidden behind backward",
                stats.allreduce.as_secs_f64(),
                100.0 * stats.hidden_share()
            ),
            None => {}
        }
    }
    Ok(())
}

/// The share of `indices` of `data` the model classifies right.
fn accuracy(model: &Model, data: &Digits, indices: &[usize], device: Device) -> Result<f64> {
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
