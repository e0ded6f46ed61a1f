//! Integration tests of [`Array`]: constructors and dtypes, strided views, elementwise
//! arithmetic and math, reductions, matmul, and the parallel paths taken by large arrays.
//!
//! Expected values are either derived by hand (a comment says how) or computed independently in
//! this file with plain loops over `Vec<f64>` and Rust's own `f64` math; no expectation is taken
//! from kusari's own output.

use kusari::random::Rng;
use kusari::{Array, DType, Result};
use kusari_tests::{arr, assert_close, broadcast_pos, reduce, uniform, unravel};
use ndarray::{Axis, ShapeBuilder, s};

// ----- independent reference helpers -----

/// The elements as f64, in C order.
fn vals(a: &Array) -> Vec<f64> {
    a.to_f64_vec().expect("host array")
}

/// `0, 1, ..., n-1` as f64, built with a loop (not with `Array::arange`).
fn seq(n: usize) -> Vec<f64> {
    (0..n).map(|i| i as f64).collect()
}

/// `f(a, b)` with `a` and `b` broadcast to `shape`, by explicit index arithmetic.
fn zip_ref(
    a: &[f64],
    a_shape: &[usize],
    b: &[f64],
    b_shape: &[usize],
    shape: &[usize],
    f: impl Fn(f64, f64) -> f64,
) -> Vec<f64> {
    let n: usize = shape.iter().product();
    (0..n)
        .map(|flat| {
            let idx = unravel(flat, shape);
            f(
                a[broadcast_pos(&idx, a_shape)],
                b[broadcast_pos(&idx, b_shape)],
            )
        })
        .collect()
}

/// Reduction of C-order `v` of `shape` over `axes` with `f` from `init`, by visiting every
/// element once. Returns the output (reduced axes removed) in C order.
fn reduce_ref(
    v: &[f64],
    shape: &[usize],
    axes: &[usize],
    init: f64,
    f: impl Fn(f64, f64) -> f64,
) -> Vec<f64> {
    let out_len: usize = (0..shape.len())
        .filter(|a| !axes.contains(a))
        .map(|a| shape[a])
        .product();
    let mut out = vec![init; out_len];
    for (flat, &x) in v.iter().enumerate() {
        let idx = unravel(flat, shape);
        let mut o = 0;
        for a in 0..shape.len() {
            if !axes.contains(&a) {
                o = o * shape[a] + idx[a];
            }
        }
        out[o] = f(out[o], x);
    }
    out
}

/// Plain triple loop: the (n, k) by (k, m) product of C-order matrices.
fn matmul_ref(a: &[f64], b: &[f64], n: usize, k: usize, m: usize) -> Vec<f64> {
    let mut out = vec![0.0; n * m];
    for i in 0..n {
        for j in 0..m {
            let mut acc = 0.0;
            for p in 0..k {
                acc += a[i * k + p] * b[p * m + j];
            }
            out[i * m + j] = acc;
        }
    }
    out
}

fn max_f(a: f64, b: f64) -> f64 {
    if a >= b { a } else { b }
}

fn min_f(a: f64, b: f64) -> f64 {
    if a <= b { a } else { b }
}

// ----- constructors -----

#[test]
fn from_vec_fills_shape_in_c_order_and_rejects_wrong_length() -> Result<()> {
    let a = Array::from_vec(vec![1i32, 2, 3, 4, 5, 6], &[2, 3])?;
    assert_eq!(a.shape(), &[2, 3]);
    assert_eq!((a.ndim(), a.size(), a.dtype()), (2, 6, DType::I32));
    assert_eq!(a.strides(), vec![3, 1]);
    assert!(a.is_contiguous());
    assert_eq!(a.to_vec::<i32>()?, vec![1, 2, 3, 4, 5, 6]);
    // [1, 2] of a C-order (2, 3) array is element 1 * 3 + 2 = 5, which holds 6.
    assert_eq!(a.view::<i32>()?[[1, 2]], 6);

    assert!(Array::from_vec(vec![1.0f64; 5], &[2, 3]).is_err());
    assert!(Array::from_vec(vec![1.0f64; 7], &[2, 3]).is_err());
    assert!(Array::from_vec(Vec::<f64>::new(), &[]).is_err());
    assert_eq!(Array::from_vec(vec![4.0f32], &[])?.item::<f32>()?, 4.0);
    let empty = Array::from_vec(Vec::<f32>::new(), &[0, 4])?;
    assert_eq!((empty.size(), empty.shape()), (0, &[0usize, 4][..]));
    assert!(empty.to_vec::<f32>()?.is_empty());

    // Reading as another element type is an error, never a reinterpretation.
    assert!(a.to_vec::<i64>().is_err());
    assert!(a.view::<f32>().is_err());
    assert!(a.item::<i32>().is_err());
    Ok(())
}

#[test]
fn ndarray_round_trip_in_any_memory_order() -> Result<()> {
    let c = ndarray::Array2::from_shape_vec((2, 3), vec![1.0, 2.0, 3.0, 4.0, 5.0, 6.0])
        .expect("six elements fill (2, 3)");
    let a = Array::from_ndarray(c.clone());
    assert_eq!(a.shape(), &[2, 3]);
    assert_eq!(a.to_vec::<f64>()?, vec![1.0, 2.0, 3.0, 4.0, 5.0, 6.0]);
    assert_eq!(a.to_ndarray::<f64>()?, c.clone().into_dyn());
    // The transposed view read through ndarray is ndarray's own transpose.
    let at = a.t();
    assert_eq!(at.view::<f64>()?, c.t().into_dyn());
    assert_eq!(at.to_ndarray::<f64>()?, c.t().to_owned().into_dyn());

    // Fortran order: from_shape_vec((2, 3).f(), d) puts d[i + 2 j] at [i, j], so the rows are
    // [1, 3, 5] and [2, 4, 6].
    let f = ndarray::Array2::from_shape_vec((2, 3).f(), vec![1.0, 2.0, 3.0, 4.0, 5.0, 6.0])
        .expect("six elements fill (2, 3)");
    let b = Array::from_ndarray(f.clone());
    assert!(b.is_contiguous());
    assert_eq!(b.to_vec::<f64>()?, vec![1.0, 3.0, 5.0, 2.0, 4.0, 6.0]);
    assert_eq!(b.to_ndarray::<f64>()?, f.into_dyn());

    // An owned array sliced in place keeps a longer buffer, with the data at an offset.
    let grid = ndarray::Array2::from_shape_fn((4, 3), |(i, j)| (3 * i + j) as f64);
    let mut middle = grid.clone();
    middle.slice_collapse(s![1..3, ..]);
    let m = Array::from_ndarray(middle);
    assert_eq!(m.shape(), &[2, 3]);
    assert_eq!(m.to_vec::<f64>()?, vec![3.0, 4.0, 5.0, 6.0, 7.0, 8.0]);
    let mut head = grid.clone();
    head.slice_collapse(s![..2, ..]);
    let h = Array::from_ndarray(head);
    assert_eq!(h.to_vec::<f64>()?, vec![0.0, 1.0, 2.0, 3.0, 4.0, 5.0]);
    let mut cols = grid;
    cols.slice_collapse(s![.., 1..;2]);
    // Columns 1 of each row: 1, 4, 7, 10.
    assert_eq!(
        Array::from_ndarray(cols).to_vec::<f64>()?,
        vec![1.0, 4.0, 7.0, 10.0]
    );

    // A reversed axis, an integer and a bool array, and the From impl.
    let mut rev = ndarray::Array1::from(vec![1i64, 2, 3]);
    rev.invert_axis(Axis(0));
    assert_eq!(Array::from_ndarray(rev).to_vec::<i64>()?, vec![3, 2, 1]);
    let flags: Array = ndarray::arr2(&[[true, false], [false, true]]).into();
    assert_eq!(flags.dtype(), DType::Bool);
    assert_eq!(flags.to_vec::<bool>()?, vec![true, false, false, true]);
    let zero_d = Array::from_ndarray(ndarray::arr0(2.5f32));
    assert_eq!((zero_d.ndim(), zero_d.item::<f32>()?), (0, 2.5));
    Ok(())
}

#[test]
fn scalar_full_zeros_ones_and_their_likes() -> Result<()> {
    let s = Array::scalar(2.5f64);
    assert_eq!((s.ndim(), s.size(), s.shape()), (0, 1, &[][..]));
    assert_eq!(s.item::<f64>()?, 2.5);
    assert_eq!(Array::scalar(7i64).dtype(), DType::I64);

    let z = Array::zeros(&[2, 3], DType::F32)?;
    assert_eq!((z.dtype(), z.shape()), (DType::F32, &[2usize, 3][..]));
    assert_eq!(z.to_vec::<f32>()?, vec![0.0; 6]);
    assert_eq!(Array::ones(&[4], DType::I64)?.to_vec::<i64>()?, vec![1; 4]);
    // `as` casts truncate toward zero: 3.7 becomes 3 in int32.
    assert_eq!(
        Array::full(&[3], 3.7, DType::I32)?.to_vec::<i32>()?,
        vec![3; 3]
    );
    assert_eq!(
        Array::full(&[2], -1.0, DType::Bool)?.to_vec::<bool>()?,
        vec![true; 2]
    );
    assert_eq!(Array::full(&[0], 1.0, DType::F64)?.size(), 0);

    let base = Array::from_vec(vec![1i64, 2, 3], &[3])?;
    for (like, expected) in [
        (base.zeros_like().unwrap(), vec![0i64; 3]),
        (base.ones_like().unwrap(), vec![1; 3]),
        (base.full_like(7.0).unwrap(), vec![7; 3]),
    ] {
        assert_eq!((like.dtype(), like.shape()), (DType::I64, &[3usize][..]));
        assert_eq!(like.to_vec::<i64>()?, expected);
    }
    Ok(())
}

#[test]
fn arange_counts_like_numpy() -> Result<()> {
    let r = |start, stop, step| Array::arange(start, stop, step, DType::F64).map(|a| vals(&a));
    assert_eq!(r(0.0, 5.0, 1.0)?, vec![0.0, 1.0, 2.0, 3.0, 4.0]);
    // ceil((0 - 5) / -1.5) = ceil(3.33) = 4 elements counting down from 5.
    assert_eq!(r(5.0, 0.0, -1.5)?, vec![5.0, 3.5, 2.0, 0.5]);
    assert_eq!(r(2.0, -1.0, -1.0)?, vec![2.0, 1.0, 0.0]);
    assert!(r(0.0, 0.0, 1.0)?.is_empty());
    assert!(r(3.0, 1.0, 1.0)?.is_empty());
    assert!(r(0.0, 3.0, -1.0)?.is_empty());
    assert_eq!(Array::arange(0.0, 0.0, 1.0, DType::F64)?.shape(), &[0]);
    assert_eq!(
        Array::arange(0.0, 1.0, 0.25, DType::F32)?.to_vec::<f32>()?,
        vec![0.0, 0.25, 0.5, 0.75]
    );
    assert_eq!(
        Array::arange(-2.0, 2.0, 1.0, DType::I32)?.to_vec::<i32>()?,
        vec![-2, -1, 0, 1]
    );
    assert!(Array::arange(0.0, 1.0, 0.0, DType::F64).is_err());
    assert!(Array::arange(0.0, f64::INFINITY, 1.0, DType::F64).is_err());
    assert!(Array::arange(f64::NAN, 1.0, 1.0, DType::F64).is_err());
    Ok(())
}

