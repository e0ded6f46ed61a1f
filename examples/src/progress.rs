//! What a training shows of its progress: a bar over the epochs while it runs, and the loss curve
//! as a PNG afterwards.

use std::path::Path;

use indicatif::{ProgressBar, ProgressStyle};
use kusari::{Error, Result};

/// A progress bar over `epochs` epochs; its message is the caller's (say, the last loss). It
/// draws on standard error, and only when that is a terminal.
pub fn epoch_bar(epochs: usize) -> ProgressBar {
    let style = ProgressStyle::with_template("{elapsed:>3} [{bar:30}] epoch {pos}/{len}, {msg}")
        .map(|style| style.progress_chars("=> "))
        .unwrap_or_else(|_| ProgressStyle::default_bar());
    ProgressBar::new(epochs as u64).with_style(style)
}

/// Draws `losses` (one per epoch) as a line on a grid, from 0 to the largest loss, and saves it
/// as a PNG at `path`, creating its folder. The plot has no text: plotters would need a system
/// font for it.
pub fn save_loss_curve(path: &Path, losses: &[f32]) -> Result<()> {
    use plotters::prelude::*;
    let plot_error = |e: &dyn std::fmt::Display| {
        Error::msg(format!(
            "cannot save the loss curve to {}: {e}",
            path.display()
        ))
    };
    if let Some(dir) = path.parent().filter(|dir| !dir.as_os_str().is_empty()) {
        std::fs::create_dir_all(dir).map_err(|e| plot_error(&e))?;
    }
    let root = BitMapBackend::new(path, (640, 400)).into_drawing_area();
    root.fill(&WHITE).map_err(|e| plot_error(&e))?;
    let top = losses.iter().copied().fold(f32::MIN_POSITIVE, f32::max) * 1.05;
    let last_epoch = losses.len().saturating_sub(1).max(1) as f32;
    let mut chart = ChartBuilder::on(&root)
        .margin(20)
        .build_cartesian_2d(0f32..last_epoch, 0f32..top)
        .map_err(|e| plot_error(&e))?;
    chart.configure_mesh().draw().map_err(|e| plot_error(&e))?;
    let points = losses.iter().enumerate().map(|(i, &l)| (i as f32, l));
    chart
        .draw_series(LineSeries::new(points, BLUE.stroke_width(2)))
        .map_err(|e| plot_error(&e))?;
    root.present().map_err(|e| plot_error(&e))
}
