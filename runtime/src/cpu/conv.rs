//! Convolution on the host, one sample at a time: each sample's windows are laid out in a
//! buffer of the thread's (`im2col`, a few MiB that stay in cache instead of the whole batch's
//! columns) and multiplied with the weight by the `gemm` crate, samples across threads. The
//! three products of a convolution layer: the forward, the gradient of the input (a transposed
//! convolution: the columns' gradient, then `col2im`) and the gradient of the weight (summed
//! over the samples, a sum per thread).

use rayon::prelude::*;

use super::window::{c_order, col2im_slice, im2col_slice};
use super::{CpuStorage, pool};
use crate::dtype::NumElement;
use crate::error::Result;
use crate::layout::Layout;
use crate::window::{ConvDims, ConvPass, Window};

/// A matrix: its elements and its row and column strides.
type Mat<'a, T> = (&'a [T], isize, isize);

/// `dst (m × n, row-major) = [dst +] lhs (m × k) · rhs (k × n)`.
fn gemm_into<T: NumElement>(
    dst: &mut [T],
    (m, n, k): (usize, usize, usize),
    (lhs, lrs, lcs): Mat<'_, T>,
    (rhs, rrs, rcs): Mat<'_, T>,
    accumulate: bool,
    threads: gemm::Parallelism,
) {
    debug_assert!(dst.len() >= m * n);
    if m * n == 0 {
        return;
    }
    if k == 0 {
        if !accumulate {
            dst[..m * n].fill(T::zero());
        }
        return;
    }
    // SAFETY: `dst` holds m × n elements with row stride n; `lhs` and `rhs` reach their
    // last elements (m - 1, k - 1) and (k - 1, n - 1) through the given strides, which the
    // callers derive from buffers of exactly those shapes.
    unsafe {
        gemm::gemm(
            m,
            n,
            k,
            dst.as_mut_ptr(),
            1,
            n as isize,
            accumulate,
            lhs.as_ptr(),
            lcs,
            lrs,
            rhs.as_ptr(),
            rcs,
            rrs,
            T::one(),
            T::one(),
            false,
            false,
            false,
            threads,
        );
    }
}

/// Inside each sample's task the product runs on one thread when there are enough samples to
/// keep every thread busy, else across threads.
fn inner_threads(samples: usize) -> gemm::Parallelism {
    match samples >= super::threads::count() {
        true => gemm::Parallelism::None,
        false => gemm::Parallelism::Rayon(0),
    }
}

/// `y (N, OC, L_out) = W (OC, Cg · K) · im2col(x) (per sample and group)`.
fn forward<T: NumElement>(x: &[T], w: &[T], win: &Window, d: ConvDims, out: &mut [T]) {
    let threads = inner_threads(d.n);
    let (x_sample, y_sample) = (d.groups * d.cg * d.l_in, d.groups * d.ocg * d.l_out);
    let col_len = d.cg * d.k * d.l_out;
    out.par_chunks_mut(y_sample.max(1))
        .enumerate()
        .for_each_init(Vec::new, |cols: &mut Vec<T>, (s, y)| {
            cols.resize(col_len, T::zero());
            for g in 0..d.groups {
                let xs = &x[s * x_sample + g * d.cg * d.l_in..][..d.cg * d.l_in];
                im2col_slice(xs, win, T::zero(), cols);
                let wg = &w[g * d.ocg * d.cg * d.k..];
                let ckl = d.cg * d.k;
                gemm_into(
                    &mut y[g * d.ocg * d.l_out..],
                    (d.ocg, d.l_out, ckl),
                    (wg, ckl as isize, 1),
                    (cols, d.l_out as isize, 1),
                    false,
                    threads,
                );
            }
        });
}