#[test]
fn seeded_uniform_is_reproducible_and_in_bounds() {
    let draw = |seed| Array::uniform(&[2000], -2.0, 3.0, DType::F64, &mut Rng::seed(seed)).unwrap();
    let (a, b, c) = (vals(&draw(42)), vals(&draw(42)), vals(&draw(43)));
    assert_eq!(a, b, "same seed, same values");
    let differing = a.iter().zip(&c).filter(|(x, y)| x != y).count();
    assert!(differing > 1990, "different seeds give different values");
    assert!(a.iter().all(|&x| (-2.0..3.0).contains(&x)));
    // The draws cover the interval: U(-2, 3) has mean 0.5 and std 5/sqrt(12) = 1.44, so the
    // mean of 2000 draws is within 0.2 of 0.5 (over six standard errors).
    let mean = a.iter().sum::<f64>() / a.len() as f64;
    assert!((mean - 0.5).abs() < 0.2, "mean {mean}");
    assert!(a.iter().cloned().fold(f64::INFINITY, f64::min) < -1.9);
    assert!(a.iter().cloned().fold(f64::NEG_INFINITY, f64::max) > 2.9);

    // One generator keeps advancing: two consecutive arrays differ.
    let mut rng = Rng::seed(5);
    let first = vals(&Array::uniform(&[8], 0.0, 1.0, DType::F64, &mut rng).unwrap());
    let second = vals(&Array::uniform(&[8], 0.0, 1.0, DType::F64, &mut rng).unwrap());
    assert_ne!(first, second);

    let f = Array::uniform(&[1000], 0.5, 0.75, DType::F32, &mut Rng::seed(1)).unwrap();
    assert_eq!(f.dtype(), DType::F32);
    assert!(vals(&f).iter().all(|&x| (0.5..=0.75).contains(&x)));
}

#[test]
fn seeded_normal_has_the_requested_moments() {
    let n = 100_000;
    let draw = |seed| Array::normal(&[n], 2.0, 3.0, DType::F64, &mut Rng::seed(seed)).unwrap();
    let a = vals(&draw(7));
    assert_eq!(a, vals(&draw(7)), "same seed, same values");
    assert_ne!(a, vals(&draw(8)), "different seeds, different values");
    let mean = a.iter().sum::<f64>() / n as f64;
    let var = a.iter().map(|x| (x - mean) * (x - mean)).sum::<f64>() / (n - 1) as f64;
    // Standard errors for 1e5 draws of N(2, 9): 0.0095 for the mean, 0.0067 for the std.
    assert!((mean - 2.0).abs() < 0.05, "mean {mean}");
    assert!((var.sqrt() - 3.0).abs() < 0.05, "std {}", var.sqrt());
    let f16 = Array::normal(&[10], 0.0, 1.0, DType::F16, &mut Rng::seed(7)).unwrap();
    assert_eq!(f16.dtype(), DType::F16);
}

// ----- dtypes -----

#[test]
fn every_dtype_is_storable() -> Result<()> {
    for dt in DType::ALL {
        let ones = Array::full(&[2, 3], 1.0, dt)?;
        assert_eq!((ones.dtype(), ones.shape()), (dt, &[2usize, 3][..]));
        assert_eq!(vals(&ones), vec![1.0; 6], "{dt}");
        assert_eq!(vals(&Array::zeros(&[4], dt)?), vec![0.0; 4], "{dt}");
        // Converting to the own dtype is free: the same buffer.
        assert!(ones.astype(dt)?.shares_buffer(&ones));
        assert!(!ones.astype(DType::F64)?.shares_buffer(&ones) || dt == DType::F64);
    }
    assert_eq!(
        Array::from_vec(vec![true, false], &[2])?.to_vec::<bool>()?,
        vec![true, false]
    );
    assert_eq!(
        Array::from_vec(vec![i32::MIN, i32::MAX], &[2])?.to_vec::<i32>()?,
        vec![i32::MIN, i32::MAX]
    );
    assert_eq!(
        Array::from_vec(vec![i64::MIN, i64::MAX], &[2])?.to_vec::<i64>()?,
        vec![i64::MIN, i64::MAX]
    );
    assert_eq!(
        Array::from_vec(vec![0.1f32, -2.5], &[2])?.to_vec::<f32>()?,
        vec![0.1f32, -2.5]
    );
    // Half precision holds small integers, halves and powers of two exactly.
    for dt in [DType::F16, DType::BF16] {
        let h = arr(&[0.5, -2.0, 1024.0, 3.0], &[4]).astype(dt)?;
        assert_eq!(h.dtype(), dt);
        assert_eq!(vals(&h), vec![0.5, -2.0, 1024.0, 3.0]);
    }
    assert_eq!(DType::F16.size_in_bytes(), 2);
    assert_eq!(DType::I64.size_in_bytes(), 8);
    Ok(())
}

#[test]
fn astype_round_trips_truncates_and_maps_non_zero_to_true() -> Result<()> {
    let x = arr(&[0.1, 1.5, -2.75, 3.3, 60000.0, -0.001], &[2, 3]);
    // f16 keeps 11 significant bits: relative error at most 2^-11 = 4.9e-4.
    let f16 = x.astype(DType::F16)?;
    assert_eq!((f16.dtype(), f16.shape()), (DType::F16, &[2usize, 3][..]));
    assert_close(&f16.astype(DType::F64)?, &x, 0.0, 4.9e-4);
    // bf16 keeps 8: at most 2^-8 = 3.9e-3.
    assert_close(&x.astype(DType::BF16)?.astype(DType::F64)?, &x, 0.0, 3.9e-3);
    assert_close(&x.astype(DType::F32)?.astype(DType::F64)?, &x, 0.0, 6e-8);
    // Exactly representable values come back exactly.
    let exact = arr(&[1.5, -2.75, 0.0, 256.0], &[4]);
    assert_eq!(
        vals(&exact.astype(DType::F16)?.astype(DType::F64)?),
        vals(&exact)
    );

    // Float to integer truncates toward zero, and saturates.
    let t = arr(&[1.9, -1.9, 2.5, -0.5, 0.0, 1e20, -1e20], &[7]);
    assert_eq!(
        t.astype(DType::I32)?.to_vec::<i32>()?,
        vec![1, -1, 2, 0, 0, i32::MAX, i32::MIN]
    );
    assert_eq!(
        t.astype(DType::I64)?.to_vec::<i64>()?[..5],
        [1, -1, 2, 0, 0]
    );
    assert_eq!(
        t.astype(DType::F32)?.astype(DType::I32)?.to_vec::<i32>()?[..4],
        [1, -1, 2, 0]
    );
    // Non-zero becomes true (negative zero is zero).
    assert_eq!(
        arr(&[0.0, -0.5, 2.0, -0.0], &[4])
            .astype(DType::Bool)?
            .to_vec::<bool>()?,
        vec![false, true, true, false]
    );
    let ints = Array::from_vec(vec![0i32, 3, -1], &[3])?;
    assert_eq!(
        ints.astype(DType::Bool)?.to_vec::<bool>()?,
        vec![false, true, true]
    );
    assert_eq!(
        ints.astype(DType::F64)?.to_vec::<f64>()?,
        vec![0.0, 3.0, -1.0]
    );
    let flags = Array::from_vec(vec![true, false], &[2])?;
    assert_eq!(flags.astype(DType::F32)?.to_vec::<f32>()?, vec![1.0, 0.0]);
    assert_eq!(flags.astype(DType::I64)?.to_vec::<i64>()?, vec![1, 0]);
    // A non-contiguous source converts in its logical (C) order: the transpose of
    // [[0, 1, 2], [3, 4, 5]] is [[0, 3], [1, 4], [2, 5]].
    let tr = arr(&seq(6), &[2, 3]).t().astype(DType::I32)?;
    assert_eq!(tr.to_vec::<i32>()?, vec![0, 3, 1, 4, 2, 5]);
    Ok(())
}

// ----- views -----

#[test]
fn reshape_is_a_view_of_contiguous_arrays_and_a_copy_otherwise() -> Result<()> {
    let a = arr(&seq(6), &[6]);
    let b = a.reshape(&[2, 3])?;
    assert!(b.shares_buffer(&a));
    assert_eq!(b.shape(), &[2, 3]);
    assert_eq!(vals(&b), seq(6));
    assert!(b.reshape(&[3, 2])?.shares_buffer(&a));
    assert!(a.reshape(&[4, 2]).is_err());
    assert!(a.reshape(&[]).is_err());
    assert_eq!(arr(&[5.0], &[1]).reshape(&[])?.item::<f64>()?, 5.0);

    // The transpose of [[0, 1, 2], [3, 4, 5]] read in C order is 0, 3, 1, 4, 2, 5.
    let t = b.t();
    assert!(!t.is_contiguous());
    let flat = t.reshape(&[6])?;
    assert!(!flat.shares_buffer(&a));
    assert!(flat.is_contiguous());
    assert_eq!(vals(&flat), vec![0.0, 3.0, 1.0, 4.0, 2.0, 5.0]);
    assert_eq!(
        vals(&t.reshape(&[2, 3])?),
        vec![0.0, 3.0, 1.0, 4.0, 2.0, 5.0]
    );

    // A row slice of a contiguous array is contiguous at an offset: reshaping it is a view.
    let rows = arr(&seq(12), &[4, 3]).slice_axis(0, 1, 3, 1)?;
    assert!(rows.is_contiguous());
    let r = rows.reshape(&[3, 2])?;
    assert!(r.shares_buffer(&rows));
    assert_eq!(vals(&r), vec![3.0, 4.0, 5.0, 6.0, 7.0, 8.0]);
    Ok(())
}

#[test]
fn transpose_permutes_axes() -> Result<()> {
    let a = arr(&seq(24), &[2, 3, 4]);
    let p = a.transpose(Some(&[1, 2, 0]))?;
    assert_eq!(p.shape(), &[3, 4, 2]);
    assert!(p.shares_buffer(&a));
    // Output axis i is input axis axes[i], so p[j, k, i] = a[i, j, k] = 12 i + 4 j + k.
    let pv = vals(&p);
    for i in 0..2 {
        for j in 0..3 {
            for k in 0..4 {
                assert_eq!(pv[(j * 4 + k) * 2 + i], (12 * i + 4 * j + k) as f64);
            }
        }
    }
    // None and t() reverse the axes: r[k, j, i] = a[i, j, k].
    let r = a.transpose(None)?;
    assert_eq!(r.shape(), &[4, 3, 2]);
    assert_eq!(r.strides(), vec![1, 4, 12]);
    assert_eq!(vals(&r), vals(&a.t()));
    let rv = vals(&r);
    assert_eq!(rv[(3 * 3 + 2) * 2 + 1], (12 + 4 * 2 + 3) as f64);
    let m = arr(&seq(6), &[2, 3]);
    assert_eq!(m.t().strides(), vec![1, 3]);
    assert_eq!(vals(&m.t().t()), seq(6));
    assert!(a.transpose(Some(&[0, 0, 1])).is_err());
    assert!(a.transpose(Some(&[0, 1])).is_err());
    assert!(a.transpose(Some(&[0, 1, 3])).is_err());
    Ok(())
}

