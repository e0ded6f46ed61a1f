//! Batch normalization on the host, fused: an `(N, P, S)` array normalized per `p` over `N`
//! and `S`, channels across threads. Each channel is handled whole before the next: its first
//! pass reads its `N` rows of `S` from memory and every later pass finds them in the core's
//! cache (a channel of a `(32, 64, 32, 32)` float32 batch is 128 KB), so that the forward and the
//! backward each move the minimum — the forward reads `x` and writes `y`, the backward reads
//! `x` and `gy` and writes `gx` — and the loops run 256 bits wide where the CPU has AVX2. Large
//! float32 results are written around the cache ([`streams`]), so that writing them does not
//! first read their memory: the five passes of the minimum traffic are then all there is.
//!
//! Accuracy: sums are taken in the dtype's own lanes over blocks of [`BLOCK`] = 256 elements
//! (each of the [`LANES`] = 16 lanes adds 16 terms) and the blocks in float64, so that a
//! statistic's rounding error is at most about `16 u · Σ|terms|` (`u = 2⁻²⁴` for float32):
//! within 16 units of the last place of the mean of the terms' magnitudes, whatever the size
//! of the batch (`tests::float32_statistics_within_their_bound` checks it against float64).

use std::mem::MaybeUninit;

use rayon::prelude::*;

use super::{CpuStorage, pool};
use crate::DType;
use crate::dtype::NumElement;
use crate::error::Result;
use crate::layout::Layout;
use crate::op::BnDims;

/// Independent accumulators of a sum, kept in vector registers (a single running sum is one
/// long dependency chain, never vectorized).
const LANES: usize = 16;

/// Elements summed in the dtype's own lanes before the lanes are added into float64.
const BLOCK: usize = 256;

/// One channel's rows of an `(N, P, S)` array.
#[derive(Clone, Copy)]
struct Rows<'a, T> {
    x: &'a [T],
    d: BnDims,
    c: usize,
}

impl<'a, T> Rows<'a, T> {
    /// The channel's row `i` (of `N`).
    #[inline(always)]
    fn row(self, i: usize) -> &'a [T] {
        &self.x[(i * self.d.p + self.c) * self.d.s..][..self.d.s]
    }
}

/// Channel `c`'s rows of `x`.
fn rows<T>(x: &[T], d: BnDims, c: usize) -> Rows<'_, T> {
    Rows { x, d, c }
}

/// How many rows ahead of the one being summed [`prefetch`] asks for.
const AHEAD: usize = 1;

/// Asks the CPU to bring `s` into its cache, a row to be read or written soon: a channel's
/// rows are pieces far apart, where the hardware's prefetchers, which follow one stream within
/// a page, start late on each. (A hint for writing, `prefetchw`, would need a CPU feature the
/// kernels are not compiled for; this is the plain `prefetcht0`.)
#[inline(always)]
fn prefetch<U>(s: &[U]) {
    #[cfg(target_arch = "x86_64")]
    for line in (0..std::mem::size_of_val(s)).step_by(64) {
        use std::arch::x86_64::{_MM_HINT_T0, _mm_prefetch};
        let p = s.as_ptr().cast::<i8>().wrapping_add(line);
        // SAFETY: the address is within `s`; a prefetch never faults or changes memory.
        unsafe { _mm_prefetch::<_MM_HINT_T0>(p) };
    }
}

/// The rows of `out` grouped by channel, for writing a channel at a time across threads.
fn channel_rows<U>(out: &mut [U], d: BnDims) -> Vec<Vec<&mut [U]>> {
    let mut by_channel: Vec<Vec<&mut [U]>> = (0..d.p).map(|_| Vec::with_capacity(d.n)).collect();
    for (r, row) in out.chunks_mut(d.s.max(1)).enumerate() {
        by_channel[r % d.p].push(row);
    }
    by_channel
}

/// Adds `Σ f(a_i, b_i)` over lanes of one block, summed in `T`, into `total`'s lanes.
#[inline(always)]
fn add_lanes<T: NumElement, const K: usize>(
    a: &[[T; LANES]],
    b: &[[T; LANES]],
    f: &impl Fn(T, T) -> [T; K],
    total: &mut [[f64; LANES]; K],
) {
    let mut acc = [[T::default(); LANES]; K];
    for (x, y) in a.iter().zip(b) {
        for i in 0..LANES {
            let v = f(x[i], y[i]);
            for k in 0..K {
                acc[k][i] = acc[k][i] + v[k];
            }
        }
    }
    for k in 0..K {
        for i in 0..LANES {
            total[k][i] += acc[k][i].to_f64();
        }
    }
}

