//! Softmax, log-softmax and the softmax cross-entropy along the last axis, one row at a time:
//! the row's maximum, its exponentials (vectorized, [`super::math`]) and their sum, then the
//! result, in three passes over a row that stays in cache, instead of the six array operations
//! (each a pass over the whole array and a new buffer) they are made of. Rows are split across
//! threads when there are many elements.

use std::mem::MaybeUninit;

use rayon::prelude::*;

use super::elementwise::elements_for;
use super::math::{apply_f32, apply_f64};
use crate::op::{MathFn, SoftmaxForm as Form};

/// The float types these kernels run on, with their vectorized `exp` and `ln`.
pub(crate) trait SoftmaxFloat: Copy + Send + Sync + PartialOrd + 'static {
    const ZERO: Self;
    const NEG_INFINITY: Self;
    fn exp_slice(src: &[Self], dst: &mut [MaybeUninit<Self>]);
    fn ln(self) -> Self;
    fn add(self, o: Self) -> Self;
    fn sub(self, o: Self) -> Self;
    fn mul(self, o: Self) -> Self;
    fn recip(self) -> Self;
    fn is_nan(self) -> bool;
}

macro_rules! softmax_float {
    ($t:ty, $apply:ident) => {
        impl SoftmaxFloat for $t {
            const ZERO: Self = 0.0;
            const NEG_INFINITY: Self = <$t>::NEG_INFINITY;
            #[inline(always)]
            fn exp_slice(src: &[Self], dst: &mut [MaybeUninit<Self>]) {
                $apply(MathFn::Exp, src, dst)
            }
            #[inline(always)]
            fn ln(self) -> Self {
                let mut out = [MaybeUninit::uninit()];
                $apply(MathFn::Ln, &[self], &mut out);
                // SAFETY: written by `apply`.
                unsafe { out[0].assume_init() }
            }
            #[inline(always)]
            fn add(self, o: Self) -> Self {
                self + o
            }
            #[inline(always)]
            fn sub(self, o: Self) -> Self {
                self - o
            }
            #[inline(always)]
            fn mul(self, o: Self) -> Self {
                self * o
            }
            #[inline(always)]
            fn recip(self) -> Self {
                1.0 / self
            }
            #[inline(always)]
            fn is_nan(self) -> bool {
                <$t>::is_nan(self)
            }
        }
    };
}

softmax_float!(f32, apply_f32);
softmax_float!(f64, apply_f64);

/// The element count from which rows are split across threads, for work of `ns_per_element`
/// in float32 on one core (twice that in float64), measured on the ops bench's 4K rows.
fn split<T>(ns_per_element: f64) -> usize {
    let wide = if size_of::<T>() > 4 { 2.0 } else { 1.0 };
    elements_for(ns_per_element * wide)
}

/// The largest element of `row` (NaN if any is NaN), with 16 accumulators so that the loop
/// vectorizes.
#[inline]
fn row_max<T: SoftmaxFloat>(row: &[T]) -> T {
    let mut acc = [T::NEG_INFINITY; 16];
    let mut chunks = row.chunks_exact(16);
    for c in &mut chunks {
        for (a, &x) in acc.iter_mut().zip(c) {
            *a = max_nan(*a, x);
        }
    }
    for (a, &x) in acc.iter_mut().zip(chunks.remainder()) {
        *a = max_nan(*a, x);
    }
    acc.iter().fold(T::NEG_INFINITY, |m, &x| max_nan(m, x))
}

/// The larger of `acc` and `x`, NaN if either is: one `max` and one blend on x86.
#[inline(always)]
fn max_nan<T: SoftmaxFloat>(acc: T, x: T) -> T {
    let m = if x > acc { x } else { acc };
    if x.is_nan() { x } else { m }
}