#[test]
fn flip_and_slice_axis_select_the_right_elements() -> Result<()> {
    // m = [[0, 1, 2], [3, 4, 5]]
    let m = arr(&seq(6), &[2, 3]);
    let f1 = m.flip(1)?;
    assert!(f1.shares_buffer(&m));
    assert_eq!(f1.strides(), vec![3, -1]);
    assert_eq!(vals(&f1), vec![2.0, 1.0, 0.0, 5.0, 4.0, 3.0]);
    assert_eq!(vals(&m.flip(0)?), vec![3.0, 4.0, 5.0, 0.0, 1.0, 2.0]);
    assert_eq!(vals(&m.flip(-1)?), vals(&f1));
    assert_eq!(
        vals(&m.flip(0)?.flip(1)?),
        vec![5.0, 4.0, 3.0, 2.0, 1.0, 0.0]
    );
    assert_eq!(vals(&f1.flip(1)?), seq(6));
    assert!(m.flip(2).is_err());

    let v = arr(&seq(10), &[10]);
    let sl = |start, stop, step| v.slice_axis(0, start, stop, step).map(|a| vals(&a));
    assert_eq!(sl(1, 8, 3)?, vec![1.0, 4.0, 7.0]);
    assert_eq!(sl(2, 100, 4)?, vec![2.0, 6.0]);
    assert_eq!(sl(-3, 10, 1)?, vec![7.0, 8.0, 9.0]);
    assert_eq!(sl(8, 1, -3)?, vec![8.0, 5.0, 2.0]);
    // Python's a[::-1]: start past the end, stop before the beginning (-11 + 10 = -1).
    assert_eq!(
        sl(100, -11, -1)?,
        (0..10).rev().map(f64::from).collect::<Vec<_>>()
    );
    assert_eq!(sl(-1, -4, -1)?, vec![9.0, 8.0, 7.0]);
    assert!(sl(5, 2, 1)?.is_empty());
    assert!(sl(2, 5, -1)?.is_empty());
    assert!(v.slice_axis(0, 0, 5, 0).is_err());
    assert!(v.slice_axis(0, 1, 8, 3)?.shares_buffer(&v));

    // Columns 3 and 1 of g = [[0..4], [4..8], [8..12]].
    let g = arr(&seq(12), &[3, 4]);
    let cols = g.slice_axis(1, 3, 0, -2)?;
    assert_eq!(cols.shape(), &[3, 2]);
    assert_eq!(cols.strides(), vec![4, -2]);
    assert_eq!(vals(&cols), vec![3.0, 1.0, 7.0, 5.0, 11.0, 9.0]);
    // Slicing a flipped view: rows reversed then every second one from the first: rows 2, 0.
    let rows = g.flip(0)?.slice_axis(0, 0, 3, 2)?;
    assert_eq!(vals(&rows), vec![8.0, 9.0, 10.0, 11.0, 0.0, 1.0, 2.0, 3.0]);
    Ok(())
}

#[test]
fn broadcast_to_is_a_zero_stride_view() -> Result<()> {
    let row = arr(&[1.0, 2.0, 3.0], &[3]);
    let b = row.broadcast_to(&[2, 3])?;
    assert!(b.shares_buffer(&row));
    assert_eq!(b.strides(), vec![0, 1]);
    assert!(!b.is_contiguous());
    assert_eq!(vals(&b), vec![1.0, 2.0, 3.0, 1.0, 2.0, 3.0]);
    let col = arr(&[1.0, 2.0, 3.0], &[3, 1]);
    let c = col.broadcast_to(&[2, 3, 4])?;
    assert_eq!(c.strides(), vec![0, 1, 0]);
    let cv = vals(&c);
    for (flat, &x) in cv.iter().enumerate() {
        // c[i, j, k] = col[j, 0] = j + 1.
        assert_eq!(x, (unravel(flat, &[2, 3, 4])[1] + 1) as f64);
    }
    assert_eq!(
        vals(&Array::scalar(4.0f64).broadcast_to(&[2, 2])?),
        vec![4.0; 4]
    );
    assert!(row.broadcast_to(&[4]).is_err());
    assert!(row.broadcast_to(&[3, 2]).is_err());
    assert!(col.broadcast_to(&[3]).is_err());
    Ok(())
}

#[test]
fn expand_dims_and_squeeze_add_and_remove_unit_axes() -> Result<()> {
    let a = arr(&seq(6), &[2, 3]);
    assert_eq!(a.expand_dims(0)?.shape(), &[1, 2, 3]);
    assert_eq!(a.expand_dims(1)?.shape(), &[2, 1, 3]);
    assert_eq!(a.expand_dims(2)?.shape(), &[2, 3, 1]);
    assert_eq!(a.expand_dims(-1)?.shape(), &[2, 3, 1]);
    assert_eq!(a.expand_dims(-3)?.shape(), &[1, 2, 3]);
    assert!(a.expand_dims(3).is_err());
    assert!(a.expand_dims(-4).is_err());
    let e = a.expand_dims(1)?;
    assert!(e.shares_buffer(&a));
    assert_eq!(vals(&e), seq(6));

    let u = arr(&seq(6), &[1, 2, 1, 3]);
    assert_eq!(u.squeeze(None)?.shape(), &[2, 3]);
    assert_eq!(u.squeeze(Some(&[-2]))?.shape(), &[1, 2, 3]);
    assert_eq!(u.squeeze(Some(&[0, 2]))?.shape(), &[2, 3]);
    assert_eq!(vals(&u.squeeze(None)?), seq(6));
    assert!(u.squeeze(Some(&[1])).is_err());
    assert!(u.squeeze(Some(&[4])).is_err());
    // Squeezing a transposed view keeps its element order: [[0, 3], [1, 4], [2, 5]].
    let st = a.t().expand_dims(0)?.squeeze(None)?;
    assert_eq!(vals(&st), vec![0.0, 3.0, 1.0, 4.0, 2.0, 5.0]);
    assert_eq!(arr(&[9.0], &[1, 1]).squeeze(None)?.shape(), &[] as &[usize]);
    Ok(())
}

/// An array op under test and the plain `f64` function it should match elementwise.
type UnaryOp = fn(&Array) -> Result<Array>;
type UnaryRef = fn(f64) -> f64;
type BinaryOp = fn(&Array, &Array) -> Result<Array>;
type BinaryRef = fn(f64, f64) -> f64;

/// Runs a battery of ops on `view` (whose C-order values are `expected`, derived by hand) and
/// checks each result against the same op on a contiguous copy and against a plain computation
/// on `expected`.
fn check_ops_on_view(view: &Array, expected: &[f64]) -> Result<()> {
    let shape = view.shape().to_vec();
    assert_eq!(vals(view), expected, "view values for shape {shape:?}");
    let dense = view.contiguous().unwrap();
    assert!(dense.is_contiguous());
    assert_eq!(vals(&dense), expected);
    let exact = |got: &Array, want: &[f64]| assert_close(got, &arr(want, &shape), 1e-12, 1e-12);

    let unary: [(UnaryOp, UnaryRef); 11] = [
        (|a| a.exp(), f64::exp),
        (|a| a.sin(), f64::sin),
        (|a| a.cos(), f64::cos),
        (|a| a.log(), f64::ln),
        (|a| a.sqrt(), f64::sqrt),
        (|a| a.tanh(), f64::tanh),
        (|a| a.sigmoid(), |x| 1.0 / (1.0 + (-x).exp())),
        (|a| a.neg(), |x| -x),
        (|a| a.sub_scalar(5.0)?.relu(), |x| max_f(x - 5.0, 0.0)),
        (|a| a.pow_scalar(2.0), |x| x * x),
        (|a| a.rdiv_scalar(1.0), |x| 1.0 / x),
    ];
    for (op, reference) in unary {
        let want: Vec<f64> = expected.iter().map(|&x| reference(x)).collect();
        let got = op(view)?;
        assert!(got.is_contiguous());
        exact(&got, &want);
        exact(&op(&dense)?, &want);
    }

    // Binary ops with a contiguous partner of the same shape and with the view itself.
    let n = expected.len();
    let partner_vals: Vec<f64> = (0..n).map(|i| 0.5 + i as f64 * 0.25).collect();
    let partner = arr(&partner_vals, &shape);
    let binary: [(BinaryOp, BinaryRef); 7] = [
        (|a, b| a + b, |x, y| x + y),
        (|a, b| a - b, |x, y| x - y),
        (|a, b| a * b, |x, y| x * y),
        (|a, b| a / b, |x, y| x / y),
        (|a, b| a.maximum(b), max_f),
        (|a, b| a.minimum(b), min_f),
        (|a, b| a.pow(b), f64::powf),
    ];
    for (op, reference) in binary {
        let want: Vec<f64> = (0..n)
            .map(|i| reference(expected[i], partner_vals[i]))
            .collect();
        exact(&op(view, &partner)?, &want);
        exact(&op(&dense, &partner)?, &want);
        let want_rev: Vec<f64> = (0..n)
            .map(|i| reference(partner_vals[i], expected[i]))
            .collect();
        exact(&op(&partner, view)?, &want_rev);
        let want_self: Vec<f64> = expected.iter().map(|&x| reference(x, x)).collect();
        exact(&op(view, view)?, &want_self);
    }
    let gt: Vec<bool> = (0..n).map(|i| expected[i] > partner_vals[i]).collect();
    assert_eq!(view.gt(&partner)?.to_vec::<bool>()?, gt);
    let le: Vec<bool> = gt.iter().map(|g| !g).collect();
    assert_eq!(view.le(&partner)?.to_vec::<bool>()?, le);
    assert_eq!(partner.lt(view)?.to_vec::<bool>()?, gt);
    assert!(view.eq(&dense)?.to_vec::<bool>()?.iter().all(|&e| e));
    let fma: Vec<f64> = (0..n)
        .map(|i| expected[i] * partner_vals[i] + expected[i])
        .collect();
    exact(&view.mul_add(&partner, view)?, &fma);
    let picked: Vec<f64> = (0..n)
        .map(|i| if gt[i] { expected[i] } else { partner_vals[i] })
        .collect();
    exact(
        &Array::where_cond(&view.gt(&partner)?, view, &partner)?,
        &picked,
    );
    let mapped: Vec<f64> = expected.iter().map(|x| 2.0 * x + 1.0).collect();
    exact(&view.map(|x: f64| 2.0 * x + 1.0)?, &mapped);

    // Reductions over each axis and over all of them.
    let ndim = shape.len();
    let mut axis_sets: Vec<Vec<usize>> = (0..ndim).map(|a| vec![a]).collect();
    axis_sets.push((0..ndim).collect());
    for axes in axis_sets {
        let ax: Vec<isize> = axes.iter().map(|&a| a as isize).collect();
        let out_shape: Vec<usize> = (0..ndim)
            .filter(|a| !axes.contains(a))
            .map(|a| shape[a])
            .collect();
        let sum = reduce_ref(expected, &shape, &axes, 0.0, |a, b| a + b);
        let max = reduce_ref(expected, &shape, &axes, f64::NEG_INFINITY, max_f);
        let min = reduce_ref(expected, &shape, &axes, f64::INFINITY, min_f);
        let count: usize = axes.iter().map(|&a| shape[a]).product();
        let mean: Vec<f64> = sum.iter().map(|t| t / count as f64).collect();
        for src in [view, &dense] {
            let got = src.mean_axes(&ax, false)?;
            assert_close(&got, &arr(&mean, &out_shape), 1e-12, 1e-12);
            assert_close(
                &src.sum_axes(&ax, false)?,
                &arr(&sum, &out_shape),
                1e-12,
                1e-12,
            );
            assert_close(&src.max_axes(&ax, false)?, &arr(&max, &out_shape), 0.0, 0.0);
            assert_close(&src.min_axes(&ax, false)?, &arr(&min, &out_shape), 0.0, 0.0);
        }
    }

    // Matrix products with the view on either side (2-D views only).
    if ndim == 2 {
        let (r, c) = (shape[0], shape[1]);
        let right_vals: Vec<f64> = (0..c * 2).map(|i| 1.0 - 0.3 * i as f64).collect();
        let right = arr(&right_vals, &[c, 2]);
        let want = matmul_ref(expected, &right_vals, r, c, 2);
        assert_close(&view.matmul(&right)?, &arr(&want, &[r, 2]), 1e-12, 1e-12);
        assert_close(&dense.matmul(&right)?, &arr(&want, &[r, 2]), 1e-12, 1e-12);
        let left_vals: Vec<f64> = (0..2 * r).map(|i| 0.2 * i as f64 - 0.5).collect();
        let left = arr(&left_vals, &[2, r]);
        let want = matmul_ref(&left_vals, expected, 2, r, c);
        assert_close(&left.matmul(view)?, &arr(&want, &[2, c]), 1e-12, 1e-12);
        // The view times its own transpose (both operands strided).
        let mut tr = vec![0.0; r * c];
        for i in 0..r {
            for j in 0..c {
                tr[j * r + i] = expected[i * c + j];
            }
        }
        let want = matmul_ref(expected, &tr, r, c, r);
        assert_close(&view.matmul(&view.t())?, &arr(&want, &[r, r]), 1e-12, 1e-12);
    }
    Ok(())
}