/// `Σ f(a_i, b_i)` (`K` sums at once) over two rows of one length: in `T` lanes within
/// blocks, in float64 across them (see the module's note on accuracy).
#[inline(always)]
fn sums<T: NumElement, const K: usize>(a: &[T], b: &[T], f: impl Fn(T, T) -> [T; K]) -> [f64; K] {
    let mut total = [[0.0f64; LANES]; K];
    let (blocks_a, rest_a) = a.as_chunks::<BLOCK>();
    let (blocks_b, rest_b) = b.as_chunks::<BLOCK>();
    for (ba, bb) in blocks_a.iter().zip(blocks_b) {
        add_lanes(
            ba.as_chunks::<LANES>().0,
            bb.as_chunks::<LANES>().0,
            &f,
            &mut total,
        );
    }
    // The last partial block: whole lanes in `T`, then one element at a time in float64.
    let ((la, ta), (lb, tb)) = (rest_a.as_chunks::<LANES>(), rest_b.as_chunks::<LANES>());
    add_lanes(la, lb, &f, &mut total);
    let mut out = total.map(|t| t.iter().sum::<f64>());
    for (&x, &y) in ta.iter().zip(tb) {
        let v = f(x, y);
        for k in 0..K {
            out[k] += v[k].to_f64();
        }
    }
    out
}

/// What [`row_sums`] adds up over a row `a` (and `b`): `Σ a`, `Σ (a - mu)²`, or
/// `(Σ b, Σ b (a - mu))`.
const SUM: u8 = 0;
const SQUARES: u8 = 1;
const GRAD_SUMS: u8 = 2;

/// The sums `MODE` names over one row (the second is 0 for the one-sum modes): [`sums`], or
/// for float32 with AVX2 the same blocks and lanes in vector registers.
#[inline(always)]
fn row_sums<T: NumElement, const MODE: u8>(a: &[T], b: &[T], mu: T) -> [f64; 2] {
    #[cfg(target_arch = "x86_64")]
    if T::DTYPE == DType::F32 && super::math::isa() == super::math::Isa::Avx2Fma {
        // SAFETY: `T` is `f32` (its dtype says so), so the slices are `f32` slices.
        let (a, b) = unsafe {
            (
                std::slice::from_raw_parts(a.as_ptr().cast::<f32>(), a.len()),
                std::slice::from_raw_parts(b.as_ptr().cast::<f32>(), b.len()),
            )
        };
        // SAFETY: this CPU has AVX2 and FMA (`isa`).
        return unsafe { avx2::row_sums::<MODE>(a, b, mu.to_f64() as f32) };
    }
    match MODE {
        SUM => [sums(a, a, |v, _| [v])[0], 0.0],
        SQUARES => [
            sums(a, a, |v, _| {
                let c = v - mu;
                [c * c]
            })[0],
            0.0,
        ],
        _ => sums(a, b, |v, dy| [dy, dy * (v - mu)]),
    }
}

/// `out = k a + (b v + e)` (without `V`: `k a + e`, the forward's `y = scale x + shift`), a
/// row of the result; with `stream` (float32 with AVX2, else ignored: [`streams`]) written around the
/// cache, in non-temporal stores: the row's memory is not read first, as a plain store does to
/// fill its cache line, so that the result costs one pass of traffic, not two. [`fence`]
/// orders those stores before the rows are handed to another thread. Both ways give the same
/// bits (the same operations in the same order).
#[inline(always)]
fn write_row<T: NumElement, const V: bool>(
    out: &mut [MaybeUninit<T>],
    a: &[T],
    v: &[T],
    [k, b, e]: [T; 3],
    stream: bool,
) {
    #[cfg(target_arch = "x86_64")]
    if stream && T::DTYPE == DType::F32 && super::math::isa() == super::math::Isa::Avx2Fma {
        // SAFETY: `T` is `f32` (its dtype says so): the slices are `f32` slices of their lengths.
        let (out, a, v) = unsafe {
            (
                std::slice::from_raw_parts_mut(
                    out.as_mut_ptr().cast::<MaybeUninit<f32>>(),
                    out.len(),
                ),
                std::slice::from_raw_parts(a.as_ptr().cast::<f32>(), a.len()),
                std::slice::from_raw_parts(v.as_ptr().cast::<f32>(), v.len()),
            )
        };
        let c = [k, b, e].map(|t| t.to_f64() as f32);
        // SAFETY: this CPU has AVX2 and FMA (`isa`).
        return unsafe { avx2::write_row::<V>(out, a, v, c) };
    }
    for ((o, &x), &y) in out.iter_mut().zip(a).zip(v) {
        o.write(if V { k * x + (b * y + e) } else { k * x + e });
    }
}

