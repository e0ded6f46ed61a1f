//! The tutorial "Define your own function", written with kusari: one example per concept,
//! run with `cargo run --example <name>` (see this package's `Cargo.toml` for the list).
//!
//! This library holds the one helper the examples share: comparing arrays within a tolerance.

use kusari::{Array, Result};

/// Whether `actual` and `expected` have one shape and agree elementwise within
/// `tol * (1 + |expected|)`, whatever their dtypes.
///
/// ```
/// use kusari::Array;
/// let a = Array::from_vec(vec![1.0f32, 2.0], &[2])?;
/// let b = Array::from_vec(vec![1.0f64, 2.000_001], &[2])?;
/// assert!(kusari_examples::allclose(&a, &b, 1e-5)?);
/// # Ok::<(), kusari::Error>(())
/// ```
pub fn allclose(actual: &Array, expected: &Array, tol: f64) -> Result<bool> {
    let (a, e) = (actual.to_f64_vec()?, expected.to_f64_vec()?);
    Ok(actual.shape() == expected.shape()
        && a.iter()
            .zip(&e)
            .all(|(a, e)| (a - e).abs() <= tol * (1.0 + e.abs())))
}

/// The README's code blocks, compiled and run as doc tests so that they stay correct.
#[doc = include_str!("../README.md")]
#[cfg(doctest)]
pub struct ReadmeDoctests;
