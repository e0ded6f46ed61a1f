//! Self-checks of a communicator over any transport: the tests run them on threads, and the
//! `kusari-mn-check` program runs them under `mpirun` (the MPI integration tests). Each returns
//! an error naming what differs from its hand-computed expectation.

use kusari::link::initializers::Constant;
use kusari::link::optimizers::{MomentumSGD, Optimizer, SGD};
use kusari::link::{Linear, Link, Parameter};
use kusari::prelude::*;

use crate::communicator::{Communicator, Options};
use crate::error::{Error, Result};
use crate::optimizer::create_multi_node_optimizer;

fn failed(comm: &Communicator, op: &str, msg: String) -> Error {
    Error::Mismatch {
        op: op.into(),
        rank: comm.rank(),
        detail: msg,
    }
}

fn expect_eq<T: PartialEq + std::fmt::Debug>(
    comm: &Communicator,
    what: &str,
    got: T,
    want: T,
) -> Result<()> {
    if got == want {
        Ok(())
    } else {
        Err(failed(
            comm,
            "check::collectives",
            format!("{what}: got {got:?}, expected {want:?}"),
        ))
    }
}

/// Every collective on arrays and values, each against what the ranks' inputs make it by hand:
/// rank `r` contributes values built from `r`, so each result is known in closed form.
pub fn collectives(comm: &Communicator) -> Result<()> {
    let (r, n) = (comm.rank(), comm.size());
    let rf = r as f64;
    // bcast from the last rank.
    let root = n - 1;
    let x = Array::from_vec(vec![10.0 + rf, -1.0], &[2])?;
    let b = comm.bcast((r == root).then_some(&x), root)?;
    expect_eq(
        comm,
        "bcast",
        b.to_vec::<f64>()?,
        vec![10.0 + root as f64, -1.0],
    )?;
    // allreduce: float32, float64, int32 and float16 sums of 0..n.
    let tri = (n * (n - 1) / 2) as f64;
    for dtype in [DType::F32, DType::F64, DType::I32, DType::F16] {
        let x = Array::from_vec(vec![rf, 1.0, 2.0 * rf, -3.0], &[2, 2])?.astype(dtype)?;
        let s = comm.allreduce(&x)?;
        expect_eq(comm, "allreduce's dtype", s.dtype(), dtype)?;
        expect_eq(
            comm,
            &format!("allreduce of {dtype}"),
            s.astype(DType::F64)?.to_vec::<f64>()?,
            vec![tri, n as f64, 2.0 * tri, -3.0 * n as f64],
        )?;
    }
    // allgather and gather of arrays whose shapes differ per rank.
    let mine = Array::from_vec(vec![rf; r + 1], &[r + 1])?;
    let all = comm.allgather(&mine)?;
    for (k, a) in all.iter().enumerate() {
        expect_eq(comm, "allgather", a.to_vec::<f64>()?, vec![k as f64; k + 1])?;
    }
    let gathered = comm.gather(&mine, 0)?;
    expect_eq(comm, "gather on root only", gathered.is_some(), r == 0)?;
    if let Some(all) = gathered {
        expect_eq(comm, "gather's count", all.len(), n)?;
        for (k, a) in all.iter().enumerate() {
            expect_eq(comm, "gather", a.to_vec::<f64>()?, vec![k as f64; k + 1])?;
        }
    }
    // scatter: part k is [k, k * k] as int64.
    let parts = (0..n)
        .map(|k| Array::from_vec(vec![k as i64, (k * k) as i64], &[2]))
        .collect::<kusari::Result<Vec<_>>>()?;
    let got = comm.scatter((r == 0).then_some(&parts[..]), 0)?;
    expect_eq(
        comm,
        "scatter",
        got.to_vec::<i64>()?,
        vec![r as i64, (r * r) as i64],
    )?;
    // alltoall: rank r sends 100 r + j to rank j.
    let outgoing = (0..n)
        .map(|j| Array::from_vec(vec![(100 * r + j) as f32], &[1]))
        .collect::<kusari::Result<Vec<_>>>()?;
    let incoming = comm.alltoall(&outgoing)?;
    for (i, a) in incoming.iter().enumerate() {
        expect_eq(
            comm,
            "alltoall",
            a.to_vec::<f32>()?,
            vec![(100 * i + r) as f32],
        )?;
    }
    // send/recv around a ring, two tags.
    if n > 1 {
        let (next, prev) = ((r + 1) % n, (r + n - 1) % n);
        comm.send(&Array::from_vec(vec![rf], &[1])?, next, 7)?;
        comm.send_obj(&format!("from {r}"), next, 8)?;
        let got: String = comm.recv_obj(prev, 8)?;
        expect_eq(comm, "recv_obj", got, format!("from {prev}"))?;
        let got = comm.recv(prev, 7)?;
        expect_eq(comm, "recv", got.to_vec::<f64>()?, vec![prev as f64])?;
    }
    // The object forms.
    let word = comm.bcast_obj((r == 0).then_some(&("zero".to_string(), 0u8)), 0)?;
    expect_eq(comm, "bcast_obj", word, ("zero".to_string(), 0u8))?;
    let ranks: Vec<usize> = comm.allgather_obj(&r)?;
    expect_eq(comm, "allgather_obj", ranks, (0..n).collect())?;
    let squares: Vec<usize> = (0..n).map(|k| k * k).collect();
    let got: usize = comm.scatter_obj((r == 0).then_some(&squares[..]), 0)?;
    expect_eq(comm, "scatter_obj", got, r * r)?;
    let got: Vec<(usize, usize)> =
        comm.alltoall_obj(&(0..n).map(|j| (r, j)).collect::<Vec<_>>())?;
    expect_eq(comm, "alltoall_obj", got, (0..n).map(|i| (i, r)).collect())?;
    if let Some(all) = comm.gather_obj(&vec![r; r], 0)? {
        expect_eq(
            comm,
            "gather_obj",
            all,
            (0..n).map(|k| vec![k; k]).collect(),
        )?;
    }
    // split: even and odd ranks, numbered in reverse by the key.
    let half = comm.split((r % 2) as u32, (n - r) as u32)?;
    let members: Vec<usize> = (0..n).filter(|k| k % 2 == r % 2).rev().collect();
    expect_eq(comm, "split's size", half.size(), members.len())?;
    expect_eq(
        comm,
        "split's rank",
        half.rank(),
        members.iter().position(|&k| k == r).unwrap(),
    )?;
    let s = half.allreduce(&Array::from_vec(vec![rf], &[1])?)?;
    expect_eq(
        comm,
        "allreduce in a split",
        s.to_vec::<f64>()?,
        vec![members.iter().sum::<usize>() as f64],
    )?;
    Ok(())
}