#[test]
fn ops_on_non_contiguous_views_match_contiguous_copies_and_hand_values() -> Result<()> {
    // base[i, j] = 4 i + j + 1 (positive, so log and sqrt apply).
    let base_vals: Vec<f64> = (0..12).map(|i| i as f64 + 1.0).collect();
    let base = arr(&base_vals, &[3, 4]);
    let at = |i: usize, j: usize| (4 * i + j + 1) as f64;

    // Transposed: t[j, i] = base[i, j].
    let mut t = vec![];
    for j in 0..4 {
        for i in 0..3 {
            t.push(at(i, j));
        }
    }
    check_ops_on_view(&base.t(), &t)?;

    // Flipped columns: f[i, j] = base[i, 3 - j].
    let mut f = vec![];
    for i in 0..3 {
        for j in 0..4 {
            f.push(at(i, 3 - j));
        }
    }
    check_ops_on_view(&base.flip(1)?, &f)?;

    // Both axes flipped then transposed: g[j, i] = base[2 - i, 3 - j].
    let mut g = vec![];
    for j in 0..4 {
        for i in 0..3 {
            g.push(at(2 - i, 3 - j));
        }
    }
    check_ops_on_view(&base.flip(0)?.flip(1)?.t(), &g)?;

    // Columns 3 and 1 (negative step): s[i, k] = base[i, 3 - 2 k].
    let mut sl = vec![];
    for i in 0..3 {
        for k in 0..2 {
            sl.push(at(i, 3 - 2 * k));
        }
    }
    check_ops_on_view(&base.slice_axis(1, 3, 0, -2)?, &sl)?;

    // Row 1 broadcast to (3, 4): every row is [5, 6, 7, 8].
    let row = base.slice_axis(0, 1, 2, 1)?.reshape(&[4])?;
    let b: Vec<f64> = (0..3).flat_map(|_| (0..4).map(|j| at(1, j))).collect();
    check_ops_on_view(&row.broadcast_to(&[3, 4])?, &b)?;

    // A column broadcast along a new trailing axis: c[i, k] = base[i, 0].
    let col = base.slice_axis(1, 0, 1, 1)?;
    let c: Vec<f64> = (0..3).flat_map(|i| (0..5).map(move |_| at(i, 0))).collect();
    check_ops_on_view(&col.broadcast_to(&[3, 5])?, &c)?;

    // A 3-D permutation: p[k, i, j] = cube[i, j, k] with cube = 1..=24 in (2, 3, 4).
    let cube = arr(&(1..=24).map(f64::from).collect::<Vec<_>>(), &[2, 3, 4]);
    let mut p = vec![];
    for k in 0..4 {
        for i in 0..2 {
            for j in 0..3 {
                p.push((12 * i + 4 * j + k + 1) as f64);
            }
        }
    }
    check_ops_on_view(&cube.transpose(Some(&[2, 0, 1]))?, &p)?;
    Ok(())
}

// ----- elementwise -----

#[test]
fn arithmetic_broadcasts_like_numpy() -> Result<()> {
    // (3, 1) + (4,) -> (3, 4): out[i, j] = x[i] + y[j].
    let x = arr(&[0.0, 10.0, 20.0], &[3, 1]);
    let y = arr(&[1.0, 2.0, 3.0, 4.0], &[4]);
    let sum = (&x + &y)?;
    assert_eq!(sum.shape(), &[3, 4]);
    assert_eq!(
        vals(&sum),
        vec![
            1.0, 2.0, 3.0, 4.0, 11.0, 12.0, 13.0, 14.0, 21.0, 22.0, 23.0, 24.0
        ]
    );
    let a = uniform(&[2, 3, 4], 1);
    let b = uniform(&[3, 1], 2).add_scalar(2.0)?; // in [1, 3): safe to divide by
    let (av, bv) = (vals(&a), vals(&b));
    let cases: [(Result<Array>, BinaryRef); 4] = [
        (&a + &b, |p, q| p + q),
        (&a - &b, |p, q| p - q),
        (&a * &b, |p, q| p * q),
        (&a / &b, |p, q| p / q),
    ];
    for (got, f) in cases {
        let want = zip_ref(&av, &[2, 3, 4], &bv, &[3, 1], &[2, 3, 4], f);
        assert_close(&got?, &arr(&want, &[2, 3, 4]), 0.0, 0.0);
    }
    // The other operand order, and a 0-d operand.
    let want = zip_ref(&bv, &[3, 1], &av, &[2, 3, 4], &[2, 3, 4], |p, q| p - q);
    assert_close(&(&b - &a)?, &arr(&want, &[2, 3, 4]), 0.0, 0.0);
    let two = Array::scalar(2.0f64);
    assert_eq!(vals(&(&y * &two)?), vec![2.0, 4.0, 6.0, 8.0]);
    assert_eq!((&two * &x)?.shape(), &[3, 1]);

    // Incompatible shapes and dtypes are errors.
    assert!((&y + &arr(&[1.0, 2.0, 3.0], &[3])).is_err());
    assert!((&y + &Array::ones(&[4], DType::F32)?).is_err());
    Ok(())
}

#[test]
fn scalar_operands_on_either_side() -> Result<()> {
    let x = arr(&[1.0, 2.0, 4.0], &[3]);
    assert_eq!(vals(&(&x + 1.0)?), vec![2.0, 3.0, 5.0]);
    assert_eq!(vals(&(&x - 1.0)?), vec![0.0, 1.0, 3.0]);
    assert_eq!(vals(&(&x * 3.0)?), vec![3.0, 6.0, 12.0]);
    assert_eq!(vals(&(&x / 4.0)?), vec![0.25, 0.5, 1.0]);
    assert_eq!(vals(&(2.0 - &x)?), vec![1.0, 0.0, -2.0]);
    assert_eq!(vals(&(8.0 / &x)?), vec![8.0, 4.0, 2.0]);
    assert_eq!(vals(&(3.0 * &x)?), vec![3.0, 6.0, 12.0]);
    assert_eq!(vals(&(1.0 + &x)?), vec![2.0, 3.0, 5.0]);
    assert_eq!(vals(&(-&x)?), vec![-1.0, -2.0, -4.0]);
    // Chained through Result: ((x * x) + x - 1) / 2 = (1, 2.5, 9.5).
    let w = (((&x * &x + &x)? - 1.0)? / 2.0)?;
    assert_eq!(vals(&w), vec![0.5, 2.5, 9.5]);
    // The scalar takes the array's dtype: 2.5 in f32 is exact; an int32 array cannot hold it,
    // and rounding it would be a wrong answer (kusari does not promote), so that is an error.
    let f = Array::from_vec(vec![1.0f32, 2.0], &[2])?;
    assert_eq!((&f + 2.5)?.to_vec::<f32>()?, vec![3.5, 4.5]);
    let i = Array::from_vec(vec![1i32, 2], &[2])?;
    assert!(matches!(
        &i + 2.5,
        Err(kusari::Error::ScalarNotRepresentable { .. })
    ));
    assert_eq!((&i + 2.0)?.to_vec::<i32>()?, vec![3, 4]);
    Ok(())
}

#[test]
fn float_math_matches_std() -> Result<()> {
    let u = vals(&uniform(&[4, 5], 3));
    let x = arr(&u, &[4, 5]);
    // Positive inputs for log, sqrt and fractional powers: |u| + 0.1.
    let pos_vals: Vec<f64> = u.iter().map(|v| v.abs() + 0.1).collect();
    let pos = arr(&pos_vals, &[4, 5]);
    let check = |got: Result<Array>, src: &[f64], f: fn(f64) -> f64| -> Result<()> {
        let want: Vec<f64> = src.iter().map(|&v| f(v)).collect();
        assert_close(&got?, &arr(&want, &[4, 5]), 1e-15, 1e-14);
        Ok(())
    };
    check(x.exp(), &u, f64::exp)?;
    check(pos.log(), &pos_vals, f64::ln)?;
    check(pos.sqrt(), &pos_vals, f64::sqrt)?;
    check(x.tanh(), &u, f64::tanh)?;
    check(x.sigmoid(), &u, |v| 1.0 / (1.0 + (-v).exp()))?;
    check(x.neg(), &u, |v| -v)?;
    check(x.abs(), &u, f64::abs)?;
    check(pos.pow_scalar(2.5), &pos_vals, |v| v.powf(2.5))?;
    check(x.pow_scalar(3.0), &u, |v| v * v * v)?;
    check(x.relu(), &u, |v| max_f(v, 0.0))?;
    check(x.sin(), &u, f64::sin)?;
    check(x.cos(), &u, f64::cos)?;
    // pow with a broadcast exponent: (4, 5) ** (5,).
    let e = [0.5, -1.0, 2.0, 3.0, 0.0];
    let got = pos.pow(&arr(&e, &[5]))?;
    let want: Vec<f64> = (0..20).map(|i| pos_vals[i].powf(e[i % 5])).collect();
    assert_close(&got, &arr(&want, &[4, 5]), 1e-15, 1e-14);
    // log and sqrt of non-positive values follow IEEE: -inf, NaN.
    let edge = arr(&[0.0, -1.0], &[2]).log()?;
    assert_eq!(vals(&edge)[0], f64::NEG_INFINITY);
    assert!(vals(&edge)[1].is_nan());

    // f32 and f16 compute too (f16 through its own precision: 2^-10 relative).
    let xf = x.astype(DType::F32)?;
    assert_close(
        &xf.exp()?,
        &arr(&u.iter().map(|v| v.exp()).collect::<Vec<_>>(), &[4, 5]),
        0.0,
        1e-6,
    );
    let xh = x.astype(DType::F16)?;
    let want: Vec<f64> = vals(&xh).iter().map(|v| v.tanh()).collect();
    assert_close(&xh.tanh()?, &arr(&want, &[4, 5]), 1e-3, 1e-3);
    // sin and cos in float32, float16 and bfloat16 (through float32, rounded once).
    for (dtype, tol) in [(DType::F32, 1e-6), (DType::F16, 1e-3), (DType::BF16, 8e-3)] {
        let xd = x.astype(dtype)?;
        let sin: Vec<f64> = vals(&xd).iter().map(|v| v.sin()).collect();
        let cos: Vec<f64> = vals(&xd).iter().map(|v| v.cos()).collect();
        assert_close(&xd.sin()?, &arr(&sin, &[4, 5]), tol, tol);
        assert_close(&xd.cos()?, &arr(&cos, &[4, 5]), tol, tol);
        assert_eq!((xd.sin()?.dtype(), xd.cos()?.dtype()), (dtype, dtype));
    }

    // Float-only ops reject integers and bools.
    let ints = Array::from_vec(vec![1i32, 2], &[2])?;
    assert!(ints.exp().is_err());
    assert!(ints.sin().is_err() && ints.cos().is_err());
    assert!(ints.sqrt().is_err());
    assert!(ints.pow(&ints).is_err());
    assert!(ints.pow_scalar(2.0).is_err());
    assert!(Array::from_vec(vec![true], &[1])?.log().is_err());
    Ok(())
}

