//! Reductions (sum, max, min) over a set of axes.

use ndarray::{ArrayD, Axis};
use rayon::prelude::*;

use super::map1;
use super::pool::Result;
use super::{CpuRef, PAR_MIN};
use crate::dtype::NumElement;
use crate::op::Reduction;

/// Reduces `a` over `axes` (sorted, unique; non-empty axes for max/min, which the caller checks).
/// Returns the C-order buffer of the result with the reduced axes removed.
pub(crate) fn reduce<T: NumElement>(
    op: &'static str,
    a: CpuRef<'_, T>,
    axes: &[usize],
    kind: Reduction,
) -> Result<Vec<T>> {
    if axes.len() == a.shape().len()
        && let Some(s) = a.contiguous()
    {
        let fold = |chunk: &[T]| {
            chunk
                .iter()
                .fold(kind.identity(), |acc, &x| kind.combine(acc, x))
        };
        let total = if s.len() >= PAR_MIN {
            let parts: Vec<T> = s.par_chunks(PAR_MIN).map(fold).collect();
            fold(&parts)
        } else {
            fold(s)
        };
        return Ok(vec![total]);
    }
    if a.layout.size() == 0 {
        // An empty input: every output element is the identity (only sums reach here; an
        // empty max or min is refused by the caller). ndarray cannot view some empty shapes.
        let n = (0..a.shape().len())
            .filter(|d| !axes.contains(d))
            .map(|d| a.shape()[d])
            .product();
        let mut out = super::pool::alloc(op, n)?;
        out.resize(n, kind.identity());
        return Ok(out);
    }
    let view = a.view();
    let Some((&last, rest)) = axes.split_last() else {
        return map1(op, a, |x| x);
    };
    // Each fold allocates its result (smaller than the input) inside ndarray: check the
    // largest one can be had before asking, so that a refused allocation is an error.
    let first_len = view.len() / view.len_of(Axis(last)).max(1);
    super::pool::check_host_bytes(op, first_len.saturating_mul(std::mem::size_of::<T>()))?;
    let mut acc: ArrayD<T> =
        view.fold_axis(Axis(last), kind.identity(), |&m, &x| kind.combine(m, x));
    for &axis in rest.iter().rev() {
        acc = acc.fold_axis(Axis(axis), kind.identity(), |&m, &x| kind.combine(m, x));
    }
    Ok(into_c_vec(acc))
}

/// The elements of an owned ndarray array in C order, without a copy when already so.
pub(crate) fn into_c_vec<T: Clone>(a: ArrayD<T>) -> Vec<T> {
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
