//! Optimizer steps on the host as one pass over a parameter's buffers, the moments updated in
//! place: what `link::optimizers` runs for float32 and float64 parameters on the host.
//!
//! An update rule written as an elementwise body runs through the executor of [`super::expr`],
//! which serves every device and dtype but costs a few microseconds a call in dispatch, a
//! program lookup and fresh buffers for every output; a model's small parameters (biases, a
//! last layer) are all overhead. Here the step is a plain loop that LLVM vectorizes for AVX2
//! ([`super::elementwise::wide`]): the same IEEE operations in the same order as the body, so
//! the same bits (no FMA contraction: Rust never contracts).

use std::mem::MaybeUninit;

use num_traits::Float;
use rayon::prelude::*;

use crate::dtype::Element;
use crate::error::Result;

/// Elements a task of a parallel step takes.
const CHUNK: usize = 1 << 14;

/// Adam's coefficients for one step, in the parameter's dtype: `b1c = 1 - beta1`,
/// `b2c = 1 - beta2`, the bias-corrected `lr`, `eps`, the decoupled weight decay `wd` and `eta`.
#[derive(Clone, Copy)]
pub(crate) struct AdamCoefficients<T> {
    pub(crate) b1c: T,
    pub(crate) b2c: T,
    pub(crate) lr: T,
    pub(crate) eps: T,
    pub(crate) wd: T,
    pub(crate) eta: T,
}

/// Adam's step without AMSGrad: `m` and `v` move in place to the new moments, and the new
/// value is returned as a fresh buffer. Per element, in this order:
/// `m = m + (g - m) * b1c; v = v + (g * g - v) * b2c;
/// out = value - (m * lr / (sqrt(v) + eps) + value * wd) * eta`.
/// The four slices are of one length (the caller checks).
pub(crate) fn adam<T: Element + Float>(
    grad: &[T],
    value: &[T],
    m: &mut [T],
    v: &mut [T],
    c: AdamCoefficients<T>,
) -> Result<Vec<T>> {
    let n = value.len();
    debug_assert!(grad.len() == n && m.len() == n && v.len() == n);
    let mut out: Vec<T> = super::pool::alloc("adam", n)?;
    let spare = &mut out.spare_capacity_mut()[..n];
    let task = |start: usize, m: &mut [T], v: &mut [T], out: &mut [MaybeUninit<T>]| {
        let end = start + out.len();
        super::elementwise::wide(|| adam_chunk(&grad[start..end], &value[start..end], m, v, out, c))
    };
    if n >= super::PAR_MIN / 8 {
        super::threads::start();
        m.par_chunks_mut(CHUNK)
            .zip(v.par_chunks_mut(CHUNK))
            .zip(spare.par_chunks_mut(CHUNK))
            .enumerate()
            .for_each(|(i, ((m, v), out))| task(i * CHUNK, m, v, out));
    } else {
        task(0, m, v, spare);
    }
    // SAFETY: the tasks wrote every element of `spare[..n]`.
    unsafe { out.set_len(n) };
    Ok(out)
}

/// [`adam`] over one chunk; inlined into [`super::elementwise::wide`]'s AVX2 frame.
#[inline(always)]
fn adam_chunk<T: Float>(
    grad: &[T],
    value: &[T],
    m: &mut [T],
    v: &mut [T],
    out: &mut [MaybeUninit<T>],
    c: AdamCoefficients<T>,
) {
    let n = out.len();
    let (grad, value, m, v) = (&grad[..n], &value[..n], &mut m[..n], &mut v[..n]);
    for i in 0..n {
        let g = grad[i];
        let mi = m[i] + (g - m[i]) * c.b1c;
        let vi = v[i] + (g * g - v[i]) * c.b2c;
        m[i] = mi;
        v[i] = vi;
        let x = value[i];
        out[i].write(x - (mi * c.lr / (vi.sqrt() + c.eps) + x * c.wd) * c.eta);
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// The step in float64 by hand for a few elements, and a length that takes the parallel
    /// path with a ragged last chunk, against the same formula element by element.
    #[test]
    fn adam_matches_the_formula_element_by_element() {
        let c = AdamCoefficients {
            b1c: 0.1,
            b2c: 0.001,
            lr: 0.01,
            eps: 1e-8,
            wd: 0.05,
            eta: 0.5,
        };
        // One element by hand: g = 2, m = 1, v = 4, value = 3.
        // m' = 1 + (2 - 1) * 0.1 = 1.1; v' = 4 + (4 - 4) * 0.001 = 4;
        // out = 3 - (1.1 * 0.01 / (2 + 1e-8) + 3 * 0.05) * 0.5.
        let (mut m, mut v) = (vec![1.0], vec![4.0]);
        let out = adam(&[2.0], &[3.0], &mut m, &mut v, c).unwrap();
        assert_eq!(m, [1.1]);
        assert_eq!(v, [4.0]);
        let want = 3.0 - (1.1 * 0.01 / (2.0 + 1e-8) + 0.15) * 0.5;
        assert!((out[0] - want).abs() < 1e-15, "{} vs {want}", out[0]);

        let n = crate::cpu::PAR_MIN / 8 + 3 * CHUNK + 17;
        let at = |i: usize, k: f64| ((i as f64 * k).sin() + 1.5) * 0.5;
        let grad: Vec<f32> = (0..n).map(|i| at(i, 0.37) as f32 - 0.6).collect();
        let value: Vec<f32> = (0..n).map(|i| at(i, 0.11) as f32).collect();
        let m0: Vec<f32> = (0..n).map(|i| at(i, 0.23) as f32 - 0.5).collect();
        let v0: Vec<f32> = (0..n).map(|i| at(i, 0.53) as f32).collect();
        let c32 = AdamCoefficients {
            b1c: 0.1f32,
            b2c: 0.001,
            lr: 0.01,
            eps: 1e-8,
            wd: 0.05,
            eta: 0.5,
        };
        let (mut m, mut v) = (m0.clone(), v0.clone());
        let out = adam(&grad, &value, &mut m, &mut v, c32).unwrap();
        for i in (0..n).step_by(997).chain([n - 1]) {
            let mi = m0[i] + (grad[i] - m0[i]) * 0.1;
            let vi = v0[i] + (grad[i] * grad[i] - v0[i]) * 0.001;
            let want = value[i] - (mi * 0.01 / (vi.sqrt() + 1e-8) + value[i] * 0.05) * 0.5;
            assert_eq!((m[i], v[i], out[i]), (mi, vi, want), "element {i}");
        }
    }
}