#[test]
fn sigmoid_saturates_without_nan_or_overflow() -> Result<()> {
    let xs: [f64; 7] = [-1000.0, -50.0, -1.0, 0.0, 1.0, 50.0, 1000.0];
    // 1 / (1 + e^-x) in f64: e^1000 = inf gives exactly 0, e^-1000 = 0 gives exactly 1.
    let want: Vec<f64> = xs.iter().map(|&v| 1.0 / (1.0 + (-v).exp())).collect();
    let got = arr(&xs, &[7]).sigmoid()?;
    assert!(!got.has_nan()?);
    assert_close(&got, &arr(&want, &[7]), 0.0, 1e-15);
    assert_eq!(vals(&got)[0], 0.0);
    assert_eq!(vals(&got)[6], 1.0);
    assert_eq!(vals(&got)[3], 0.5);
    for dt in [DType::F32, DType::F16, DType::BF16] {
        let g = arr(&[-1000.0, -100.0, 0.0, 100.0, 1000.0], &[5])
            .astype(dt)?
            .sigmoid()?;
        assert!(!g.has_nan()?, "{dt}");
        let v = vals(&g);
        assert!(v.iter().all(|s| (0.0..=1.0).contains(s)), "{dt}: {v:?}");
        assert_eq!(v[2], 0.5);
        assert!(v[0] < 1e-30 && v[4] == 1.0, "{dt}: {v:?}");
    }
    Ok(())
}

#[test]
fn maximum_minimum_and_relu_propagate_nan() -> Result<()> {
    let nan = f64::NAN;
    let a = arr(&[1.0, nan, 3.0, -2.0], &[4]);
    let b = arr(&[2.0, 2.0, nan, -5.0], &[4]);
    let mx = vals(&a.maximum(&b)?);
    assert_eq!((mx[0], mx[3]), (2.0, -2.0));
    assert!(mx[1].is_nan() && mx[2].is_nan());
    let mn = vals(&a.minimum(&b)?);
    assert_eq!((mn[0], mn[3]), (1.0, -5.0));
    assert!(mn[1].is_nan() && mn[2].is_nan());
    let r = vals(&arr(&[-1.0, 0.0, 2.0, nan, -0.5], &[5]).relu()?);
    assert_eq!(r[..3], [0.0, 0.0, 2.0]);
    assert!(r[3].is_nan());
    assert_eq!(r[4], 0.0);
    // Broadcasting: maximum of (2, 1) and (3,).
    let m = arr(&[0.0, 5.0], &[2, 1]).maximum(&arr(&[-1.0, 1.0, 6.0], &[3]))?;
    assert_eq!(vals(&m), vec![0.0, 1.0, 6.0, 5.0, 5.0, 6.0]);
    // Integers too.
    let i = Array::from_vec(vec![3i32, -4], &[2])?;
    assert_eq!(i.relu()?.to_vec::<i32>()?, vec![3, 0]);
    assert_eq!(
        i.minimum(&Array::from_vec(vec![0i32, 0], &[2])?)?
            .to_vec::<i32>()?,
        vec![0, -4]
    );
    Ok(())
}

#[test]
fn comparisons_give_bool_arrays() -> Result<()> {
    let nan = f64::NAN;
    let a = arr(&[1.0, 2.0, 3.0, nan], &[4]);
    let b = arr(&[2.0, 2.0, 2.0, nan], &[4]);
    let cases: [(Result<Array>, [bool; 4]); 6] = [
        (a.eq(&b), [false, true, false, false]),
        (a.ne(&b), [true, false, true, true]),
        (a.lt(&b), [true, false, false, false]),
        (a.le(&b), [true, true, false, false]),
        (a.gt(&b), [false, false, true, false]),
        (a.ge(&b), [false, true, true, false]),
    ];
    for (got, want) in cases {
        let got = got?;
        assert_eq!(got.dtype(), DType::Bool);
        assert_eq!(got.to_vec::<bool>()?, want.to_vec());
    }
    // Broadcast (2, 1) < (3,): [[0 < 0, 0 < 1, 0 < 2], [5 < 0, 5 < 1, 5 < 2]].
    let c = arr(&[0.0, 5.0], &[2, 1]).lt(&arr(&[0.0, 1.0, 2.0], &[3]))?;
    assert_eq!(c.shape(), &[2, 3]);
    assert_eq!(
        c.to_vec::<bool>()?,
        vec![false, true, true, false, false, false]
    );
    assert_eq!(
        a.gt_scalar(1.5)?.to_vec::<bool>()?,
        vec![false, true, true, false]
    );
    let i = Array::from_vec(vec![1i64, 5], &[2])?;
    assert_eq!(
        i.ge(&Array::from_vec(vec![1i64, 6], &[2])?)?
            .to_vec::<bool>()?,
        vec![true, false]
    );
    let t = Array::from_vec(vec![true, false], &[2])?;
    assert_eq!(t.eq(&t)?.to_vec::<bool>()?, vec![true, true]);
    assert!(a.eq(&Array::ones(&[4], DType::F32)?).is_err());
    Ok(())
}

#[test]
fn where_cond_broadcasts_all_three_operands() -> Result<()> {
    // cond (2, 1), a (3,), b 0-d: row 0 takes a, row 1 takes b.
    let cond = Array::from_vec(vec![true, false], &[2, 1])?;
    let a = arr(&[1.0, 2.0, 3.0], &[3]);
    let b = Array::scalar(-1.0f64);
    let w = Array::where_cond(&cond, &a, &b)?;
    assert_eq!(w.shape(), &[2, 3]);
    assert_eq!(vals(&w), vec![1.0, 2.0, 3.0, -1.0, -1.0, -1.0]);
    // cond (3,) against a (2, 1) and b (2, 3).
    let cond = Array::from_vec(vec![false, true, false], &[3])?;
    let a = arr(&[10.0, 20.0], &[2, 1]);
    let b = arr(&seq(6), &[2, 3]);
    assert_eq!(
        vals(&Array::where_cond(&cond, &a, &b)?),
        vec![0.0, 10.0, 2.0, 3.0, 20.0, 5.0]
    );
    // Conditions must be bool, operands one dtype.
    assert!(Array::where_cond(&b, &a, &b).is_err());
    assert!(Array::where_cond(&cond, &a, &b.astype(DType::F32)?).is_err());
    Ok(())
}

#[test]
fn mul_add_and_map() -> Result<()> {
    // x (2, 1), y (3,), z 0-d: out[i, j] = x[i] * y[j] + z.
    let x = arr(&[1.0, -2.0], &[2, 1]);
    let y = arr(&[3.0, 4.0, 5.0], &[3]);
    let z = Array::scalar(0.5f64);
    assert_eq!(
        vals(&x.mul_add(&y, &z)?),
        vec![3.5, 4.5, 5.5, -5.5, -7.5, -9.5]
    );
    let i = Array::from_vec(vec![2i32, 3], &[2])?;
    assert_eq!(i.mul_add(&i, &i)?.to_vec::<i32>()?, vec![6, 12]);
    assert!(x.mul_add(&y, &Array::scalar(1.0f32)).is_err());

    let m = arr(&[1.0, -2.0, 3.0], &[3]).map(|v: f64| v * v + 1.0)?;
    assert_eq!(vals(&m), vec![2.0, 5.0, 10.0]);
    let positive = arr(&[1.0, -2.0, 0.0], &[3]).map(|v: f64| v > 0.0)?;
    assert_eq!(positive.dtype(), DType::Bool);
    assert_eq!(positive.to_vec::<bool>()?, vec![true, false, false]);
    let as_int = arr(&[1.5, 2.5], &[2]).map(|v: f64| (v * 2.0) as i64)?;
    assert_eq!(as_int.to_vec::<i64>()?, vec![3, 5]);
    // The closure's input type must be the dtype.
    assert!(arr(&[1.0], &[1]).map(|v: f32| v).is_err());
    Ok(())
}

#[test]
fn integer_arithmetic_wraps_and_never_panics() -> Result<()> {
    let a = Array::from_vec(vec![i32::MAX, i32::MIN, 7, -7, 5], &[5])?;
    let ones = Array::from_vec(vec![1i32; 5], &[5])?;
    assert_eq!(
        (&a + &ones)?.to_vec::<i32>()?,
        vec![i32::MIN, i32::MIN + 1, 8, -6, 6]
    );
    assert_eq!(
        (&a - &ones)?.to_vec::<i32>()?,
        vec![i32::MAX - 1, i32::MAX, 6, -8, 4]
    );
    // MAX * 2 = 2^32 - 2 wraps to -2; MIN * 2 = -2^32 wraps to 0.
    assert_eq!((&a * 2.0)?.to_vec::<i32>()?, vec![-2, 0, 14, -14, 10]);
    // Division truncates toward zero; by zero gives 0; MIN / -1 wraps to MIN.
    let d = Array::from_vec(vec![0i32, -1, 2, 2, 0], &[5])?;
    assert_eq!((&a / &d)?.to_vec::<i32>()?, vec![0, i32::MIN, 3, -3, 0]);
    assert_eq!((&a / 0.0)?.to_vec::<i32>()?, vec![0; 5]);
    assert_eq!(
        (10.0 / &Array::from_vec(vec![0i32, 3, -4], &[3])?)?.to_vec::<i32>()?,
        vec![0, 3, -2]
    );
    assert_eq!(
        a.neg()?.to_vec::<i32>()?,
        vec![-i32::MAX, i32::MIN, -7, 7, -5]
    );
    assert_eq!(a.abs()?.to_vec::<i32>()?, vec![i32::MAX, i32::MIN, 7, 7, 5]);

    let b = Array::from_vec(vec![i64::MAX, i64::MIN, 9], &[3])?;
    assert_eq!(
        (&b + 1.0)?.to_vec::<i64>()?,
        vec![i64::MIN, i64::MIN + 1, 10]
    );
    let d = Array::from_vec(vec![2i64, -1, 0], &[3])?;
    assert_eq!((&b / &d)?.to_vec::<i64>()?, vec![i64::MAX / 2, i64::MIN, 0]);

    // Bools have no arithmetic.
    let t = Array::from_vec(vec![true, false], &[2])?;
    assert!((&t + &t).is_err());
    assert!(t.neg().is_err());
    assert!((&t * 2.0).is_err());
    Ok(())
}

