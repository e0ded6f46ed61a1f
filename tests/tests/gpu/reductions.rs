//! Reductions and matrix products on the GPU against the host's: every axis set, NaN, empty and
//! half-precision inputs, and few long rows split across blocks.

use super::*;

#[test]
fn reductions_match_the_host() {
    let Some(dev) = gpu("reductions_match_the_host") else {
        return;
    };
    let _suite = shared();
    let axes_list: [Option<&[isize]>; 8] = [
        None,
        Some(&[0]),
        Some(&[1]),
        Some(&[2]),
        Some(&[0, 2]),
        Some(&[-1]),
        Some(&[1, 2]),
        Some(&[]),
    ];
    for dtype in DType::INTEGERS.into_iter().chain([DType::F32, DType::F64]) {
        let inputs = [values(&[3, 4, 5], dtype, 170)];
        for axes in axes_list {
            for keepdims in [false, true] {
                let what = |op: &str| format!("{op} {dtype} axes {axes:?} keepdims {keepdims}");
                let t = tol(dtype, Math::Arith);
                same(dev, &what("sum"), &inputs, t, |x| {
                    reduce(&x[0], "sum", axes, keepdims)
                });
                same(dev, &what("max"), &inputs, t, |x| {
                    reduce(&x[0], "max", axes, keepdims)
                });
                same(dev, &what("min"), &inputs, t, |x| {
                    reduce(&x[0], "min", axes, keepdims)
                });
                if dtype.is_float() {
                    same(dev, &what("mean"), &inputs, t, |x| {
                        reduce(&x[0], "mean", axes, keepdims)
                    });
                }
                // Of views: transposed, flipped, sliced.
                same(dev, &what("sum of transposed"), &inputs, t, |x| {
                    reduce(&x[0].t(), "sum", axes, keepdims)
                });
                same(dev, &what("max of flipped"), &inputs, t, |x| {
                    reduce(&x[0].flip(2)?, "max", axes, keepdims)
                });
                same(dev, &what("min of sliced"), &inputs, t, |x| {
                    reduce(&x[0].slice_axis(2, 4, 0, -2)?, "min", axes, keepdims)
                });
            }
        }
        // Rows longer than a block, more rows than the grid, and a reduction over the first axis
        // of a large array (transposed before reducing).
        for (shape, axes) in [
            (&[3, 1000][..], &[1isize][..]),
            (&[5000, 3], &[1]),
            (&[1000, 7], &[0]),
            (&[2, 3, 700], &[0, 2]),
        ] {
            let inputs = [values(shape, dtype, 180)];
            let t = tol(dtype, Math::Arith);
            let what = |op: &str| format!("{op} {dtype} {shape:?} axes {axes:?}");
            same(dev, &what("sum"), &inputs, t, |x| {
                x[0].sum_axes(axes, false)
            });
            same(dev, &what("max"), &inputs, t, |x| x[0].max_axes(axes, true));
            same(dev, &what("min"), &inputs, t, |x| {
                x[0].min_axes(axes, false)
            });
            same(dev, &what("sum of all"), &inputs, t, |x| x[0].sum());
        }
    }
    // Integer sums of many elements (exact), and bool is not reducible on either device.
    let inputs = [values(&[2, 100_000], DType::I64, 190)];
    same(dev, "sum i64 [2, 100000]", &inputs, EXACT, |x| {
        x[0].sum_axes(&[1], false)
    });
    let b = on(dev, &values(&[3], DType::Bool, 1));
    assert!(matches!(b.sum(), Err(Error::UnsupportedDType { .. })));
}

