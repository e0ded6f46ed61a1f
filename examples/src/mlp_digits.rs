//! What `11_mlp_digits.rs` trains: an MLP on the UCI handwritten digits ([`Digits`]). Its hidden
//! layers are `Linear` links with a leaky ReLU declared here with `#[function_node]` (with a CUDA
//! kernel), and dropout, which acts in training mode only: [`accuracy`] measures under
//! `config::using_train(false)`. [`train`] fits it with Adam on minibatches.
//!
//! `cargo run --release --example mlp_digits` trains it with a progress bar over the epochs and
//! saves the loss curve as a PNG.

use kusari::link::Linear;
use kusari::link::optimizers::{Adam, Optimizer};
use kusari::prelude::*;
use kusari::{config, random};

use crate::{Digits, shuffled};

/// `x` where positive, `slope * x` elsewhere (for `0 <= slope < 1`).
pub struct LeakyRelu {
    slope: f64,
}

#[function_node]
impl LeakyRelu {
    fn new(slope: f64) -> Self {
        LeakyRelu { slope }
    }

    #[retain(x)]
    #[forward_gpu(
        inputs = "T x",
        outputs = "T y",
        params = "T slope",
        body = "y = x > 0 ? x : x * slope;"
    )]
    fn forward(&self, x: &Array) -> Result<Array> {
        x.maximum(&x.mul_scalar(self.slope)?)
    }

    fn backward(&self, x: &Variable, gy: &Variable) -> Result<Variable> {
        // dy/dx is 1 where x > 0, else slope: slope + (1 - slope) [x > 0].
        let positive = x.array().gt_scalar(0.0)?.astype(x.dtype())?;
        let dy_dx = positive
            .mul_scalar(1.0 - self.slope)?
            .add_scalar(self.slope)?;
        gy * Variable::constant(dy_dx)
    }
}

/// Two hidden layers with leaky ReLU and dropout, then the class scores.
#[derive(Link)]
pub struct Mlp {
    l1: Linear,
    l2: Linear,
    out: Linear,
}

impl Mlp {
    /// The first layer's input size is taken from the first batch.
    pub fn new(hidden: usize) -> Result<Self> {
        let layer = |in_size, out_size| Linear::new(in_size, out_size, false, DType::F32);
        Ok(Mlp {
            l1: layer(None, hidden)?,
            l2: layer(Some(hidden), hidden)?,
            out: layer(Some(hidden), Digits::CLASSES)?,
        })
    }

    /// Class scores `(N, CLASSES)` for images `(N, FEATURES)`.
    pub fn forward(&self, x: &Variable) -> Result<Variable> {
        let h = F::dropout(&leaky_relu(&self.l1.forward(x)?, 0.1)?, 0.2)?;
        let h = F::dropout(&leaky_relu(&self.l2.forward(&h)?, 0.1)?, 0.2)?;
        self.out.forward(&h)
    }
}

/// The example's number of epochs (the test trains fewer).
pub const EPOCHS: usize = 20;
/// Images per minibatch.
pub const BATCH_SIZE: usize = 32;
const HIDDEN: usize = 64;
/// Seeds the split, the initial weights, the dropout masks and the minibatch order.
const SEED: u64 = 0;

/// Trains a fresh model on `device` on 80% of the digits, calling `on_epoch` with each epoch's
/// mean loss, and returns the losses and the accuracy on the other 20%.
pub fn train(
    epochs: usize,
    device: Device,
    mut on_epoch: impl FnMut(f32),
) -> Result<(Vec<f32>, f64)> {
    let (train, test) = Digits::load()?.split(0.2, SEED);
    random::seed(SEED); // the initial weights and the dropout masks
    let model = Mlp::new(HIDDEN)?;
    model.to_device(device)?;
    let mut optimizer = Adam::new().alpha(0.005);
    let mut rng = Rng::seed(SEED);
    let mut losses = Vec::with_capacity(epochs);
    for _ in 0..epochs {
        let mut total = 0.0;
        for batch in shuffled(train.len(), &mut rng).chunks(BATCH_SIZE) {
            let (x, t) = train.batch(batch)?;
            let x = Variable::constant(x.to_device(device)?);
            let loss = F::softmax_cross_entropy(&model.forward(&x)?, &t)?;
            model.cleargrads();
            loss.backward()?;
            optimizer.update(&model)?;
            total += loss.array().item::<f32>()? * batch.len() as f32;
        }
        let mean = total / train.len() as f32;
        on_epoch(mean);
        losses.push(mean);
    }
    Ok((losses, accuracy(&model, &test, device)?))
}

/// The fraction of `data` whose highest class score is its label, in test mode (no dropout).
pub fn accuracy(model: &Mlp, data: &Digits, device: Device) -> Result<f64> {
    // Test mode (no dropout), recording no graph.
    let _eval = config::using_config(config::Config {
        train: false,
        enable_backprop: false,
        ..config::current()
    });
    let (x, _) = data.batch(&(0..data.len()).collect::<Vec<_>>())?;
    let scores = model.forward(&Variable::constant(x.to_device(device)?))?;
    let scores = scores.array().to_vec::<f32>()?;
    let predicted = scores
        .chunks(Digits::CLASSES)
        .map(|row| (0..row.len()).fold(0, |best, c| if row[c] > row[best] { c } else { best }));
    let correct = predicted
        .zip(&data.labels)
        .filter(|&(p, &t)| p as i32 == t)
        .count();
    Ok(correct as f64 / data.len() as f64)
}
