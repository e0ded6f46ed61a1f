//! What `13_cnn_digits.rs` trains: a small convolutional network on the UCI handwritten digits
//! ([`Digits`], 8×8 images): two blocks of 3×3 convolution, batch normalization, ReLU and 2×2
//! max pooling (8×8 → 4×4 → 2×2), then a linear layer to the class scores. [`train`] fits it
//! with Adam on minibatches; [`accuracy`] measures in test mode, where batch normalization uses
//! its running averages.

use kusari::functions::{ConvOptions, PoolOptions};
use kusari::link::optimizers::{Adam, Optimizer};
use kusari::link::{BatchNormalization, Convolution2D, Linear};
use kusari::prelude::*;
use kusari::{config, random};

use crate::{Digits, shuffled};

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
pub fn train(
    epochs: usize,
    device: Device,
    mut on_epoch: impl FnMut(f32),
) -> Result<(Vec<f32>, f64)> {
    let (train, test) = Digits::load()?.split(0.2, SEED);
    random::seed(SEED);
    let model = Cnn::new(CHANNELS)?;
    model.to_device(device)?;
    let mut optimizer = Adam::new().alpha(0.002);
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

/// The fraction of `data` whose highest class score is its label, in test mode (batch
/// normalization with its running averages), recording no graph.
pub fn accuracy(model: &Cnn, data: &Digits, device: Device) -> Result<f64> {
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