#[test]
fn max_and_min_propagate_nan() {
    let Some(dev) = gpu("max_and_min_propagate_nan") else {
        return;
    };
    let _suite = shared();
    for dtype in [DType::F32, DType::F64, DType::F16] {
        for (shape, nan_at) in [
            (&[3usize, 5][..], 7usize),
            (&[2, 1000], 1700),
            (&[4, 300], 0),
        ] {
            let mut v = values(shape, DType::F64, 200).to_f64_vec().unwrap();
            v[nan_at] = f64::NAN;
            let inputs = [host(&v, shape, dtype)];
            let cols = shape[1];
            let (row, col) = (nan_at / cols, nan_at % cols);
            for name in ["max", "min"] {
                let op =
                    |a: &Array, axes: Option<&[isize]>, keepdims| reduce(a, name, axes, keepdims);
                for axis in [0isize, 1] {
                    let what = format!("{name} {dtype} {shape:?} axis {axis} with NaN at {nan_at}");
                    same(dev, &what, &inputs, EXACT, |x| {
                        op(&x[0], Some(&[axis]), false)
                    });
                    let r = op(&on(dev, &inputs[0]), Some(&[axis]), false)
                        .unwrap()
                        .to_f64_vec()
                        .unwrap();
                    let hit = if axis == 0 { col } else { row };
                    for (i, x) in r.iter().enumerate() {
                        assert_eq!(x.is_nan(), i == hit, "{what}: element {i} is {x}");
                    }
                }
                let all = op(&on(dev, &inputs[0]), None, false).unwrap();
                assert!(all.to_f64_vec().unwrap()[0].is_nan(), "{name} of all");
            }
            // Sums propagate NaN too (IEEE).
            same(
                dev,
                &format!("sum {dtype} with NaN"),
                &inputs,
                tol(dtype, Math::Arith),
                |x| x[0].sum_axes(&[1], false),
            );
        }
    }
}

#[test]
fn zero_size_reductions() {
    let Some(dev) = gpu("zero_size_reductions") else {
        return;
    };
    let _suite = shared();
    for dtype in [DType::F32, DType::I64, DType::F16] {
        let inputs = [values(&[0, 3], dtype, 1)];
        let t = EXACT;
        for (axes, keepdims) in [
            (Some(&[0isize][..]), false),
            (Some(&[0]), true),
            (Some(&[1]), false),
            (None, false),
            (None, true),
        ] {
            same(
                dev,
                &format!("sum {dtype} [0,3] axes {axes:?} keepdims {keepdims}"),
                &inputs,
                t,
                |x| reduce(&x[0], "sum", axes, keepdims),
            );
        }
        // The sum over an empty axis is zero.
        let g = on(dev, &inputs[0]);
        assert_eq!(
            g.sum_axes(&[0], false).unwrap().to_f64_vec().unwrap(),
            vec![0.0; 3]
        );
        assert_eq!(g.sum().unwrap().to_f64_vec().unwrap(), vec![0.0]);
        // Max and min over a non-empty axis of an empty array are empty; over an empty axis
        // they are an error on both devices.
        same(dev, &format!("max {dtype} [0,3] axis 1"), &inputs, t, |x| {
            x[0].max_axes(&[1], false)
        });
        assert!(matches!(g.max_axes(&[0], false), Err(Error::Shape { .. })));
        assert!(matches!(g.min(), Err(Error::Shape { .. })));
        if dtype.is_float() {
            same(
                dev,
                &format!("mean {dtype} [0,3] axis 1"),
                &inputs,
                t,
                |x| x[0].mean_axes(&[1], false),
            );
        }
    }
}

#[test]
fn half_precision_reductions() {
    let Some(dev) = gpu("half_precision_reductions") else {
        return;
    };
    let _suite = shared();
    for dtype in [DType::F16, DType::BF16] {
        let inputs = [values(&[4, 50], dtype, 210)];
        let t = tol(dtype, Math::Arith);
        for axes in [None, Some(&[0isize][..]), Some(&[1])] {
            let what = |op: &str| format!("{op} {dtype} axes {axes:?}");
            same(dev, &what("sum"), &inputs, t, |x| {
                reduce(&x[0], "sum", axes, false)
            });
            same(dev, &what("mean"), &inputs, t, |x| {
                reduce(&x[0], "mean", axes, true)
            });
            same(dev, &what("max"), &inputs, t, |x| {
                reduce(&x[0], "max", axes, false)
            });
            same(dev, &what("min"), &inputs, t, |x| {
                reduce(&x[0], "min", axes, false)
            });
        }
        // Accumulated in float32: 4096 ones sum to 4096 in float16 (a float16 accumulator
        // would stop at 2048).
        let ones = [Array::ones(&[4096], dtype).unwrap()];
        same(
            dev,
            &format!("sum of 4096 {dtype} ones"),
            &ones,
            EXACT,
            |x| x[0].sum(),
        );
    }
}

