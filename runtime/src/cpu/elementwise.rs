//! The elementwise engine: one pass over up to three operands into a new C-contiguous buffer.
//!
//! Contiguous operands of the output's shape take a flat loop over slices, which the compiler
//! vectorises; anything else (broadcast, transposed, negative strides) goes through ndarray's
//! `Zip` over views, with no copy of the inputs. Above [`PAR_MIN`] elements both paths split the
//! work across rayon's threads.

use std::mem::MaybeUninit;

use ndarray::{ArrayViewMutD, IxDyn, Zip};
use rayon::prelude::*;

use super::CpuRef;
use super::pool::Result;
use crate::dtype::Element;
use crate::op::MathFn;

/// Element count from which elementwise work and reductions are split across threads. Below it
/// one thread is faster: waking rayon's threads costs tens of microseconds on this kind of
/// machine (measured: an f32 add of 64K elements took 45 µs on two threads, 12 µs on one).
pub(crate) const PAR_MIN: usize = 1 << 18;
/// Elements per parallel task on the contiguous path.
const CHUNK: usize = 1 << 14;

/// The element count from which `f` over a slice of `T` is split across threads: where one
/// thread's work passes about 60 µs, twice what waking the others costs. From the time an
/// element takes on one core (AVX2 and FMA, the 4K rows of the ops bench, in ns): float32 exp
/// 1.0, ln 1.1, expm1 1.5, ln1p 1.6, sigmoid 1.7, tanh 2.0, erf 5.9, sqrt 0.27; float64 about
/// 2.3, 3.3, 3.7, 3.5, 3.9, 5.2, 23 and 0.76. Never above [`PAR_MIN`], where memory-bound
/// work splits. (Here, not in `math`: when to split is this engine's policy.)
pub(crate) fn math_par_min<T>(f: MathFn) -> usize {
    let wide = std::mem::size_of::<T>() > 4;
    let ns_per_element = match (f, wide) {
        (MathFn::Sqrt, _) => return PAR_MIN,
        (MathFn::Exp | MathFn::Ln, false) => 1.0,
        (MathFn::ExpM1 | MathFn::Ln1p | MathFn::Sigmoid, false) => 1.5,
        (MathFn::Tanh, false) => 2.0,
        (MathFn::Exp, true) => 2.3,
        (MathFn::Ln | MathFn::ExpM1 | MathFn::Ln1p | MathFn::Sigmoid, true) => 3.3,
        (MathFn::Tanh, true) => 5.0,
        (MathFn::Erf, false) => 6.0,
        (MathFn::Erf, true) => 20.0,
    };
    elements_for(ns_per_element)
}

/// The element count whose work, at `ns_per_element` on one core, is worth splitting across
/// threads (about 60 µs; see [`math_par_min`]), at most [`PAR_MIN`].
pub(crate) fn elements_for(ns_per_element: f64) -> usize {
    ((60_000.0 / ns_per_element) as usize).clamp(1 << 12, PAR_MIN)
}

/// Runs `body` compiled for AVX2 and FMA where this CPU has them, so that the loop inlined into
/// it is vectorized 256 bits wide (twice the x86-64 baseline's SSE2), and as it is elsewhere.
/// The results are the same bits either way: the operations do not change (Rust never contracts
/// `a * b + c` into a fused multiply-add of its own accord).
#[inline(always)]
pub(crate) fn wide<R>(body: impl FnOnce() -> R) -> R {
    #[cfg(target_arch = "x86_64")]
    if super::math::isa() == super::math::Isa::Avx2Fma {
        #[target_feature(enable = "avx2,fma")]
        fn avx2<R>(body: impl FnOnce() -> R) -> R {
            body()
        }
        // SAFETY: this CPU has AVX2 and FMA (`isa`).
        return unsafe { avx2(body) };
    }
    body()
}

/// Fills `n` fresh elements with `fill(start, chunk)` over disjoint chunks, in parallel from
/// `par_min` elements.
fn collect_chunks<O: Element>(
    op: &'static str,
    n: usize,
    par_min: usize,
    fill: impl Fn(usize, &mut [MaybeUninit<O>]) + Sync + Send,
) -> Result<Vec<O>> {
    let mut out: Vec<O> = super::pool::alloc(op, n)?;
    let spare = &mut out.spare_capacity_mut()[..n];
    if n >= par_min {
        super::threads::start();
        spare
            .par_chunks_mut(CHUNK)
            .enumerate()
            .for_each(|(i, chunk)| fill(i * CHUNK, chunk));
    } else {
        fill(0, spare);
    }
    // SAFETY: `fill` wrote every element of `spare[..n]` (each chunk is written in full).
    unsafe { out.set_len(n) };
    Ok(out)
}

