//! Elementwise operations on the GPU against the host's: binary (with every broadcast and view of
//! both operands), scalar, unary, comparisons and `where`, `mul_add`, casts.

use super::*;

#[test]
fn binary_ops_match_the_host() {
    let Some(dev) = gpu("binary_ops_match_the_host") else {
        return;
    };
    let _suite = shared();
    for dtype in NUMERIC {
        for (p, pair) in PAIRS.iter().enumerate() {
            let inputs = [
                values(pair.a.0, dtype, 10 + p as u64),
                values(pair.b.0, dtype, 20 + p as u64),
            ];
            let mut ops: Vec<(&str, Binary, Math)> = NUMERIC_BINARY
                .iter()
                .map(|&(n, f)| (n, f, Math::Arith))
                .collect();
            if dtype.is_float() {
                ops.push(("pow", Array::pow, Math::Transcendental));
            }
            for (name, op, math) in ops {
                same(
                    dev,
                    &format!("{name} {dtype} {}", pair.name),
                    &inputs,
                    tol(dtype, math),
                    |x| op(&(pair.a.1)(&x[0])?, &(pair.b.1)(&x[1])?),
                );
            }
        }
    }
    // Enough elements for the grid-stride loop to go round more than once.
    let big = [
        values(&[1000, 600], DType::F32, 1),
        values(&[600, 1000], DType::F32, 2),
    ];
    same(
        dev,
        "add f32 [600,1000] transposed",
        &big,
        tol(DType::F32, Math::Arith),
        |x| x[0].t().add(&x[1]),
    );
    same(
        dev,
        "mul f32 [600,1000] contiguous",
        &big,
        tol(DType::F32, Math::Arith),
        |x| x[0].t().contiguous()?.mul(&x[1]),
    );
}

#[test]
fn scalar_ops_match_the_host() {
    let Some(dev) = gpu("scalar_ops_match_the_host") else {
        return;
    };
    let _suite = shared();
    for dtype in NUMERIC {
        for (s, &(layout, shape, view)) in SINGLES.iter().enumerate() {
            let inputs = [values(shape, dtype, 30 + s as u64)];
            // Integer arrays refuse fractional scalars, and unsigned ones negative scalars
            // (tests/hostile/numerics.rs, tests/host/integer_dtypes.rs).
            let scalars = if dtype.is_float() {
                [2.5, -1.5, 0.0]
            } else if dtype.is_unsigned() {
                [3.0, 2.0, 0.0]
            } else {
                [3.0, -2.0, 0.0]
            };
            for scalar in scalars {
                for (name, op) in NUMERIC_SCALAR {
                    same(
                        dev,
                        &format!("{name}({scalar}) {dtype} {layout}"),
                        &inputs,
                        tol(dtype, Math::Arith),
                        |x| op(&view(&x[0])?, scalar),
                    );
                }
            }
            if dtype.is_float() {
                for p in [2.0, 0.5, -1.0, 3.0] {
                    same(
                        dev,
                        &format!("pow_scalar({p}) {dtype} {layout}"),
                        &inputs,
                        tol(dtype, Math::Transcendental),
                        |x| view(&x[0])?.pow_scalar(p),
                    );
                }
            }
        }
    }
    // gt_scalar gives bools, for every dtype (bool included).
    for dtype in DType::ALL {
        for (s, &(layout, shape, view)) in SINGLES.iter().enumerate() {
            let inputs = [values(shape, dtype, 40 + s as u64)];
            for scalar in [0.0, 0.5, -1.0] {
                same(
                    dev,
                    &format!("gt_scalar({scalar}) {dtype} {layout}"),
                    &inputs,
                    EXACT,
                    |x| view(&x[0])?.gt_scalar(scalar),
                );
            }
        }
    }
}