#[test]
fn matmul_matches_the_host() {
    let Some(dev) = gpu("matmul_matches_the_host") else {
        return;
    };
    let _suite = shared();
    let cases: [MatmulCase; 11] = [
        ("[3,4] @ [4,5]", &[3, 4], ident, &[4, 5], ident),
        ("[4] @ [4,5]", &[4], ident, &[4, 5], ident),
        ("[3,4] @ [4]", &[3, 4], ident, &[4], ident),
        ("[4] @ [4]", &[4], ident, &[4], ident),
        (
            "[2,1,3,4] @ [5,4,2]",
            &[2, 1, 3, 4],
            ident,
            &[5, 4, 2],
            ident,
        ),
        ("[2,3,4] @ [4,5]", &[2, 3, 4], ident, &[4, 5], ident),
        (
            "transposed @ flipped",
            &[4, 3],
            transposed,
            &[4, 5],
            flipped0,
        ),
        ("[3,0] @ [0,5]", &[3, 0], ident, &[0, 5], ident),
        ("[0,4] @ [4,5]", &[0, 4], ident, &[4, 5], ident),
        ("[2,3,0] @ [0,4]", &[2, 3, 0], ident, &[0, 4], ident),
        ("[64,96] @ [96,80]", &[64, 96], ident, &[96, 80], ident),
    ];
    for dtype in [DType::F32, DType::F64, DType::I32, DType::I64, DType::F16] {
        for (c, (name, sa, va, sb, vb)) in cases.into_iter().enumerate() {
            let inputs = [
                values(sa, dtype, 220 + c as u64),
                values(sb, dtype, 240 + c as u64),
            ];
            same(
                dev,
                &format!("matmul {dtype} {name}"),
                &inputs,
                tol(dtype, Math::Transcendental),
                |x| va(&x[0])?.matmul(&vb(&x[1])?),
            );
        }
        // An empty inner dimension gives zeros.
        let a = on(dev, &values(&[3, 0], dtype, 1));
        let b = on(dev, &values(&[0, 5], dtype, 2));
        let p = a.matmul(&b).unwrap();
        assert_eq!(p.shape(), &[3, 5]);
        assert_eq!(p.to_f64_vec().unwrap(), vec![0.0; 15], "{dtype}");
    }
    // bool is not a matmul dtype on either device.
    let b = on(dev, &values(&[2, 2], DType::Bool, 1));
    assert!(b.matmul(&b).is_err());
}

/// A float64 sum of the host copy, and the bound on a float32 tree sum's error:
/// `log2(n) * eps * sum |x|` with a factor of two to spare.
fn f64_sum_and_bound(v: &[f64], eps: f64) -> (f64, f64) {
    let sum: f64 = v.iter().sum();
    let abs: f64 = v.iter().map(|x| x.abs()).sum();
    let depth = (v.len() as f64).log2().ceil() + 2.0;
    (sum, 2.0 * depth * eps * abs)
}