/// The model of [`equivalence`]: two linear layers with tanh between, float64.
#[derive(kusari::Link)]
pub struct Net {
    l1: Linear,
    l2: Linear,
}

impl Net {
    /// Weights drawn from `seed` (different seeds per rank show the broadcast works).
    pub fn new(seed: u64) -> Result<Net> {
        kusari::random::seed(seed);
        Ok(Net {
            l1: Linear::new(Some(4), 8, false, DType::F64)?,
            l2: Linear::new(Some(8), 3, false, DType::F64)?,
        })
    }

    /// The mean over the batch of the squared error of `x`'s predictions against `t`.
    pub fn loss(&self, x: &Array, t: &Array) -> Result<Variable> {
        let h = self.l1.forward(&Variable::constant(x.clone()))?.tanh()?;
        let d = (&self.l2.forward(&h)? - &Variable::constant(t.clone()))?;
        // The mean over the batch of the squared error: a gradient that averages correctly.
        Ok(F::mean(&(&d * &d)?)?)
    }
}

/// Examples `range` of the synthetic regression data set: inputs (len, 4), targets (len, 3).
pub fn examples(range: std::ops::Range<usize>) -> Result<(Array, Array)> {
    let len = range.len();
    let x: Vec<f64> = range
        .clone()
        .flat_map(|i| (0..4).map(move |j| ((i * 4 + j) as f64 * 0.731).sin()))
        .collect();
    let t: Vec<f64> = range
        .flat_map(|i| (0..3).map(move |j| ((i * 3 + j) as f64 * 0.377).cos()))
        .collect();
    Ok((
        Array::from_vec(x, &[len, 4])?,
        Array::from_vec(t, &[len, 3])?,
    ))
}

