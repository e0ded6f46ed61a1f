//! Matrix products on the host (matrixmultiply's kernels through ndarray for f32 and f64).

use ndarray::linalg::general_mat_mul;
use ndarray::{ArrayView2, ArrayViewD, ArrayViewMut2, Axis, Ix2, IxDyn, LinalgScalar};

use super::CpuRef;
use super::pool::Result;
use crate::dtype::Element;

/// `a @ b` for operands already shaped `batch + [n, k]` and `batch + [k, m]` (broadcast batch
/// dims checked by the caller). Returns the C-order buffer of `batch + [n, m]`.
pub(crate) fn matmul<T: Element + LinalgScalar>(
    op: &'static str,
    a: CpuRef<'_, T>,
    b: CpuRef<'_, T>,
    batch: &[usize],
    (n, k, m): (usize, usize, usize),
) -> Result<Vec<T>> {
    let mut a_dims = batch.to_vec();
    a_dims.extend([n, k]);
    let mut b_dims = batch.to_vec();
    b_dims.extend([k, m]);
    let av = a.view();
    let bv = b.view();
    let av = av
        .broadcast(IxDyn(&a_dims))
        .expect("caller checked batch broadcast");
    let bv = bv
        .broadcast(IxDyn(&b_dims))
        .expect("caller checked batch broadcast");
    let count: usize = batch.iter().product();
    let len = count * n * m;
    let mut out: Vec<T> = super::pool::alloc(op, len)?;
    out.resize(len, T::zero());
    if n * m == 0 {
        return Ok(out);
    }
    for (i, chunk) in out.chunks_mut(n * m).enumerate() {
        let a2 = matrix_at(&av, batch, i);
        let b2 = matrix_at(&bv, batch, i);
        let mut c2 = ArrayViewMut2::from_shape((n, m), chunk).expect("chunk holds n*m elements");
        general_mat_mul(T::one(), &a2, &b2, T::zero(), &mut c2);
    }
    Ok(out)
}

/// The 2-D matrix at flat batch index `i` of a `batch + [r, c]` view.
fn matrix_at<'a, T>(v: &ArrayViewD<'a, T>, batch: &[usize], mut i: usize) -> ArrayView2<'a, T> {
    let mut idx = vec![0; batch.len()];
    for (slot, &d) in idx.iter_mut().zip(batch).rev() {
        *slot = i % d;
        i /= d;
    }
    let mut m = v.clone();
    for &j in &idx {
        m = m.index_axis_move(Axis(0), j);
    }
    m.into_dimensionality::<Ix2>().expect("two trailing axes")
}
