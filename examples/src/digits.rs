//! The handwritten-digits data set that `11_mlp_digits.rs` trains on, read and checked from
//! `data/digits.csv`, and the shuffle that splits it and orders its minibatches.

use std::path::PathBuf;

use kusari::random::Rng;
use kusari::{Array, Error, Result};

/// The UCI "Optical Recognition of Handwritten Digits" test set as scikit-learn ships it
/// (`data/digits.csv`; source and licence in `data/README.md`): 1797 images of 8×8 pixels, each
/// scaled from 0..=16 to [0, 1], with their labels 0..=9.
///
/// ```
/// use kusari_examples::Digits;
/// let (train, test) = Digits::load()?.split(0.2, 0);
/// assert_eq!((train.len(), test.len()), (1438, 359));
/// let (x, t) = test.batch(&[0, 1, 2])?;
/// assert_eq!((x.shape(), t.shape()), (&[3, Digits::FEATURES][..], &[3][..]));
/// # Ok::<(), kusari::Error>(())
/// ```
pub struct Digits {
    /// `len() * FEATURES` pixels, one image after another, row by row.
    pub pixels: Vec<f32>,
    /// One label per image.
    pub labels: Vec<i32>,
}

impl Digits {
    /// Pixels per image.
    pub const FEATURES: usize = 64;
    /// Labels run over `0..CLASSES`.
    pub const CLASSES: usize = 10;
    /// Where the data set lives in the repository (the path at build time).
    pub const PATH: &str = concat!(env!("CARGO_MANIFEST_DIR"), "/data/digits.csv");
    /// Overrides [`Self::PATH`], for a binary run away from the tree it was built in (`.ci/gpu`
    /// runs the examples on a GPU machine that has the repository at another path).
    pub const PATH_VAR: &str = "KUSARI_DIGITS_CSV";
    const ROWS: usize = 1797;
    /// FNV-1a over every value in file order, so a changed file is caught (line endings aside).
    const CHECKSUM: u64 = 0x7768_69cc_e379_5967;

    /// The file [`Self::load`] reads: `$KUSARI_DIGITS_CSV` when set, else [`Self::PATH`].
    pub fn path() -> PathBuf {
        std::env::var_os(Self::PATH_VAR).map_or_else(|| PathBuf::from(Self::PATH), PathBuf::from)
    }

    /// Reads and checks [`Self::path`]: an error says what is missing or malformed.
    pub fn load() -> Result<Digits> {
        let path = Self::path();
        let csv = std::fs::read_to_string(&path).map_err(|e| {
            Error::msg(format!(
                "cannot read the digits data set {}: {e} (it ships with the repository; see examples/data/README.md)",
                path.display()
            ))
        })?;
        let malformed = |msg: String| Error::msg(format!("{}: {msg}", path.display()));
        let mut digits = Digits {
            pixels: Vec::new(),
            labels: Vec::new(),
        };
        let mut checksum = 0xcbf2_9ce4_8422_2325u64;
        for (i, line) in csv.lines().enumerate() {
            let values = line
                .split(',')
                .map(|v| v.trim().parse::<u8>())
                .collect::<std::result::Result<Vec<u8>, _>>()
                .map_err(|e| malformed(format!("line {}: {e}", i + 1)))?;
            let (label, pixels) = match values.split_last() {
                Some((&label, pixels))
                    if pixels.len() == Self::FEATURES
                        && pixels.iter().all(|&p| p <= 16)
                        && label < 10 =>
                {
                    (label, pixels)
                }
                _ => {
                    return Err(malformed(format!(
                        "line {}: expected {} pixels in 0..=16 and a label in 0..=9",
                        i + 1,
                        Self::FEATURES
                    )));
                }
            };
            for &v in &values {
                checksum = (checksum ^ u64::from(v)).wrapping_mul(0x100_0000_01b3);
            }
            digits
                .pixels
                .extend(pixels.iter().map(|&p| f32::from(p) / 16.0));
            digits.labels.push(i32::from(label));
        }
        if digits.len() != Self::ROWS || checksum != Self::CHECKSUM {
            return Err(malformed(format!(
                "expected scikit-learn's {} rows (checksum {:#x}), got {} rows (checksum {checksum:#x})",
                Self::ROWS,
                Self::CHECKSUM,
                digits.len()
            )));
        }
        Ok(digits)
    }

    /// The number of images.
    pub fn len(&self) -> usize {
        self.labels.len()
    }

    /// Whether there are no images.
    pub fn is_empty(&self) -> bool {
        self.labels.is_empty()
    }

    /// `(train, test)`: the images shuffled by a generator seeded with `seed`, the last
    /// `test_fraction` of them for testing.
    pub fn split(&self, test_fraction: f64, seed: u64) -> (Digits, Digits) {
        let order = shuffled(self.len(), &mut Rng::seed(seed));
        let n_test = (self.len() as f64 * test_fraction).round() as usize;
        let (train, test) = order.split_at(self.len() - n_test);
        (self.select(train), self.select(test))
    }

    /// The images at `indices`, on the host: pixels `(len, FEATURES)` as float32 and labels
    /// `(len,)` as int32.
    pub fn batch(&self, indices: &[usize]) -> Result<(Array, Array)> {
        let part = self.select(indices);
        Ok((
            Array::from_vec(part.pixels, &[indices.len(), Self::FEATURES])?,
            Array::from_vec(part.labels, &[indices.len()])?,
        ))
    }

    fn select(&self, indices: &[usize]) -> Digits {
        // One allocation and a copy an image (a flat_map's collect grows its vector and moves
        // one pixel at a time: a few percent of a training step at the examples' batches).
        let mut pixels = Vec::with_capacity(indices.len() * Self::FEATURES);
        for &i in indices {
            pixels.extend_from_slice(&self.pixels[i * Self::FEATURES..(i + 1) * Self::FEATURES]);
        }
        Digits {
            pixels,
            labels: indices.iter().map(|&i| self.labels[i]).collect(),
        }
    }
}

/// `0..n` in a random order (Fisher–Yates).
pub fn shuffled(n: usize, rng: &mut Rng) -> Vec<usize> {
    let mut order: Vec<usize> = (0..n).collect();
    for i in (1..n).rev() {
        order.swap(i, (rng.next_u64() % (i as u64 + 1)) as usize);
    }
    order
}