// ----- reductions -----

#[test]
fn reductions_over_any_axes() -> Result<()> {
    let shape = [2, 3, 4];
    let x = uniform(&shape, 11);
    let v = vals(&x);
    let cases: [(&[isize], Vec<usize>); 8] = [
        (&[0], vec![0]),
        (&[1], vec![1]),
        (&[2], vec![2]),
        (&[-1], vec![2]),
        (&[0, 2], vec![0, 2]),
        (&[-3, -1], vec![0, 2]),
        (&[2, 1], vec![1, 2]),
        (&[0, 1, 2], vec![0, 1, 2]),
    ];
    for (axes, norm) in cases {
        let out: Vec<usize> = (0..3)
            .filter(|a| !norm.contains(a))
            .map(|a| shape[a])
            .collect();
        let kept: Vec<usize> = (0..3)
            .map(|a| if norm.contains(&a) { 1 } else { shape[a] })
            .collect();
        let count: usize = norm.iter().map(|&a| shape[a]).product();
        let sum = reduce_ref(&v, &shape, &norm, 0.0, |a, b| a + b);
        let mean: Vec<f64> = sum.iter().map(|s| s / count as f64).collect();
        let max = reduce_ref(&v, &shape, &norm, f64::NEG_INFINITY, max_f);
        let min = reduce_ref(&v, &shape, &norm, f64::INFINITY, min_f);
        for (keepdims, s) in [(false, &out), (true, &kept)] {
            let ax = Some(axes);
            assert_close(
                &reduce(&x, "sum", ax, keepdims)?,
                &arr(&sum, s),
                1e-14,
                1e-14,
            );
            assert_close(
                &reduce(&x, "mean", ax, keepdims)?,
                &arr(&mean, s),
                1e-14,
                1e-14,
            );
            assert_close(&reduce(&x, "max", ax, keepdims)?, &arr(&max, s), 0.0, 0.0);
            assert_close(&reduce(&x, "min", ax, keepdims)?, &arr(&min, s), 0.0, 0.0);
        }
    }
    // None reduces everything, to a 0-d array (or all-ones with keepdims).
    let total: f64 = v.iter().sum();
    assert_close(&x.sum()?, &Array::scalar(total), 1e-14, 1e-14);
    assert_close(&x.sum()?, &Array::scalar(total), 1e-14, 1e-14);
    assert_eq!(reduce(&x, "sum", None, true)?.shape(), &[1, 1, 1]);
    assert_close(&x.mean()?, &Array::scalar(total / 24.0), 1e-14, 1e-14);
    assert_eq!(
        x.max()?.item::<f64>()?,
        v.iter().cloned().fold(f64::NEG_INFINITY, max_f)
    );
    // No axes: nothing reduced.
    assert_eq!(vals(&x.sum_axes(&[], false)?), v);
    // Integers: [[1, 2, 3], [4, 5, 6]].
    let i = Array::from_vec(vec![1i32, 2, 3, 4, 5, 6], &[2, 3])?;
    assert_eq!(i.sum_axes(&[0], false)?.to_vec::<i32>()?, vec![5, 7, 9]);
    assert_eq!(i.max_axes(&[1], false)?.to_vec::<i32>()?, vec![3, 6]);
    assert_eq!(i.min()?.item::<i32>()?, 1);
    let wrap = Array::from_vec(vec![i32::MAX, 1], &[2])?;
    assert_eq!(wrap.sum()?.item::<i32>()?, i32::MIN);
    let neg = Array::from_vec(vec![i64::MIN, i64::MIN], &[2])?;
    assert_eq!(neg.max()?.item::<i64>()?, i64::MIN);
    // Errors: repeated or out-of-range axes, mean of integers, sums of bools.
    assert!(x.sum_axes(&[0, 0], false).is_err());
    assert!(x.sum_axes(&[0, -3], false).is_err());
    assert!(x.sum_axes(&[3], false).is_err());
    assert!(x.max_axes(&[-4], false).is_err());
    assert!(i.mean().is_err());
    assert!(Array::from_vec(vec![true], &[1])?.sum().is_err());
    Ok(())
}

#[test]
fn reductions_of_empty_axes() -> Result<()> {
    let e = Array::zeros(&[2, 0], DType::F64)?;
    assert!(e.max_axes(&[1], false).is_err());
    assert!(e.min_axes(&[1], false).is_err());
    assert!(e.max().is_err());
    // Reducing the non-empty axis of an empty array is fine and empty.
    assert_eq!(e.max_axes(&[0], false)?.shape(), &[0]);
    // An empty sum is 0 (and an empty mean is 0 / 0).
    assert_eq!(vals(&e.sum_axes(&[1], false)?), vec![0.0, 0.0]);
    assert_eq!(e.sum()?.item::<f64>()?, 0.0);
    assert!(e.mean_axes(&[1], false)?.has_nan()?);
    Ok(())
}

#[test]
fn half_precision_sums_accumulate_in_f32() -> Result<()> {
    // Summed in f16 the total would stop at 2048 (2048 + 1 rounds back to 2048); 10000 is exact
    // in f16 (625 * 16, 10 significant bits).
    let ones = Array::ones(&[10_000], DType::F16)?;
    let s = ones.sum()?;
    assert_eq!(s.dtype(), DType::F16);
    assert_eq!(s.to_f64_vec()?, vec![10_000.0]);
    assert_eq!(ones.mean()?.to_f64_vec()?, vec![1.0]);
    let rows = Array::ones(&[4, 5000], DType::F16)?.sum_axes(&[1], true)?;
    assert_eq!(rows.shape(), &[4, 1]);
    assert_eq!(rows.to_f64_vec()?, vec![5000.0; 4]);
    // bf16 would stop at 256; 1000 = 125 * 8 is exact in bf16.
    let b = Array::ones(&[1000], DType::BF16)?.sum()?;
    assert_eq!(b.to_f64_vec()?, vec![1000.0]);
    Ok(())
}

#[test]
fn nan_propagates_through_reductions() -> Result<()> {
    let nan = f64::NAN;
    for data in [[1.0, nan, 3.0], [nan, 1.0, 3.0], [1.0, 3.0, nan]] {
        let a = arr(&data, &[3]);
        assert!(a.max()?.item::<f64>()?.is_nan(), "{data:?}");
        assert!(a.min()?.item::<f64>()?.is_nan(), "{data:?}");
        assert!(a.sum()?.item::<f64>()?.is_nan(), "{data:?}");
    }
    // [[1, NaN], [2, 3]]: max over rows [2, NaN], over columns [NaN, 3].
    let m = arr(&[1.0, nan, 2.0, 3.0], &[2, 2]);
    let r0 = vals(&m.max_axes(&[0], false)?);
    assert!(r0[0] == 2.0 && r0[1].is_nan());
    let r1 = vals(&m.max_axes(&[1], false)?);
    assert!(r1[0].is_nan() && r1[1] == 3.0);
    let f = arr(&[1.0, nan], &[2]).astype(DType::F32)?;
    assert!(f.max()?.has_nan()?);
    Ok(())
}

// ----- matmul -----

#[test]
fn matmul_2d_matches_a_loop() -> Result<()> {
    let (n, k, m) = (3, 4, 5);
    let a = uniform(&[n, k], 21);
    let b = uniform(&[k, m], 22);
    let want = matmul_ref(&vals(&a), &vals(&b), n, k, m);
    let got = a.matmul(&b)?;
    assert_eq!(got.shape(), &[n, m]);
    assert_close(&got, &arr(&want, &[n, m]), 1e-14, 1e-14);
    // f32 agrees to f32 precision.
    let got32 = a.astype(DType::F32)?.matmul(&b.astype(DType::F32)?)?;
    assert_eq!(got32.dtype(), DType::F32);
    assert_close(&got32, &arr(&want, &[n, m]), 1e-6, 1e-5);
    // [[1, 2], [3, 4]] @ [[5, 6], [7, 8]] = [[19, 22], [43, 50]].
    assert_eq!(
        vals(&arr(&[1.0, 2.0, 3.0, 4.0], &[2, 2]).matmul(&arr(&[5.0, 6.0, 7.0, 8.0], &[2, 2]))?),
        vec![19.0, 22.0, 43.0, 50.0]
    );
    // An empty inner dimension gives zeros.
    let z = Array::zeros(&[3, 0], DType::F64)?.matmul(&Array::zeros(&[0, 2], DType::F64)?)?;
    assert_eq!((z.shape(), vals(&z)), (&[3usize, 2][..], vec![0.0; 6]));
    Ok(())
}

#[test]
fn matmul_promotes_1d_operands() -> Result<()> {
    let v = arr(&[1.0, 2.0, 3.0], &[3]);
    let w = arr(&[4.0, 5.0, 6.0], &[3]);
    // 1*4 + 2*5 + 3*6 = 32, as a 0-d array.
    let dot = v.matmul(&w)?;
    assert_eq!(dot.shape(), &[] as &[usize]);
    assert_eq!(dot.item::<f64>()?, 32.0);
    // m = [[1, 0, 2], [0, 1, -1]]: m @ v = [1 + 6, 2 - 3] = [7, -1].
    let m = arr(&[1.0, 0.0, 2.0, 0.0, 1.0, -1.0], &[2, 3]);
    let mv = m.matmul(&v)?;
    assert_eq!(mv.shape(), &[2]);
    assert_eq!(vals(&mv), vec![7.0, -1.0]);
    // [1, 2] @ m = [1, 2, 2 - 2] = [1, 2, 0].
    let vm = arr(&[1.0, 2.0], &[2]).matmul(&m)?;
    assert_eq!(vm.shape(), &[3]);
    assert_eq!(vals(&vm), vec![1.0, 2.0, 0.0]);
    // A vector against a batch: (3,) @ (2, 3, 2) -> (2, 2), each batch's v @ b[i].
    let b = uniform(&[2, 3, 2], 5);
    let bv = vals(&b);
    let got = v.matmul(&b)?;
    assert_eq!(got.shape(), &[2, 2]);
    let mut want = vec![];
    for i in 0..2 {
        want.extend(matmul_ref(
            &[1.0, 2.0, 3.0],
            &bv[i * 6..(i + 1) * 6],
            1,
            3,
            2,
        ));
    }
    assert_close(&got, &arr(&want, &[2, 2]), 1e-14, 1e-14);
    // And a batch against a vector: (2, 2, 3) @ (3,) -> (2, 2).
    let c = uniform(&[2, 2, 3], 6);
    let cv = vals(&c);
    let want = matmul_ref(&cv, &[1.0, 2.0, 3.0], 4, 3, 1);
    assert_close(&c.matmul(&v)?, &arr(&want, &[2, 2]), 1e-14, 1e-14);
    Ok(())
}