/// `gx (N, C, L_in) = col2im(Wᵀ (Cg · K, OCg) · gy (OCg, L_out))`, per sample and group.
fn backward_data<T: NumElement>(gy: &[T], w: &[T], win: &Window, d: ConvDims, out: &mut [T]) {
    let threads = inner_threads(d.n);
    let (x_sample, y_sample) = (d.groups * d.cg * d.l_in, d.groups * d.ocg * d.l_out);
    let ckl = d.cg * d.k;
    out.par_chunks_mut(x_sample.max(1))
        .enumerate()
        .for_each_init(Vec::new, |cols: &mut Vec<T>, (s, gx)| {
            cols.resize(ckl * d.l_out, T::zero());
            for g in 0..d.groups {
                let wg = &w[g * d.ocg * ckl..];
                let gyg = &gy[s * y_sample + g * d.ocg * d.l_out..];
                gemm_into(
                    cols,
                    (ckl, d.l_out, d.ocg),
                    (wg, 1, ckl as isize),
                    (gyg, d.l_out as isize, 1),
                    false,
                    threads,
                );
                col2im_slice(cols, win, &mut gx[g * d.cg * d.l_in..][..d.cg * d.l_in]);
            }
        });
}

/// `gW (OC, Cg · K) = Σ_samples gy (OCg, L_out) · im2col(x)ᵀ (L_out, Cg · K)`: each thread
/// sums its samples into a weight-sized buffer, then the buffers are added.
fn backward_filter<T: NumElement>(x: &[T], gy: &[T], win: &Window, d: ConvDims) -> Vec<T> {
    let threads = inner_threads(d.n);
    let (x_sample, y_sample) = (d.groups * d.cg * d.l_in, d.groups * d.ocg * d.l_out);
    let ckl = d.cg * d.k;
    let w_len = d.groups * d.ocg * ckl;
    let zero = T::zero();
    let partial = |range: std::ops::Range<usize>| {
        let mut gw = vec![zero; w_len];
        let mut cols = vec![zero; ckl * d.l_out];
        for s in range {
            for g in 0..d.groups {
                let xs = &x[s * x_sample + g * d.cg * d.l_in..][..d.cg * d.l_in];
                im2col_slice(xs, win, zero, &mut cols);
                let gyg = &gy[s * y_sample + g * d.ocg * d.l_out..];
                gemm_into(
                    &mut gw[g * d.ocg * ckl..],
                    (d.ocg, ckl, d.l_out),
                    (gyg, d.l_out as isize, 1),
                    (&cols, 1, d.l_out as isize),
                    true,
                    threads,
                );
            }
        }
        gw
    };
    let parts = super::threads::count().min(d.n).max(1);
    let chunk = d.n.div_ceil(parts);
    (0..parts)
        .into_par_iter()
        .map(|p| partial(p * chunk..((p + 1) * chunk).min(d.n)))
        .reduce(
            || vec![zero; w_len],
            |mut a, b| {
                a.iter_mut().zip(&b).for_each(|(a, &b)| *a = a.plus(b));
                a
            },
        )
}

impl CpuStorage {
    /// One of a convolution's products of `self` and `rhs` (float32 and float64; `None` for
    /// other dtypes, which the caller composes), C order.
    pub(crate) fn conv(
        &self,
        op: &'static str,
        l: &Layout,
        (rhs, rl): (&CpuStorage, &Layout),
        win: &Window,
        d: ConvDims,
        pass: ConvPass,
    ) -> Result<Option<Self>> {
        macro_rules! run {
            ($T:ty) => {{
                let a = c_order(op, self.typed::<$T>(op, l)?)?;
                let b = c_order(op, rhs.typed::<$T>(op, rl)?)?;
                let out = match pass {
                    ConvPass::Forward => {
                        let n = d.n * d.groups * d.ocg * d.l_out;
                        let mut out = pool::alloc::<$T>(op, n)?;
                        out.resize(n, 0.0);
                        forward(&a, &b, win, d, &mut out);
                        out
                    }
                    ConvPass::BackwardData => {
                        let n = d.n * d.groups * d.cg * d.l_in;
                        let mut out = pool::alloc::<$T>(op, n)?;
                        out.resize(n, 0.0);
                        backward_data(&a, &b, win, d, &mut out);
                        out
                    }
                    ConvPass::BackwardFilter => backward_filter(&a, &b, win, d),
                };
                Ok(Some(Self::from_vec(out)))
            }};
        }
        match self.dtype() {
            crate::DType::F32 => run!(f32),
            crate::DType::F64 => run!(f64),
            _ => Ok(None),
        }
    }
}
