//! Reductions (sum, max, min) over a set of axes, vectorized and threaded.
//!
//! The input is seen in C order (a strided one is gathered first) and its axes merged where
//! neighbours are both kept or both reduced; the reduced axes are then taken one run at a time,
//! each a reduction of `[outer, len, inner]` over its middle axis:
//!
//! - `inner == 1` (the run is innermost): each of the `outer` rows of `len` contiguous elements
//!   folds into one value, with [`LANES`] accumulators so that the loop vectorizes;
//! - otherwise every one of the `len` rows of `inner` elements is combined into an output row,
//!   elementwise (vectorized across `inner`).
//!
//! Sums are blocked and pairwise: a block of [`BLOCK`] elements (or rows) is summed into
//! [`LANES`] partial sums, and the blocks' sums are added in a balanced tree. The error of a
//! float sum of n elements is then at most (BLOCK / LANES + ⌈log₂(n / BLOCK)⌉ + log₂ LANES + 1)
//! units in the last place of the accumulator times Σ|xᵢ|, instead of n of them for a running
//! sum: for float32, below 3.5 · 10⁻⁶ · Σ|xᵢ| up to 2³⁰ elements (the tests check it against
//! float64 sums). Integer sums wrap. Max and min propagate NaN, as NumPy's do. Large reductions
//! split their rows (or, for a few long rows, blocks of each) across rayon's threads, and the
//! loops are compiled for AVX2 too where the CPU has it.

use std::marker::PhantomData;

use rayon::prelude::*;

use super::pool::Result;
use super::{CpuRef, PAR_MIN};
use crate::dtype::NumElement;
use crate::op::Reduction;

/// Independent accumulators of a fold: 32 float32 (four AVX2 registers), so that the loop
/// vectorizes and its adds (4 cycles of latency each) do not wait on each other.
const LANES: usize = 32;

/// Elements summed in order (by each of the [`LANES`] accumulators together) before blocks are
/// combined pairwise: large enough that the recursion costs little beside the loop.
const BLOCK: usize = 1024;

/// Rows summed in order into one partial row before partial rows are combined pairwise.
const ROW_BLOCK: usize = 32;

/// A fold: its identity and its combining step, as a type so that each loop is specialised.
trait Fold<T: NumElement>: Copy + Send + Sync {
    /// Whether the order of combination changes the result (sums), so that blocks are combined
    /// pairwise; max and min fold in one pass.
    const PAIRWISE: bool;
    fn identity() -> T;
    fn combine(acc: T, x: T) -> T;
}

#[derive(Clone, Copy)]
struct Sum<T>(PhantomData<T>);
#[derive(Clone, Copy)]
struct Max<T>(PhantomData<T>);
#[derive(Clone, Copy)]
struct Min<T>(PhantomData<T>);

impl<T: NumElement> Fold<T> for Sum<T> {
    const PAIRWISE: bool = true;
    #[inline(always)]
    fn identity() -> T {
        Reduction::Sum.identity()
    }
    #[inline(always)]
    fn combine(acc: T, x: T) -> T {
        acc.plus(x)
    }
}

/// `v` is NaN (never for integers).
#[inline(always)]
#[allow(clippy::eq_op)]
fn nan<T: PartialOrd>(v: T) -> bool {
    v != v
}

impl<T: NumElement> Fold<T> for Max<T> {
    const PAIRWISE: bool = false;
    #[inline(always)]
    fn identity() -> T {
        Reduction::Max.identity()
    }
    #[inline(always)]
    fn combine(acc: T, x: T) -> T {
        // NaN wins: a NaN accumulator stays (`x > NaN` is false), a NaN element takes over.
        // `x > acc ? x : acc` is one `max` instruction on x86, and the NaN test one blend after
        // it: two steps on each accumulator's chain, no branch, so that the loop vectorizes.
        let m = if x > acc { x } else { acc };
        if nan(x) { x } else { m }
    }
}

impl<T: NumElement> Fold<T> for Min<T> {
    const PAIRWISE: bool = false;
    #[inline(always)]
    fn identity() -> T {
        Reduction::Min.identity()
    }
    #[inline(always)]
    fn combine(acc: T, x: T) -> T {
        let m = if x < acc { x } else { acc };
        if nan(x) { x } else { m }
    }
}

