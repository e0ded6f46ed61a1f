//! An MLP trained on a real data set: the UCI handwritten digits (8×8 images, 10 classes; see
//! `examples/data/README.md`). Its hidden layers are `Linear` links with a leaky ReLU declared
//! with `#[function_node]` (with a CUDA kernel), and dropout, which acts in training mode only:
//! the test accuracy is measured under `config::using_train(false)`. Adam fits it on
//! minibatches, with a progress bar over the epochs; the loss curve is saved as a PNG, with
//! labelled axes and the test accuracy (in a font embedded in the binary).
//!
//! The model, its leaky ReLU and its training loop are defined in `examples/src/mlp_digits.rs`
//! (`kusari_examples::mlp_digits`), the data set in `examples/src/digits.rs`.
//!
//! Run with `cargo run --release --example mlp_digits [-- LOSS.png]` (the plot goes to
//! `target/mlp_digits_loss.png` by default). It runs on `cuda:0` when kusari finds a CUDA driver
//! and device, else on the host, and says which.

use std::path::{Path, PathBuf};

use kusari::prelude::*;
use kusari_examples::mlp_digits::{BATCH_SIZE, EPOCHS, train};
use kusari_examples::{epoch_bar, save_loss_curve};

fn main() -> Result<()> {
    let device = kusari_examples::gpu_or_host()?;
    println!("training on {device}: {EPOCHS} epochs, minibatches of {BATCH_SIZE}");

    let bar = epoch_bar(EPOCHS);
    let (losses, accuracy) = train(EPOCHS, device, |loss| {
        bar.set_message(format!("loss {loss:.4}"));
        bar.inc(1);
    })?;
    bar.finish_and_clear(); // the summary below replaces it
    let (first, last) = (losses[0], losses[losses.len() - 1]);
    println!("loss per epoch: {first:.4} at the first, {last:.4} at the last");
    println!("test accuracy: {:.1}%", 100.0 * accuracy);

    let workspace = Path::new(env!("CARGO_MANIFEST_DIR"))
        .parent()
        .unwrap_or(Path::new("."));
    let plot = std::env::args().nth(1).map_or_else(
        || workspace.join("target/mlp_digits_loss.png"),
        PathBuf::from,
    );
    save_loss_curve(&plot, &losses, accuracy)?;
    println!("loss curve saved to {}", plot.display());
    assert!(accuracy >= 0.95, "the README states 97.2% on the host");
    Ok(())
}
