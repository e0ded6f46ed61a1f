//! Special values on the GPU as on the host: NaN, ±inf, -0.0, integer division by zero, casts of
//! edge values, and the dtypes a function refuses.

use super::*;

/// NaN, ±inf, ±0 and ordinary values, in every pairing of two arrays.
fn special_pairs(dtype: DType) -> (Array, Array) {
    let v = [
        f64::NAN,
        f64::INFINITY,
        f64::NEG_INFINITY,
        -0.0,
        0.0,
        1.5,
        -2.5,
    ];
    let (mut a, mut b) = (Vec::new(), Vec::new());
    for &x in &v {
        for &y in &v {
            a.push(x);
            b.push(y);
        }
    }
    let n = a.len();
    (host(&a, &[n], dtype), host(&b, &[n], dtype))
}

/// Like `close`, and a zero must have the host's sign too.
#[track_caller]
fn same_bits(actual: &Array, expected: &Array, what: &str) {
    close(actual, expected, EXACT, what);
    let (a, e) = (actual.to_f64_vec().unwrap(), expected.to_f64_vec().unwrap());
    for (i, (x, y)) in a.iter().zip(&e).enumerate() {
        if *y == 0.0 {
            assert_eq!(
                x.is_sign_negative(),
                y.is_sign_negative(),
                "{what}: element {i} is {x} on the GPU but {y} on the host"
            );
        }
    }
}