/// Folds a slice: blocks of [`BLOCK`] into [`LANES`] accumulators, the blocks' accumulators
/// pairwise (lane by lane, vectorized), the lanes pairwise at the end.
#[inline(always)]
fn fold_slice<T: NumElement, F: Fold<T>>(s: &[T]) -> T {
    let mut acc = fold_lanes::<T, F>(s);
    let mut width = LANES;
    while width > 1 {
        width /= 2;
        for i in 0..width {
            acc[i] = F::combine(acc[i], acc[i + width]);
        }
    }
    acc[0]
}

#[inline(always)]
fn fold_lanes<T: NumElement, F: Fold<T>>(s: &[T]) -> [T; LANES] {
    if F::PAIRWISE && s.len() > BLOCK {
        let mid = (s.len() / BLOCK).div_ceil(2) * BLOCK;
        let mut left = fold_lanes::<T, F>(&s[..mid]);
        let right = fold_lanes::<T, F>(&s[mid..]);
        for (a, b) in left.iter_mut().zip(right) {
            *a = F::combine(*a, b);
        }
        return left;
    }
    let mut acc = [F::identity(); LANES];
    let mut chunks = s.chunks_exact(LANES);
    for c in &mut chunks {
        for (a, &x) in acc.iter_mut().zip(c) {
            *a = F::combine(*a, x);
        }
    }
    for (a, &x) in acc.iter_mut().zip(chunks.remainder()) {
        *a = F::combine(*a, x);
    }
    acc
}

/// Combines `row` into `acc` elementwise.
#[inline(always)]
fn combine_rows<T: NumElement, F: Fold<T>>(acc: &mut [T], row: &[T]) {
    for (a, &x) in acc.iter_mut().zip(row) {
        *a = F::combine(*a, x);
    }
}

/// Folds `rows` rows of `width` elements, row `r` at `s[r * stride..]`, into `out` (`width`
/// elements, overwritten): blocks of [`ROW_BLOCK`] rows in order, then the blocks pairwise
/// (a stack of partial rows, one per level, as a binary counter).
#[inline(always)]
fn fold_rows<T: NumElement, F: Fold<T>>(
    s: &[T],
    rows: usize,
    stride: usize,
    width: usize,
    out: &mut [T],
) {
    let row = |r: usize| &s[r * stride..r * stride + width];
    let mut stack: Vec<(u32, Vec<T>)> = Vec::new();
    let mut spare: Vec<Vec<T>> = Vec::new();
    for start in (0..rows).step_by(ROW_BLOCK) {
        let mut acc = spare.pop().unwrap_or_else(|| vec![F::identity(); width]);
        acc.copy_from_slice(row(start));
        for r in start + 1..(start + ROW_BLOCK).min(rows) {
            combine_rows::<T, F>(&mut acc, row(r));
        }
        let mut level = 0;
        while stack.last().is_some_and(|(l, _)| *l == level) {
            let (_, mut left) = stack.pop().expect("checked");
            combine_rows::<T, F>(&mut left, &acc);
            spare.push(std::mem::replace(&mut acc, left));
            level += 1;
        }
        stack.push((level, acc));
    }
    let (_, mut acc) = stack.pop().expect("at least one row");
    while let Some((_, mut left)) = stack.pop() {
        combine_rows::<T, F>(&mut left, &acc);
        acc = left;
    }
    out.copy_from_slice(&acc);
}

/// The kernels, compiled for the baseline and (on x86-64) for AVX2, chosen once per call.
#[derive(Clone, Copy)]
struct Kernels<T, F>(PhantomData<(T, F)>);

impl<T: NumElement, F: Fold<T>> Kernels<T, F> {
    fn fold_slice(s: &[T]) -> T {
        #[cfg(target_arch = "x86_64")]
        if super::math::isa() == super::math::Isa::Avx2Fma {
            // SAFETY: the CPU has AVX2 (`isa`).
            return unsafe { avx2::fold_slice::<T, F>(s) };
        }
        fold_slice::<T, F>(s)
    }

    fn fold_rows(s: &[T], rows: usize, stride: usize, width: usize, out: &mut [T]) {
        #[cfg(target_arch = "x86_64")]
        if super::math::isa() == super::math::Isa::Avx2Fma {
            // SAFETY: the CPU has AVX2 (`isa`).
            return unsafe { avx2::fold_rows::<T, F>(s, rows, stride, width, out) };
        }
        fold_rows::<T, F>(s, rows, stride, width, out)
    }
}

