//! Sliding windows on the host: `im2col` (every window's elements laid out as columns, the
//! padding value outside the input) and `col2im` (its adjoint: each column element added back
//! to the input position it came from). One `(n, c)` plane at a time, planes across threads.

use std::borrow::Cow;

use rayon::prelude::*;

use super::pool;
use super::{CpuRef, CpuStorage};
use crate::dtype::{NumElement, with_float_dtype};
use crate::error::Result;
use crate::layout::Layout;
use crate::op::{FLOATING, unsupported};
use crate::window::Window;

/// Below this many output elements the planes run on the calling thread.
const PAR_MIN_ELEMENTS: usize = 1 << 15;

/// The geometry of one spatial axis: input size, output size, stride, and the input offset of
/// kernel element `k` (`k * dilate - pad`).
#[derive(Clone, Copy)]
struct Axis {
    input: isize,
    output: usize,
    stride: isize,
}

impl Axis {
    /// The output positions `o` whose input position `o * stride + offset` lies inside the
    /// input, as a range.
    fn valid(self, offset: isize) -> std::ops::Range<usize> {
        // o * s + off >= 0  <=>  o >= ceil(-off / s)
        let lo = if offset >= 0 {
            0
        } else {
            (-offset + self.stride - 1) / self.stride
        };
        // o * s + off < in  <=>  o < ceil((in - off) / s)
        let hi = if self.input - offset <= 0 {
            0
        } else {
            (self.input - offset + self.stride - 1) / self.stride
        };
        let lo = (lo as usize).min(self.output);
        let hi = (hi as usize).min(self.output);
        lo..hi.max(lo)
    }
}

/// Each kernel element `(k0, k1, k2)` with the input offsets it reads at output position 0.
fn kernel_offsets(w: &Window) -> (Vec<[isize; 3]>, [Axis; 3]) {
    let [input, output, ksize, stride, pad, dilate] = w.as_3d();
    let axes = [0, 1, 2].map(|a| Axis {
        input: input[a] as isize,
        output: output[a],
        stride: stride[a] as isize,
    });
    let mut offsets = Vec::with_capacity(w.kernel_size());
    for k0 in 0..ksize[0] {
        for k1 in 0..ksize[1] {
            for k2 in 0..ksize[2] {
                let off = |a: usize, k: usize| (k * dilate[a]) as isize - pad[a] as isize;
                offsets.push([off(0, k0), off(1, k1), off(2, k2)]);
            }
        }
    }
    (offsets, axes)
}

/// Runs `f(plane, out_chunk)` for every `chunk`-long piece of `out`, across threads when `out`
/// is large.
fn planes<T: Send>(out: &mut [T], chunk: usize, f: impl Fn(usize, &mut [T]) + Sync) {
    if chunk == 0 {
        return;
    }
    if out.len() >= PAR_MIN_ELEMENTS && out.len() / chunk > 1 {
        super::threads::start();
        out.par_chunks_mut(chunk)
            .enumerate()
            .for_each(|(p, o)| f(p, o));
    } else {
        out.chunks_mut(chunk).enumerate().for_each(|(p, o)| f(p, o));
    }
}

/// `x` (`planes` planes of the window's input size, C order) as columns:
/// `[planes, kernel elements, output positions]`, `pad` where a window leaves the input.
pub(crate) fn im2col_slice<T: NumElement>(x: &[T], w: &Window, pad: T, out: &mut [T]) {
    let (offsets, [a0, a1, a2]) = kernel_offsets(w);
    let (in_plane, l) = (w.input_size(), w.output_size());
    let (in1, in2) = (a1.input as usize, a2.input as usize);
    planes(out, offsets.len() * l, |p, cols| {
        let src = &x[p * in_plane..(p + 1) * in_plane];
        for (off, dst) in offsets.iter().zip(cols.chunks_mut(l.max(1))) {
            dst.fill(pad);
            let (r0, r1, r2) = (a0.valid(off[0]), a1.valid(off[1]), a2.valid(off[2]));
            for o0 in r0 {
                let i0 = (o0 as isize * a0.stride + off[0]) as usize;
                for o1 in r1.clone() {
                    let i1 = (o1 as isize * a1.stride + off[1]) as usize;
                    let row = &src[(i0 * in1 + i1) * in2..];
                    let d = &mut dst[(o0 * a1.output + o1) * a2.output..];
                    let first = r2.start as isize * a2.stride + off[2];
                    if a2.stride == 1 {
                        let n = r2.len();
                        d[r2.start..r2.start + n]
                            .copy_from_slice(&row[first as usize..first as usize + n]);
                    } else {
                        for (j, o2) in r2.clone().enumerate() {
                            d[o2] = row[(first + j as isize * a2.stride) as usize];
                        }
                    }
                }
            }
        }
    });
}