/// Every elementwise function (`F::..`) and array op, on NaN, ±inf and ±0, gives on the GPU
/// exactly what it gives on the host: NaN propagates through relu, maximum and minimum, and the
/// sign of a zero is kept.
#[test]
fn special_values_give_the_hosts_results() {
    let Some(dev) = gpu("special_values_give_the_hosts_results") else {
        return;
    };
    let _suite = shared();
    type Unary = (&'static str, fn(&Variable) -> Result<Variable>);
    type Binary = (&'static str, fn(&Variable, &Variable) -> Result<Variable>);
    let unary: [Unary; 22] = [
        ("relu", F::relu),
        ("sin", F::sin),
        ("cos", F::cos),
        ("absolute", F::absolute),
        ("clip", |x| F::clip(x, Some(-1.0), Some(2.0))),
        ("leaky_relu", |x| F::leaky_relu(x, 0.2)),
        ("elu", |x| F::elu(x, 1.0)),
        ("softplus", |x| F::softplus(x, 1.0)),
        ("gelu", F::gelu),
        ("expm1", F::expm1),
        ("log1p", F::log1p),
        ("exp", F::exp),
        ("log", F::log),
        ("sqrt", F::sqrt),
        ("tanh", F::tanh),
        ("sigmoid", F::sigmoid),
        ("neg", F::neg),
        ("add_scalar", |x| F::add_scalar(x, 1.5)),
        ("mul_scalar", |x| F::mul_scalar(x, -2.0)),
        ("rsub_scalar", |x| F::rsub_scalar(x, 1.0)),
        ("rdiv_scalar", |x| F::rdiv_scalar(x, 3.0)),
        ("pow_scalar", |x| F::pow_scalar(x, 2.0)),
    ];
    let binary: [Binary; 6] = [
        ("add", F::add),
        ("sub", F::sub),
        ("mul", F::mul),
        ("div", F::div),
        ("maximum", F::maximum),
        ("pow", F::pow),
    ];
    for dtype in [DType::F32, DType::F64, DType::F16, DType::BF16] {
        let (a, b) = special_pairs(dtype);
        let (ga, gb) = (on(dev, &a), on(dev, &b));
        for (name, f) in unary {
            let what = format!("F::{name} {dtype}");
            let want = f(&Variable::new(a.clone())).unwrap();
            let got = f(&Variable::new(ga.clone())).unwrap();
            assert_eq!(got.device(), dev, "{what}");
            let t = tol(dtype, Math::Transcendental);
            if matches!(
                name,
                "relu"
                    | "neg"
                    | "add_scalar"
                    | "mul_scalar"
                    | "rsub_scalar"
                    | "clip"
                    | "leaky_relu"
            ) {
                same_bits(got.array(), want.array(), &what);
            } else {
                close(got.array(), want.array(), t, &what);
            }
        }
        for (name, f) in binary {
            let what = format!("F::{name} {dtype}");
            let want = f(&Variable::new(a.clone()), &Variable::new(b.clone())).unwrap();
            let got = f(&Variable::new(ga.clone()), &Variable::new(gb.clone())).unwrap();
            if matches!(name, "maximum" | "add" | "sub" | "mul") {
                same_bits(got.array(), want.array(), &what);
            } else {
                close(
                    got.array(),
                    want.array(),
                    tol(dtype, Math::Transcendental),
                    &what,
                );
            }
        }
        // The array ops.
        type ArrayOp = (&'static str, fn(&Array, &Array) -> Result<Array>);
        let ops: [ArrayOp; 6] = [
            ("maximum", |x, y| x.maximum(y)),
            ("minimum", |x, y| x.minimum(y)),
            ("add", |x, y| x + y),
            ("mul", |x, y| x * y),
            ("div", |x, y| x / y),
            ("pow", |x, y| x.pow(y)),
        ];
        for (name, f) in ops {
            let what = format!("Array::{name} {dtype}");
            let want = f(&a, &b).unwrap();
            let got = f(&ga, &gb).unwrap();
            if matches!(name, "maximum" | "minimum" | "add" | "mul") {
                same_bits(&got, &want, &what);
            } else {
                close(&got, &want, tol(dtype, Math::Transcendental), &what);
            }
        }
        for (name, f) in [
            ("relu", Array::relu as fn(&Array) -> Result<Array>),
            ("abs", Array::abs),
            ("sigmoid", Array::sigmoid),
            ("exp", Array::exp),
        ] {
            let what = format!("Array::{name} {dtype}");
            close(
                &f(&ga).unwrap(),
                &f(&a).unwrap(),
                tol(dtype, Math::Transcendental),
                &what,
            );
        }
    }
}

/// `F::div` and `F::rdiv_scalar` of integers by zero give 0 on the GPU, as on the host, and
/// integer division truncates.
#[test]
fn integer_division_by_zero_in_functions_gives_zero() {
    let Some(dev) = gpu("integer_division_by_zero_in_functions_gives_zero") else {
        return;
    };
    let _suite = shared();
    for dtype in [DType::I32, DType::I64] {
        let a = host(&[7.0, -7.0, 0.0, 9.0, -9.0, 4.0], &[6], dtype);
        let b = host(&[0.0, 0.0, 0.0, 2.0, -2.0, -3.0], &[6], dtype);
        let q = F::div(&Variable::new(on(dev, &a)), &Variable::new(on(dev, &b))).unwrap();
        assert_eq!(q.device(), dev);
        assert_eq!(
            q.array().to_f64_vec().unwrap(),
            [0.0, 0.0, 0.0, 4.0, 4.0, -1.0],
            "F::div {dtype}"
        );
        let host_q = F::div(&Variable::new(a.clone()), &Variable::new(b.clone())).unwrap();
        close(q.array(), host_q.array(), EXACT, "F::div against the host");
        let r = F::rdiv_scalar(&Variable::new(on(dev, &b)), 7.0).unwrap();
        assert_eq!(
            r.array().to_f64_vec().unwrap(),
            [0.0, 0.0, 0.0, 3.0, -3.0, -2.0],
            "F::rdiv_scalar {dtype}"
        );
    }
}

/// Float-only functions on integer CUDA variables are refused before any kernel is compiled,
/// with the host's error: `UnsupportedDType` naming the function and the dtype.
#[test]
fn float_functions_refuse_integer_inputs_as_on_the_host() {
    let Some(dev) = gpu("float_functions_refuse_integer_inputs_as_on_the_host") else {
        return;
    };
    let _suite = shared();
    type Unary = (&'static str, fn(&Variable) -> Result<Variable>);
    let cases: [Unary; 16] = [
        ("exp", F::exp),
        ("sin", F::sin),
        ("cos", F::cos),
        ("absolute", F::absolute),
        ("clip", |x| F::clip(x, Some(0.0), Some(1.0))),
        ("leaky_relu", |x| F::leaky_relu(x, 0.2)),
        ("elu", |x| F::elu(x, 1.0)),
        ("softplus", |x| F::softplus(x, 1.0)),
        ("gelu", F::gelu),
        ("swish", |x| F::swish(x, x)),
        ("log", F::log),
        ("sqrt", F::sqrt),
        ("tanh", F::tanh),
        ("sigmoid", F::sigmoid),
        ("pow_scalar", |x| F::pow_scalar(x, 2.0)),
        ("pow", |x| F::pow(x, x)),
    ];
    for dtype in [DType::I32, DType::I64] {
        let x = host(&[1.0, 2.0, 3.0], &[3], dtype);
        let gx = on(dev, &x);
        for (name, f) in cases {
            let on_host = f(&Variable::new(x.clone())).unwrap_err();
            let on_gpu = f(&Variable::new(gx.clone())).unwrap_err();
            for (where_, e) in [("host", &on_host), ("GPU", &on_gpu)] {
                let Error::UnsupportedDType { dtype: d, .. } = e.root_cause() else {
                    panic!(
                        "F::{name} {dtype} on the {where_}: expected UnsupportedDType, got {e:?}"
                    );
                };
                assert_eq!(*d, dtype, "F::{name} on the {where_}");
            }
            let msg = on_gpu.to_string();
            assert!(
                msg.contains(name.trim_end_matches("_scalar")),
                "F::{name}: {msg}"
            );
            assert!(
                !msg.contains("NVRTC") && !msg.contains("compile"),
                "F::{name}: {msg}"
            );
        }
    }
}

/// Casts agree bit for bit with the host on edge values: integers wrap, float to integer
/// truncates and saturates with NaN to 0, a float64 rounds to a half type once (values just past
/// a half-type halfway point, which float32 rounding would move onto it), NaN keeps its sign.
#[test]
fn casts_of_edge_values_match_the_host() {
    let Some(dev) = gpu("casts_of_edge_values_match_the_host") else {
        return;
    };
    let _suite = shared();
    let ints = Array::from_vec(
        vec![
            (1i64 << 32) + 5,
            -(1i64 << 31) - 1,
            i64::MAX,
            i64::MIN,
            (1i64 << 60) + (1i64 << 36) + 1,
            -7,
            0,
            65519,
            65521,
        ],
        &[9],
    )
    .unwrap();
    let half_tie_f16 = 1.0 + 2f64.powi(-11) + 2f64.powi(-40);
    let half_tie_bf16 = 1.0 + 2f64.powi(-8) + 2f64.powi(-40);
    let floats = Array::from_vec(
        vec![
            f64::NAN,
            -f64::NAN,
            f64::INFINITY,
            f64::NEG_INFINITY,
            1e30,
            -1e30,
            2147483647.5,
            -2147483648.7,
            9.3e18,
            3.99,
            -3.99,
            -0.0,
            65519.99,
            65520.0,
            half_tie_f16,
            -half_tie_f16,
            half_tie_bf16,
            1e-8,
            3e-39,
        ],
        &[19],
    )
    .unwrap();
    // Every pair is tried before the test fails, so that one run names every cast that differs.
    let mut sign_mismatches = Vec::new();
    for source in [ints, floats] {
        for from in DType::ALL {
            let a = source.astype(from).unwrap();
            let g = on(dev, &a);
            for to in DType::ALL {
                let what = format!("{from} {:?} to {to}", a.to_f64_vec().unwrap());
                let want = a.astype(to).unwrap();
                let got = g.astype(to).unwrap();
                close(&got, &want, EXACT, &what);
                // Signs too, NaN's included.
                let (gb, wb) = (got.to_f64_vec().unwrap(), want.to_f64_vec().unwrap());
                let differ: Vec<usize> = (0..gb.len())
                    .filter(|&i| gb[i].is_sign_negative() != wb[i].is_sign_negative())
                    .collect();
                if !differ.is_empty() {
                    sign_mismatches.push(format!(
                        "{what}: signs differ at {differ:?}: {gb:?} on the GPU, {wb:?} on the host"
                    ));
                }
            }
        }
    }
    assert!(
        sign_mismatches.is_empty(),
        "{} casts differ in sign:\n{}",
        sign_mismatches.len(),
        sign_mismatches.join("\n")
    );
    // The double-rounding cases by hand: one rounding lands above the halfway point.
    let x = on(
        dev,
        &Array::from_vec(vec![half_tie_f16, half_tie_bf16], &[2]).unwrap(),
    );
    let f16 = x.astype(DType::F16).unwrap().to_vec::<half::f16>().unwrap();
    assert_eq!(f16[0].to_f64(), 1.0 + 2f64.powi(-10));
    let bf16 = x
        .astype(DType::BF16)
        .unwrap()
        .to_vec::<half::bf16>()
        .unwrap();
    assert_eq!(bf16[1].to_f64(), 1.0 + 2f64.powi(-7));
}