#[test]
fn unary_ops_match_the_host() {
    let Some(dev) = gpu("unary_ops_match_the_host") else {
        return;
    };
    let _suite = shared();
    for dtype in NUMERIC {
        for (s, &(layout, shape, view)) in SINGLES.iter().enumerate() {
            let inputs = [values(shape, dtype, 50 + s as u64)];
            for (name, op) in NUMERIC_UNARY {
                same(
                    dev,
                    &format!("{name} {dtype} {layout}"),
                    &inputs,
                    tol(dtype, Math::Arith),
                    |x| op(&view(&x[0])?),
                );
            }
            if dtype.is_float() {
                // Smooth values, and positive ones where the function needs them (the others
                // give NaN on both devices, compared too).
                let smooth_inputs = [smooth(shape, dtype, 60 + s as u64)];
                let positive_inputs = [positive(shape, dtype, 70 + s as u64)];
                for (name, op) in FLOAT_UNARY {
                    for (kind, inputs) in
                        [("smooth", &smooth_inputs), ("positive", &positive_inputs)]
                    {
                        same(
                            dev,
                            &format!("{name} {dtype} {layout} {kind}"),
                            inputs,
                            tol(dtype, Math::Transcendental),
                            |x| op(&view(&x[0])?),
                        );
                    }
                }
            }
        }
    }
    let big = [smooth(&[600, 1000], DType::F32, 3)];
    same(
        dev,
        "exp f32 [600,1000] flipped",
        &big,
        tol(DType::F32, Math::Transcendental),
        |x| x[0].flip(1)?.exp(),
    );
}

#[test]
fn comparisons_and_where_match_the_host() {
    let Some(dev) = gpu("comparisons_and_where_match_the_host") else {
        return;
    };
    let _suite = shared();
    for dtype in [
        DType::Bool,
        DType::I32,
        DType::I64,
        DType::F16,
        DType::F32,
        DType::F64,
    ] {
        for (p, pair) in PAIRS.iter().enumerate() {
            // Values from a small set, so that many elements tie.
            let inputs = [
                values(pair.a.0, dtype, 80 + p as u64),
                values(pair.b.0, dtype, 90 + p as u64),
            ];
            for (name, op) in COMPARISONS {
                same(
                    dev,
                    &format!("{name} {dtype} {}", pair.name),
                    &inputs,
                    EXACT,
                    |x| op(&(pair.a.1)(&x[0])?, &(pair.b.1)(&x[1])?),
                );
            }
        }

        // where_cond, its three operands broadcast together.
        let cases: [Triple; 4] = [
            (
                "same shape",
                [&[3, 4], &[3, 4], &[3, 4]],
                [ident, ident, ident],
            ),
            (
                "[3,1], [1,4], [3,4]",
                [&[3, 1], &[1, 4], &[3, 4]],
                [ident, ident, ident],
            ),
            (
                "[4], transposed, 0-d",
                [&[4], &[4, 3], &[]],
                [ident, transposed, ident],
            ),
            (
                "flipped, sliced, offset",
                [&[3, 4], &[3, 8], &[5, 4]],
                [flipped0, every_other, middle_rows],
            ),
        ];
        for (c, (name, shapes, views)) in cases.into_iter().enumerate() {
            let inputs = [
                values(shapes[0], DType::Bool, 100 + c as u64),
                values(shapes[1], dtype, 110 + c as u64),
                values(shapes[2], dtype, 120 + c as u64),
            ];
            same(
                dev,
                &format!("where_cond {dtype} {name}"),
                &inputs,
                EXACT,
                |x| Array::where_cond(&views[0](&x[0])?, &views[1](&x[1])?, &views[2](&x[2])?),
            );
        }
    }
}