/// Whether a result of `len` elements of `T` is written around the cache ([`write_row`]):
/// float32 where the CPU has AVX2, and only when batch normalization's four arrays of that
/// size (`x`, `y`, `gy`, `gx`) take more than half the last-level cache, which the other
/// arrays of a training step share: a result kept in the cache would mostly be pushed out
/// before it is read again. Below that the plain stores win. Measured on a 32 MB L3 (forward
/// and backward of `(32, 64, S)` float32): streamed results took 1.2× as long at 3.1 MB,
/// 0.85× at 4.5 MB and 0.65× at 8 MB; at 2 MB twice as long.
fn streams<T: NumElement>(len: usize) -> bool {
    cfg!(target_arch = "x86_64")
        && T::DTYPE == DType::F32
        && super::math::isa() == super::math::Isa::Avx2Fma
        && len.saturating_mul(4 * std::mem::size_of::<T>()) > super::last_level_cache_bytes() / 2
}

/// Orders [`write_row`]'s non-temporal stores before what follows (a no-op without them).
#[inline(always)]
fn fence() {
    #[cfg(target_arch = "x86_64")]
    // SAFETY: `sfence` only orders stores.
    unsafe {
        std::arch::x86_64::_mm_sfence()
    };
}

#[cfg(target_arch = "x86_64")]
mod avx2 {
    use std::arch::x86_64::*;

    use super::{BLOCK, GRAD_SUMS, LANES, SQUARES, SUM};

    /// Float32 lanes of one sum (16: two registers) converted and added into float64 ones.
    #[inline]
    #[target_feature(enable = "avx2")]
    fn widen(acc: [__m256; 2], total: &mut [__m256d; 4]) {
        for (h, a) in acc.into_iter().enumerate() {
            let lo = _mm256_cvtps_pd(_mm256_castps256_ps128(a));
            let hi = _mm256_cvtps_pd(_mm256_extractf128_ps::<1>(a));
            total[2 * h] = _mm256_add_pd(total[2 * h], lo);
            total[2 * h + 1] = _mm256_add_pd(total[2 * h + 1], hi);
        }
    }

    /// [`super::write_row`] for float32: the elements up to a 32-byte boundary of `out` and
    /// after its last whole vector one at a time, the rest in non-temporal 8-lane stores.
    #[target_feature(enable = "avx2,fma")]
    pub(super) fn write_row<const V: bool>(
        out: &mut [std::mem::MaybeUninit<f32>],
        a: &[f32],
        v: &[f32],
        [k, b, e]: [f32; 3],
    ) {
        let n = out.len().min(a.len()).min(v.len());
        let one = |i: usize| {
            if V {
                k * a[i] + (b * v[i] + e)
            } else {
                k * a[i] + e
            }
        };
        let head = (out.as_ptr().align_offset(32)).min(n);
        let whole = head + (n - head) / 8 * 8;
        for i in (0..head).chain(whole..n) {
            out[i].write(one(i));
        }
        let (kv, bv, ev) = (_mm256_set1_ps(k), _mm256_set1_ps(b), _mm256_set1_ps(e));
        let mut i = head;
        while i < whole {
            // SAFETY: `i + 8 <= n` elements of each slice; `out[i..]` is 32-byte aligned.
            unsafe {
                let x = _mm256_loadu_ps(a.as_ptr().add(i));
                let t = if V {
                    _mm256_add_ps(_mm256_mul_ps(bv, _mm256_loadu_ps(v.as_ptr().add(i))), ev)
                } else {
                    ev
                };
                let r = _mm256_add_ps(_mm256_mul_ps(kv, x), t);
                _mm256_stream_ps(out.as_mut_ptr().add(i).cast::<f32>(), r);
            }
            i += 8;
        }
    }

