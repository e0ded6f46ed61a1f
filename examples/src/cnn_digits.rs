//! What `13_cnn_digits.rs` trains: a small convolutional network on the UCI handwritten digits
//! ([`Digits`], 8×8 images): two blocks of 3×3 convolution, batch normalization, ReLU and 2×2
//! max pooling (8×8 → 4×4 → 2×2), then a linear layer to the class scores. [`train`] fits it
//! with Adam on minibatches; [`accuracy`] measures in test mode, where batch normalization uses
//! its running averages.

use kusari::functions::{ConvOptions, PoolOptions};
use kusari::link::optimizers::Adam;
use kusari::link::{BatchNormalization, Convolution2D, Linear};
use kusari::prelude::*;
use kusari::random;

use crate::Digits;
pub use crate::classify::accuracy;
use crate::classify::{Classifier, fit};

/// Convolution, batch normalization, ReLU, 2×2 max pooling.
#[derive(Link)]
pub struct Block {
    conv: Convolution2D,
    bn: BatchNormalization,
}

impl Block {
    fn new(in_channels: usize, out_channels: usize) -> Result<Self> {
        let same = ConvOptions::default().pad(1);
        Ok(Block {
            // The bias would be undone by the normalization that follows.
            conv: Convolution2D::new(Some(in_channels), out_channels, 3, same, true, DType::F32)?,
            bn: BatchNormalization::new(&[out_channels], 0.9, 2e-5, DType::F32)?,
        })
    }

    fn forward(&self, x: &Variable) -> Result<Variable> {
        let h = F::relu(&self.bn.forward(&self.conv.forward(x)?)?)?;
        F::max_pooling_2d(&h, &PoolOptions::new(2))
    }
}

/// Two convolutional blocks, then the class scores.
#[derive(Link)]
pub struct Cnn {
    b1: Block,
    b2: Block,
    out: Linear,
}

impl Cnn {
    /// `channels` filters in the first block, twice as many in the second.
    pub fn new(channels: usize) -> Result<Self> {
        Ok(Cnn {
            b1: Block::new(1, channels)?,
            b2: Block::new(channels, 2 * channels)?,
            out: Linear::new(
                Some(2 * channels * 2 * 2),
                Digits::CLASSES,
                false,
                DType::F32,
            )?,
        })
    }

    /// Class scores `(N, CLASSES)` for images `(N, FEATURES)` (reshaped to `(N, 1, 8, 8)`).
    pub fn forward(&self, x: &Variable) -> Result<Variable> {
        let x = F::reshape(x, &[x.shape()[0], 1, 8, 8])?;
        let h = self.b2.forward(&self.b1.forward(&x)?)?;
        self.out.forward(&h)
    }
}

/// The example's number of epochs (the test trains fewer).
pub const EPOCHS: usize = 15;
/// Images per minibatch.
pub const BATCH_SIZE: usize = 32;
const CHANNELS: usize = 16;
/// Seeds the split, the initial weights and the minibatch order (the MLP's split).
const SEED: u64 = 0;

/// Trains a fresh model on `device` on 80% of the digits, calling `on_epoch` with each epoch's
/// mean loss, and returns the losses and the accuracy on the other 20%.
pub fn train(epochs: usize, device: Device, on_epoch: impl FnMut(f32)) -> Result<(Vec<f32>, f64)> {
    let (train, test) = Digits::load()?.split(0.2, SEED);
    random::seed(SEED);
    let model = Cnn::new(CHANNELS)?;
    model.to_device(device)?;
    let mut optimizer = Adam::new().alpha(0.002);
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

impl Classifier for Cnn {
    fn scores(&self, x: &Variable) -> Result<Variable> {
        self.forward(x)
    }
}
