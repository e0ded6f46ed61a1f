//! Batch normalization on the host, fused: an `(N, P, S)` array normalized per `p` over `N`
//! and `S`. The statistics are taken a channel at a time (a channel's elements stay in cache
//! between the passes, sums in float64), the outputs a row of `S` at a time, channels and rows
//! across threads.

use rayon::prelude::*;

use super::{CpuStorage, pool};
use crate::DType;
use crate::dtype::NumElement;
use crate::error::Result;
use crate::layout::Layout;
use crate::op::BnDims;

/// `f(channel)` for every channel, across threads.
fn per_channel<R: Send>(d: BnDims, f: impl Fn(usize) -> R + Sync + Send) -> Vec<R> {
    (0..d.p).into_par_iter().map(f).collect()
}

/// Each channel's rows of `x`.
fn rows<T>(x: &[T], d: BnDims, c: usize) -> impl Iterator<Item = &[T]> {
    (0..d.n).map(move |i| &x[(i * d.p + c) * d.s..][..d.s])
}

/// Lanes of the float64 sums: independent accumulators the compiler keeps in vector registers
/// (a single running sum would be one long dependency chain, never vectorized).
const LANES: usize = 8;

/// `Σ f(a_i, b_i)` over two rows in float64, `LANES` sums at a time.
#[inline]
fn sum2<T: NumElement>(a: &[T], b: &[T], f: impl Fn(f64, f64) -> f64) -> f64 {
    let mut acc = [0.0f64; LANES];
    let (ca, cb) = (a.chunks_exact(LANES), b.chunks_exact(LANES));
    let tail: f64 = ca
        .remainder()
        .iter()
        .zip(cb.remainder())
        .map(|(&x, &y)| f(x.to_f64(), y.to_f64()))
        .sum();
    for (xa, xb) in ca.zip(cb) {
        for i in 0..LANES {
            acc[i] += f(xa[i].to_f64(), xb[i].to_f64());
        }
    }
    acc.iter().sum::<f64>() + tail
}

/// `y = gamma (x - mean) inv_std + beta` (and the statistics: mean, biased variance,
/// `1 / sqrt(var + eps)`).
fn forward<T: NumElement>(
    x: &[T],
    gamma: &[T],
    beta: &[T],
    d: BnDims,
    eps: f64,
    y: &mut [T],
) -> [Vec<T>; 3] {
    let m = (d.n * d.s).max(1) as f64;
    let stats = per_channel(d, |c| {
        let sum: f64 = rows(x, d, c).map(|r| sum2(r, r, |v, _| v)).sum();
        let mean = sum / m;
        let sq: f64 = rows(x, d, c)
            .map(|r| sum2(r, r, |v, _| (v - mean) * (v - mean)))
            .sum();
        let var = sq / m;
        (mean, var, 1.0 / (var + eps).sqrt())
    });
    y.par_chunks_mut(d.s.max(1))
        .enumerate()
        .for_each(|(r, out)| {
            let c = r % d.p;
            let (mean, _, inv) = stats[c];
            let scale = gamma[c].to_f64() * inv;
            let shift = beta[c].to_f64() - mean * scale;
            let (scale, shift) = (T::from_f64(scale), T::from_f64(shift));
            for (o, &v) in out.iter_mut().zip(&x[r * d.s..][..d.s]) {
                *o = v.times(scale).plus(shift);
            }
        });
    let pick = |f: fn(&(f64, f64, f64)) -> f64| stats.iter().map(|s| T::from_f64(f(s))).collect();
    [pick(|s| s.0), pick(|s| s.1), pick(|s| s.2)]
}

