//! What `11_mlp_digits.rs` trains: an MLP on the UCI handwritten digits ([`Digits`]). Its hidden
//! layers are `Linear` links with a leaky ReLU declared here with `#[function_node]` (with a CUDA
//! kernel), and dropout, which acts in training mode only: [`accuracy`] measures under
//! `config::using_train(false)`. [`train`] fits it with Adam on minibatches.
//!
//! `cargo run --release --example mlp_digits` trains it with a progress bar over the epochs and
//! saves the loss curve as a PNG.

use kusari::link::Linear;
use kusari::link::optimizers::Adam;
use kusari::prelude::*;
use kusari::random;

use crate::Digits;
pub use crate::classify::accuracy;
use crate::classify::{Classifier, fit};

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
pub fn train(epochs: usize, device: Device, on_epoch: impl FnMut(f32)) -> Result<(Vec<f32>, f64)> {
    let (train, test) = Digits::load()?.split(0.2, SEED);
    random::seed(SEED); // the initial weights and the dropout masks
    let model = Mlp::new(HIDDEN)?;
    model.to_device(device)?;
    let mut optimizer = Adam::new().alpha(0.005);
    let mut rng = Rng::seed(SEED);
    let losses = fit(
        &model,
        &mut optimizer,
        (&train, BATCH_SIZE),
        (epochs, device, &mut rng),
        on_epoch,
    )?;
    Ok((losses, accuracy(&model, &test, device)?))
}

impl Classifier for Mlp {
    fn scores(&self, x: &Variable) -> Result<Variable> {
        self.forward(x)
    }
}