#[test]
fn batched_matmul_broadcasts_batch_axes() -> Result<()> {
    // (2, 1, 3, 4) @ (5, 4, 2) -> (2, 5, 3, 2): out[i, j] = a[i, 0] @ b[j].
    let a = uniform(&[2, 1, 3, 4], 31);
    let b = uniform(&[5, 4, 2], 32);
    let (av, bv) = (vals(&a), vals(&b));
    let got = a.matmul(&b)?;
    assert_eq!(got.shape(), &[2, 5, 3, 2]);
    let mut want = vec![];
    for i in 0..2 {
        for j in 0..5 {
            want.extend(matmul_ref(
                &av[i * 12..(i + 1) * 12],
                &bv[j * 8..(j + 1) * 8],
                3,
                4,
                2,
            ));
        }
    }
    assert_close(&got, &arr(&want, &[2, 5, 3, 2]), 1e-14, 1e-14);
    // A 2-D operand broadcasts against a batch: (3, 4) @ (5, 4, 2) -> (5, 3, 2).
    let a2 = uniform(&[3, 4], 33);
    let a2v = vals(&a2);
    let mut want = vec![];
    for j in 0..5 {
        want.extend(matmul_ref(&a2v, &bv[j * 8..(j + 1) * 8], 3, 4, 2));
    }
    assert_close(&a2.matmul(&b)?, &arr(&want, &[5, 3, 2]), 1e-14, 1e-14);
    // Mismatched batch or inner dimensions, 0-d operands, bools and mixed dtypes are errors.
    assert!(
        uniform(&[2, 3, 4], 1)
            .matmul(&uniform(&[3, 4, 2], 2))
            .is_err()
    );
    assert!(a2.matmul(&uniform(&[3, 2], 2)).is_err());
    assert!(a2.matmul(&Array::scalar(1.0f64)).is_err());
    assert!(Array::scalar(1.0f64).matmul(&a2).is_err());
    let t = Array::from_vec(vec![true; 4], &[2, 2])?;
    assert!(t.matmul(&t).is_err());
    assert!(a2.matmul(&uniform(&[4, 2], 2).astype(DType::F32)?).is_err());
    Ok(())
}

#[test]
fn integer_and_half_precision_matmul() -> Result<()> {
    // [[1, 2], [3, 4]] @ [[5, 6], [7, 8]] = [[19, 22], [43, 50]].
    let a = Array::from_vec(vec![1i32, 2, 3, 4], &[2, 2])?;
    let b = Array::from_vec(vec![5i32, 6, 7, 8], &[2, 2])?;
    let p = a.matmul(&b)?;
    assert_eq!(p.dtype(), DType::I32);
    assert_eq!(p.to_vec::<i32>()?, vec![19, 22, 43, 50]);
    // Transposed integer operand: a^T @ b = [[1*5 + 3*7, 1*6 + 3*8], [2*5 + 4*7, 2*6 + 4*8]].
    assert_eq!(a.t().matmul(&b)?.to_vec::<i32>()?, vec![26, 30, 38, 44]);
    let a64 = a.astype(DType::I64)?;
    let v64 = Array::from_vec(vec![1i64, -1], &[2])?;
    assert_eq!(a64.matmul(&v64)?.to_vec::<i64>()?, vec![-1, -1]);
    assert_eq!(
        a64.matmul(&b.astype(DType::I64)?)?.to_vec::<i64>()?,
        vec![19, 22, 43, 50]
    );
    for dt in [DType::F16, DType::BF16] {
        let h = a.astype(dt)?.matmul(&b.astype(dt)?)?;
        assert_eq!(h.dtype(), dt);
        assert_eq!(h.to_f64_vec()?, vec![19.0, 22.0, 43.0, 50.0]);
        let hv = a.astype(dt)?.matmul(&v64.astype(dt)?)?;
        assert_eq!(
            (hv.shape(), hv.to_f64_vec()?),
            (&[2usize][..], vec![-1.0, -1.0])
        );
    }
    // f16 random values: compared with the loop on the f16-rounded inputs, to f16 precision.
    let x = uniform(&[3, 8], 41).astype(DType::F16)?;
    let y = uniform(&[8, 2], 42).astype(DType::F16)?;
    let want = matmul_ref(&vals(&x), &vals(&y), 3, 8, 2);
    assert_close(&x.matmul(&y)?, &arr(&want, &[3, 2]), 2e-3, 2e-3);
    Ok(())
}

#[test]
fn matmul_of_strided_operands() -> Result<()> {
    let a = uniform(&[4, 3], 51); // used as a^T: (3, 4)
    let b = uniform(&[4, 5], 52);
    let (av, bv) = (vals(&a), vals(&b));
    let mut at = vec![0.0; 12];
    for i in 0..4 {
        for j in 0..3 {
            at[j * 4 + i] = av[i * 3 + j];
        }
    }
    let want = matmul_ref(&at, &bv, 3, 4, 5);
    assert_close(&a.t().matmul(&b)?, &arr(&want, &[3, 5]), 1e-14, 1e-14);
    assert_close(
        &a.t().contiguous()?.matmul(&b)?,
        &arr(&want, &[3, 5]),
        1e-14,
        1e-14,
    );
    // b with its rows reversed: row i of the flip is row 3 - i.
    let mut bf = vec![0.0; 20];
    for i in 0..4 {
        bf[i * 5..(i + 1) * 5].copy_from_slice(&bv[(3 - i) * 5..(4 - i) * 5]);
    }
    let want = matmul_ref(&at, &bf, 3, 4, 5);
    assert_close(
        &a.t().matmul(&b.flip(0)?)?,
        &arr(&want, &[3, 5]),
        1e-14,
        1e-14,
    );
    // A broadcast left operand: one row repeated three times.
    let row = arr(&[1.0, -1.0, 0.5, 2.0], &[4]);
    let rows = row.broadcast_to(&[3, 4])?;
    let one = matmul_ref(&[1.0, -1.0, 0.5, 2.0], &bv, 1, 4, 5);
    let want: Vec<f64> = (0..3).flat_map(|_| one.clone()).collect();
    assert_close(&rows.matmul(&b)?, &arr(&want, &[3, 5]), 1e-14, 1e-14);
    assert_close(
        &rows.contiguous()?.matmul(&b)?,
        &arr(&want, &[3, 5]),
        1e-14,
        1e-14,
    );
    // A batch of transposed matrices: (2, 4, 3) transposed to (2, 3, 4), times (4, 2).
    let batch = uniform(&[2, 4, 3], 53);
    let btv = vals(&batch);
    let r = uniform(&[4, 2], 54);
    let rv = vals(&r);
    let mut want = vec![];
    for n in 0..2 {
        let mut t = vec![0.0; 12];
        for i in 0..4 {
            for j in 0..3 {
                t[j * 4 + i] = btv[n * 12 + i * 3 + j];
            }
        }
        want.extend(matmul_ref(&t, &rv, 3, 4, 2));
    }
    let bt = batch.transpose(Some(&[0, 2, 1]))?;
    assert_close(&bt.matmul(&r)?, &arr(&want, &[2, 3, 2]), 1e-14, 1e-14);
    assert_close(
        &bt.contiguous()?.matmul(&r)?,
        &arr(&want, &[2, 3, 2]),
        1e-14,
        1e-14,
    );
    Ok(())
}

// ----- large arrays (the parallel paths) -----

const BIG: usize = 200_000;

#[test]
fn large_elementwise_matches_a_plain_loop() -> Result<()> {
    let (x, y, z) = (
        uniform(&[BIG], 61),
        uniform(&[BIG], 62),
        uniform(&[BIG], 63),
    );
    let (xv, yv, zv) = (vals(&x), vals(&y), vals(&z));
    let want: Vec<f64> = (0..BIG).map(|i| xv[i] * yv[i] + zv[i]).collect();
    let want = arr(&want, &[BIG]);
    assert_close(&((&x * &y)? + &z)?, &want, 0.0, 0.0);
    assert_close(&x.mul_add(&y, &z)?, &want, 0.0, 0.0);
    let e: Vec<f64> = xv.iter().map(|v| v.exp()).collect();
    assert_close(&x.exp()?, &arr(&e, &[BIG]), 0.0, 1e-15);
    let gt = x.gt(&y)?.to_vec::<bool>()?;
    assert!((0..BIG).all(|i| gt[i] == (xv[i] > yv[i])));
    let w = vals(&Array::where_cond(&x.gt(&y)?, &x, &y)?);
    assert!((0..BIG).all(|i| w[i] == max_f(xv[i], yv[i])));
    // f32 too (the same chunked path for another element type).
    let (xf, yf) = (x.astype(DType::F32)?, y.astype(DType::F32)?);
    let (xfv, yfv) = (xf.to_vec::<f32>()?, yf.to_vec::<f32>()?);
    let p = (&xf * &yf)?.to_vec::<f32>()?;
    assert!((0..BIG).all(|i| p[i] == xfv[i] * yfv[i]));
    Ok(())
}

#[test]
fn large_broadcast_and_strided_operands_match_a_plain_loop() -> Result<()> {
    let (r, c) = (400, 500);
    let a = uniform(&[r, c], 71);
    let row = uniform(&[c], 72);
    let col = uniform(&[r, 1], 73);
    let (av, rv, cv) = (vals(&a), vals(&row), vals(&col));
    // a * col + row, broadcasting both.
    let got = ((&a * &col)? + &row)?;
    let want: Vec<f64> = (0..r * c).map(|f| av[f] * cv[f / c] + rv[f % c]).collect();
    assert_close(&got, &arr(&want, &[r, c]), 0.0, 0.0);
    let fused = a.mul_add(&col, &row)?;
    assert_close(&fused, &arr(&want, &[r, c]), 0.0, 0.0);

    // A transposed (c, r) array viewed as (r, c): t[i, j] = b[j, i].
    let b = uniform(&[c, r], 74);
    let bv = vals(&b);
    let bt = b.t();
    let want: Vec<f64> = (0..r * c)
        .map(|f| bv[(f % c) * r + f / c] + av[f])
        .collect();
    assert_close(&(&bt + &a)?, &arr(&want, &[r, c]), 0.0, 0.0);
    let tv: Vec<f64> = (0..r * c).map(|f| bv[(f % c) * r + f / c]).collect();
    assert_eq!(vals(&bt.contiguous().unwrap()), tv);
    let sq: Vec<f64> = tv.iter().map(|t| t * t).collect();
    assert_close(&bt.map(|v: f64| v * v)?, &arr(&sq, &[r, c]), 0.0, 0.0);
    // A flipped array: f[i] = x[n - 1 - i].
    let x = uniform(&[BIG], 75);
    let xv = vals(&x);
    let fl: Vec<f64> = (0..BIG).map(|i| xv[BIG - 1 - i].tanh()).collect();
    assert_close(&x.flip(0)?.tanh()?, &arr(&fl, &[BIG]), 0.0, 1e-15);
    // Large reductions: everything, an axis of a strided view, NaN far into the data.
    let total: f64 = xv.iter().sum();
    assert_close(&x.sum()?, &Array::scalar(total), 1e-9, 1e-12);
    let col_sums = reduce_ref(&want, &[r, c], &[0], 0.0, |p, q| p + q);
    assert_close(
        &(&bt + &a)?.sum_axes(&[0], false)?,
        &arr(&col_sums, &[c]),
        1e-12,
        1e-12,
    );
    let bt_max = reduce_ref(&vals(&bt), &[r, c], &[1], f64::NEG_INFINITY, max_f);
    assert_close(&bt.max_axes(&[1], false)?, &arr(&bt_max, &[r]), 0.0, 0.0);
    let mut with_nan = xv.clone();
    with_nan[150_000] = f64::NAN;
    assert!(arr(&with_nan, &[BIG]).max()?.item::<f64>()?.is_nan());
    assert_eq!(
        x.max()?.item::<f64>()?,
        xv.iter().cloned().fold(f64::NEG_INFINITY, max_f)
    );
    Ok(())
}