    /// [`super::row_sums`] for float32: blocks of [`BLOCK`] elements in 16 float32 lanes,
    /// the blocks in 16 float64 lanes, the last elements one at a time in float64.
    #[target_feature(enable = "avx2,fma")]
    pub(super) fn row_sums<const MODE: u8>(a: &[f32], b: &[f32], mu: f32) -> [f64; 2] {
        let n = if MODE == GRAD_SUMS {
            a.len().min(b.len())
        } else {
            a.len()
        };
        let whole = n - n % LANES;
        let m = _mm256_set1_ps(mu);
        let mut total = [[_mm256_setzero_pd(); 4]; 2];
        let load = |s: &[f32], i: usize| -> [__m256; 2] {
            let l = &s[i..i + LANES];
            // SAFETY: `l` holds 16 elements.
            unsafe {
                [
                    _mm256_loadu_ps(l.as_ptr()),
                    _mm256_loadu_ps(l.as_ptr().add(8)),
                ]
            }
        };
        let mut i = 0;
        while i < whole {
            let end = (i + BLOCK).min(whole);
            let mut acc = [[_mm256_setzero_ps(); 2]; 2];
            while i < end {
                let x = load(a, i);
                for h in 0..2 {
                    match MODE {
                        SUM => acc[0][h] = _mm256_add_ps(acc[0][h], x[h]),
                        SQUARES => {
                            let c = _mm256_sub_ps(x[h], m);
                            acc[0][h] = _mm256_add_ps(acc[0][h], _mm256_mul_ps(c, c));
                        }
                        _ => {
                            let dy = load(b, i)[h];
                            acc[0][h] = _mm256_add_ps(acc[0][h], dy);
                            let t = _mm256_mul_ps(dy, _mm256_sub_ps(x[h], m));
                            acc[1][h] = _mm256_add_ps(acc[1][h], t);
                        }
                    }
                }
                i += LANES;
            }
            widen(acc[0], &mut total[0]);
            if MODE == GRAD_SUMS {
                widen(acc[1], &mut total[1]);
            }
        }
        let mut out = total.map(|t| {
            let mut lanes = [0.0f64; 16];
            for (k, v) in t.into_iter().enumerate() {
                // SAFETY: `lanes[4 k..]` holds 4 elements.
                unsafe { _mm256_storeu_pd(lanes[4 * k..].as_mut_ptr(), v) };
            }
            lanes.iter().sum::<f64>()
        });
        for j in whole..n {
            let c = f64::from(a[j] - mu);
            match MODE {
                SUM => out[0] += f64::from(a[j]),
                SQUARES => out[0] += c * c,
                _ => {
                    out[0] += f64::from(b[j]);
                    out[1] += f64::from(b[j] * (a[j] - mu));
                }
            }
        }
        out
    }
}

/// Runs the channel kernel `$body` (a function of `$args`) compiled for AVX2 and FMA where the
/// CPU has them, else as it is (Rust never contracts `a * b + c` into a fused multiply-add, so
/// only [`row_sums`], which picks its own float32 AVX2 kernel, may differ in the last bits, both
/// within the module's bound). Not `elementwise::wide`: the closure it takes was
/// left uninlined here, so the kernel ran without AVX2 (perf showed it).
macro_rules! dispatch {
    ($body:ident <$T:ident> ($($arg:ident: $ty:ty),*) -> $ret:ty) => {{
        #[cfg(target_arch = "x86_64")]
        if super::math::isa() == super::math::Isa::Avx2Fma {
            #[target_feature(enable = "avx2,fma")]
            fn avx2<'a, $T: NumElement>($($arg: $ty),*) -> $ret {
                $body($($arg),*)
            }
            // SAFETY: this CPU has AVX2 and FMA (`isa`).
            return unsafe { avx2($($arg),*) };
        }
        $body($($arg),*)
    }};
}

