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

/// Element count from which elementwise work and reductions are split across threads. Below it
/// one thread is faster: waking rayon's threads costs tens of microseconds on this kind of
/// machine (measured: an f32 add of 64K elements took 45 µs on two threads, 12 µs on one).
pub(crate) const PAR_MIN: usize = 1 << 18;
/// Elements per parallel task on the contiguous path.
const CHUNK: usize = 1 << 14;

/// Fills `n` fresh elements with `fill(start, chunk)` over disjoint chunks, in parallel when large.
fn collect_chunks<O: Element>(
    op: &'static str,
    n: usize,
    fill: impl Fn(usize, &mut [MaybeUninit<O>]) + Sync + Send,
) -> Result<Vec<O>> {
    let mut out: Vec<O> = super::pool::alloc(op, n)?;
    let spare = &mut out.spare_capacity_mut()[..n];
    if n >= PAR_MIN {
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
    if let Some(a) = a.contiguous() {
        return collect_chunks(op, a.len(), |start, out| {
            let end = start + out.len();
            for (o, &x) in out.iter_mut().zip(&a[start..end]) {
                o.write(f(x));
            }
        });
    }
    let av = a.view();
    collect_zip(op, a.shape(), |out| {
        let z = Zip::from(out).and(&av);
        if av.len() >= PAR_MIN {
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
/// many. A strided `a` is gathered into C order first. For functions that are vectorized over
/// slices ([`super::math`]).
pub(crate) fn map_slices<A: Element, O: Element>(
    op: &'static str,
    a: CpuRef<'_, A>,
    f: impl Fn(&[A], &mut [MaybeUninit<O>]) + Sync + Send,
) -> Result<Vec<O>> {
    let src = a.to_cow(op)?;
    collect_chunks(op, src.len(), |start, out| {
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
        return collect_chunks(op, a.len(), |start, out| {
            let end = start + out.len();
            for ((o, &x), &y) in out.iter_mut().zip(&a[start..end]).zip(&b[start..end]) {
                o.write(f(x, y));
            }
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
        return collect_chunks(op, whole.len(), |start, out| {
            for (o, &x) in out.iter_mut().zip(&whole[start..]) {
                o.write(f(x, y));
            }
        });
    }
    collect_chunks(op, whole.len(), |start, out| {
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
    })
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
        return collect_chunks(op, a.len(), |start, out| {
            let end = start + out.len();
            let abc = a[start..end].iter().zip(&b[start..end]).zip(&c[start..end]);
            for (o, ((&x, &y), &z)) in out.iter_mut().zip(abc) {
                o.write(f(x, y, z));
            }
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