#[cfg(target_arch = "x86_64")]
mod avx2 {
    use super::{Fold, NumElement};

    #[target_feature(enable = "avx2")]
    pub(super) fn fold_slice<T: NumElement, F: Fold<T>>(s: &[T]) -> T {
        super::fold_slice::<T, F>(s)
    }

    #[target_feature(enable = "avx2")]
    pub(super) fn fold_rows<T: NumElement, F: Fold<T>>(
        s: &[T],
        rows: usize,
        stride: usize,
        width: usize,
        out: &mut [T],
    ) {
        super::fold_rows::<T, F>(s, rows, stride, width, out)
    }
}

/// Reduces `a` over `axes` (sorted, unique; non-empty axes for max/min, which the caller checks).
/// Returns the C-order buffer of the result with the reduced axes removed.
pub(crate) fn reduce<T: NumElement>(
    op: &'static str,
    a: CpuRef<'_, T>,
    axes: &[usize],
    kind: Reduction,
) -> Result<Vec<T>> {
    match kind {
        Reduction::Sum => reduce_with::<T, Sum<T>>(op, a, axes),
        Reduction::Max => reduce_with::<T, Max<T>>(op, a, axes),
        Reduction::Min => reduce_with::<T, Min<T>>(op, a, axes),
    }
}

fn reduce_with<T: NumElement, F: Fold<T>>(
    op: &'static str,
    a: CpuRef<'_, T>,
    axes: &[usize],
) -> Result<Vec<T>> {
    let shape = a.shape().to_vec();
    // The caller has checked the output's size; the input's may only overflow when it is empty.
    let kept_len = shape
        .iter()
        .enumerate()
        .filter(|(d, _)| !axes.contains(d))
        .map(|(_, &l)| l)
        .product::<usize>();
    if shape.contains(&0) {
        // An empty input: every output element is the identity (only sums reach here; an
        // empty max or min is refused by the caller).
        let mut out = super::pool::alloc(op, kept_len)?;
        out.resize(kept_len, F::identity());
        return Ok(out);
    }
    let src = a.to_cow(op)?;
    // Merge neighbouring axes of one kind; drop axes of length 1.
    let mut dims: Vec<(usize, bool)> = Vec::new();
    for (d, &len) in shape.iter().enumerate() {
        let reduced = axes.contains(&d);
        if len == 1 {
            continue;
        }
        match dims.last_mut() {
            Some((l, r)) if *r == reduced => *l *= len,
            _ => dims.push((len, reduced)),
        }
    }
    // Reduce the runs from the innermost out, each over `[outer, len, inner]`.
    let mut cur: std::borrow::Cow<'_, [T]> = src;
    while let Some(i) = dims.iter().rposition(|&(_, r)| r) {
        let len = dims[i].0;
        let inner: usize = dims[i + 1..].iter().map(|&(l, _)| l).product();
        let outer: usize = dims[..i].iter().map(|&(l, _)| l).product();
        cur = std::borrow::Cow::Owned(reduce_middle::<T, F>(op, &cur, outer, len, inner)?);
        dims.remove(i);
        // The run's neighbours are now adjacent and both kept: merge them.
        if i > 0 && i < dims.len() {
            let right = dims.remove(i);
            dims[i - 1].0 *= right.0;
        }
    }
    Ok(cur.into_owned())
}

