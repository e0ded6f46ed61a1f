//! What the digit classifiers of `11_mlp_digits.rs` and `13_cnn_digits.rs` share: fitting a
//! model to minibatches of [`Digits`] and measuring its accuracy in test mode.

use kusari::config;
use kusari::link::optimizers::Optimizer;
use kusari::prelude::*;

use crate::{Digits, shuffled};

/// A model that gives class scores `(N, CLASSES)` for images `(N, FEATURES)`.
pub trait Classifier: Link {
    /// The class scores of a batch of images.
    fn scores(&self, x: &Variable) -> Result<Variable>;
}

/// Fits `model` on `device` for `epochs` passes over `train` in shuffled minibatches of
/// `batch_size` (the order drawn from `rng`), calling `on_epoch` with each epoch's mean
/// softmax cross-entropy; returns those means.
pub fn fit(
    model: &impl Classifier,
    optimizer: &mut impl Optimizer,
    (train, batch_size): (&Digits, usize),
    (epochs, device, rng): (usize, Device, &mut Rng),
    mut on_epoch: impl FnMut(f32),
) -> Result<Vec<f32>> {
    let mut losses = Vec::with_capacity(epochs);
    for _ in 0..epochs {
        let mut total = 0.0;
        for batch in shuffled(train.len(), rng).chunks(batch_size) {
            let (x, t) = train.batch(batch)?;
            let x = Variable::constant(x.to_device(device)?);
            let loss = F::softmax_cross_entropy(&model.scores(&x)?, &t)?;
            model.cleargrads();
            loss.backward()?;
            optimizer.update(model)?;
            total += loss.array().item::<f32>()? * batch.len() as f32;
        }
        let mean = total / train.len() as f32;
        on_epoch(mean);
        losses.push(mean);
    }
    Ok(losses)
}

/// The fraction of `data` whose highest class score is its label, in test mode (no dropout;
/// batch normalization with its running averages), recording no graph.
pub fn accuracy(model: &impl Classifier, data: &Digits, device: Device) -> Result<f64> {
    let _eval = config::using_config(config::Config {
        train: false,
        enable_backprop: false,
        ..config::current()
    });
    let (x, _) = data.batch(&(0..data.len()).collect::<Vec<_>>())?;
    let scores = model.scores(&Variable::constant(x.to_device(device)?))?;
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