#[test]
fn empty_arrays_through_every_path() -> Result<()> {
    // (0, 3): contiguous; its transpose (3, 0) is not.
    let e = Array::zeros(&[0, 3], DType::F64)?;
    let et = e.t();
    assert!(!et.is_contiguous());
    assert_eq!(et.exp()?.shape(), &[3, 0]);
    assert_eq!(et.map(|v: f64| v + 1.0)?.shape(), &[3, 0]);
    assert_eq!(et.contiguous().unwrap().shape(), &[3, 0]);
    assert!(et.to_vec::<f64>()?.is_empty());
    // Broadcasting against a bias, as a linear layer on an empty batch does.
    let bias = arr(&[1.0, 2.0, 3.0], &[3]);
    assert_eq!((&e + &bias)?.shape(), &[0, 3]);
    assert_eq!(e.mul_add(&bias, &bias)?.shape(), &[0, 3]);
    assert_eq!(
        Array::where_cond(&e.gt(&bias)?, &e, &bias)?.shape(),
        &[0, 3]
    );
    assert_eq!((&et + &et)?.shape(), &[3, 0]);
    assert_eq!(et.sum_axes(&[0], false)?.shape(), &[0]);
    assert_eq!(vals(&et.sum_axes(&[1], false)?), vec![0.0; 3]);
    assert_eq!(
        e.matmul(&Array::zeros(&[3, 2], DType::F64)?)?.shape(),
        &[0, 2]
    );
    Ok(())
}

#[test]
fn empty_strided_arrays_convert_to_ndarray() -> Result<()> {
    let et = Array::zeros(&[0, 3], DType::F32)?.t();
    let nd = et.to_ndarray::<f32>()?;
    assert_eq!(nd.shape(), &[3, 0]);
    assert_eq!(et.view::<f32>()?.len(), 0);
    let flipped = Array::zeros(&[2, 0], DType::I32)?.flip(0)?;
    assert_eq!(flipped.to_ndarray::<i32>()?.shape(), &[2, 0]);
    Ok(())
}

/// `astype` as NumPy: integers wrap, a float rounds once (never through float64 first), float
/// to integer truncates and saturates with NaN to 0.
#[test]
fn astype_wraps_integers_rounds_once_and_saturates_floats() {
    let big = Array::from_vec(
        vec![
            (1i64 << 32) + 5,
            -(1i64 << 31) - 1,
            i64::MAX,
            (1i64 << 60) + (1i64 << 36) + 1,
        ],
        &[4],
    )
    .unwrap();
    assert_eq!(
        big.astype(DType::I32).unwrap().to_vec::<i32>().unwrap(),
        [5, i32::MAX, -1, 1]
    );
    // 2^60 + 2^36 + 1 is above the float32 halfway point 2^60 + 2^36; through float64 it would
    // land on the halfway point and round to even, 2^60.
    let f = big.astype(DType::F32).unwrap().to_vec::<f32>().unwrap();
    assert_eq!(f[3], ((1u64 << 60) + (1u64 << 37)) as f32);
    assert_eq!(f[3].to_bits(), 0x5d80_0001);
    let floats = Array::from_vec(
        vec![f64::NAN, f64::INFINITY, -1e30, 3.99, -3.99, 2147483647.5],
        &[6],
    )
    .unwrap();
    assert_eq!(
        floats.astype(DType::I32).unwrap().to_vec::<i32>().unwrap(),
        [0, i32::MAX, i32::MIN, 3, -3, i32::MAX]
    );
    assert_eq!(
        floats.astype(DType::I64).unwrap().to_vec::<i64>().unwrap(),
        [0, i64::MAX, i64::MIN, 3, -3, 2147483647]
    );
    assert_eq!(
        floats
            .astype(DType::Bool)
            .unwrap()
            .to_vec::<bool>()
            .unwrap(),
        [true, true, true, true, true, true]
    );
}

// ----- indexing, joining, splitting, padding -----

/// `0, 1, 2, ...` of `dtype` in `shape`.
fn iota(shape: &[usize], dtype: DType) -> Array {
    let n: usize = shape.iter().product();
    Array::arange(0.0, n as f64, 1.0, dtype)
        .and_then(|a| a.reshape(shape))
        .expect("a small shape")
}

/// Basic indices are views with NumPy's values (written out by hand for `x = arange(24)`
/// shaped `(2, 3, 4)`).
#[test]
fn basic_indexing_is_a_view_with_numpys_values() -> Result<()> {
    use kusari::Ix;
    let x = iota(&[2, 3, 4], DType::F64);
    // x[1, ::-1, 1:4:2]
    let y = x.get_item(&[
        Ix::Int(1),
        Ix::slice(None, None, -1),
        Ix::slice(Some(1), Some(4), 2),
    ])?;
    assert_eq!(y.shape(), &[3, 2]);
    assert!(y.shares_buffer(&x));
    assert_eq!(vals(&y), vec![21.0, 23.0, 17.0, 19.0, 13.0, 15.0]);
    // x[..., None], x[None, 0], x[1, 2, 3] (0-d), x[0, -10:10], x[0, 5:], x[0, 0, 3:0:-2]
    assert_eq!(
        x.get_item(&[Ix::Ellipsis, Ix::NewAxis])?.shape(),
        &[2, 3, 4, 1]
    );
    assert_eq!(x.get_item(&[Ix::NewAxis, Ix::Int(0)])?.shape(), &[1, 3, 4]);
    let e = x.get_item(&[Ix::Int(1), Ix::Int(2), Ix::Int(3)])?;
    assert_eq!((e.shape(), vals(&e)), (&[][..], vec![23.0]));
    assert_eq!(
        vals(&x.get_item(&[Ix::Int(0), Ix::range(-10, 10)])?),
        seq(12)
    );
    assert_eq!(
        x.get_item(&[Ix::Int(0), Ix::slice(Some(5), None, 1)])?
            .shape(),
        &[0, 4]
    );
    let r = x.get_item(&[Ix::Int(0), Ix::Int(0), Ix::slice(Some(3), Some(0), -2)])?;
    assert_eq!(vals(&r), vec![3.0, 1.0]);
    // x[-1:-3:-1, ..., ::-3]
    let r = x.get_item(&[Ix::range(-1, -3), Ix::Ellipsis])?;
    assert_eq!(r.shape(), &[0, 3, 4]); // -1:-3 with step 1 is empty, as in Python
    let r = x.get_item(&[
        Ix::slice(Some(-1), Some(-3), -1),
        Ix::Ellipsis,
        Ix::slice(None, None, -3),
    ])?;
    // -1:-3:-1 over 2 rows is rows 1 and 0 (Python: slice(-1, -3, -1).indices(2) is (1, -1, -1)).
    assert_eq!(r.shape(), &[2, 3, 2]);
    let want = [
        15.0, 12.0, 19.0, 16.0, 23.0, 20.0, 3.0, 0.0, 7.0, 4.0, 11.0, 8.0,
    ];
    assert_eq!(vals(&r), want);
    Ok(())
}

/// Integer-array indexing gathers in every dtype, with NumPy's placement of the index's axes.
#[test]
fn integer_array_indexing_gathers_in_every_dtype() -> Result<()> {
    use kusari::Ix;
    let idx = Array::from_vec(vec![2i32, -3, 2], &[3])?;
    for dtype in [
        DType::I32,
        DType::I64,
        DType::F16,
        DType::BF16,
        DType::F32,
        DType::F64,
    ] {
        let x = iota(&[3, 2], dtype);
        let y = x.get_item(&[Ix::Array(&idx)])?;
        assert_eq!((y.dtype(), y.shape()), (dtype, &[3, 2][..]));
        assert_eq!(vals(&y), vec![4.0, 5.0, 0.0, 1.0, 4.0, 5.0], "{dtype}");
    }
    let b = Array::from_vec(vec![true, false, false, true], &[2, 2])?;
    let one = Array::from_vec(vec![1i64], &[1])?;
    let y = b.get_item(&[Ix::all(), Ix::Array(&one)])?;
    assert_eq!(
        (y.shape(), y.to_vec::<bool>()?),
        (&[2, 1][..], vec![false, true])
    );
    // x[0, :, idx] (apart: the index's axis first) and x[:, 0, idx] (adjacent: in place).
    let x = iota(&[2, 3, 4], DType::F64);
    let i = Array::from_vec(vec![3i64, 0], &[2])?;
    let apart = x.get_item(&[Ix::Int(0), Ix::all(), Ix::Array(&i)])?;
    assert_eq!(apart.shape(), &[2, 3]);
    assert_eq!(vals(&apart), vec![3.0, 7.0, 11.0, 0.0, 4.0, 8.0]);
    let adjacent = x.get_item(&[Ix::all(), Ix::Int(0), Ix::Array(&i)])?;
    assert_eq!(adjacent.shape(), &[2, 2]);
    assert_eq!(vals(&adjacent), vec![3.0, 0.0, 15.0, 12.0]);
    // An empty index array gives an empty axis.
    let none = Array::from_vec(Vec::<i64>::new(), &[0])?;
    assert_eq!(x.get_item(&[Ix::Array(&none)])?.shape(), &[0, 3, 4]);
    Ok(())
}

#[test]
fn concat_stack_split_and_pad_in_integer_dtypes_and_with_empty_pieces() -> Result<()> {
    let a = iota(&[2, 2], DType::I64);
    let empty = Array::zeros(&[2, 0], DType::I64)?;
    let b = Array::full(&[2, 1], 7.0, DType::I64)?;
    let c = Array::concat(&[&a, &empty, &b.t().t()], 1)?;
    assert_eq!(c.to_vec::<i64>()?, vec![0, 1, 7, 2, 3, 7]);
    // A transposed (strided) piece is read in its logical order.
    let c = Array::concat(&[&a.t(), &a], 0)?;
    assert_eq!(c.to_vec::<i64>()?, vec![0, 2, 1, 3, 0, 1, 2, 3]);
    let s = Array::stack(&[&a, &a.t()], 0)?;
    assert_eq!(s.shape(), &[2, 2, 2]);
    assert_eq!(s.to_vec::<i64>()?, vec![0, 1, 2, 3, 0, 2, 1, 3]);
    let parts = iota(&[5], DType::I32).split_axis(&[0, 2, 2], 0)?;
    let sizes: Vec<usize> = parts.iter().map(|p| p.size()).collect();
    assert_eq!(sizes, vec![0, 2, 0, 3]);
    assert_eq!(parts[3].to_vec::<i32>()?, vec![2, 3, 4]);
    let p = a.pad(&[(0, 1), (1, 0)], "constant", -1.0)?;
    assert_eq!(p.to_vec::<i64>()?, vec![-1, 0, 1, -1, 2, 3, -1, -1, -1]);
    let flipped = a.flip(1)?.pad(&[(0, 0)], "constant", 0.0)?;
    assert_eq!(flipped.to_vec::<i64>()?, vec![1, 0, 3, 2]);
    Ok(())
}