/// `s`, C order `[outer, len, inner]`, reduced over its middle axis into `[outer, inner]`.
fn reduce_middle<T: NumElement, F: Fold<T>>(
    op: &'static str,
    s: &[T],
    outer: usize,
    len: usize,
    inner: usize,
) -> Result<Vec<T>> {
    let mut out: Vec<T> = super::pool::alloc(op, outer * inner)?;
    out.resize(outer * inner, F::identity());
    let big = s.len() >= PAR_MIN;
    if big {
        super::threads::start();
    }
    if inner == 1 {
        if outer == 1 {
            // One long row: blocks across the threads, their results pairwise.
            out[0] = if big {
                let parts: Vec<T> = s
                    .par_chunks(split_len(s.len()))
                    .map(Kernels::<T, F>::fold_slice)
                    .collect();
                Kernels::<T, F>::fold_slice(&parts)
            } else {
                Kernels::<T, F>::fold_slice(s)
            };
        } else if big {
            out.par_iter_mut()
                .zip(s.par_chunks(len))
                .with_min_len(rows_per_task(len))
                .for_each(|(o, row)| *o = Kernels::<T, F>::fold_slice(row));
        } else {
            for (o, row) in out.iter_mut().zip(s.chunks(len)) {
                *o = Kernels::<T, F>::fold_slice(row);
            }
        }
        return Ok(out);
    }
    let plane = len * inner;
    if big && outer < 2 * super::threads::count() {
        // Few output rows: each is split across the threads, by columns where the rows are wide
        // (every thread folds all rows of its columns) and by rows where they are not (partial
        // rows, combined at the end).
        for (o, p) in out.chunks_mut(inner).zip(s.chunks(plane)) {
            if inner >= 4 * 1024 {
                let cols = inner.div_ceil(super::threads::count() * 4).max(LANES);
                o.par_chunks_mut(cols).enumerate().for_each(|(j, oc)| {
                    let w = oc.len();
                    Kernels::<T, F>::fold_rows(&p[j * cols..], len, inner, w, oc)
                });
            } else {
                let parts_n = super::threads::count() * 4;
                let rows_per = len.div_ceil(parts_n).max(1);
                let parts: Vec<Vec<T>> = p
                    .par_chunks(rows_per * inner)
                    .map(|part| {
                        let mut acc = vec![F::identity(); inner];
                        Kernels::<T, F>::fold_rows(
                            part,
                            part.len() / inner,
                            inner,
                            inner,
                            &mut acc,
                        );
                        acc
                    })
                    .collect();
                o.copy_from_slice(&parts[0]);
                for part in &parts[1..] {
                    combine_rows::<T, F>(o, part);
                }
            }
        }
        return Ok(out);
    }
    if big {
        out.par_chunks_mut(inner)
            .zip(s.par_chunks(plane))
            .for_each(|(o, p)| Kernels::<T, F>::fold_rows(p, len, inner, inner, o));
    } else {
        for (o, p) in out.chunks_mut(inner).zip(s.chunks(plane)) {
            Kernels::<T, F>::fold_rows(p, len, inner, inner, o);
        }
    }
    Ok(out)
}

/// Elements per thread's part of one long reduction: the input split in about four parts per
/// thread, each a whole number of blocks.
fn split_len(n: usize) -> usize {
    let parts = super::threads::count().max(1) * 4;
    n.div_ceil(parts).div_ceil(BLOCK).max(1) * BLOCK
}

/// Rows per rayon task for rows of `len` elements: enough for about 16K elements a task.
fn rows_per_task(len: usize) -> usize {
    (16 * 1024 / len.max(1)).max(1)
}

