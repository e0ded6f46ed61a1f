//! The CUDA backend against the host: every operation is run on the host and on `cuda:0` with the
//! same inputs, and the GPU's result, copied back, must match within a tolerance suited to the
//! dtype. Needs a CUDA driver and device (and NVRTC to compile the kernels); without one every
//! test prints `SKIPPED <test>: <reason>` and returns (`tests/no_cuda.rs` checks that machine).
//!
//! Inputs are seeded. Floating-point test values are multiples of 1/8 in [-3, 3): exact in every
//! float dtype, so sums and products of a few of them are exact whatever the order the GPU adds
//! them in; transcendental functions get smooth values.
//!
//! Tests that read process-wide counters (kernel cache statistics, host fallbacks) take the
//! suite's lock exclusively; every other test takes it shared.

use std::sync::{PoisonError, RwLock, RwLockReadGuard, RwLockWriteGuard};

use kusari::cuda::{self, KernelStats};
use kusari::prelude::*;
use kusari::{config, default_device, random, using_device, ElementwiseKernel};
use kusari_examples::muladd_kernel;
use kusari_tests::{check_close, reduce};

// ----- helpers -----

/// `cuda:0`, or `None` after printing why the test skips (a failure under
/// `KUSARI_REQUIRE_GPU`).
fn gpu(test: &str) -> Option<Device> {
    kusari::testing::cuda_or_skip(test).unwrap_or_else(|e| panic!("{e}"))
}

static SUITE: RwLock<()> = RwLock::new(());

/// Held by tests that do not read process-wide counters.
fn shared() -> RwLockReadGuard<'static, ()> {
    SUITE.read().unwrap_or_else(PoisonError::into_inner)
}

/// Held by tests that read process-wide counters: no other test runs meanwhile.
fn exclusive() -> RwLockWriteGuard<'static, ()> {
    SUITE.write().unwrap_or_else(PoisonError::into_inner)
}

/// What kind of computation is compared, for its tolerance.
#[derive(Clone, Copy, Debug)]
enum Math {
    /// `+ - * /`, comparisons, casts, exact sums.
    Arith,
    /// exp, log, pow, tanh, ..., matrix products, chains of functions.
    Transcendental,
}

/// No tolerance.
const EXACT: (f64, f64) = (0.0, 0.0);

/// `(atol, rtol)` for results of `dtype`.
fn tol(dtype: DType, math: Math) -> (f64, f64) {
    match (dtype, math) {
        (DType::Bool | DType::I32 | DType::I64, _) => EXACT,
        (DType::F16, _) => (1e-2, 1e-2),
        (DType::BF16, _) => (2e-2, 2e-2),
        (DType::F32, Math::Arith) => (1e-6, 1e-5),
        (DType::F32, Math::Transcendental) => (1e-5, 1e-4),
        (DType::F64, Math::Arith) => (1e-12, 1e-12),
        (DType::F64, Math::Transcendental) => (1e-12, 1e-10),
    }
}

/// Asserts that `actual` (on the GPU) equals `expected` (on the host) in dtype and by the tests'
/// closeness rule ([`check_close`]).
#[track_caller]
fn close(actual: &Array, expected: &Array, (atol, rtol): (f64, f64), what: &str) {
    assert_eq!(actual.dtype(), expected.dtype(), "{what}: dtypes differ");
    if let Err(msg) = check_close(actual, expected, atol, rtol) {
        panic!("{what} (GPU vs host): {msg}");
    }
}

/// `a` copied to `device`.
#[track_caller]
fn on(device: Device, a: &Array) -> Array {
    a.to_device(device)
        .unwrap_or_else(|e| panic!("copying {a:?} to {device}: {e}"))
}

/// Runs `f` on host `inputs` and on copies of them on `dev`, and compares the results.
#[track_caller]
fn same(
    dev: Device,
    what: &str,
    inputs: &[Array],
    tolerance: (f64, f64),
    f: impl Fn(&[Array]) -> Result<Array>,
) {
    let expected = f(inputs).unwrap_or_else(|e| panic!("{what} on the host: {e}"));
    let moved: Vec<Array> = inputs.iter().map(|a| on(dev, a)).collect();
    let actual = f(&moved).unwrap_or_else(|e| panic!("{what} on {dev}: {e}"));
    assert_eq!(actual.device(), dev, "{what}: the result is not on {dev}");
    close(&actual, &expected, tolerance, what);
}

/// Seeded host values of `dtype`: floats are multiples of 1/8 in [-3, 3), integers lie in
/// [-9, 9], bools are about half true.
fn values(shape: &[usize], dtype: DType, seed: u64) -> Array {
    let mut rng = random::Rng::seed(seed);
    let u = Array::uniform(shape, -1.0, 1.0, DType::F64, &mut rng).unwrap();
    let v = match dtype {
        DType::Bool => u.map(|x: f64| x > 0.0),
        DType::I32 | DType::I64 => u.map(|x: f64| (x * 10.0).trunc()),
        _ => u.map(|x: f64| (x * 24.0).floor() / 8.0),
    }
    .expect("host values");
    v.astype(dtype).expect("host cast")
}

/// Seeded smooth host values in `[low, high)`.
fn uniform_in(shape: &[usize], dtype: DType, seed: u64, low: f64, high: f64) -> Array {
    let mut rng = random::Rng::seed(seed);
    Array::uniform(shape, low, high, dtype, &mut rng).unwrap()
}

/// Seeded smooth host values in `[-1, 1)`.
fn smooth(shape: &[usize], dtype: DType, seed: u64) -> Array {
    uniform_in(shape, dtype, seed, -1.0, 1.0)
}

/// Seeded smooth host values in `[0.5, 2)` (for log, sqrt, pow, division).
fn positive(shape: &[usize], dtype: DType, seed: u64) -> Array {
    uniform_in(shape, dtype, seed, 0.5, 2.0)
}

/// Host values from a list.
fn host(v: &[f64], shape: &[usize], dtype: DType) -> Array {
    Array::from_vec(v.to_vec(), shape)
        .and_then(|a| a.to_device(Device::Cpu))
        .and_then(|a| a.astype(dtype))
        .expect("host array")
}

// Views applied to inputs on whichever device they are.
type View = fn(&Array) -> Result<Array>;

fn ident(a: &Array) -> Result<Array> {
    Ok(a.clone())
}
fn transposed(a: &Array) -> Result<Array> {
    Ok(a.t())
}
fn flipped0(a: &Array) -> Result<Array> {
    a.flip(0)
}
fn flipped1(a: &Array) -> Result<Array> {
    a.flip(1)
}
/// `[3, 8]` to `[3, 4]`: every other column from the second (offset 1, stride 2).
fn every_other(a: &Array) -> Result<Array> {
    a.slice_axis(1, 1, 8, 2)
}
/// `[5, 4]` to `[3, 4]`: rows 1 to 3 (contiguous, offset 4).
fn middle_rows(a: &Array) -> Result<Array> {
    a.slice_axis(0, 1, 4, 1)
}