/// One channel's forward: its statistics `(mean, var, inv_std)` and its rows of `y`.
fn forward_channel<'a, T: NumElement>(
    xs: Rows<'a, T>,
    ys: Vec<&mut [MaybeUninit<T>]>,
    params: (T, T),
    m_eps: (f64, f64),
    stream: bool,
) -> (f64, f64, f64) {
    dispatch!(forward_body<T>(xs: Rows<'a, T>, ys: Vec<&mut [MaybeUninit<T>]>, params: (T, T), m_eps: (f64, f64), stream: bool) -> (f64, f64, f64))
}

#[inline(always)]
fn forward_body<'a, T: NumElement>(
    xs: Rows<'a, T>,
    mut ys: Vec<&mut [MaybeUninit<T>]>,
    (gamma, beta): (T, T),
    (m, eps): (f64, f64),
    stream: bool,
) -> (f64, f64, f64) {
    let n = xs.d.n;
    let mut sum = 0.0;
    for i in 0..n {
        if i + AHEAD < n {
            prefetch(xs.row(i + AHEAD));
        }
        let r = xs.row(i);
        sum += row_sums::<T, SUM>(r, r, T::default())[0];
    }
    let mean = sum / m;
    // The squares about the mean rounded to `T`, corrected for that rounding:
    // Σ (x - mean)² = Σ (x - mt)² - m (mean - mt)².
    let mt = T::from_f64(mean);
    let mut sq = 0.0;
    for i in 0..n {
        let r = xs.row(i);
        sq += row_sums::<T, SQUARES>(r, r, mt)[0];
    }
    let shift = mean - mt.to_f64();
    let var = (sq / m - shift * shift).max(0.0);
    let inv = 1.0 / (var + eps).sqrt();
    let scale = gamma.to_f64() * inv;
    let (scale, shift) = (
        T::from_f64(scale),
        T::from_f64(beta.to_f64() - mean * scale),
    );
    for i in 0..ys.len() {
        // (Rows about to be streamed are not brought into the cache.)
        if let Some(next) = ys.get(i + 1).filter(|_| !stream) {
            prefetch(next);
        }
        let c = [scale, T::default(), shift];
        write_row::<T, false>(ys[i], xs.row(i), xs.row(i), c, stream);
    }
    fence();
    (mean, var, inv)
}

/// `y = gamma (x - mean) inv_std + beta` into `y`'s spare capacity (its length becomes
/// `x.len()`), and the statistics: mean, biased variance, `1 / sqrt(var + eps)`; `y` streamed
/// where `stream` ([`streams`]).
fn forward<T: NumElement>(
    x: &[T],
    gamma: &[T],
    beta: &[T],
    d: BnDims,
    eps: f64,
    (y, stream): (&mut Vec<T>, bool),
) -> [Vec<T>; 3] {
    let m = (d.n * d.s).max(1) as f64;
    let spare = &mut y.spare_capacity_mut()[..x.len()];
    super::threads::start();
    let stats: Vec<(f64, f64, f64)> = channel_rows(spare, d)
        .into_par_iter()
        .enumerate()
        .map(|(c, ys)| forward_channel(rows(x, d, c), ys, (gamma[c], beta[c]), (m, eps), stream))
        .collect();
    // SAFETY: `forward_channel` wrote every row of every channel, which cover `x.len()`
    // elements (`N · P · S`).
    unsafe { y.set_len(x.len()) };
    let pick = |f: fn(&(f64, f64, f64)) -> f64| stats.iter().map(|s| T::from_f64(f(s))).collect();
    [pick(|s| s.0), pick(|s| s.1), pick(|s| s.2)]
}

/// One channel's backward: `(Σ gy, Σ gy · x̂)` and its rows of `gx`.
fn backward_channel<'a, T: NumElement>(
    xs: Rows<'a, T>,
    gys: Rows<'a, T>,
    gxs: Vec<&mut [MaybeUninit<T>]>,
    params: (T, T, T),
    m: f64,
    stream: bool,
) -> (f64, f64) {
    dispatch!(backward_body<T>(xs: Rows<'a, T>, gys: Rows<'a, T>, gxs: Vec<&mut [MaybeUninit<T>]>, params: (T, T, T), m: f64, stream: bool) -> (f64, f64))
}