/// Trains [`Net`] for `steps` steps of momentum SGD with a global batch of `batch` examples,
/// each rank taking its contiguous `batch / size`, then trains a second net the same way on
/// this rank alone with the whole batch. Returns the largest difference between their
/// parameters relative to the largest parameter; data parallelism is right when it is at
/// rounding level. Each rank starts from other random weights: the optimizer's `setup` must
/// make them rank 0's, which the one-process net is seeded to match. Both nets and the data
/// live on this thread's [default device](kusari::default_device).
pub fn equivalence(comm: &Communicator, steps: usize, batch: usize) -> Result<f64> {
    let (r, n) = (comm.rank(), comm.size());
    if !batch.is_multiple_of(n) {
        return Err(Error::InvalidArgument {
            op: "check::equivalence".into(),
            rank: r,
            msg: format!("batch {batch} does not split over {n} ranks"),
        });
    }
    let local = batch / n;
    let device = kusari::default_device();
    let parallel = Net::new(100 + r as u64)?;
    parallel.to_device(device)?;
    let mut opt = create_multi_node_optimizer(MomentumSGD::new().lr(0.1), comm);
    opt.setup(&parallel)?;
    let single = Net::new(100)?;
    single.to_device(device)?;
    let mut single_opt = MomentumSGD::new().lr(0.1);
    for step in 0..steps {
        let start = step * batch;
        let (x, t) = examples(start + r * local..start + (r + 1) * local)?;
        parallel.cleargrads();
        parallel.loss(&x, &t)?.backward()?;
        opt.update(&parallel)?;
        let (x, t) = examples(start..start + batch)?;
        single.cleargrads();
        single.loss(&x, &t)?.backward()?;
        single_opt.update(&single)?;
    }
    relative_difference(&parallel, &single)
}

/// The largest difference between `a`'s and `b`'s parameters relative to `b`'s largest.
fn relative_difference(parallel: &Net, single: &Net) -> Result<f64> {
    let (mut diff, mut scale) = (0.0f64, 0.0f64);
    for ((_, a), (_, b)) in parallel.named_params().iter().zip(single.named_params()) {
        for (u, v) in a
            .array()?
            .to_vec::<f64>()?
            .iter()
            .zip(b.array()?.to_vec::<f64>()?)
        {
            diff = diff.max((u - v).abs());
            scale = scale.max(v.abs());
        }
    }
    Ok(diff / scale)
}

/// Options with small buckets (several per model of these checks) and the overlap on or off.
pub fn small_buckets(overlap: bool) -> Options {
    Options {
        bucket_cap_bytes: 64,
        first_bucket_cap_bytes: 16,
        overlap,
        ..Options::default()
    }
}

/// Two linear layers (float64, then float32, so that buckets close at the dtype change) and a
/// parameter no loss uses: [`accumulated_means`]' model.
#[derive(kusari::Link)]
struct Mixed {
    l1: Linear,
    l2: Linear,
    unused: Parameter,
}

