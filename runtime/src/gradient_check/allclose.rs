//! `assert_allclose` and `allclose`: two arrays of any dtypes on any devices compared
//! elementwise, naming the worst elements.

use std::fmt::Write as _;

use crate::error::{Error, Result};
use crate::{Array, Device};

use super::numerical::{check_tolerance, unravel};

/// Whether `|actual - expected| <= atol + rtol * |expected|` holds for element `(a, e)`; NaNs
/// are equal to each other, and infinities to themselves.
fn close(a: f64, e: f64, atol: f64, rtol: f64) -> bool {
    a == e || (a.is_nan() && e.is_nan()) || (a - e).abs() <= atol + rtol * e.abs()
}

/// Both arrays' elements in f64, once their shapes are checked to match.
fn host_pair(
    op: &'static str,
    actual: &Array,
    expected: &Array,
    atol: f64,
    rtol: f64,
) -> Result<(Vec<f64>, Vec<f64>)> {
    check_tolerance(op, "atol", atol)?;
    check_tolerance(op, "rtol", rtol)?;
    if actual.shape() != expected.shape() {
        return Err(Error::Shape {
            op,
            msg: format!(
                "actual is {}{:?} on {} but expected is {}{:?} on {}; the shapes must match",
                actual.dtype(),
                actual.shape(),
                actual.device(),
                expected.dtype(),
                expected.shape(),
                expected.device()
            ),
        });
    }
    let a = actual.to_device(Device::Cpu)?.to_f64_vec()?;
    let e = expected.to_device(Device::Cpu)?.to_f64_vec()?;
    Ok((a, e))
}

/// Checks that two arrays have one shape and agree elementwise within
/// `atol + rtol * |expected|` (NumPy's `assert_allclose`, as Chainer's `testing.assert_allclose`).
///
/// The arrays may have any dtypes (compared in f64) and live on any devices, mixed (both are
/// copied to the host). NaNs compare equal to NaNs. Mismatched shapes are [`Error::Shape`]; a
/// mismatch is [`Error::NotClose`], whose message lists up to five worst elements with their
/// indexes, values, `|diff|` and tolerance, and how many elements fail.
///
/// ```
/// use kusari::gradient_check::assert_allclose;
/// use kusari::{Array, Error};
/// # fn main() -> kusari::Result<()> {
/// let a = Array::from_vec(vec![1.0f32, 2.0, 3.0, 4.0], &[2, 2])?;
/// let b = Array::from_vec(vec![1.0f64, 2.0, 3.0, 4.5], &[2, 2])?;
/// assert_allclose(&a, &a, 1e-6, 0.0)?;
/// let err = assert_allclose(&a, &b, 1e-5, 1e-4).expect_err("4 vs 4.5");
/// assert!(matches!(err, Error::NotClose { failed: 1, .. }));
/// assert!(err.to_string().contains("[1, 1]: actual 4, expected 4.5"));
/// # Ok(()) }
/// ```
pub fn assert_allclose(actual: &Array, expected: &Array, atol: f64, rtol: f64) -> Result<()> {
    const WORST: usize = 5;
    let (a, e) = host_pair("assert_allclose", actual, expected, atol, rtol)?;
    let mut failing: Vec<(usize, f64)> = a
        .iter()
        .zip(&e)
        .enumerate()
        .filter(|&(_, (&a, &e))| !close(a, e, atol, rtol))
        .map(|(k, (&a, &e))| {
            let excess = (a - e).abs() - (atol + rtol * e.abs());
            (
                k,
                if excess.is_nan() {
                    f64::INFINITY
                } else {
                    excess
                },
            )
        })
        .collect();
    if failing.is_empty() {
        return Ok(());
    }
    failing.sort_by(|x, y| y.1.total_cmp(&x.1).then(x.0.cmp(&y.0)));
    let mut worst = String::new();
    for &(k, _) in failing.iter().take(WORST) {
        let _ = write!(
            worst,
            "\n  {:?}: actual {}, expected {}, |diff| {:e} > tolerance {:e}",
            unravel(k, actual.shape()),
            a[k],
            e[k],
            (a[k] - e[k]).abs(),
            atol + rtol * e[k].abs()
        );
    }
    Err(Error::NotClose {
        failed: failing.len(),
        total: a.len(),
        shape: actual.shape().to_vec(),
        dtypes: format!("{} vs {}", actual.dtype(), expected.dtype()),
        atol,
        rtol,
        worst,
    })
}

/// Whether [`assert_allclose`] would pass: `Ok(false)` for elements out of tolerance, `Err` for
/// mismatched shapes or tolerances that are negative or not finite.
///
/// ```
/// use kusari::gradient_check::allclose;
/// use kusari::Array;
/// # fn main() -> kusari::Result<()> {
/// let a = Array::from_vec(vec![1.0f32, 2.0], &[2])?;
/// let b = Array::from_vec(vec![1.0f64, 2.000_01], &[2])?;
/// assert!(allclose(&a, &b, 1e-4, 0.0)?);
/// assert!(!allclose(&a, &b, 1e-6, 0.0)?);
/// # Ok(()) }
/// ```
pub fn allclose(actual: &Array, expected: &Array, atol: f64, rtol: f64) -> Result<bool> {
    let (a, e) = host_pair("allclose", actual, expected, atol, rtol)?;
    Ok(a.iter().zip(&e).all(|(&a, &e)| close(a, e, atol, rtol)))
}