/// Long rows are summed by many blocks (chunks, then the partials): right against a float64 sum
/// within the float32 tree's error bound, for a full sum, few long rows and a float64 sum.
#[test]
fn long_rows_are_reduced_across_blocks_and_stay_accurate() {
    let Some(dev) = gpu("long_rows_are_reduced_across_blocks_and_stay_accurate") else {
        return;
    };
    let _suite = shared();
    let n = 3_000_000usize;
    let v: Vec<f64> = (0..n)
        .map(|i| (((i * 7919) % 10007) as f64 - 5003.0) / 1024.0)
        .collect();
    let x32 = Array::from_vec(v.iter().map(|&x| x as f32).collect::<Vec<_>>(), &[n]).unwrap();
    let exact32: Vec<f64> = x32.to_f64_vec().unwrap();
    let (want, bound) = f64_sum_and_bound(&exact32, f32::EPSILON as f64);
    let got = on(dev, &x32).sum().unwrap().to_f64_vec().unwrap()[0];
    assert!(
        (got - want).abs() <= bound,
        "sum of {n} float32: {got} on the GPU, {want} in float64 (bound {bound})"
    );
    let mean = on(dev, &x32).mean().unwrap().to_f64_vec().unwrap()[0];
    assert!(
        (mean - want / n as f64).abs() <= bound / n as f64,
        "mean {mean}"
    );

    let x64 = Array::from_vec(v.clone(), &[n]).unwrap();
    let (want64, bound64) = f64_sum_and_bound(&v, f64::EPSILON);
    let got64 = on(dev, &x64).sum().unwrap().to_f64_vec().unwrap()[0];
    assert!(
        (got64 - want64).abs() <= bound64,
        "float64: {got64} vs {want64}"
    );

    // Few long rows: [3, 1_000_000] summed over the last axis, each row on its own.
    let rows = x32.reshape(&[3, 1_000_000]).unwrap();
    let got = on(dev, &rows)
        .sum_axes(&[1], false)
        .unwrap()
        .to_f64_vec()
        .unwrap();
    for r in 0..3 {
        let (want, bound) = f64_sum_and_bound(
            &exact32[r * 1_000_000..(r + 1) * 1_000_000],
            f32::EPSILON as f64,
        );
        assert!(
            (got[r] - want).abs() <= bound,
            "row {r}: {} vs {want}",
            got[r]
        );
    }
    // Many short rows (one block per row, unchanged): exact, the values being multiples of
    // 1/1024 with small sums.
    let many = x32.reshape(&[100_000, 30]).unwrap();
    close(
        &on(dev, &many).sum_axes(&[1], false).unwrap(),
        &many.sum_axes(&[1], false).unwrap(),
        EXACT,
        "100000 rows of 30",
    );
}

/// Max and min over long rows find a NaN in any chunk (the middle, the very end) and the
/// extreme values; integer sums over long rows wrap as on the host.
#[test]
fn long_row_max_min_find_nan_and_integer_sums_wrap() {
    let Some(dev) = gpu("long_row_max_min_find_nan_and_integer_sums_wrap") else {
        return;
    };
    let _suite = shared();
    let n = 1_000_003usize;
    let mut v: Vec<f32> = (0..n).map(|i| ((i * 31) % 1000) as f32 - 500.0).collect();
    v[777_777] = 1e6;
    v[12_345] = -1e6;
    let x = Array::from_vec(v.clone(), &[n]).unwrap();
    let g = on(dev, &x);
    assert_eq!(g.max().unwrap().to_vec::<f32>().unwrap(), [1e6]);
    assert_eq!(g.min().unwrap().to_vec::<f32>().unwrap(), [-1e6]);
    for at in [n / 2, n - 1] {
        let mut w = v.clone();
        w[at] = f32::NAN;
        let g = on(dev, &Array::from_vec(w, &[n]).unwrap());
        assert!(
            g.max().unwrap().to_vec::<f32>().unwrap()[0].is_nan(),
            "NaN at {at}"
        );
        assert!(
            g.min().unwrap().to_vec::<f32>().unwrap()[0].is_nan(),
            "NaN at {at}"
        );
    }
    let ints = Array::from_vec(vec![i32::MAX; n], &[n]).unwrap();
    let want = ints.sum().unwrap().to_vec::<i32>().unwrap();
    let got = on(dev, &ints).sum().unwrap().to_vec::<i32>().unwrap();
    assert_eq!(got, want, "int32 sums wrap");
    assert_eq!(want[0], (i32::MAX as i64 * n as i64) as i32);
}