/// Σ `row`, in 16 accumulators (pairwise at the end).
#[inline]
fn row_sum<T: SoftmaxFloat>(row: &[T]) -> T {
    let mut acc = [T::ZERO; 16];
    let mut chunks = row.chunks_exact(16);
    for c in &mut chunks {
        for (a, &x) in acc.iter_mut().zip(c) {
            *a = a.add(x);
        }
    }
    for (a, &x) in acc.iter_mut().zip(chunks.remainder()) {
        *a = a.add(x);
    }
    let mut width = 16;
    while width > 1 {
        width /= 2;
        for i in 0..width {
            acc[i] = acc[i].add(acc[i + width]);
        }
    }
    acc[0]
}

/// Writes `exp(row - m)` into `out` (one length) and returns its sum.
#[inline]
fn shifted_exp<T: SoftmaxFloat>(row: &[T], m: T, out: &mut [MaybeUninit<T>]) -> T {
    // The shifted row goes through a stack buffer, a chunk at a time, into exp. The buffer is
    // left uninitialised: zeroing its 1024 elements cost more than a short row's work.
    const CHUNK: usize = 1024;
    let mut buf = [const { MaybeUninit::<T>::uninit() }; CHUNK];
    let mut total = T::ZERO;
    for (src, dst) in row.chunks(CHUNK).zip(out.chunks_mut(CHUNK)) {
        let b = &mut buf[..src.len()];
        for (d, &x) in b.iter_mut().zip(src) {
            d.write(x.sub(m));
        }
        // SAFETY: the loop wrote every element of `b`.
        let b = unsafe { &*(b as *const [MaybeUninit<T>] as *const [T]) };
        T::exp_slice(b, dst);
        // SAFETY: `exp_slice` wrote every element of `dst`.
        let written = unsafe { &*(dst as *const [MaybeUninit<T>] as *const [T]) };
        total = total.add(row_sum(written));
    }
    total
}

/// Softmax or log-softmax of each row of `len` elements of `x` (C order), into `out`.
pub(crate) fn rows<T: SoftmaxFloat>(x: &[T], len: usize, form: Form, out: &mut [MaybeUninit<T>]) {
    let one = |row: &[T], o: &mut [MaybeUninit<T>]| {
        let m = row_max(row);
        let s = shifted_exp(row, m, o);
        // SAFETY: `shifted_exp` wrote every element of `o`.
        let o = unsafe { &mut *(o as *mut [MaybeUninit<T>] as *mut [T]) };
        match form {
            Form::Softmax => {
                let r = s.recip();
                for v in o.iter_mut() {
                    *v = v.mul(r);
                }
            }
            Form::LogSoftmax => {
                let shift = m.add(s.ln());
                for (v, &xv) in o.iter_mut().zip(row) {
                    *v = xv.sub(shift);
                }
            }
        }
    };
    if x.len() >= split::<T>(2.0) {
        super::threads::start();
        x.par_chunks(len)
            .zip(out.par_chunks_mut(len))
            .with_min_len((16 * 1024 / len.max(1)).max(1))
            .for_each(|(row, o)| one(row, o));
    } else {
        for (row, o) in x.chunks(len).zip(out.chunks_mut(len)) {
            one(row, o);
        }
    }
}

/// The gradient of the mean cross-entropy: for each row `i` of `len` elements of `x`,
/// `(softmax(x_i) - onehot(labels[i])) * scale` where `labels[i]` is not negative, 0 where it
/// is (`scale` = the output gradient over the count), into `out`: one row at a time, in cache.
pub(crate) fn cross_entropy_grad<T: SoftmaxFloat>(
    x: &[T],
    len: usize,
    labels: &[i64],
    scale: T,
    out: &mut [MaybeUninit<T>],
) {
    let one = |((row, o), &t): ((&[T], &mut [MaybeUninit<T>]), &i64)| {
        if t < 0 {
            for v in o.iter_mut() {
                v.write(T::ZERO);
            }
            return;
        }
        let m = row_max(row);
        let s = shifted_exp(row, m, o);
        // SAFETY: `shifted_exp` wrote every element of `o`.
        let o = unsafe { &mut *(o as *mut [MaybeUninit<T>] as *mut [T]) };
        let r = s.recip().mul(scale);
        for v in o.iter_mut() {
            *v = v.mul(r);
        }
        o[t as usize] = o[t as usize].sub(scale);
    };
    if x.len() >= split::<T>(2.0) {
        super::threads::start();
        x.par_chunks(len)
            .zip(out.par_chunks_mut(len))
            .zip(labels.par_iter())
            .with_min_len((16 * 1024 / len.max(1)).max(1))
            .for_each(one);
    } else {
        x.chunks(len)
            .zip(out.chunks_mut(len))
            .zip(labels)
            .for_each(one);
    }
}

