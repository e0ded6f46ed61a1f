//! cuBLAS's strided-batched GEMM on the emulated device, with cuBLAS's own column-major
//! semantics (transposes, leading dimensions, strides, batches, `beta == 0` not reading C), and
//! its argument checks. It is written from cuBLAS's definition, not with kusari's host matmul,
//! so that kusari's row-major mapping onto cuBLAS is what gets tested.

use super::memory;
use crate::cuda::driver::types::{DriverResult, Gemm, GemmType};

/// cuBLAS's argument checks (`CUBLAS_STATUS_INVALID_VALUE`).
fn check(g: &Gemm) -> DriverResult<()> {
    let invalid = |what: String| Err(format!("CUBLAS_STATUS_INVALID_VALUE: {what}"));
    if g.m < 0 || g.n < 0 || g.k < 0 || g.batch < 0 {
        return invalid(format!(
            "m = {}, n = {}, k = {} and batch = {} must not be negative",
            g.m, g.n, g.k, g.batch
        ));
    }
    let rows_a = if g.trans_a { g.k } else { g.m };
    let rows_b = if g.trans_b { g.n } else { g.k };
    if g.lda < rows_a.max(1) {
        return invalid(format!("lda = {} < max(1, {rows_a})", g.lda));
    }
    if g.ldb < rows_b.max(1) {
        return invalid(format!("ldb = {} < max(1, {rows_b})", g.ldb));
    }
    if g.ldc < g.m.max(1) {
        return invalid(format!("ldc = {} < max(1, m = {})", g.ldc, g.m));
    }
    Ok(())
}

/// Elements a column-major `rows × cols` matrix with leading dimension `ld` spans.
fn span(rows: i32, cols: i32, ld: i32) -> usize {
    if rows == 0 || cols == 0 {
        0
    } else {
        (cols as usize - 1) * ld as usize + rows as usize
    }
}

trait Real: Copy + std::ops::Add<Output = Self> + std::ops::Mul<Output = Self> {
    const ZERO: Self;
    fn from_f64(v: f64) -> Self;
}

impl Real for f32 {
    const ZERO: f32 = 0.0;
    fn from_f64(v: f64) -> f32 {
        v as f32
    }
}

impl Real for f64 {
    const ZERO: f64 = 0.0;
    fn from_f64(v: f64) -> f64 {
        v
    }
}

/// # Safety
/// The operands were checked to lie in live allocations of the device.
unsafe fn gemm_typed<T: Real>(g: &Gemm) {
    let (m, n, k) = (g.m as usize, g.n as usize, g.k as usize);
    let (lda, ldb, ldc) = (g.lda as usize, g.ldb as usize, g.ldc as usize);
    let (alpha, beta) = (T::from_f64(g.alpha), T::from_f64(g.beta));
    for p in 0..g.batch as isize {
        // SAFETY: matrix `p` of each operand lies in its allocation (checked by the caller).
        let (a, b, c) = unsafe {
            (
                (g.a as *const T).offset(p * g.stride_a as isize),
                (g.b as *const T).offset(p * g.stride_b as isize),
                (g.c as *mut T).offset(p * g.stride_c as isize),
            )
        };
        for j in 0..n {
            for i in 0..m {
                let mut acc = T::ZERO;
                for l in 0..k {
                    // op(A)(i, l) and op(B)(l, j), column-major.
                    let ai = if g.trans_a { l + i * lda } else { i + l * lda };
                    let bi = if g.trans_b { j + l * ldb } else { l + j * ldb };
                    // SAFETY: both indices lie in the spans checked by the caller.
                    acc = acc + unsafe { *a.add(ai) * *b.add(bi) };
                }
                // SAFETY: as above.
                let out = unsafe { &mut *c.add(i + j * ldc) };
                // cuBLAS does not read C when beta is zero (so NaN there does not propagate).
                *out = if g.beta == 0.0 {
                    alpha * acc
                } else {
                    alpha * acc + beta * *out
                };
            }
        }
    }
}

