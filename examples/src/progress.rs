//! What a training shows of its progress: a bar over the epochs while it runs, and the loss curve
//! as a PNG afterwards, its text in a font embedded in the binary.

use std::ops::Range;
use std::path::Path;
use std::sync::OnceLock;

use indicatif::{ProgressBar, ProgressStyle};
use kusari::{Error, Result};
use plotters::coord::Shift;
use plotters::prelude::*;
use plotters::style::{FontStyle, register_font};

/// A progress bar over `epochs` epochs; its message is the caller's (say, the last loss). It
/// draws on standard error, and only when that is a terminal.
pub fn epoch_bar(epochs: usize) -> ProgressBar {
    let style = ProgressStyle::with_template("{elapsed:>3} [{bar:30}] epoch {pos}/{len}, {msg}")
        .map(|style| style.progress_chars("=> "))
        .unwrap_or_else(|_| ProgressStyle::default_bar());
    ProgressBar::new(epochs as u64).with_style(style)
}

/// The size of the loss plot in pixels.
const PLOT_SIZE: (u32, u32) = (800, 500);

/// The font family every text of the plot is drawn in: plotters' name for it, under which
/// [`embedded_font`] registers the embedded font.
const FONT: &str = "sans-serif";

/// Registers the font that the plot's text is drawn in with plotters, once: Hack Regular (MIT
/// and Bitstream Vera licences), whose bytes `epaint_default_fonts` embeds in the binary. With
/// plotters' `ab_glyph` feature (and not its `ttf` one), plotters draws text only in fonts
/// registered so, and never looks for one on the system, which may have none.
fn embedded_font() -> Result<()> {
    static REGISTERED: OnceLock<bool> = OnceLock::new();
    let registered = *REGISTERED.get_or_init(|| {
        register_font(FONT, FontStyle::Normal, epaint_default_fonts::HACK_REGULAR).is_ok()
    });
    if registered {
        Ok(())
    } else {
        Err(Error::msg(
            "the embedded font of the loss plot is not a valid font",
        ))
    }
}

/// Draws `losses` (the mean training loss of each epoch, the first being epoch 1) as a line
/// from 0 to the largest loss, with a title, labelled axes (epoch, loss) with numbered ticks, and
/// the test `accuracy` (a fraction), and saves it as an 800×500 PNG at `path`, creating its
/// folder. Its text is drawn in a font embedded in the binary: no system font is needed.
pub fn save_loss_curve(path: &Path, losses: &[f32], accuracy: f64) -> Result<()> {
    let plot_error = |e: &dyn std::fmt::Display| {
        Error::msg(format!(
            "cannot save the loss curve to {}: {e}",
            path.display()
        ))
    };
    if let Some(dir) = path.parent().filter(|dir| !dir.as_os_str().is_empty()) {
        std::fs::create_dir_all(dir).map_err(|e| plot_error(&e))?;
    }
    embedded_font()?;
    let root = BitMapBackend::new(path, PLOT_SIZE).into_drawing_area();
    draw_loss_curve(&root, losses, accuracy).map_err(|e| plot_error(&e))?;
    root.present().map_err(|e| plot_error(&e))
}

/// The pixels of the plotting area, the part of the plot within its axes: its columns and rows.
type PixelRanges = (Range<i32>, Range<i32>);

/// Draws the loss plot of [`save_loss_curve`] on `root`, on any plotters backend, and returns
/// where its plotting area is. The embedded font must be registered ([`embedded_font`]).
fn draw_loss_curve<DB: DrawingBackend>(
    root: &DrawingArea<DB, Shift>,
    losses: &[f32],
    accuracy: f64,
) -> std::result::Result<PixelRanges, DrawingAreaErrorKind<DB::ErrorType>> {
    root.fill(&WHITE)?;
    let highest = losses.iter().copied().fold(f32::MIN_POSITIVE, f32::max) * 1.1;
    let epochs = losses.len().max(2);
    let mut chart = ChartBuilder::on(root)
        .caption("mlp_digits: training loss per epoch", (FONT, 24))
        .margin(20)
        .x_label_area_size(50)
        .y_label_area_size(70)
        .build_cartesian_2d(1..epochs, 0f32..highest)?;
    chart
        .configure_mesh()
        .x_desc("epoch")
        .y_desc("loss")
        .x_labels(epochs.min(20))
        .y_labels(8)
        .y_label_formatter(&|loss| format!("{loss:.2}"))
        .label_style((FONT, 15))
        .axis_desc_style((FONT, 17))
        .draw()?;
    let points = losses.iter().enumerate().map(|(i, &l)| (i + 1, l));
    chart.draw_series(LineSeries::new(points, BLUE.stroke_width(2)))?;
    // The accuracy in a framed box in the plot's top right corner, clear of the grid.
    let note = format!("test accuracy: {:.1}%", 100.0 * accuracy);
    let style = TextStyle::from((FONT, 18).into_font()).color(&BLACK);
    let (width, height) = root.estimate_text_size(&note, &style)?;
    let (x_pixels, y_pixels) = chart.plotting_area().get_pixel_range();
    let (right, top) = (x_pixels.end - 10, y_pixels.start + 10);
    let (left, bottom) = (right - width as i32 - 16, top + height as i32 + 14);
    root.draw(&Rectangle::new(
        [(left, top), (right, bottom)],
        WHITE.filled(),
    ))?;
    root.draw(&Rectangle::new([(left, top), (right, bottom)], BLACK))?;
    root.draw_text(&note, &style, (left + 8, top + 7))?;
    Ok((x_pixels, y_pixels))
}