#[inline(always)]
fn backward_body<'a, T: NumElement>(
    xs: Rows<'a, T>,
    gys: Rows<'a, T>,
    mut gxs: Vec<&mut [MaybeUninit<T>]>,
    (gamma, mu, is): (T, T, T),
    m: f64,
    stream: bool,
) -> (f64, f64) {
    let n = xs.d.n;
    let (mut g, mut gh) = (0.0, 0.0);
    for i in 0..n {
        if i + AHEAD < n {
            prefetch(xs.row(i + AHEAD));
            prefetch(gys.row(i + AHEAD));
        }
        let [dg, dgh] = row_sums::<T, GRAD_SUMS>(xs.row(i), gys.row(i), mu);
        g += dg;
        gh += dgh;
    }
    let is64 = is.to_f64();
    gh *= is64;
    let k = gamma.to_f64() * is64;
    // gx = k gy - k g / m - k (x - mu) is gh / m, as k · gy + b · x + e.
    let b = -k * is64 * gh / m;
    let e = -k * g / m - b * mu.to_f64();
    let (k, b, e) = (T::from_f64(k), T::from_f64(b), T::from_f64(e));
    for i in 0..gxs.len() {
        if let Some(next) = gxs.get(i + 1).filter(|_| !stream) {
            prefetch(next);
        }
        write_row::<T, true>(gxs[i], gys.row(i), xs.row(i), [k, b, e], stream);
    }
    fence();
    (g, gh)
}

