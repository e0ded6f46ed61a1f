//! A convolutional network trained on the UCI handwritten digits (8×8 images, 10 classes; see
//! `examples/data/README.md`): two blocks of `Convolution2D`, `BatchNormalization`, ReLU and
//! 2×2 max pooling, then a `Linear` layer. Adam fits it on minibatches, with a progress bar over
//! the epochs; batch normalization uses the batch's statistics while training and its running
//! averages when the test accuracy is measured (`config::using_train(false)`). The loss curve
//! is saved as a PNG with the test accuracy.
//!
//! The model and its training loop are in `examples/src/cnn_digits.rs`
//! (`kusari_examples::cnn_digits`), on the same split of the same data as the MLP of
//! `11_mlp_digits.rs`.
//!
//! Run with `cargo run --release --example cnn_digits [-- LOSS.png]` (the plot goes to
//! `target/cnn_digits_loss.png` by default). It runs on `cuda:0` when kusari finds a CUDA
//! driver and device, else on the host, and says which.

use std::path::{Path, PathBuf};

use kusari::prelude::*;
use kusari_examples::cnn_digits::{BATCH_SIZE, EPOCHS, train};
use kusari_examples::{epoch_bar, save_loss_curve};

fn main() -> Result<()> {
    let device = kusari_examples::gpu_or_host()?;
    println!("training on {device}: {EPOCHS} epochs, minibatches of {BATCH_SIZE}");

    let bar = epoch_bar(EPOCHS);
    let (losses, accuracy) = train(EPOCHS, device, |loss| {
        bar.set_message(format!("loss {loss:.4}"));
        bar.inc(1);
    })?;
    bar.finish_and_clear();
    let (first, last) = (losses[0], losses[losses.len() - 1]);
    println!("loss per epoch: {first:.4} at the first, {last:.4} at the last");
    println!("test accuracy: {:.1}%", 100.0 * accuracy);

    let workspace = Path::new(env!("CARGO_MANIFEST_DIR"))
        .parent()
        .unwrap_or(Path::new("."));
    let plot = std::env::args().nth(1).map_or_else(
        || workspace.join("target/cnn_digits_loss.png"),
        PathBuf::from,
    );
    save_loss_curve(&plot, &losses, accuracy)?;
    println!("loss curve saved to {}", plot.display());
    assert!(
        accuracy >= 0.985,
        "the CNN must reach 98.5% on the test split"
    );
    Ok(())
}