/// Runs `g` on emulated device `ordinal`.
pub(crate) fn gemm(ordinal: usize, g: &Gemm) -> DriverResult<()> {
    check(g)?;
    if g.m == 0 || g.n == 0 || g.batch == 0 {
        return Ok(());
    }
    let elem = match g.dtype {
        GemmType::F32 => 4,
        GemmType::F64 => 8,
    };
    let (rows_a, cols_a) = if g.trans_a { (g.k, g.m) } else { (g.m, g.k) };
    let (rows_b, cols_b) = if g.trans_b { (g.n, g.k) } else { (g.k, g.n) };
    let operands = [
        ("A", g.a, span(rows_a, cols_a, g.lda), g.stride_a),
        ("B", g.b, span(rows_b, cols_b, g.ldb), g.stride_b),
        ("C", g.c, span(g.m, g.n, g.ldc), g.stride_c),
    ];
    for (name, ptr, elems, stride) in operands {
        if elems == 0 {
            continue;
        }
        for p in [0, i64::from(g.batch) - 1] {
            let at = (ptr as i64).wrapping_add(p * stride * elem as i64) as u64;
            memory::check_range(
                ordinal,
                at,
                elems * elem,
                &format!("cuBLAS gemm: matrix {p} of {name}"),
            )?;
        }
    }
    // What cuBLAS writes (C) counts as written, for the sanitizer's initialization check.
    memory::mark_all_written(g.c);
    // SAFETY: every operand's first and last matrix lie in one allocation of this device; the
    // ones between lie between them.
    unsafe {
        match g.dtype {
            GemmType::F32 => gemm_typed::<f32>(g),
            GemmType::F64 => gemm_typed::<f64>(g),
        }
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::cuda::driver::types::DevicePtr;

    fn upload(v: &[f64]) -> DevicePtr {
        let p = memory::alloc(0, v.len() * 8).unwrap();
        // SAFETY: the allocation holds `v.len()` doubles.
        unsafe { std::ptr::copy_nonoverlapping(v.as_ptr(), p as *mut f64, v.len()) };
        p
    }

    fn download(p: DevicePtr, n: usize) -> Vec<f64> {
        let mut v = vec![0.0; n];
        // SAFETY: the allocation holds `n` doubles.
        unsafe { std::ptr::copy_nonoverlapping(p as *const f64, v.as_mut_ptr(), n) };
        v
    }

    /// Matrix `p` of a batch, element (r, c) of a *logical* (row, column) matrix held
    /// column-major with leading dimension `ld`.
    fn at(v: &[f64], p: usize, stride: usize, ld: usize, r: usize, c: usize) -> f64 {
        v[p * stride + r + c * ld]
    }

    /// Every transpose combination, leading dimensions larger than the rows, two batches with
    /// padding between them, alpha and beta: against a naive reference written from the
    /// definition, op(X)(r, c) = X(c, r) when transposed.
    #[test]
    fn gemm_matches_a_naive_reference_for_every_transpose_combination() {
        let (m, n, k, batch) = (3usize, 4usize, 5usize, 2usize);
        for trans_a in [false, true] {
            for trans_b in [false, true] {
                let (ra, ca) = if trans_a { (k, m) } else { (m, k) };
                let (rb, cb) = if trans_b { (n, k) } else { (k, n) };
                let (lda, ldb, ldc) = (ra + 2, rb + 1, m + 3);
                let (sa, sb, sc) = (lda * ca + 7, ldb * cb + 3, ldc * n + 5);
                let fill = |len: usize, seed: f64| -> Vec<f64> {
                    (0..len)
                        .map(|i| ((i as f64 * 0.37 + seed).sin() * 4.0).round() / 4.0)
                        .collect()
                };
                let a = fill(sa * batch, 1.0);
                let b = fill(sb * batch, 2.0);
                let c0 = fill(sc * batch, 3.0);
                let (alpha, beta) = (1.5, -0.5);
                let (pa, pb, pc) = (upload(&a), upload(&b), upload(&c0));
                let g = Gemm {
                    dtype: GemmType::F64,
                    trans_a,
                    trans_b,
                    m: m as i32,
                    n: n as i32,
                    k: k as i32,
                    alpha,
                    a: pa,
                    lda: lda as i32,
                    stride_a: sa as i64,
                    b: pb,
                    ldb: ldb as i32,
                    stride_b: sb as i64,
                    beta,
                    c: pc,
                    ldc: ldc as i32,
                    stride_c: sc as i64,
                    batch: batch as i32,
                };
                gemm(0, &g).unwrap();
                let c = download(pc, sc * batch);
                for p in 0..batch {
                    for i in 0..m {
                        for j in 0..n {
                            let mut want = 0.0;
                            for l in 0..k {
                                let x = if trans_a {
                                    at(&a, p, sa, lda, l, i)
                                } else {
                                    at(&a, p, sa, lda, i, l)
                                };
                                let y = if trans_b {
                                    at(&b, p, sb, ldb, j, l)
                                } else {
                                    at(&b, p, sb, ldb, l, j)
                                };
                                want += x * y;
                            }
                            want = alpha * want + beta * at(&c0, p, sc, ldc, i, j);
                            let got = at(&c, p, sc, ldc, i, j);
                            assert!(
                                (got - want).abs() <= 1e-12 * want.abs().max(1.0),
                                "trans_a {trans_a} trans_b {trans_b}: C[{p}]({i}, {j}) = {got}, want {want}"
                            );
                        }
                    }
                    // The padding rows of C (beyond m in each column) are untouched.
                    for j in 0..n {
                        for i in m..ldc {
                            let idx = p * sc + i + j * ldc;
                            assert_eq!(c[idx], c0[idx], "padding of C changed");
                        }
                    }
                }
                for ptr in [pa, pb, pc] {
                    memory::free(ptr);
                }
            }
        }
    }

    #[test]
    fn beta_zero_does_not_read_c_and_bad_arguments_are_cublas_errors() {
        let a = upload(&[1.0, 2.0]); // 2 x 1
        let b = upload(&[3.0]); // 1 x 1
        let c = memory::alloc(0, 16).unwrap(); // poisoned: NaN
        let mut g = Gemm {
            dtype: GemmType::F64,
            trans_a: false,
            trans_b: false,
            m: 2,
            n: 1,
            k: 1,
            alpha: 1.0,
            a,
            lda: 2,
            stride_a: 0,
            b,
            ldb: 1,
            stride_b: 0,
            beta: 0.0,
            c,
            ldc: 2,
            stride_c: 0,
            batch: 1,
        };
        gemm(0, &g).unwrap();
        assert_eq!(download(c, 2), [3.0, 6.0]);
        g.lda = 1;
        let e = gemm(0, &g).unwrap_err();
        assert!(
            e.contains("CUBLAS_STATUS_INVALID_VALUE") && e.contains("lda = 1"),
            "{e}"
        );
        // A 3 x 1 A where 2 elements were allocated.
        g.m = 3;
        g.lda = 3;
        g.ldc = 3;
        let e = gemm(0, &g).unwrap_err();
        assert!(e.contains("overrun"), "{e}");
        for p in [a, b, c] {
            memory::free(p);
        }
    }
}