/// Each parameter's gradient as float64 (empty for none) after two updates, each after
/// `passes` backward passes of this rank's own data (all but the last under
/// [`no_sync`](crate::MultiNodeOptimizer::no_sync) when `no_sync`), the update SGD with learning
/// rate 0: the mean gradients the exchange leaves, the parameters unchanged. Every rank must
/// get the same, and the exchange overlapped with backward those of the exchange after it, bit
/// for bit, whether it is dirty (several passes outside `no_sync`) or not. Runs on this thread's
/// [default device](kusari::default_device).
pub fn accumulated_means(
    comm: &Communicator,
    passes: usize,
    no_sync: bool,
) -> Result<Vec<Vec<f64>>> {
    kusari::random::seed(5);
    let model = Mixed {
        l1: Linear::new(Some(3), 4, false, DType::F64)?,
        l2: Linear::new(Some(4), 2, false, DType::F32)?,
        unused: Parameter::with_shape(Constant(1.0), &[2], DType::F64)?,
    };
    model.to_device(kusari::default_device())?;
    let mut opt = create_multi_node_optimizer(SGD::new().lr(0.0), comm);
    opt.setup(&model)?;
    let r = comm.rank();
    let loss = |k: usize| -> kusari::Result<Variable> {
        let x: Vec<f64> = (0..6).map(|i| ((i + 7 * r + 3 * k) as f64).sin()).collect();
        let x = Array::from_vec(x, &[2, 3])?;
        let h = model.l1.forward(&Variable::constant(x))?.tanh()?;
        let y = model.l2.forward(&F::astype(&h, DType::F32)?)?;
        F::sum(&(&y * &y)?)
    };
    for round in 0..2 {
        model.cleargrads();
        {
            let _guard = no_sync.then(|| opt.no_sync());
            for k in 0..passes - 1 {
                loss(k + round)?.backward()?;
            }
        }
        loss(passes - 1 + round)?.backward()?;
        opt.update(&model)?;
    }
    if let (Some(stats), true) = (opt.overlap_stats(), passes == 1 || no_sync)
        && stats.rounds != 2
    {
        return Err(failed(
            comm,
            "check::accumulated_means",
            format!("{} rounds exchanged during backward, not 2", stats.rounds),
        ));
    }
    model
        .named_params()
        .iter()
        .map(|(_, p)| match p.grad() {
            Some(g) => Ok(g.astype(DType::F64)?.to_vec::<f64>()?),
            None => Ok(Vec::new()),
        })
        .collect()
}

/// As [`equivalence`], with [double buffering](crate::MultiNodeOptimizer::double_buffering):
/// `steps` updates, each stepping with the previous update's mean gradients, against one
/// process applying the same rule to the whole batch by hand (no step at the first update).
/// Returns the largest difference relative to the largest parameter.
pub fn double_buffering_equivalence(
    comm: &Communicator,
    steps: usize,
    batch: usize,
) -> Result<f64> {
    let (r, n) = (comm.rank(), comm.size());
    let local = batch / n;
    let device = kusari::default_device();
    let single = Net::new(100)?;
    single.to_device(device)?;
    let mut single_opt = MomentumSGD::new().lr(0.1);
    let mut previous: Option<Vec<Array>> = None;
    for t in 0..steps {
        let (x, y) = examples(t * batch..(t + 1) * batch)?;
        single.cleargrads();
        single.loss(&x, &y)?.backward()?;
        let grads: Vec<Array> = single
            .params()
            .iter()
            .map(|p| p.grad().expect("every parameter has a gradient"))
            .collect();
        if let Some(old) = previous.replace(grads) {
            for (p, g) in single.params().iter().zip(old) {
                p.variable()?.set_grad_array(g)?;
            }
            single_opt.update(&single)?;
        }
    }
    let net = Net::new(100 + r as u64)?;
    net.to_device(device)?;
    let mut opt =
        create_multi_node_optimizer(MomentumSGD::new().lr(0.1), comm).double_buffering(true);
    opt.setup(&net)?;
    for t in 0..steps {
        let start = t * batch + r * local;
        let (x, y) = examples(start..start + local)?;
        net.cleargrads();
        net.loss(&x, &y)?.backward()?;
        opt.update(&net)?;
    }
    if opt.t() != steps as u64 - 1 {
        return Err(failed(
            comm,
            "check::double_buffering_equivalence",
            format!(
                "{} steps taken in {steps} updates, not {}",
                opt.t(),
                steps - 1
            ),
        ));
    }
    relative_difference(&net, &single)
}