/// The gradients of `forward` for `gy`: `gbeta = Σ gy`, `ggamma = Σ gy · x̂` and
/// `gx = gamma · inv_std · (gy - gbeta / m - x̂ · ggamma / m)`, `x̂ = (x - mean) · inv_std`.
fn backward<T: NumElement>(
    x: &[T],
    gamma: &[T],
    gy: &[T],
    (mean, inv): (&[T], &[T]),
    d: BnDims,
    gx: &mut [T],
) -> [Vec<T>; 2] {
    let m = (d.n * d.s).max(1) as f64;
    let sums = per_channel(d, |c| {
        let (mu, is) = (mean[c].to_f64(), inv[c].to_f64());
        let (mut g, mut gh) = (0.0, 0.0);
        for (xr, gr) in rows(x, d, c).zip(rows(gy, d, c)) {
            g += sum2(gr, gr, |dy, _| dy);
            gh += sum2(xr, gr, |v, dy| dy * (v - mu));
        }
        (g, gh * is)
    });
    gx.par_chunks_mut(d.s.max(1))
        .enumerate()
        .for_each(|(r, out)| {
            let c = r % d.p;
            let (g, gh) = sums[c];
            let (mu, is) = (mean[c].to_f64(), inv[c].to_f64());
            let k = gamma[c].to_f64() * is;
            // gx = k gy - k g / m - k (x - mu) is gh / m, as a · gy + b · x + e.
            let b = -k * is * gh / m;
            let e = -k * g / m - b * mu;
            let (k, b, e) = (T::from_f64(k), T::from_f64(b), T::from_f64(e));
            let (xr, gr) = (&x[r * d.s..][..d.s], &gy[r * d.s..][..d.s]);
            for ((o, &v), &dy) in out.iter_mut().zip(xr).zip(gr) {
                *o = k.times(dy).plus(b.times(v)).plus(e);
            }
        });
    [
        sums.iter().map(|s| T::from_f64(s.1)).collect(),
        sums.iter().map(|s| T::from_f64(s.0)).collect(),
    ]
}

impl CpuStorage {
    /// Batch normalization of `x` (`self`, C order `(N, P, S)`) with `gamma` and `beta` of `P`
    /// elements (C order): `[y, mean, var, inv_std]`, float32 and float64; `None` for the other
    /// dtypes (composed by the caller).
    pub(crate) fn batch_norm(
        &self,
        l: &Layout,
        (gamma, gl): (&CpuStorage, &Layout),
        (beta, bl): (&CpuStorage, &Layout),
        d: BnDims,
        eps: f64,
    ) -> Result<Option<[Self; 4]>> {
        const OP: &str = "batch_normalization";
        macro_rules! run {
            ($T:ty) => {{
                let x = super::window::c_order(OP, self.typed::<$T>(OP, l)?)?;
                let g = super::window::c_order(OP, gamma.typed::<$T>(OP, gl)?)?;
                let b = super::window::c_order(OP, beta.typed::<$T>(OP, bl)?)?;
                let mut y = pool::alloc::<$T>(OP, x.len())?;
                y.resize(x.len(), 0.0);
                let [mean, var, inv] = forward(&x, &g, &b, d, eps, &mut y);
                Ok(Some([y, mean, var, inv].map(Self::from_vec)))
            }};
        }
        match self.dtype() {
            DType::F32 => run!(f32),
            DType::F64 => run!(f64),
            _ => Ok(None),
        }
    }

    /// The gradients `[gx, ggamma, gbeta]` of [`CpuStorage::batch_norm`] for `gy`, from `x`
    /// (`self`), `gamma` and the forward's `mean` and `inv_std` (all C order, one dtype).
    pub(crate) fn batch_norm_grad(
        &self,
        l: &Layout,
        [gamma, gy, mean, inv]: [(&CpuStorage, &Layout); 4],
        d: BnDims,
    ) -> Result<Option<[Self; 3]>> {
        const OP: &str = "batch_normalization";
        macro_rules! run {
            ($T:ty) => {{
                let x = super::window::c_order(OP, self.typed::<$T>(OP, l)?)?;
                let (g, dy, mu, is) = (
                    super::window::c_order(OP, gamma.0.typed::<$T>(OP, gamma.1)?)?,
                    super::window::c_order(OP, gy.0.typed::<$T>(OP, gy.1)?)?,
                    super::window::c_order(OP, mean.0.typed::<$T>(OP, mean.1)?)?,
                    super::window::c_order(OP, inv.0.typed::<$T>(OP, inv.1)?)?,
                );
                let mut gx = pool::alloc::<$T>(OP, x.len())?;
                gx.resize(x.len(), 0.0);
                let [gg, gb] = backward(&x, &g, &dy, (&mu, &is), d, &mut gx);
                Ok(Some([gx, gg, gb].map(Self::from_vec)))
            }};
        }
        match self.dtype() {
            DType::F32 => run!(f32),
            DType::F64 => run!(f64),
            _ => Ok(None),
        }
    }
}
