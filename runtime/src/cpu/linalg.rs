//! Matrix products on the host: float32 and float64 through the `gemm` crate (candle's engine:
//! packed SIMD kernels for AVX2/AVX-512/NEON chosen at run time, threaded on rayon's pool, any
//! strides, so transposed operands are never copied first); int32 and int64 through ndarray.
//!
//! The engine was chosen by measurement against ndarray's matrixmultiply (single-threaded and
//! threaded) and faer at the bench's shapes (`docs/guide/performance.md`).
//!
//! `gemm` allocates its packing buffers itself, and an allocation it cannot get aborts the
//! process. So before each float product of 64 KiB or more, [`reserve_workspace`] asks the
//! allocator for an upper bound of what `gemm` will take (a packed copy of both operands and one
//! L2-sized slab per thread) and gives it back: under a memory limit, a product whose workspace
//! does not fit is `Err(OutOfMemory)` instead.

use std::any::TypeId;

use ndarray::linalg::general_mat_mul;
use ndarray::{ArrayView2, ArrayViewD, ArrayViewMut2, Axis, Ix2, IxDyn, LinalgScalar};

use super::CpuRef;
use super::pool::Result;
use crate::dtype::Element;

/// Products of at least this many multiply-adds run on every thread of the pool.
const PAR_MIN_FLOPS: usize = 1 << 18;

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
    if n * m == 0 || k == 0 {
        out.resize(len, T::zero());
        return Ok(out);
    }
    if [TypeId::of::<f32>(), TypeId::of::<f64>()].contains(&TypeId::of::<T>()) {
        let parallel = n.saturating_mul(k).saturating_mul(m) >= PAR_MIN_FLOPS;
        reserve_workspace::<T>(op, (n, k, m), parallel)?;
        let parallelism = match parallel {
            true => gemm::Parallelism::Rayon(0),
            false => gemm::Parallelism::None,
        };
        // The products write every element of the spare capacity, which is never zeroed first
        // (`read_dst` is false: `gemm` writes its destination without reading it).
        let spare = &mut out.spare_capacity_mut()[..len];
        for (i, chunk) in spare.chunks_mut(n * m).enumerate() {
            let a2 = matrix_at(&av, batch, i);
            let b2 = matrix_at(&bv, batch, i);
            let (sa, sb) = (a2.strides(), b2.strides());
            // SAFETY: `chunk` holds room for the n×m result in C order (column stride 1, row
            // stride m); `a2` and `b2` are views of n×k and k×m elements at their pointers with
            // their strides (any sign, zero for broadcast axes), alive for the call. `read_dst`
            // is false, so `chunk` is only written, never read. `T` is f32 or f64, which `gemm`
            // dispatches on.
            unsafe {
                gemm::gemm(
                    n,
                    m,
                    k,
                    chunk.as_mut_ptr().cast::<T>(),
                    1,
                    m as isize,
                    false,
                    a2.as_ptr(),
                    sa[1],
                    sa[0],
                    b2.as_ptr(),
                    sb[1],
                    sb[0],
                    T::zero(),
                    T::one(),
                    false,
                    false,
                    false,
                    parallelism,
                );
            }
        }
        // SAFETY: the products above wrote all `len` elements (`n * m > 0`, `k > 0`).
        unsafe { out.set_len(len) };
        return Ok(out);
    }
    out.resize(len, T::zero());
    for (i, chunk) in out.chunks_mut(n * m).enumerate() {
        let a2 = matrix_at(&av, batch, i);
        let b2 = matrix_at(&bv, batch, i);
        let mut c2 = ArrayViewMut2::from_shape((n, m), chunk).expect("chunk holds n*m elements");
        general_mat_mul(T::one(), &a2, &b2, T::zero(), &mut c2);
    }
    Ok(out)
}

/// Fails with `OutOfMemory` unless the allocator can give an upper bound of the workspace
/// `gemm` allocates for an n×k · k×m product of `T`: packed copies of both operands and one
/// L2-cache-sized slab per thread that runs it, every thread of the pool when `parallel`, else
/// the caller's ([`super::pool::probe_host_bytes`]: one allocation, none for small products).
/// (Counting every thread for a product that runs on one asked 64 MiB for a 16×32 · 32×16
/// product, which an address-space limit refused.)
fn reserve_workspace<T>(
    op: &'static str,
    (n, k, m): (usize, usize, usize),
    parallel: bool,
) -> Result<()> {
    let elements = k.saturating_mul(n.saturating_add(m));
    let threads = if parallel { super::threads::count() } else { 1 };
    let slabs = gemm_common::cache::CACHE_INFO[1]
        .cache_bytes
        .saturating_mul(threads + 1);
    let bytes = elements
        .saturating_mul(std::mem::size_of::<T>())
        .saturating_add(slabs);
    super::pool::probe_host_bytes(op, bytes)
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