/// For each row `i` of `len` elements of `x` whose label `labels[i]` is not negative,
/// `ln Σ exp(x_i) - x_i[labels[i]]` (the row's cross-entropy against its label); 0 for the
/// others.
pub(crate) fn cross_entropy<T: SoftmaxFloat>(x: &[T], len: usize, labels: &[i64]) -> Vec<T> {
    let one = |(row, &t): (&[T], &i64)| {
        if t < 0 {
            return T::ZERO;
        }
        let m = row_max(row);
        // On the stack, uninitialised: a heap buffer per row cost more than a short row.
        let mut scratch = [const { MaybeUninit::<T>::uninit() }; 1024];
        let mut s = T::ZERO;
        for part in row.chunks(1024) {
            s = s.add(shifted_exp(part, m, &mut scratch[..part.len()]));
        }
        m.add(s.ln()).sub(row[t as usize])
    };
    if x.len() >= split::<T>(1.5) {
        super::threads::start();
        x.par_chunks(len)
            .zip(labels.par_iter())
            .with_min_len((16 * 1024 / len.max(1)).max(1))
            .map(one)
            .collect()
    } else {
        x.chunks(len).zip(labels).map(one).collect()
    }
}

/// The gradient of softmax or log-softmax from its output, row by row: for rows of `len`
/// elements of the output `y` and its gradient `gy` (one length, C order),
/// `y (gy - Σ y gy)` (softmax) or `gy - exp(y) Σ gy` (log-softmax), into `out`: two passes over
/// a row that stays in cache instead of five array operations.
pub(crate) fn grad_rows<T: SoftmaxFloat>(
    y: &[T],
    gy: &[T],
    len: usize,
    form: Form,
    out: &mut [MaybeUninit<T>],
) {
    type Row<'a, T> = ((&'a [T], &'a [T]), &'a mut [MaybeUninit<T>]);
    let one = |((y, g), o): Row<'_, T>| match form {
        Form::Softmax => {
            // Σ y gy with 16 accumulators, then one pass writing y gy - y s.
            let mut acc = [T::ZERO; 16];
            let mut yc = y.chunks_exact(16);
            let mut gc = g.chunks_exact(16);
            for (a, b) in (&mut yc).zip(&mut gc) {
                for ((s, &yv), &gv) in acc.iter_mut().zip(a).zip(b) {
                    *s = s.add(yv.mul(gv));
                }
            }
            for ((s, &yv), &gv) in acc.iter_mut().zip(yc.remainder()).zip(gc.remainder()) {
                *s = s.add(yv.mul(gv));
            }
            let s = row_sum(&acc);
            for ((o, &yv), &gv) in o.iter_mut().zip(y).zip(g) {
                o.write(yv.mul(gv.sub(s)));
            }
        }
        Form::LogSoftmax => {
            let s = row_sum(g);
            T::exp_slice(y, o);
            // SAFETY: `exp_slice` wrote every element of `o`.
            let o = unsafe { &mut *(o as *mut [MaybeUninit<T>] as *mut [T]) };
            for (v, &gv) in o.iter_mut().zip(g) {
                *v = gv.sub(v.mul(s));
            }
        }
    };
    let per_element = match form {
        Form::Softmax => 0.5,
        Form::LogSoftmax => 1.2,
    };
    if y.len() >= split::<T>(per_element) {
        super::threads::start();
        y.par_chunks(len)
            .zip(gy.par_chunks(len))
            .zip(out.par_chunks_mut(len))
            .with_min_len((16 * 1024 / len.max(1)).max(1))
            .for_each(one);
    } else {
        y.chunks(len)
            .zip(gy.chunks(len))
            .zip(out.chunks_mut(len))
            .for_each(one);
    }
}