/// Operand layouts for binary operations: base shapes, and the view taken of each.
struct Pair {
    name: &'static str,
    a: (&'static [usize], View),
    b: (&'static [usize], View),
}

const PAIRS: &[Pair] = &[
    Pair {
        name: "same shape",
        a: (&[3, 4], ident),
        b: (&[3, 4], ident),
    },
    Pair {
        name: "[3,1] with [1,4]",
        a: (&[3, 1], ident),
        b: (&[1, 4], ident),
    },
    Pair {
        name: "row [4] with [3,4]",
        a: (&[4], ident),
        b: (&[3, 4], ident),
    },
    Pair {
        name: "[3,4] with row [4]",
        a: (&[3, 4], ident),
        b: (&[4], ident),
    },
    Pair {
        name: "transposed with [3,4]",
        a: (&[4, 3], transposed),
        b: (&[3, 4], ident),
    },
    Pair {
        name: "flipped",
        a: (&[3, 4], flipped1),
        b: (&[3, 4], flipped0),
    },
    Pair {
        name: "sliced",
        a: (&[3, 8], every_other),
        b: (&[5, 4], middle_rows),
    },
    Pair {
        name: "0-d with [3,4]",
        a: (&[], ident),
        b: (&[3, 4], ident),
    },
    Pair {
        name: "zero-size",
        a: (&[0, 4], ident),
        b: (&[1, 4], ident),
    },
];

/// Layouts for unary operations.
const SINGLES: &[(&str, &[usize], View)] = &[
    ("contiguous", &[3, 4], ident),
    ("transposed", &[4, 3], transposed),
    ("flipped", &[3, 4], flipped1),
    ("sliced", &[3, 8], every_other),
    ("offset", &[5, 4], middle_rows),
    ("0-d", &[], ident),
    ("zero-size", &[0, 4], ident),
];

/// Three operands: a name, base shapes, and the view taken of each.
type Triple = (&'static str, [&'static [usize]; 3], [View; 3]);
/// A matrix product: a name, and each operand's base shape and view.
type MatmulCase = (&'static str, &'static [usize], View, &'static [usize], View);

type Binary = fn(&Array, &Array) -> Result<Array>;
type Unary = fn(&Array) -> Result<Array>;
type WithScalar = fn(&Array, f64) -> Result<Array>;

const NUMERIC_BINARY: [(&str, Binary); 6] = [
    ("add", Array::add),
    ("sub", Array::sub),
    ("mul", Array::mul),
    ("div", Array::div),
    ("maximum", Array::maximum),
    ("minimum", Array::minimum),
];

const COMPARISONS: [(&str, Binary); 6] = [
    ("eq", Array::eq),
    ("ne", Array::ne),
    ("lt", Array::lt),
    ("le", Array::le),
    ("gt", Array::gt),
    ("ge", Array::ge),
];

const NUMERIC_SCALAR: [(&str, WithScalar); 7] = [
    ("add_scalar", Array::add_scalar),
    ("sub_scalar", Array::sub_scalar),
    ("rsub_scalar", Array::rsub_scalar),
    ("mul_scalar", Array::mul_scalar),
    ("div_scalar", Array::div_scalar),
    ("rdiv_scalar", Array::rdiv_scalar),
    ("maximum_scalar", Array::maximum_scalar),
];

const NUMERIC_UNARY: [(&str, Unary); 3] = [
    ("neg", Array::neg),
    ("abs", Array::abs),
    ("relu", Array::relu),
];

const FLOAT_UNARY: [(&str, Unary); 5] = [
    ("exp", Array::exp),
    ("log", Array::log),
    ("sqrt", Array::sqrt),
    ("tanh", Array::tanh),
    ("sigmoid", Array::sigmoid),
];

const NUMERIC: [DType; 6] = [
    DType::I32,
    DType::I64,
    DType::F32,
    DType::F64,
    DType::F16,
    DType::BF16,
];

// ----- transfers -----

#[test]
fn every_dtype_and_view_round_trips() {
    let Some(dev) = gpu("every_dtype_and_view_round_trips") else {
        return;
    };
    let _suite = shared();
    let views: [(&str, View); 6] = [
        ("t()", transposed),
        ("flip(0)", flipped0),
        ("flip(1)", flipped1),
        ("slice_axis(1, 1, 4, 2)", |a| a.slice_axis(1, 1, 4, 2)),
        ("slice_axis(0, 2, -4, -1)", |a| a.slice_axis(0, 2, -4, -1)),
        ("rows 1..3", |a| a.slice_axis(0, 1, 3, 1)),
    ];
    for (k, dtype) in DType::ALL.into_iter().enumerate() {
        let h = values(&[3, 4], dtype, 1 + k as u64);
        let g = on(dev, &h);
        let what = format!("{dtype} [3, 4]");
        assert_eq!(g.device(), dev, "{what}");
        assert_eq!(g.dtype(), dtype, "{what}");
        assert!(g.is_contiguous(), "{what}");
        close(&g, &h, EXACT, &what);
        let back = g.to_device(Device::Cpu).unwrap();
        assert_eq!(back.device(), Device::Cpu);
        close(&back, &h, EXACT, &format!("{what} back on the host"));

        // Views of a GPU array, read in place or copied.
        for (name, view) in views {
            let what = format!("{dtype} {name}");
            let (gv, hv) = (view(&g).unwrap(), view(&h).unwrap());
            assert_eq!(gv.device(), dev, "{what}");
            close(&gv, &hv, EXACT, &what);
            let c = gv.contiguous().unwrap();
            assert!(c.is_contiguous() && c.device() == dev, "{what}");
            close(&c, &hv, EXACT, &format!("{what}.contiguous()"));
            let back = gv.to_device(Device::Cpu).unwrap();
            close(&back, &hv, EXACT, &format!("{what} to the host"));
            // A host view is uploaded as a C-contiguous copy.
            let up = hv.to_device(dev).unwrap();
            assert!(up.is_contiguous(), "{what} uploaded");
            close(&up, &hv, EXACT, &format!("{what} uploaded"));
        }

        // Zero-size, 0-d and one-element arrays.
        for shape in [&[0, 3][..], &[3, 0], &[], &[1], &[2, 0, 2]] {
            let h = values(shape, dtype, 9);
            let g = on(dev, &h);
            assert_eq!(g.shape(), shape);
            close(&g, &h, EXACT, &format!("{dtype} {shape:?}"));
            close(
                &g.to_device(Device::Cpu).unwrap(),
                &h,
                EXACT,
                &format!("{dtype} {shape:?} back"),
            );
        }

        // To the device it is on: the same buffer.
        let again = g.to_device(dev).unwrap();
        assert!(again.shares_buffer(&g), "{dtype}: cuda:0 to cuda:0 copies");
        assert!(!back.shares_buffer(&g));
    }

    // Typed reads copy back; the wrong type is an error, not garbage.
    let h = values(&[2, 3], DType::F32, 3);
    let g = on(dev, &h);
    assert_eq!(g.to_vec::<f32>().unwrap(), h.to_vec::<f32>().unwrap());
    assert_eq!(
        g.to_ndarray::<f32>().unwrap(),
        h.to_ndarray::<f32>().unwrap()
    );
    assert!(matches!(g.to_vec::<f64>(), Err(Error::ElementType { .. })));
    let b = on(dev, &values(&[5], DType::Bool, 4));
    assert_eq!(
        b.to_vec::<bool>().unwrap(),
        values(&[5], DType::Bool, 4).to_vec::<bool>().unwrap()
    );
    let i = on(dev, &values(&[5], DType::I64, 5));
    assert_eq!(
        i.to_vec::<i64>().unwrap(),
        values(&[5], DType::I64, 5).to_vec::<i64>().unwrap()
    );
    assert_eq!(on(dev, &Array::scalar(2.5f64)).item::<f64>().unwrap(), 2.5);
}

#[test]
fn full_and_zeros_on_the_gpu() {
    let Some(dev) = gpu("full_and_zeros_on_the_gpu") else {
        return;
    };
    let _suite = shared();
    for dtype in DType::ALL {
        for value in [0.0, 1.0, 2.5, -3.0] {
            for shape in [&[2, 3][..], &[], &[0, 2], &[700, 30]] {
                let g = Array::full_on(shape, value, dtype, dev).unwrap();
                let what = format!("full_on({shape:?}, {value}, {dtype})");
                assert_eq!(g.device(), dev, "{what}");
                close(&g, &Array::full(shape, value, dtype).unwrap(), EXACT, &what);
            }
        }
        // -0.0 keeps its sign (all-zero bytes would be +0.0), as on the host.
        if dtype.is_float() {
            let g = Array::full_on(&[3], -0.0, dtype, dev).unwrap();
            let bits = g.to_f64_vec().unwrap();
            let host = Array::full(&[3], -0.0, dtype)
                .unwrap()
                .to_f64_vec()
                .unwrap();
            assert!(host.iter().all(|v| *v == 0.0 && v.is_sign_negative()));
            assert!(
                bits.iter().all(|v| *v == 0.0 && v.is_sign_negative()),
                "full_on(-0.0, {dtype}) gave {bits:?}"
            );
        }
        let z = Array::zeros_on(&[4, 5], dtype, dev).unwrap();
        assert_eq!(z.device(), dev);
        close(
            &z,
            &Array::zeros(&[4, 5], dtype).unwrap(),
            EXACT,
            "zeros_on",
        );
        let g = on(dev, &values(&[2, 3], dtype, 1));
        for (name, like, value) in [
            ("zeros_like", g.zeros_like().unwrap(), 0.0),
            ("ones_like", g.ones_like().unwrap(), 1.0),
            ("full_like", g.full_like(-2.0).unwrap(), -2.0),
        ] {
            assert_eq!(like.device(), dev, "{name}");
            close(
                &like,
                &Array::full(&[2, 3], value, dtype).unwrap(),
                EXACT,
                &format!("{dtype} {name}"),
            );
        }
    }
}

// ----- elementwise operations -----

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
            // Integer arrays refuse fractional scalars (tests/hostile/numerics.rs).
            let scalars = if dtype.is_float() {
                [2.5, -1.5, 0.0]
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
fn integer_division_by_zero_gives_zero() {
    let Some(dev) = gpu("integer_division_by_zero_gives_zero") else {
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

// ----- reductions and matrix products -----

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
    for dtype in [DType::I32, DType::I64, DType::F32, DType::F64] {
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

// ----- variables and functions -----

type VarFn = Box<dyn Fn(&[Variable], Device) -> Result<Variable>>;

/// A built-in function applied to seeded inputs.
struct Case {
    name: &'static str,
    inputs: Vec<Array>,
    f: VarFn,
}

fn case(
    name: &'static str,
    inputs: Vec<Array>,
    f: impl Fn(&[Variable], Device) -> Result<Variable> + 'static,
) -> Case {
    Case {
        name,
        inputs,
        f: Box::new(f),
    }
}

/// Every built-in of `kusari::functions` (but select_item and softmax_cross_entropy, tested on
/// their own) on inputs of `t`.
fn function_cases(t: DType) -> Vec<Case> {
    let s = |shape: &[usize], seed: u64| smooth(shape, t, seed);
    let p = |shape: &[usize], seed: u64| positive(shape, t, seed);
    let other = if t == DType::F32 {
        DType::F64
    } else {
        DType::F32
    };
    let cond = values(&[3, 4], DType::Bool, 7);
    vec![
        case("add", vec![s(&[3, 4], 1), s(&[4], 2)], |v, _| {
            F::add(&v[0], &v[1])
        }),
        case("sub", vec![s(&[3, 1], 3), s(&[1, 4], 4)], |v, _| {
            F::sub(&v[0], &v[1])
        }),
        case("mul", vec![s(&[3, 4], 5), s(&[3, 4], 6)], |v, _| {
            F::mul(&v[0], &v[1])
        }),
        case("div", vec![s(&[3, 4], 7), p(&[3, 1], 8)], |v, _| {
            F::div(&v[0], &v[1])
        }),
        case("maximum", vec![s(&[3, 4], 9), s(&[3, 4], 10)], |v, _| {
            F::maximum(&v[0], &v[1])
        }),
        case("pow", vec![p(&[3, 4], 11), s(&[3, 4], 12)], |v, _| {
            F::pow(&v[0], &v[1])
        }),
        case("neg", vec![s(&[3, 4], 13)], |v, _| F::neg(&v[0])),
        case("add_scalar", vec![s(&[3, 4], 14)], |v, _| {
            F::add_scalar(&v[0], 1.5)
        }),
        case("sub_scalar", vec![s(&[3, 4], 15)], |v, _| {
            F::sub_scalar(&v[0], 0.5)
        }),
        case("mul_scalar", vec![s(&[3, 4], 16)], |v, _| {
            F::mul_scalar(&v[0], -2.0)
        }),
        case("div_scalar", vec![s(&[3, 4], 17)], |v, _| {
            F::div_scalar(&v[0], 4.0)
        }),
        case("rsub_scalar", vec![s(&[3, 4], 18)], |v, _| {
            F::rsub_scalar(&v[0], 3.0)
        }),
        case("rdiv_scalar", vec![p(&[3, 4], 19)], |v, _| {
            F::rdiv_scalar(&v[0], 2.0)
        }),
        case("pow_scalar", vec![p(&[3, 4], 20)], |v, _| {
            F::pow_scalar(&v[0], 1.5)
        }),
        case(
            "where_",
            vec![s(&[3, 4], 21), s(&[3, 4], 22)],
            move |v, d| F::where_(&cond.to_device(d)?, &v[0], &v[1]),
        ),
        case("astype", vec![s(&[3, 4], 23)], move |v, _| {
            F::astype(&v[0], other)
        }),
        case("broadcast_to", vec![s(&[3, 1], 24)], |v, _| {
            F::broadcast_to(&v[0], &[3, 4])
        }),
        case("expand_dims", vec![s(&[3, 4], 25)], |v, _| {
            F::expand_dims(&v[0], 1)
        }),
        case("reshape", vec![s(&[3, 4], 26)], |v, _| {
            F::reshape(&v[0], &[2, 6])
        }),
        case("reshape of transposed", vec![s(&[3, 4], 27)], |v, _| {
            F::reshape(&F::transpose(&v[0], None)?, &[2, 6])
        }),
        case("squeeze", vec![s(&[3, 1, 4], 28)], |v, _| {
            F::squeeze(&v[0], None)
        }),
        case("sum_to", vec![s(&[3, 4], 29)], |v, _| {
            F::sum_to(&v[0], &[1, 4])
        }),
        case("transpose", vec![s(&[2, 3, 4], 30)], |v, _| {
            F::transpose(&v[0], Some(&[2, 0, 1]))
        }),
        case("dropout", vec![s(&[4, 5], 31)], |v, _| {
            // The mask is drawn on the host: one seed, one mask on every device.
            random::seed(11);
            F::dropout(&v[0], 0.4)
        }),
        case(
            "linear",
            vec![s(&[5, 3], 32), s(&[2, 3], 33), s(&[2], 34)],
            |v, _| F::linear(&v[0], &v[1], Some(&v[2])),
        ),
        case(
            "linear without bias",
            vec![s(&[5, 3], 35), s(&[2, 3], 36)],
            |v, _| F::linear(&v[0], &v[1], None),
        ),
        case(
            "linear of [5,2,3]",
            vec![s(&[5, 2, 3], 37), s(&[4, 6], 38), s(&[4], 39)],
            |v, _| F::linear(&v[0], &v[1], Some(&v[2])),
        ),
        case("matmul", vec![s(&[2, 3, 4], 40), s(&[4, 5], 41)], |v, _| {
            F::matmul(&v[0], &v[1])
        }),
        case(
            "matmul [4] @ [4,5]",
            vec![s(&[4], 42), s(&[4, 5], 43)],
            |v, _| F::matmul(&v[0], &v[1]),
        ),
        case(
            "matmul [4] @ [4]",
            vec![s(&[4], 44), s(&[4], 45)],
            |v, _| F::matmul(&v[0], &v[1]),
        ),
        case("log_softmax", vec![s(&[4, 5], 46)], |v, _| {
            F::log_softmax(&v[0], 1)
        }),
        case("softmax", vec![s(&[4, 5], 47)], |v, _| F::softmax(&v[0], 0)),
        case("exp", vec![s(&[3, 4], 48)], |v, _| F::exp(&v[0])),
        case("log", vec![p(&[3, 4], 49)], |v, _| F::log(&v[0])),
        case("relu", vec![s(&[3, 4], 50)], |v, _| F::relu(&v[0])),
        case("sigmoid", vec![s(&[3, 4], 51)], |v, _| F::sigmoid(&v[0])),
        case("sqrt", vec![p(&[3, 4], 52)], |v, _| F::sqrt(&v[0])),
        case("tanh", vec![s(&[3, 4], 53)], |v, _| F::tanh(&v[0])),
        case("max", vec![s(&[3, 4, 5], 54)], |v, _| {
            F::max_axes(&v[0], &[1], false)
        }),
        case("min", vec![s(&[3, 4, 5], 55)], |v, _| F::min(&v[0])),
        case("min keepdims", vec![s(&[3, 4, 5], 56)], |v, _| {
            F::min_axes(&v[0], &[0, 2], true)
        }),
        case("mean", vec![s(&[3, 4, 5], 57)], |v, _| {
            F::mean_axes(&v[0], &[0], true)
        }),
        case("sum", vec![s(&[3, 4], 58)], |v, _| F::sum(&v[0])),
        case("sum_axes", vec![s(&[3, 4, 5], 59)], |v, _| {
            F::sum_axes(&v[0], &[0, 2], true)
        }),
        case("operators", vec![s(&[3, 4], 60), p(&[4], 61)], |v, _| {
            let a = ((&v[0] * &v[1])? + 1.0)?;
            let b = (2.0 - &v[0])?;
            (&a / &v[1])? - (-b)?
        }),
    ]
}

/// The output of `case` on `device` and the gradients of its inputs for a seeded output
/// gradient, all as arrays on `device`.
fn run_case(case: &Case, device: Device) -> Result<(Array, Vec<Option<Array>>)> {
    let xs: Vec<Variable> = case
        .inputs
        .iter()
        .map(|a| Ok(Variable::new(a.to_device(device)?)))
        .collect::<Result<_>>()?;
    let y = (case.f)(&xs, device)?;
    let gy = smooth(y.shape(), y.dtype(), 99).to_device(device)?;
    let refs: Vec<&Variable> = xs.iter().collect();
    let grads = grad(
        &[&y],
        &refs,
        &[Variable::constant(gy)],
        GradOptions::default(),
    )?;
    Ok((
        y.array().clone(),
        grads
            .into_iter()
            .map(|g| g.map(|g| g.array().clone()))
            .collect(),
    ))
}

fn functions_match_the_host(test: &str, dtype: DType) {
    let Some(dev) = gpu(test) else {
        return;
    };
    let _suite = shared();
    let fallbacks = cuda::host_fallback_count();
    for case in function_cases(dtype) {
        let what = format!("F::{} {dtype}", case.name);
        let (y, grads) =
            run_case(&case, Device::Cpu).unwrap_or_else(|e| panic!("{what} on the host: {e}"));
        let (gy, ggrads) = run_case(&case, dev).unwrap_or_else(|e| panic!("{what} on {dev}: {e}"));
        assert_eq!(gy.device(), dev, "{what}: the output is not on {dev}");
        close(&gy, &y, tol(y.dtype(), Math::Transcendental), &what);
        assert_eq!(grads.len(), ggrads.len());
        for (i, (h, g)) in grads.iter().zip(&ggrads).enumerate() {
            let what = format!("{what}: gradient of input {i}");
            match (h, g) {
                (Some(h), Some(g)) => {
                    assert_eq!(g.device(), dev, "{what} is not on {dev}");
                    close(g, h, tol(h.dtype(), Math::Transcendental), &what);
                }
                (None, None) => {}
                _ => panic!("{what}: present on one device only ({h:?} vs {g:?})"),
            }
        }
    }
    // Every built-in runs on the GPU itself: none fell back to the host.
    assert_eq!(
        cuda::host_fallback_count(),
        fallbacks,
        "a built-in fell back to the host"
    );
}

#[test]
fn functions_match_the_host_in_float32() {
    functions_match_the_host("functions_match_the_host_in_float32", DType::F32);
}

#[test]
fn functions_match_the_host_in_float64() {
    functions_match_the_host("functions_match_the_host_in_float64", DType::F64);
}

/// `x` on `device` and the classification loss or item selection of it, with its gradient.
fn labelled(
    device: Device,
    x: &Array,
    t: &Array,
    f: fn(&Variable, &Array) -> Result<Variable>,
) -> Result<(Variable, Array)> {
    let xv = Variable::new(x.to_device(device)?);
    let y = f(&xv, &t.to_device(device)?)?;
    if y.device() != device {
        return Err(Error::msg(format!(
            "the output is on {}, not on its input's device {device}",
            y.device()
        )));
    }
    let gy = smooth(y.shape(), y.dtype(), 5).to_device(device)?;
    let g = grad(
        &[&y],
        &[&xv],
        &[Variable::constant(gy)],
        GradOptions::default(),
    )?
    .remove(0)
    .expect("x gets a gradient");
    Ok((y, g.array().clone()))
}

#[test]
fn select_item_stays_on_the_gpu() {
    let Some(dev) = gpu("select_item_stays_on_the_gpu") else {
        return;
    };
    let _suite = shared();
    for dtype in [DType::F32, DType::F64] {
        let x = smooth(&[4, 5], dtype, 1);
        let t = host(&[1.0, -1.0, 4.0, 0.0], &[4], DType::I32);
        let (y, g) = labelled(Device::Cpu, &x, &t, F::select_item).unwrap();
        let (gy, gg) = labelled(dev, &x, &t, F::select_item)
            .unwrap_or_else(|e| panic!("select_item {dtype} on {dev}: {e}"));
        assert_eq!(
            gy.device(),
            dev,
            "select_item's output is on {}",
            gy.device()
        );
        close(gy.array(), y.array(), EXACT, "select_item");
        assert_eq!(gg.device(), dev);
        close(&gg, &g, EXACT, "select_item's gradient");
    }
}

#[test]
fn softmax_cross_entropy_stays_on_the_gpu() {
    let Some(dev) = gpu("softmax_cross_entropy_stays_on_the_gpu") else {
        return;
    };
    let _suite = shared();
    for dtype in [DType::F32, DType::F64] {
        let x = smooth(&[6, 5], dtype, 2);
        let t = host(&[1.0, -1.0, 4.0, 0.0, 2.0, 2.0], &[6], DType::I64);
        let (y, g) = labelled(Device::Cpu, &x, &t, F::softmax_cross_entropy).unwrap();
        let (gy, gg) = labelled(dev, &x, &t, F::softmax_cross_entropy)
            .unwrap_or_else(|e| panic!("softmax_cross_entropy {dtype} on {dev}: {e}"));
        assert_eq!(
            gy.device(),
            dev,
            "softmax_cross_entropy's loss is on {}",
            gy.device()
        );
        let t = tol(dtype, Math::Transcendental);
        close(gy.array(), y.array(), t, "softmax_cross_entropy");
        assert_eq!(gg.device(), dev);
        close(&gg, &g, t, "softmax_cross_entropy's gradient");
    }
}

/// First- and second-order gradients of `f` at `inputs` on `device`: each input's gradient for
/// a seeded output gradient, then the gradient of `Σ gx²` (through the recorded backward).
fn second_order(
    device: Device,
    inputs: &[Array],
    f: &dyn Fn(&[Variable]) -> Result<Variable>,
) -> Result<Vec<Option<Array>>> {
    let xs: Vec<Variable> = inputs
        .iter()
        .map(|a| Ok(Variable::new(a.to_device(device)?)))
        .collect::<Result<_>>()?;
    let refs: Vec<&Variable> = xs.iter().collect();
    let y = f(&xs)?;
    let gy = Variable::constant(smooth(y.shape(), y.dtype(), 7).to_device(device)?);
    let record = GradOptions {
        enable_double_backprop: true,
        ..Default::default()
    };
    let gxs: Vec<Variable> = grad(&[&y], &refs, &[gy], record)?
        .into_iter()
        .map(|g| g.expect("every input gets a gradient"))
        .collect();
    let mut z: Option<Variable> = None;
    for g in &gxs {
        let s = F::sum(&F::mul(g, g)?)?;
        z = Some(match z {
            Some(z) => F::add(&z, &s)?,
            None => s,
        });
    }
    let z = z.expect("at least one input");
    let ggs = grad(&[&z], &refs, None, GradOptions::default())?;
    // An input the first-order gradients do not depend on gets no second-order one.
    let mut out: Vec<Option<Array>> = gxs.iter().map(|g| Some(g.array().clone())).collect();
    out.extend(ggs.into_iter().map(|g| g.map(|g| g.array().clone())));
    Ok(out)
}

#[test]
fn second_order_gradients_match_the_host() {
    let Some(dev) = gpu("second_order_gradients_match_the_host") else {
        return;
    };
    let _suite = shared();
    type Of = Box<dyn Fn(&[Variable]) -> Result<Variable>>;
    for dtype in [DType::F32, DType::F64] {
        let cases: Vec<(&str, Vec<Array>, Of)> = vec![
            (
                "tanh",
                vec![smooth(&[3, 4], dtype, 1)],
                Box::new(|v: &[Variable]| F::tanh(&v[0])),
            ),
            (
                "sigmoid",
                vec![smooth(&[3, 4], dtype, 2)],
                Box::new(|v: &[Variable]| F::sigmoid(&v[0])),
            ),
            (
                "exp",
                vec![smooth(&[3, 4], dtype, 3)],
                Box::new(|v: &[Variable]| F::exp(&v[0])),
            ),
            (
                "log",
                vec![positive(&[3, 4], dtype, 4)],
                Box::new(|v: &[Variable]| F::log(&v[0])),
            ),
            (
                "pow_scalar",
                vec![positive(&[3, 4], dtype, 5)],
                Box::new(|v: &[Variable]| F::pow_scalar(&v[0], 3.0)),
            ),
            (
                "mul with broadcasting",
                vec![smooth(&[3, 4], dtype, 6), smooth(&[4], dtype, 7)],
                Box::new(|v: &[Variable]| F::mul(&v[0], &v[1])),
            ),
            (
                "MulAdd (kusari_examples::muladd_kernel)",
                vec![
                    smooth(&[3, 4], dtype, 8),
                    smooth(&[3, 4], dtype, 9),
                    smooth(&[3, 4], dtype, 10),
                ],
                Box::new(|v: &[Variable]| muladd_kernel::mul_add(&v[0], &v[1], &v[2])),
            ),
        ];
        for (name, inputs, f) in cases {
            let what = format!("{name} {dtype}");
            let h = second_order(Device::Cpu, &inputs, &*f).unwrap();
            let g =
                second_order(dev, &inputs, &*f).unwrap_or_else(|e| panic!("{what} on {dev}: {e}"));
            assert_eq!(h.len(), g.len());
            for (i, (h, g)) in h.iter().zip(&g).enumerate() {
                let what = format!("{what}: gradient {i}");
                match (h, g) {
                    (Some(h), Some(g)) => {
                        assert_eq!(g.device(), dev, "{what}");
                        close(g, h, tol(dtype, Math::Transcendental), &what);
                    }
                    (None, None) => {}
                    _ => panic!("{what}: present on one device only ({h:?} vs {g:?})"),
                }
            }
        }
    }
}

// ----- kernels -----

#[test]
fn muladd_example_ops_match_the_host() {
    let Some(dev) = gpu("muladd_example_ops_match_the_host") else {
        return;
    };
    let _suite = shared();
    let fallbacks = cuda::host_fallback_count();
    for dtype in [DType::F32, DType::F64, DType::F16, DType::BF16] {
        let inputs: Vec<Array> = (0..3).map(|k| smooth(&[3, 4], dtype, 20 + k)).collect();
        let gw = smooth(&[3, 4], dtype, 30);
        let run = |device: Device| -> Result<Vec<Array>> {
            let v: Vec<Variable> = inputs
                .iter()
                .map(|a| Ok(Variable::new(a.to_device(device)?)))
                .collect::<Result<_>>()?;
            let w = muladd_kernel::mul_add(&v[0], &v[1], &v[2])?;
            assert_eq!(w.creator_label().as_deref(), Some("MulAdd"));
            let record = GradOptions {
                enable_double_backprop: true,
                ..Default::default()
            };
            let gw = Variable::constant(gw.to_device(device)?);
            let grads = grad(&[&w], &[&v[0], &v[1], &v[2]], &[gw], record)?;
            let grads: Vec<Variable> = grads.into_iter().map(|g| g.expect("a gradient")).collect();
            // Backward applied MulAddGrad, whose one kernel computes gx and gy.
            assert_eq!(grads[0].creator_label().as_deref(), Some("MulAddGrad"));
            // MulAddGrad's two outputs, applied directly.
            let (gx, gy) = muladd_kernel::mul_add_grad(&v[0], &v[1], &v[2])?;
            let mut out = vec![w.array().clone()];
            out.extend(grads.iter().map(|g| g.array().clone()));
            out.extend([gx.array().clone(), gy.array().clone()]);
            Ok(out)
        };
        let h = run(Device::Cpu).unwrap();
        let g = run(dev).unwrap_or_else(|e| panic!("MulAdd {dtype} on {dev}: {e}"));
        let names = ["w", "gx", "gy", "gz", "mul_add_grad gx", "mul_add_grad gy"];
        for ((h, g), name) in h.iter().zip(&g).zip(names) {
            assert_eq!(g.device(), dev, "{name} {dtype}");
            close(
                g,
                h,
                tol(dtype, Math::Arith),
                &format!("MulAdd {dtype}: {name}"),
            );
        }
    }
    // The ops ran their kernels: nothing fell back to the host.
    assert_eq!(cuda::host_fallback_count(), fallbacks);
}

static SUM_DIFF: ElementwiseKernel = ElementwiseKernel::new(
    "sum_diff",
    "T x, T y",
    "T s, T d",
    "",
    "s = x + y; d = x - y;",
);

static SCALED: ElementwiseKernel = ElementwiseKernel::new(
    "scaled_mixed",
    "float32 x, int32 k",
    "float64 out, int64 twice",
    "int64 shift, float64 scale, bool flip, float32 bias",
    "const double v = (double)x * scale + (double)k + (double)shift + (double)bias;\n\
     out = flip ? -v : v;\n\
     twice = 2 * (long long)k;",
);

#[test]
fn kernels_with_several_outputs_and_mixed_types() {
    let Some(dev) = gpu("kernels_with_several_outputs_and_mixed_types") else {
        return;
    };
    let _suite = shared();
    for dtype in [DType::F32, DType::F64, DType::I32, DType::I64, DType::F16] {
        for pair in PAIRS {
            let (a, b) = (values(pair.a.0, dtype, 1), values(pair.b.0, dtype, 2));
            let (ga, gb) = (on(dev, &a), on(dev, &b));
            let (ha, hb) = ((pair.a.1)(&a).unwrap(), (pair.b.1)(&b).unwrap());
            let (va, vb) = ((pair.a.1)(&ga).unwrap(), (pair.b.1)(&gb).unwrap());
            let out = SUM_DIFF.launch(&[&va, &vb], &[]).unwrap();
            let what = format!("sum_diff {dtype} {}", pair.name);
            assert_eq!(out.len(), 2, "{what}");
            for o in &out {
                assert_eq!(o.device(), dev, "{what}");
                assert!(o.is_contiguous(), "{what}");
            }
            let t = tol(dtype, Math::Arith);
            close(&out[0], &ha.add(&hb).unwrap(), t, &format!("{what}: s"));
            close(&out[1], &ha.sub(&hb).unwrap(), t, &format!("{what}: d"));
        }
    }

    // Concrete types of every width, in the arrays and in the scalar parameters.
    let x = values(&[3, 4], DType::F32, 3);
    let k = values(&[4], DType::I32, 4);
    let (gx, gk) = (on(dev, &x), on(dev, &k));
    for (shift, scale, flip, bias) in [(3.0, 0.5, 0.0, 0.25), (-7.0, -2.0, 1.0, 1.5)] {
        let out = SCALED
            .launch(
                &[&gx.t().t(), &gk],
                &[
                    shift.into(),
                    scale.into(),
                    (flip != 0.0).into(),
                    bias.into(),
                ],
            )
            .unwrap();
        assert_eq!(out[0].dtype(), DType::F64);
        assert_eq!(out[1].dtype(), DType::I64);
        let (xs, ks) = (x.to_f64_vec().unwrap(), k.to_f64_vec().unwrap());
        let expected: Vec<f64> = xs
            .iter()
            .enumerate()
            .map(|(i, &xv)| {
                let v = xv * scale + ks[i % 4] + shift + bias;
                if flip != 0.0 {
                    -v
                } else {
                    v
                }
            })
            .collect();
        let twice: Vec<f64> = (0..12).map(|i| 2.0 * ks[i % 4]).collect();
        close(
            &out[0],
            &host(&expected, &[3, 4], DType::F64),
            (1e-12, 1e-12),
            "scaled_mixed out",
        );
        close(
            &out[1],
            &host(&twice, &[3, 4], DType::I64),
            EXACT,
            "scaled_mixed twice",
        );
    }
    // Arguments are checked before anything runs.
    let e = SCALED.launch(&[&gx, &gk], &[1.0.into()]).unwrap_err();
    assert!(e.to_string().contains("scalar parameter"), "{e}");
    let e = SUM_DIFF.launch(&[&gx, &gk], &[]).unwrap_err();
    assert!(
        e.to_string().contains("`T` was bound to float32 by `x`"),
        "{e}"
    );
}

fn delta(before: KernelStats, after: KernelStats) -> KernelStats {
    KernelStats {
        compiles: after.compiles - before.compiles,
        disk_hits: after.disk_hits - before.disk_hits,
        memory_hits: after.memory_hits - before.memory_hits,
        module_loads: after.module_loads - before.module_loads,
        launches: after.launches - before.launches,
    }
}

static CACHE_PROBE: ElementwiseKernel = ElementwiseKernel::new(
    "kusari_test_cache_probe",
    "T x, T y",
    "T w",
    "T a",
    "w = a * x + y;",
);

#[test]
fn warm_launches_compile_and_load_nothing() {
    let Some(dev) = gpu("warm_launches_compile_and_load_nothing") else {
        return;
    };
    let _suite = exclusive();
    let (hx, hy) = (
        values(&[3, 4], DType::F32, 1),
        values(&[3, 4], DType::F32, 2),
    );
    let (x, y) = (on(dev, &hx), on(dev, &hy));
    let expected = hx.mul_scalar(2.0).unwrap().add(&hy).unwrap();
    let launch = |x: &Array| {
        CACHE_PROBE
            .launch(&[x, &y], &[2.0.into()])
            .unwrap()
            .remove(0)
    };

    // First launch of this kernel in the process: compiled (or read from the disk cache) and
    // loaded once.
    let s0 = cuda::kernel_stats();
    let first = launch(&x);
    let d1 = delta(s0, cuda::kernel_stats());
    assert_eq!(d1.launches, 1, "first launch: {d1:?}");
    assert_eq!(d1.module_loads, 1, "first launch: {d1:?}");
    assert!(d1.compiles + d1.disk_hits >= 1, "first launch: {d1:?}");

    // The same launch again: nothing but the launch.
    let s1 = cuda::kernel_stats();
    let second = launch(&x);
    let d2 = delta(s1, cuda::kernel_stats());
    assert_eq!(d2.compiles, 0, "warm launch: {d2:?}");
    assert_eq!(d2.disk_hits, 0, "warm launch: {d2:?}");
    assert_eq!(d2.module_loads, 0, "warm launch: {d2:?}");
    assert_eq!(d2.launches, 1, "warm launch: {d2:?}");
    let t = tol(DType::F32, Math::Arith);
    close(&first, &expected, t, "first launch");
    close(&second, &expected, t, "second launch");

    // Another variant (a transposed operand takes the strided path) is compiled and loaded
    // once, then warm too.
    let xt = on(dev, &hx.t().contiguous().unwrap()).t();
    let s2 = cuda::kernel_stats();
    let strided = launch(&xt);
    let d3 = delta(s2, cuda::kernel_stats());
    assert_eq!(
        (d3.module_loads, d3.launches),
        (1, 1),
        "strided variant: {d3:?}"
    );
    let s3 = cuda::kernel_stats();
    launch(&xt);
    let d4 = delta(s3, cuda::kernel_stats());
    assert_eq!(
        (d4.compiles, d4.disk_hits, d4.module_loads, d4.launches),
        (0, 0, 0, 1),
        "warm strided launch: {d4:?}"
    );
    close(&strided, &expected, t, "strided launch");

    // Built-in operations go through the same caches: a repeated sum over the last axis (one
    // reduction kernel, no copy) compiles and loads nothing the second time.
    let a = on(dev, &values(&[8, 33], DType::F64, 3));
    a.sum_axes(&[1], false).unwrap();
    let s4 = cuda::kernel_stats();
    let r = a.sum_axes(&[1], false).unwrap();
    let d5 = delta(s4, cuda::kernel_stats());
    assert_eq!(
        (d5.compiles, d5.disk_hits, d5.module_loads, d5.launches),
        (0, 0, 0, 1),
        "warm reduction: {d5:?}"
    );
    close(
        &r,
        &values(&[8, 33], DType::F64, 3)
            .sum_axes(&[1], false)
            .unwrap(),
        EXACT,
        "sum",
    );
}

// ----- host fallback -----

/// x³ with only a CPU forward: on CUDA inputs it runs on host copies (the host fallback).
struct Cube;

#[function_node]
impl Cube {
    #[retain(x)]
    fn forward_cpu(&self, x: &Array) -> Result<Array> {
        x.mul(&x.mul(x)?)
    }

    fn backward(&self, x: &Variable, gy: &Variable) -> Result<Variable> {
        F::mul(gy, &F::mul_scalar(&F::mul(x, x)?, 3.0)?)
    }
}

#[test]
fn functions_without_forward_gpu_fall_back_to_the_host() {
    let Some(dev) = gpu("functions_without_forward_gpu_fall_back_to_the_host") else {
        return;
    };
    let _suite = exclusive();
    let hx = smooth(&[3, 4], DType::F32, 1);
    let expected = cube(&Variable::new(hx.clone())).unwrap();
    let x = Variable::new(on(dev, &hx));
    let t = tol(DType::F32, Math::Arith);

    let before = cuda::host_fallback_count();
    let y = cube(&x).unwrap();
    assert_eq!(cuda::host_fallback_count(), before + 1);
    assert_eq!(
        y.device(),
        dev,
        "the fallback's output is moved back to {dev}"
    );
    close(y.array(), expected.array(), t, "Cube on the GPU");
    // Backward (written with built-ins) runs on the GPU with the retained GPU input.
    F::sum(&y).unwrap().backward().unwrap();
    let g = x.grad_array().expect("x.grad");
    assert_eq!(g.device(), dev);
    close(
        &g,
        &hx.mul(&hx).unwrap().mul_scalar(3.0).unwrap(),
        t,
        "Cube's gradient",
    );

    // Forbidden: a typed error naming the function and the device, and no copy.
    {
        let _strict = config::using_host_fallback(false);
        let err = cube(&x).unwrap_err();
        match err.root_cause() {
            Error::HostFallbackForbidden { function, device } => {
                assert_eq!(function, "Cube");
                assert_eq!(*device, dev);
            }
            other => panic!("expected HostFallbackForbidden, got {other:?}"),
        }
        let msg = err.to_string();
        assert!(msg.contains("Cube") && msg.contains("cuda:0"), "{msg}");
        // Host inputs are not a fallback.
        cube(&Variable::new(hx.clone())).unwrap();
    }
    assert_eq!(cuda::host_fallback_count(), before + 1);
    // Allowed again once the guard drops.
    cube(&x).unwrap();
    assert_eq!(cuda::host_fallback_count(), before + 2);
}

// ----- devices -----

#[track_caller]
fn assert_mismatch<T: std::fmt::Debug>(result: Result<T>, dev: Device, what: &str) {
    let err = result.expect_err(what);
    let Error::DeviceMismatch { lhs, rhs, .. } = err.root_cause() else {
        panic!("{what}: expected DeviceMismatch, got {err:?}");
    };
    let mut devices = [*lhs, *rhs];
    devices.sort_by_key(|d| d.to_string());
    let mut expected = [dev, Device::Cpu];
    expected.sort_by_key(|d| d.to_string());
    assert_eq!(devices, expected, "{what}: {err}");
    let msg = err.to_string();
    assert!(
        msg.contains(&dev.to_string()) && msg.contains("native:0"),
        "{what}: the message names both devices: {msg}"
    );
}

#[test]
fn mixing_devices_is_a_device_mismatch() {
    let Some(dev) = gpu("mixing_devices_is_a_device_mismatch") else {
        return;
    };
    let _suite = shared();
    let h = values(&[3, 4], DType::F32, 1);
    let g = on(dev, &h);
    let cond = values(&[3, 4], DType::Bool, 2);
    let gcond = on(dev, &cond);
    assert_mismatch(g.add(&h), dev, "add");
    assert_mismatch(h.mul(&g), dev, "mul");
    assert_mismatch(g.pow(&h), dev, "pow");
    assert_mismatch(g.maximum(&h), dev, "maximum");
    assert_mismatch(g.lt(&h), dev, "lt");
    assert_mismatch(g.matmul(&h.t()), dev, "matmul");
    assert_mismatch(g.mul_add(&h, &g), dev, "mul_add");
    assert_mismatch(
        Array::where_cond(&cond, &g, &g),
        dev,
        "where with a host condition",
    );
    assert_mismatch(
        Array::where_cond(&gcond, &g, &h),
        dev,
        "where with a host operand",
    );
    if let Err(Error::DeviceMismatch { op, lhs, rhs }) = g.add(&h) {
        assert_eq!((op.as_str(), lhs, rhs), ("add", dev, Device::Cpu));
    }

    let (vg, vh) = (Variable::new(g.clone()), Variable::new(h.clone()));
    assert_mismatch(F::add(&vg, &vh), dev, "F::add");
    assert_mismatch(F::mul(&vh, &vg), dev, "F::mul");
    assert_mismatch(
        F::matmul(&vg, &F::transpose(&vh, None).unwrap()),
        dev,
        "F::matmul",
    );
    assert_mismatch(muladd_kernel::mul_add(&vg, &vh, &vg), dev, "MulAdd");
    // A kernel launched on a mix of devices is refused too, naming both.
    let err = SUM_DIFF.launch(&[&g, &h], &[]).unwrap_err();
    assert!(
        matches!(&err, Error::DeviceMismatch { lhs, rhs, .. } if *lhs == dev && *rhs == Device::Cpu),
        "{err:?}"
    );
}

#[test]
fn device_queries_and_devices_that_do_not_exist() {
    let Some(dev) = gpu("device_queries_and_devices_that_do_not_exist") else {
        return;
    };
    let _suite = shared();
    let n = cuda::device_count();
    assert!(n >= 1);
    assert_eq!(cuda::unavailable_reason(), None);
    let (name, (major, minor)) = cuda::properties(0).unwrap();
    eprintln!("cuda:0 is {name}, compute capability {major}.{minor}, one of {n} device(s)");
    assert!(!name.is_empty());
    assert!(major >= 5, "compute capability {major}.{minor}");
    cuda::synchronize(dev).unwrap();
    cuda::synchronize(Device::Cpu).unwrap();

    let far = Device::Cuda(n + 1000);
    let x = values(&[2], DType::F32, 1);
    let err = x.to_device(far).unwrap_err();
    let msg = err.to_string();
    assert!(
        matches!(&err, Error::CudaUnavailable { op, .. } if op.contains(&far.to_string())),
        "{err:?}"
    );
    assert!(
        msg.contains(&far.to_string()) && msg.contains("does not exist"),
        "{msg}"
    );
    assert!(using_device(far).is_err());
    assert_eq!(default_device(), Device::Cpu);
    assert!(Array::zeros_on(&[2], DType::F32, far).is_err());
    assert!(cuda::properties(n + 1000).is_err());
    assert!(cuda::synchronize(far).is_err());
    // A GPU array cannot go there either.
    assert!(on(dev, &x).to_device(far).is_err());
}

#[test]
fn using_device_puts_new_arrays_on_the_gpu() {
    let Some(dev) = gpu("using_device_puts_new_arrays_on_the_gpu") else {
        return;
    };
    let _suite = shared();
    assert_eq!(default_device(), Device::Cpu);
    let hx = smooth(&[6, 5], DType::F32, 3);
    let t = host(&[1.0, -1.0, 4.0, 0.0, 2.0, 2.0], &[6], DType::I64);
    let expected = F::softmax_cross_entropy(&Variable::new(hx.clone()), &t).unwrap();
    {
        let _gpu = using_device(dev).unwrap();
        assert_eq!(default_device(), dev);
        let a = Array::from_vec(vec![1.0f32, 2.0, 3.0], &[3]).unwrap();
        assert_eq!(a.device(), dev);
        assert_eq!(a.to_vec::<f32>().unwrap(), vec![1.0, 2.0, 3.0]);
        let r = Array::arange(0.0, 4.0, 1.0, DType::I64).unwrap();
        assert_eq!(r.device(), dev);
        assert_eq!(r.to_vec::<i64>().unwrap(), vec![0, 1, 2, 3]);
        // The default is per thread: a new thread starts on the host.
        let there = std::thread::spawn(|| {
            let a = Array::arange(0.0, 2.0, 1.0, DType::F32).expect("arange");
            (default_device(), a.device())
        })
        .join()
        .expect("the thread ran");
        assert_eq!(there, (Device::Cpu, Device::Cpu));
        {
            let _cpu = using_device(Device::Cpu).unwrap();
            let b = Array::from_vec(vec![1i32], &[1]).unwrap();
            assert_eq!(b.device(), Device::Cpu);
        }
        assert_eq!(default_device(), dev);
        // Functions that build arrays from host values place them on the default device.
        let loss = F::softmax_cross_entropy(&Variable::new(on(dev, &hx)), &t).unwrap();
        assert_eq!(loss.device(), dev);
        close(
            loss.array(),
            expected.array(),
            tol(DType::F32, Math::Transcendental),
            "softmax_cross_entropy in a GPU scope",
        );
    }
    assert_eq!(default_device(), Device::Cpu);
    assert_eq!(
        Array::from_vec(vec![1.0f64], &[1]).unwrap().device(),
        Device::Cpu
    );
}

// ----- special values: NaN, ±inf, -0.0, integer division by zero, dtype restrictions -----

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
    let unary: [Unary; 12] = [
        ("relu", F::relu),
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
                "relu" | "neg" | "add_scalar" | "mul_scalar" | "rsub_scalar"
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
    let cases: [Unary; 7] = [
        ("exp", F::exp),
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

// ----- reductions of few, long rows (split across blocks) -----

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