/// The elements of an owned ndarray array in C order, without a copy when already so.
pub(crate) fn into_c_vec<T: Clone>(a: ndarray::ArrayD<T>) -> Vec<T> {
    if a.is_standard_layout() {
        // The buffer may be longer than the array (an owned array sliced in place).
        let len = a.len();
        let (mut v, offset) = a.into_raw_vec_and_offset();
        let offset = offset.unwrap_or(0);
        if offset == 0 {
            v.truncate(len);
            return v;
        }
        return v[offset..offset + len].to_vec();
    }
    a.iter().cloned().collect()
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::layout::Layout;

    /// A float64 reference: the sum (or max) of `x` (C order of `shape`) over `axes`, and the
    /// sum of the magnitudes of each output's elements.
    fn reference(x: &[f64], shape: &[usize], axes: &[usize], max: bool) -> (Vec<f64>, Vec<f64>) {
        let kept: Vec<usize> = (0..shape.len()).filter(|d| !axes.contains(d)).collect();
        let n_out: usize = kept.iter().map(|&d| shape[d]).product();
        let init = if max { f64::NEG_INFINITY } else { 0.0 };
        let (mut out, mut mag) = (vec![init; n_out], vec![0.0; n_out]);
        for (flat, &v) in x.iter().enumerate() {
            let (mut rest, mut o) = (flat, 0);
            let mut idx = vec![0; shape.len()];
            for d in (0..shape.len()).rev() {
                idx[d] = rest % shape[d];
                rest /= shape[d];
            }
            for &d in &kept {
                o = o * shape[d] + idx[d];
            }
            out[o] = if max { out[o].max(v) } else { out[o] + v };
            mag[o] += v.abs();
        }
        (out, mag)
    }

    fn values(n: usize, seed: u64) -> Vec<f32> {
        let mut rng = crate::random::Rng::seed(seed);
        (0..n)
            .map(|_| (rng.next_f64() * 2.0 - 1.0) as f32)
            .collect()
    }

    #[test]
    fn float32_sums_are_within_the_stated_bound_of_float64_sums() {
        let cases: &[(&[usize], &[usize])] = &[
            (&[1 << 20], &[0]),
            (&[1000, 1000], &[0]),
            (&[1000, 1000], &[1]),
            (&[1000, 1000], &[0, 1]),
            (&[3, 70_000], &[0]),
            (&[70_000, 3], &[1]),
            (&[2, 40_000], &[0]),
            (&[5, 300, 7], &[1]),
            (&[5, 300, 7], &[0, 2]),
            (&[4, 1, 9, 1, 6], &[0, 2]),
            (&[17], &[0]),
        ];
        for &(shape, axes) in cases {
            let n: usize = shape.iter().product();
            let x = values(n, n as u64);
            let layout = Layout::contiguous(shape);
            let a = CpuRef {
                data: &x,
                layout: &layout,
            };
            let got = reduce("sum", a, axes, Reduction::Sum).unwrap();
            let x64: Vec<f64> = x.iter().map(|&v| f64::from(v)).collect();
            let (want, mag) = reference(&x64, shape, axes, false);
            let len = n / want.len();
            let k = 32.0 + (len as f64).log2().ceil();
            for i in 0..want.len() {
                let bound = k * f64::from(f32::EPSILON) / 2.0 * mag[i];
                let err = (f64::from(got[i]) - want[i]).abs();
                assert!(
                    err <= bound,
                    "{shape:?} over {axes:?}, output {i}: error {err:e} > {bound:e}"
                );
            }
        }
    }

    #[test]
    fn max_and_min_find_the_extreme_and_propagate_nan() {
        let mut x = values(100_003, 3);
        x[77_777] = 5.0;
        x[3] = -5.0;
        let layout = Layout::contiguous(&[x.len()]);
        let a = CpuRef {
            data: &x,
            layout: &layout,
        };
        assert_eq!(reduce("max", a, &[0], Reduction::Max).unwrap(), vec![5.0]);
        assert_eq!(reduce("min", a, &[0], Reduction::Min).unwrap(), vec![-5.0]);
        x[50_000] = f32::NAN;
        let a = CpuRef {
            data: &x,
            layout: &layout,
        };
        assert!(reduce("max", a, &[0], Reduction::Max).unwrap()[0].is_nan());
        assert!(reduce("min", a, &[0], Reduction::Min).unwrap()[0].is_nan());
        // Across rows, per column.
        let layout = Layout::contiguous(&[100_003 / 7, 7]);
        let rows: Vec<f32> = x[..100_003 / 7 * 7].to_vec();
        let a = CpuRef {
            data: &rows,
            layout: &layout,
        };
        let got = reduce("max", a, &[0], Reduction::Max).unwrap();
        let x64: Vec<f64> = rows.iter().map(|&v| f64::from(v)).collect();
        let (want, _) = reference(&x64, layout.shape(), &[0], true);
        for (g, w) in got.iter().zip(&want) {
            // f64::max ignores NaN; the reduction does not: compare where the column has none.
            assert!(g.is_nan() || f64::from(*g) == *w, "{g} vs {w}");
        }
        assert_eq!(got.iter().filter(|g| g.is_nan()).count(), 1);
    }

    #[test]
    fn integer_sums_wrap_and_strided_inputs_are_gathered() {
        let x: Vec<i32> = vec![i32::MAX, 1, 2, 3];
        let layout = Layout::contiguous(&[4]);
        let a = CpuRef {
            data: &x,
            layout: &layout,
        };
        assert_eq!(
            reduce("sum", a, &[0], Reduction::Sum).unwrap(),
            vec![i32::MAX.wrapping_add(6)]
        );
        // The transpose of [[0, 1, 2], [3, 4, 5]]: rows summed are its columns.
        let x: Vec<i64> = (0..6).collect();
        let t = Layout::contiguous(&[2, 3]).permuted(&[1, 0]);
        let a = CpuRef {
            data: &x,
            layout: &t,
        };
        assert_eq!(
            reduce("sum", a, &[1], Reduction::Sum).unwrap(),
            vec![3, 5, 7]
        );
        assert_eq!(reduce("sum", a, &[0], Reduction::Sum).unwrap(), vec![3, 12]);
    }
}