/// The adjoint of [`im2col_slice`]: `cols` (`[planes, kernel elements, output positions]`)
/// summed into planes of the window's input size.
pub(crate) fn col2im_slice<T: NumElement>(cols: &[T], w: &Window, out: &mut [T]) {
    let (offsets, [a0, a1, a2]) = kernel_offsets(w);
    let (in_plane, l) = (w.input_size(), w.output_size());
    let (in1, in2) = (a1.input as usize, a2.input as usize);
    let kl = offsets.len() * l;
    planes(out, in_plane, |p, dst| {
        dst.fill(<T as num_traits::Zero>::zero());
        let src = &cols[p * kl..(p + 1) * kl];
        for (off, col) in offsets.iter().zip(src.chunks(l.max(1))) {
            let (r0, r1, r2) = (a0.valid(off[0]), a1.valid(off[1]), a2.valid(off[2]));
            for o0 in r0 {
                let i0 = (o0 as isize * a0.stride + off[0]) as usize;
                for o1 in r1.clone() {
                    let i1 = (o1 as isize * a1.stride + off[1]) as usize;
                    let row = &mut dst[(i0 * in1 + i1) * in2..];
                    let c = &col[(o0 * a1.output + o1) * a2.output..];
                    let first = r2.start as isize * a2.stride + off[2];
                    if a2.stride == 1 {
                        let (n, f) = (r2.len(), first as usize);
                        for (r, &v) in row[f..f + n].iter_mut().zip(&c[r2.start..r2.start + n]) {
                            *r = r.plus(v);
                        }
                    } else {
                        for (j, o2) in r2.clone().enumerate() {
                            let i2 = (first + j as isize * a2.stride) as usize;
                            row[i2] = row[i2].plus(c[o2]);
                        }
                    }
                }
            }
        }
    });
}

/// A buffer's elements in C order: the buffer itself when it is, else a copy (by the
/// elementwise engine, threads and all: a broadcast gradient is the common case).
pub(crate) fn c_order<'a, T: crate::Element>(
    op: &'static str,
    r: CpuRef<'a, T>,
) -> Result<Cow<'a, [T]>> {
    Ok(match r.contiguous() {
        Some(s) => Cow::Borrowed(s),
        None => Cow::Owned(super::map1(op, r, |x| x)?),
    })
}

impl CpuStorage {
    /// `l`'s elements (`planes` planes of the window's input, any layout) as columns
    /// `[planes, kernel elements, output positions]` in C order.
    pub(crate) fn im2col(
        &self,
        op: &'static str,
        l: &Layout,
        w: &Window,
        pad: f64,
    ) -> Result<Self> {
        let planes = l.size() / w.input_size().max(1);
        with_float_dtype!(self.dtype(), T => {
            let x = c_order(op, self.typed::<T>(op, l)?)?;
            let n = planes * w.kernel_size() * w.output_size();
            let mut out = pool::alloc::<T>(op, n)?;
            out.resize(n, <T as num_traits::Zero>::zero());
            im2col_slice(&x, w, <T as crate::Element>::from_f64(pad), &mut out);
            Ok(Self::from_vec(out))
        }, other => Err(unsupported(op, self.dtype(), l.shape(), FLOATING)))
    }

    /// The adjoint of [`CpuStorage::im2col`]: columns (`l`, `[planes, kernel elements, output
    /// positions]`) summed into `planes` planes of the window's input, C order.
    pub(crate) fn col2im(&self, op: &'static str, l: &Layout, w: &Window) -> Result<Self> {
        let planes = l.size() / (w.kernel_size() * w.output_size()).max(1);
        with_float_dtype!(self.dtype(), T => {
            let cols = c_order(op, self.typed::<T>(op, l)?)?;
            let n = planes * w.input_size();
            let mut out = pool::alloc::<T>(op, n)?;
            out.resize(n, <T as num_traits::Zero>::zero());
            col2im_slice(&cols, w, &mut out);
            Ok(Self::from_vec(out))
        }, other => Err(unsupported(op, self.dtype(), l.shape(), FLOATING)))
    }
}