/// The gradients of `forward` for `gy`: `gx` into its spare capacity (its length becomes
/// `x.len()`), and `[ggamma, gbeta]` with `gbeta = Σ gy`, `ggamma = Σ gy · x̂`,
/// `gx = gamma · inv_std · (gy - gbeta / m - x̂ · ggamma / m)`, `x̂ = (x - mean) · inv_std`;
/// `gx` streamed where `stream` ([`streams`]).
fn backward<T: NumElement>(
    x: &[T],
    gamma: &[T],
    gy: &[T],
    (mean, inv): (&[T], &[T]),
    d: BnDims,
    (gx, stream): (&mut Vec<T>, bool),
) -> [Vec<T>; 2] {
    let m = (d.n * d.s).max(1) as f64;
    let spare = &mut gx.spare_capacity_mut()[..x.len()];
    super::threads::start();
    let sums: Vec<(f64, f64)> = channel_rows(spare, d)
        .into_par_iter()
        .enumerate()
        .map(|(c, gxs)| {
            let params = (gamma[c], mean[c], inv[c]);
            backward_channel(rows(x, d, c), rows(gy, d, c), gxs, params, m, stream)
        })
        .collect();
    // SAFETY: `backward_channel` wrote every row of every channel (`x.len()` elements).
    unsafe { gx.set_len(x.len()) };
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
                let out = (&mut y, streams::<$T>(x.len()));
                let [mean, var, inv] = forward(&x, &g, &b, d, eps, out);
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
                let out = (&mut gx, streams::<$T>(x.len()));
                let [gg, gb] = backward(&x, &g, &dy, (&mu, &is), d, out);
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

#[cfg(test)]
mod tests {
    use super::*;

    /// `n` float32 values `offset + u`, `u` uniform in [-1, 1).
    fn values(n: usize, offset: f64, seed: u64) -> Vec<f32> {
        let mut rng = crate::random::Rng::seed(seed);
        (0..n)
            .map(|_| (offset + rng.next_f64() * 2.0 - 1.0) as f32)
            .collect()
    }

    /// The module's bound: 16 float32 roundings of the sum of the terms' magnitudes, and a
    /// little for the float64 additions.
    fn bound(magnitudes: f64) -> f64 {
        17.0 * f64::from(f32::EPSILON) / 2.0 * magnitudes
    }

    #[test]
    fn streamed_results_are_the_plain_ones() {
        // Rows of 37 elements start at every offset from a 32-byte boundary, so that the
        // streamed rows' scalar heads and tails and their vector bodies are all exercised.
        let d = BnDims { n: 3, p: 5, s: 37 };
        let len = d.n * d.p * d.s;
        let (x, gy) = (values(len, 2.0, 3), values(len, 0.0, 4));
        let (gamma, beta) = (values(d.p, 1.0, 5), values(d.p, 0.0, 6));
        let run = |stream: bool| {
            let (mut y, mut gx) = (Vec::with_capacity(len), Vec::with_capacity(len));
            let [mean, _, inv] = forward(&x, &gamma, &beta, d, 1e-5, (&mut y, stream));
            let sums = backward(&x, &gamma, &gy, (&mean, &inv), d, (&mut gx, stream));
            (y, gx, sums)
        };
        let (plain, streamed) = (run(false), run(true));
        assert_eq!(plain, streamed);
        // And the plain ones are batch normalization (float64 from the definition).
        let (y, gx, _) = plain;
        for c in 0..d.p {
            let at = |i: usize, j: usize| (i * d.p + c) * d.s + j;
            let idx: Vec<usize> = (0..d.n)
                .flat_map(|i| (0..d.s).map(move |j| at(i, j)))
                .collect();
            let m = idx.len() as f64;
            let mean = idx.iter().map(|&k| f64::from(x[k])).sum::<f64>() / m;
            let var = idx
                .iter()
                .map(|&k| (f64::from(x[k]) - mean).powi(2))
                .sum::<f64>()
                / m;
            let inv = 1.0 / (var + 1e-5).sqrt();
            let xh = |k: usize| (f64::from(x[k]) - mean) * inv;
            let gb = idx.iter().map(|&k| f64::from(gy[k])).sum::<f64>();
            let gg = idx.iter().map(|&k| f64::from(gy[k]) * xh(k)).sum::<f64>();
            let g = f64::from(gamma[c]);
            for &k in &idx {
                let want_y = g * xh(k) + f64::from(beta[c]);
                let want_gx = g * inv * (f64::from(gy[k]) - gb / m - xh(k) * gg / m);
                assert!((f64::from(y[k]) - want_y).abs() < 1e-5, "y[{k}]");
                assert!((f64::from(gx[k]) - want_gx).abs() < 1e-5, "gx[{k}]");
            }
        }
    }

    #[test]
    fn float32_statistics_within_their_bound() {
        // Rows that end in every way: whole blocks, a partial block, lanes and a tail.
        for (len, offset) in [(1000, 1000.0), (256, 3.0), (4099, -50.0), (7, 0.5)] {
            let (x, gy) = (values(len, offset, 1), values(len, 0.25, 2));
            let exact_mean = x.iter().map(|&v| f64::from(v)).sum::<f64>() / len as f64;
            let mu = exact_mean as f32;
            let terms = |f: &dyn Fn(f64, f64) -> f64| -> (f64, f64) {
                let t = x
                    .iter()
                    .zip(&gy)
                    .map(|(&v, &g)| f(f64::from(v), f64::from(g)));
                t.fold((0.0, 0.0), |(s, m), t| (s + t, m + t.abs()))
            };
            let m64 = f64::from(mu);
            let checks = [
                (SUM, terms(&|v, _| v), None),
                (SQUARES, terms(&|v, _| (v - m64) * (v - m64)), None),
                (
                    GRAD_SUMS,
                    terms(&|_, g| g),
                    Some(terms(&|v, g| g * (v - m64))),
                ),
            ];
            for (mode, (want, mag), second) in checks {
                let got = match mode {
                    SUM => [
                        row_sums::<f32, SUM>(&x, &gy, mu),
                        sums(&x, &gy, |v, _| [v, 0.0]),
                    ],
                    SQUARES => [
                        row_sums::<f32, SQUARES>(&x, &gy, mu),
                        sums(&x, &gy, |v, _| [(v - mu) * (v - mu), 0.0]),
                    ],
                    _ => [
                        row_sums::<f32, GRAD_SUMS>(&x, &gy, mu),
                        sums(&x, &gy, |v, g| [g, g * (v - mu)]),
                    ],
                };
                // The dispatched sums (AVX2 where the CPU has it) and the portable ones.
                for got in got {
                    let err = (got[0] - want).abs();
                    assert!(
                        err <= bound(mag),
                        "mode {mode}, {len} elements: {} vs {want}, error {err:e} > {:e}",
                        got[0],
                        bound(mag)
                    );
                    if let Some((want, mag)) = second {
                        let err = (got[1] - want).abs();
                        assert!(
                            err <= bound(mag),
                            "mode {mode}, {len}: second sum error {err:e}"
                        );
                    }
                }
            }
        }
    }
}
