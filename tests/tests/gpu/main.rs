//! The CUDA backend against the host: every operation is run on the host and on `cuda:0` with the
//! same inputs, and the GPU's result, copied back, must match within a tolerance suited to the
//! dtype. Needs a CUDA driver and device (and NVRTC to compile the kernels); without one every
//! test prints `SKIPPED <test>: <reason>` and returns (the `no_gpu` module checks that machine).
//!
//! Inputs are seeded. Floating-point test values are multiples of 1/8 in [-3, 3): exact in every
//! float dtype, so sums and products of a few of them are exact whatever the order the GPU adds
//! them in; transcendental functions get smooth values.
//!
//! Tests that read process-wide counters (kernel cache statistics, host fallbacks) take the
//! suite's lock exclusively; every other test takes it shared.
//!
//! One module per kind of work: `transfers`, `elementwise`, `reductions`, `functions`,
//! `kernels`, `host_fallback`, `devices`, `special_values`; and `no_gpu`, which checks a machine
//! without a GPU (its tests skip where one is present, the others where none is). The helpers
//! every module shares are here.

mod devices;
mod elementwise;
mod functions;
mod host_fallback;
mod kernels;
mod no_gpu;
mod reductions;
mod special_values;
mod transfers;

use std::sync::{PoisonError, RwLock, RwLockReadGuard, RwLockWriteGuard};

use kusari::cuda::{self, KernelStats};
use kusari::prelude::*;
use kusari::{ElementwiseKernel, config, default_device, random, using_device};
use kusari_examples::muladd_kernel;
use kusari_tests::{check_close, reduce};

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
        (DType::F16, _) => (1e-2, 1e-2),
        (DType::BF16, _) => (2e-2, 2e-2),
        (DType::F32, Math::Arith) => (1e-6, 1e-5),
        (DType::F32, Math::Transcendental) => (1e-5, 1e-4),
        (DType::F64, Math::Arith) => (1e-12, 1e-12),
        (DType::F64, Math::Transcendental) => (1e-12, 1e-10),
        // bool and the integers.
        _ => EXACT,
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
        d if d.is_signed_int() => u.map(|x: f64| (x * 10.0).trunc()),
        d if d.is_unsigned() => u.map(|x: f64| ((x + 1.0) * 10.0).trunc()),
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

const FLOAT_UNARY: [(&str, Unary); 10] = [
    ("exp", Array::exp),
    ("erf", Array::erf),
    ("expm1", Array::expm1),
    ("log", Array::log),
    ("log1p", Array::log1p),
    ("sqrt", Array::sqrt),
    ("tanh", Array::tanh),
    ("sigmoid", Array::sigmoid),
    ("sin", Array::sin),
    ("cos", Array::cos),
];

/// Every dtype with arithmetic: the integers, then the floats.
const NUMERIC: [DType; 12] = {
    let mut out = [DType::F64; 12];
    let mut k = 0;
    while k < 8 {
        out[k] = DType::INTEGERS[k];
        k += 1;
    }
    out[8] = DType::F16;
    out[9] = DType::BF16;
    out[10] = DType::F32;
    out
};

/// Every `.rs` file of this suite is a module of it.
#[test]
fn every_file_is_a_module() {
    kusari_tests::assert_every_file_is_a_module(
        concat!(env!("CARGO_MANIFEST_DIR"), "/tests/gpu"),
        include_str!("main.rs"),
    );
}