/// Runs `body` over a fresh uninitialised C-order view of `shape` and returns its buffer.
fn collect_zip<O: Element>(
    op: &'static str,
    shape: &[usize],
    body: impl FnOnce(ArrayViewMutD<'_, MaybeUninit<O>>),
) -> Result<Vec<O>> {
    let n = shape.iter().product();
    let mut out: Vec<O> = super::pool::alloc(op, n)?;
    let view = ArrayViewMutD::from_shape(IxDyn(shape), &mut out.spare_capacity_mut()[..n])
        .expect("a buffer of the shape's size fits the shape");
    body(view);
    // SAFETY: `body` zips over every element of the view, which covers `out[..n]`, writing each.
    unsafe { out.set_len(n) };
    Ok(out)
}

/// `f` applied to each element of `a`, in C order.
pub(crate) fn map1<A: Element, O: Element>(
    op: &'static str,
    a: CpuRef<'_, A>,
    f: impl Fn(A) -> O + Sync + Send,
) -> Result<Vec<O>> {
    map1_from(op, a, PAR_MIN, f)
}

/// [`map1`] split across threads from `par_min` elements (below [`PAR_MIN`] for an `f` that
/// costs many cycles an element).
pub(crate) fn map1_from<A: Element, O: Element>(
    op: &'static str,
    a: CpuRef<'_, A>,
    par_min: usize,
    f: impl Fn(A) -> O + Sync + Send,
) -> Result<Vec<O>> {
    if let Some(a) = a.contiguous() {
        return collect_chunks(op, a.len(), par_min, |start, out| {
            let end = start + out.len();
            wide(|| {
                for (o, &x) in out.iter_mut().zip(&a[start..end]) {
                    o.write(f(x));
                }
            })
        });
    }
    let av = a.view();
    collect_zip(op, a.shape(), |out| {
        let z = Zip::from(out).and(&av);
        if av.len() >= par_min {
            z.par_for_each(|o, &x| {
                o.write(f(x));
            });
        } else {
            z.for_each(|o, &x| {
                o.write(f(x));
            });
        }
    })
}

/// `a`'s elements in C order through `f`, a slice at a time: `f(src, dst)` writes
/// `dst[i]` from `src[i]` (one length), for chunks of the elements, in parallel when there are
/// `par_min` or more. A strided `a` is gathered into C order first. For functions that are
/// vectorized over slices ([`super::math`]).
pub(crate) fn map_slices<A: Element, O: Element>(
    op: &'static str,
    a: CpuRef<'_, A>,
    par_min: usize,
    f: impl Fn(&[A], &mut [MaybeUninit<O>]) + Sync + Send,
) -> Result<Vec<O>> {
    let src = a.to_cow(op)?;
    collect_chunks(op, src.len(), par_min, |start, out| {
        f(&src[start..start + out.len()], out)
    })
}

/// `f` applied to `a` and `b` broadcast to `shape` (which the caller has checked), in C order.
pub(crate) fn zip2<A: Element, B: Element, O: Element>(
    op: &'static str,
    a: CpuRef<'_, A>,
    b: CpuRef<'_, B>,
    shape: &[usize],
    f: impl Fn(A, B) -> O + Sync + Send,
) -> Result<Vec<O>> {
    if out_len(shape) == 0 {
        // Nothing to compute; ndarray cannot even describe some empty shapes ([0, 1 << 62, 8]).
        return Ok(Vec::new());
    }
    let same = a.shape() == shape && b.shape() == shape;
    if let (true, Some(a), Some(b)) = (same, a.contiguous(), b.contiguous()) {
        return collect_chunks(op, a.len(), PAR_MIN, |start, out| {
            let end = start + out.len();
            wide(|| {
                for ((o, &x), &y) in out.iter_mut().zip(&a[start..end]).zip(&b[start..end]) {
                    o.write(f(x, y));
                }
            })
        });
    }
    // One operand whole, the other repeated along leading axes (a bias row, a scalar): one
    // pass over contiguous slices instead of ndarray's strided zip.
    if let (Some(ac), Some(bc)) = (a.contiguous(), b.contiguous()) {
        if a.shape() == shape && is_suffix(b.shape(), shape) {
            return repeat_zip(op, ac, bc, &f);
        }
        if b.shape() == shape && is_suffix(a.shape(), shape) {
            return repeat_zip(op, bc, ac, |y, x| f(x, y));
        }
    }
    let dims = IxDyn(shape);
    let (av, bv) = (a.view(), b.view());
    let (av, bv) = (
        av.broadcast(dims.clone())
            .expect("caller checked broadcast"),
        bv.broadcast(dims).expect("caller checked broadcast"),
    );
    collect_zip(op, shape, |out| {
        let z = Zip::from(out).and(&av).and(&bv);
        if out_len(shape) >= PAR_MIN {
            z.par_for_each(|o, &x, &y| {
                o.write(f(x, y));
            });
        } else {
            z.for_each(|o, &x, &y| {
                o.write(f(x, y));
            });
        }
    })
}

/// Whether `small`, leading 1s aside, is a trailing part of `shape`: broadcasting it to `shape`
/// repeats its C-order elements whole.
fn is_suffix(small: &[usize], shape: &[usize]) -> bool {
    let lead = small.iter().take_while(|&&d| d == 1).count();
    let rest = &small[lead..];
    rest.len() <= shape.len() && shape.ends_with(rest)
}

/// `f(whole[i], part[i % part.len()])` for every `i`: `part` broadcast along leading axes.
fn repeat_zip<A: Element, B: Element, O: Element>(
    op: &'static str,
    whole: &[A],
    part: &[B],
    f: impl Fn(A, B) -> O + Sync + Send,
) -> Result<Vec<O>> {
    let period = part.len();
    if period == 1 {
        let y = part[0];
        return collect_chunks(op, whole.len(), PAR_MIN, |start, out| {
            wide(|| {
                for (o, &x) in out.iter_mut().zip(&whole[start..]) {
                    o.write(f(x, y));
                }
            })
        });
    }
    collect_chunks(op, whole.len(), PAR_MIN, |start, out| {
        wide(|| repeat_chunk(whole, part, start, out, &f))
    })
}

/// `out[k] = f(whole[start + k], part[(start + k) % part.len()])` for every `k` of `out`.
#[inline(always)]
fn repeat_chunk<A: Element, B: Element, O: Element>(
    whole: &[A],
    part: &[B],
    start: usize,
    out: &mut [MaybeUninit<O>],
    f: &impl Fn(A, B) -> O,
) {
    let period = part.len();
    let (mut i, mut done) = (start, 0);
    while done < out.len() {
        let j = i % period;
        let take = (period - j).min(out.len() - done);
        let dst = &mut out[done..done + take];
        for ((o, &x), &y) in dst
            .iter_mut()
            .zip(&whole[i..i + take])
            .zip(&part[j..j + take])
        {
            o.write(f(x, y));
        }
        done += take;
        i += take;
    }
}

/// `f` applied to `a`, `b` and `c` broadcast to `shape` (which the caller has checked).
pub(crate) fn zip3<A: Element, B: Element, C: Element, O: Element>(
    op: &'static str,
    a: CpuRef<'_, A>,
    b: CpuRef<'_, B>,
    c: CpuRef<'_, C>,
    shape: &[usize],
    f: impl Fn(A, B, C) -> O + Sync + Send,
) -> Result<Vec<O>> {
    if out_len(shape) == 0 {
        // Nothing to compute; ndarray cannot even describe some empty shapes ([0, 1 << 62, 8]).
        return Ok(Vec::new());
    }
    let same = a.shape() == shape && b.shape() == shape && c.shape() == shape;
    if let (true, Some(a), Some(b), Some(c)) =
        (same, a.contiguous(), b.contiguous(), c.contiguous())
    {
        return collect_chunks(op, a.len(), PAR_MIN, |start, out| {
            let end = start + out.len();
            let abc = a[start..end].iter().zip(&b[start..end]).zip(&c[start..end]);
            wide(|| {
                for (o, ((&x, &y), &z)) in out.iter_mut().zip(abc) {
                    o.write(f(x, y, z));
                }
            })
        });
    }
    let dims = IxDyn(shape);
    let (av, bv, cv) = (a.view(), b.view(), c.view());
    let av = av
        .broadcast(dims.clone())
        .expect("caller checked broadcast");
    let bv = bv
        .broadcast(dims.clone())
        .expect("caller checked broadcast");
    let cv = cv.broadcast(dims).expect("caller checked broadcast");
    collect_zip(op, shape, |out| {
        let z = Zip::from(out).and(&av).and(&bv).and(&cv);
        if out_len(shape) >= PAR_MIN {
            z.par_for_each(|o, &x, &y, &w| {
                o.write(f(x, y, w));
            });
        } else {
            z.for_each(|o, &x, &y, &w| {
                o.write(f(x, y, w));
            });
        }
    })
}

fn out_len(shape: &[usize]) -> usize {
    shape.iter().product()
}

impl<'a, T: Element> CpuRef<'a, T> {
    /// The elements in C order in a new buffer (`OutOfMemory`, not an abort, if it does not
    /// fit).
    pub(crate) fn to_owned_vec(self, op: &'static str) -> Result<Vec<T>> {
        match self.contiguous() {
            Some(s) => {
                let mut v = super::pool::alloc(op, s.len())?;
                v.extend_from_slice(s);
                Ok(v)
            }
            None => map1(op, self, |x| x),
        }
    }

    /// The elements in C order, borrowed when contiguous, copied otherwise.
    pub(crate) fn to_cow(self, op: &'static str) -> Result<std::borrow::Cow<'a, [T]>> {
        Ok(match self.contiguous() {
            Some(s) => std::borrow::Cow::Borrowed(s),
            None => std::borrow::Cow::Owned(map1(op, self, |x| x)?),
        })
    }
}