#[cfg(test)]
mod tests {
    use super::*;

    const LOSSES: [f32; 6] = [1.3, 0.6, 0.35, 0.2, 0.15, 0.12];
    const PIXELS: usize = PLOT_SIZE.0 as usize * PLOT_SIZE.1 as usize;

    /// The loss plot drawn into memory: its RGB pixels, row by row, and where its plotting area is.
    fn render(losses: &[f32], accuracy: f64) -> (Vec<u8>, PixelRanges) {
        embedded_font().unwrap();
        let mut pixels = vec![0u8; 3 * PIXELS];
        let area = {
            let root = BitMapBackend::with_buffer(&mut pixels, PLOT_SIZE).into_drawing_area();
            let area = draw_loss_curve(&root, losses, accuracy).unwrap();
            root.present().unwrap();
            area
        };
        (pixels, area)
    }

    /// The pixel at column `x`, row `y`.
    fn pixel(pixels: &[u8], x: i32, y: i32) -> [u8; 3] {
        let at = 3 * (y as usize * PLOT_SIZE.0 as usize + x as usize);
        [pixels[at], pixels[at + 1], pixels[at + 2]]
    }

    /// How many pixels in `columns` × `rows` are dark: what black text leaves on white. The
    /// blue loss line and the light grey grid are not dark.
    fn dark_pixels(pixels: &[u8], columns: Range<i32>, rows: Range<i32>) -> usize {
        rows.flat_map(|y| columns.clone().map(move |x| (x, y)))
            .filter(|&(x, y)| pixel(pixels, x, y).iter().all(|&c| c < 100))
            .count()
    }

    #[test]
    fn the_margins_hold_text_the_title_the_axis_labels_and_the_ticks_numbers() {
        let (pixels, (x, y)) = render(&LOSSES, 0.9);
        let (width, height) = (PLOT_SIZE.0 as i32, PLOT_SIZE.1 as i32);
        // The margins hold no line but the axes and their tick marks (a few pixels long, next to
        // the axes, left out here): anything dark there is text.
        let title = dark_pixels(&pixels, 0..width, 0..y.start - 1);
        let left = dark_pixels(&pixels, 0..x.start - 10, y.clone());
        let below = dark_pixels(&pixels, x.clone(), y.end + 10..height);
        for (margin, dark) in [("title", title), ("left", left), ("below", below)] {
            assert!(
                dark > 100,
                "{dark} dark pixels in the {margin} margin: no text drawn"
            );
        }
        // The far left holds the y axis' label ("loss") and nothing else; the bottom rows the
        // x axis' label ("epoch") below the ticks' numbers.
        assert!(dark_pixels(&pixels, 0..x.start / 3, y.clone()) > 20);
        assert!(dark_pixels(&pixels, x.clone(), height - 35..height) > 20);
    }

    #[test]
    fn the_test_accuracy_is_written_in_the_plots_top_right_corner() {
        let (high, (x, y)) = render(&LOSSES, 0.972);
        let (low, _) = render(&LOSSES, 0.5);
        let differing: Vec<(i32, i32)> = (0..PLOT_SIZE.1 as i32)
            .flat_map(|row| (0..PLOT_SIZE.0 as i32).map(move |column| (column, row)))
            .filter(|&(column, row)| pixel(&high, column, row) != pixel(&low, column, row))
            .collect();
        assert!(
            differing.len() > 20,
            "the accuracy changes nothing in the plot"
        );
        let corner = |&(column, row): &(i32, i32)| {
            (x.start + x.len() as i32 / 2..x.end).contains(&column)
                && (y.start..y.start + y.len() as i32 / 4).contains(&row)
        };
        assert!(
            differing.iter().all(corner),
            "the accuracy is drawn outside the corner"
        );
    }

    #[test]
    fn save_loss_curve_writes_the_plot_as_a_png_creating_its_folder() {
        let dir = std::env::temp_dir().join(format!("kusari-loss-curve-{}", std::process::id()));
        let path = dir.join("plots").join("loss.png");
        let saved = save_loss_curve(&path, &LOSSES, 0.9);
        let decoded = image::open(&path);
        std::fs::remove_dir_all(&dir).unwrap();
        saved.unwrap();
        let decoded = decoded.unwrap().to_rgb8();
        assert_eq!(decoded.dimensions(), PLOT_SIZE);
        assert_eq!(decoded.as_raw(), &render(&LOSSES, 0.9).0);
    }

    #[test]
    fn a_single_epoch_or_none_still_draws() {
        for losses in [&[0.7][..], &[]] {
            let (pixels, (x, y)) = render(losses, 0.1);
            assert!(dark_pixels(&pixels, 0..x.start - 10, y) > 100);
        }
    }
}