#[test]
fn mul_add_matches_the_host() {
    let Some(dev) = gpu("mul_add_matches_the_host") else {
        return;
    };
    let _suite = shared();
    let cases: [Triple; 4] = [
        (
            "same shape",
            [&[3, 4], &[3, 4], &[3, 4]],
            [ident, ident, ident],
        ),
        (
            "[3,1], [4], [1,4]",
            [&[3, 1], &[4], &[1, 4]],
            [ident, ident, ident],
        ),
        (
            "transposed, flipped, 0-d",
            [&[4, 3], &[3, 4], &[]],
            [transposed, flipped1, ident],
        ),
        (
            "sliced, offset, [3,4]",
            [&[3, 8], &[5, 4], &[3, 4]],
            [every_other, middle_rows, ident],
        ),
    ];
    for dtype in NUMERIC {
        for (c, (name, shapes, views)) in cases.into_iter().enumerate() {
            let inputs = [
                values(shapes[0], dtype, 130 + c as u64),
                values(shapes[1], dtype, 140 + c as u64),
                values(shapes[2], dtype, 150 + c as u64),
            ];
            same(
                dev,
                &format!("mul_add {dtype} {name}"),
                &inputs,
                tol(dtype, Math::Arith),
                |x| views[0](&x[0])?.mul_add(&views[1](&x[1])?, &views[2](&x[2])?),
            );
        }
    }
}

#[test]
fn integer_division_by_zero_gives_zero_and_min_by_minus_one_wraps() {
    let Some(dev) = gpu("integer_division_by_zero_gives_zero_and_min_by_minus_one_wraps") else {
        return;
    };
    let _suite = shared();
    for dtype in [DType::I32, DType::I64] {
        let a = host(&[7.0, -7.0, 0.0, 9.0, -9.0, 4.0], &[6], dtype);
        let b = host(&[0.0, 0.0, 0.0, 2.0, -2.0, -3.0], &[6], dtype);
        let (ga, gb) = (on(dev, &a), on(dev, &b));
        let q = ga.div(&gb).unwrap();
        assert_eq!(q.device(), dev);
        assert_eq!(
            q.to_f64_vec().unwrap(),
            vec![0.0, 0.0, 0.0, 4.0, 4.0, -1.0],
            "{dtype}: a / b truncates, and / 0 gives 0"
        );
        close(&q, &a.div(&b).unwrap(), EXACT, "div");
        let r = gb.rdiv_scalar(7.0).unwrap();
        assert_eq!(
            r.to_f64_vec().unwrap(),
            vec![0.0, 0.0, 0.0, 3.0, -3.0, -2.0]
        );
        let z = ga.div_scalar(0.0).unwrap();
        assert_eq!(z.to_f64_vec().unwrap(), vec![0.0; 6]);
    }
    // MIN / -1 wraps to MIN as on the host (a division would trap on x86 and is undefined in
    // C++: the emulated device died of SIGFPE), and MIN / 1, MAX / -1 are what they are.
    let a = Array::from_vec(vec![i32::MIN, i32::MIN, i32::MAX, -6], &[4]).unwrap();
    let b = Array::from_vec(vec![-1i32, 1, -1, -1], &[4]).unwrap();
    let q = on(dev, &a).div(&on(dev, &b)).unwrap();
    assert_eq!(
        q.to_vec::<i32>().unwrap(),
        [i32::MIN, i32::MIN, -i32::MAX, 6]
    );
    let a = Array::from_vec(vec![i64::MIN, 5], &[2]).unwrap();
    let q = on(dev, &a).div_scalar(-1.0).unwrap();
    assert_eq!(q.to_vec::<i64>().unwrap(), [i64::MIN, -5]);
    assert_eq!(
        a.div_scalar(-1.0).unwrap().to_vec::<i64>().unwrap(),
        [i64::MIN, -5]
    );
}

#[test]
fn astype_between_every_pair_of_dtypes() {
    let Some(dev) = gpu("astype_between_every_pair_of_dtypes") else {
        return;
    };
    let _suite = shared();
    for (k, from) in DType::ALL.into_iter().enumerate() {
        let inputs = [values(&[3, 4], from, 160 + k as u64)];
        for to in DType::ALL {
            same(
                dev,
                &format!("astype {from} to {to}"),
                &inputs,
                tol(to, Math::Arith),
                |x| x[0].astype(to),
            );
            same(
                dev,
                &format!("astype {from} to {to}, flipped"),
                &inputs,
                tol(to, Math::Arith),
                |x| x[0].flip(1)?.astype(to),
            );
        }
    }
}
