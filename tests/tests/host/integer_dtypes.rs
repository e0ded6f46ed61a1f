//! The integer dtypes of NumPy and CuPy beyond int32 and int64 (`int8`, `int16`, `uint8`,
//! `uint16`, `uint32`, `uint64`), on the host and, where one can be used, on a CUDA device:
//! NumPy's promotion table written out, arithmetic that wraps (and divides by zero to zero)
//! against exact `i128` arithmetic reduced to each width, reductions, conversions, kernel
//! signatures and raw kernels that name them.

use kusari::prelude::*;
use kusari::{ElementwiseKernel, RawKernel, Scalar};

/// The dtypes this file is about, with their bounds.
const NEW: [(DType, i128, i128); 6] = [
    (DType::I8, -128, 127),
    (DType::I16, -32768, 32767),
    (DType::U8, 0, 255),
    (DType::U16, 0, 65535),
    (DType::U32, 0, (1 << 32) - 1),
    (DType::U64, 0, (1 << 64) - 1),
];

/// The devices to run on: the host, and CUDA device 0 where one can be used.
fn devices(test: &str) -> Vec<Device> {
    let mut d = vec![Device::Cpu];
    if kusari::testing::cuda_or_skip(test)
        .unwrap_or_else(|e| panic!("{e}"))
        .is_some()
    {
        d.push(Device::Cuda(0));
    }
    d
}

/// An array of `dtype` holding `values` (each in its range).
fn array_of(dtype: DType, values: &[i128], shape: &[usize]) -> Array {
    macro_rules! make {
        ($t:ty) => {
            Array::from_vec(
                values
                    .iter()
                    .map(|&v| <$t>::try_from(v).unwrap())
                    .collect::<Vec<$t>>(),
                shape,
            )
        };
    }
    match dtype {
        DType::I8 => make!(i8),
        DType::I16 => make!(i16),
        DType::I32 => make!(i32),
        DType::I64 => make!(i64),
        DType::U8 => make!(u8),
        DType::U16 => make!(u16),
        DType::U32 => make!(u32),
        DType::U64 => make!(u64),
        other => panic!("not an integer dtype: {other}"),
    }
    .unwrap()
}

/// The elements of an integer array (any device), exactly.
fn values(a: &Array) -> Vec<i128> {
    let a = a.to_device(Device::Cpu).unwrap();
    macro_rules! read {
        ($t:ty) => {
            a.to_vec::<$t>()
                .unwrap()
                .into_iter()
                .map(i128::from)
                .collect()
        };
    }
    match a.dtype() {
        DType::I8 => read!(i8),
        DType::I16 => read!(i16),
        DType::I32 => read!(i32),
        DType::I64 => read!(i64),
        DType::U8 => read!(u8),
        DType::U16 => read!(u16),
        DType::U32 => read!(u32),
        DType::U64 => read!(u64),
        other => panic!("not an integer dtype: {other}"),
    }
}

/// `v` reduced to the width of a type whose range is `lo..=hi`, as wrapping arithmetic does.
fn wrap(v: i128, lo: i128, hi: i128) -> i128 {
    let span = hi - lo + 1;
    (v - lo).rem_euclid(span) + lo
}

/// Values at and near both ends of the range, and around zero.
fn edge_values(lo: i128, hi: i128) -> Vec<i128> {
    let mut v: Vec<i128> = [lo, lo + 1, -7, -1, 0, 1, 2, 3, 100, hi - 1, hi]
        .into_iter()
        .filter(|x| (lo..=hi).contains(x))
        .collect();
    v.dedup();
    v
}

#[test]
fn promotion_is_numpys_table() {
    // numpy.promote_types over every pair, as NumPy 2.4 prints it (rows and columns in this
    // order); bfloat16 is not NumPy's and is checked after.
    const NAMES: [&str; 12] = [
        "bool", "int8", "int16", "int32", "int64", "uint8", "uint16", "uint32", "uint64",
        "float16", "float32", "float64",
    ];
    const TABLE: &str = "
bool     bool    int8    int16   int32   int64   uint8   uint16  uint32  uint64  float16 float32 float64
int8     int8    int8    int16   int32   int64   int16   int32   int64   float64 float16 float32 float64
int16    int16   int16   int16   int32   int64   int16   int32   int64   float64 float32 float32 float64
int32    int32   int32   int32   int32   int64   int32   int32   int64   float64 float64 float64 float64
int64    int64   int64   int64   int64   int64   int64   int64   int64   float64 float64 float64 float64
uint8    uint8   int16   int16   int32   int64   uint8   uint16  uint32  uint64  float16 float32 float64
uint16   uint16  int32   int32   int32   int64   uint16  uint16  uint32  uint64  float32 float32 float64
uint32   uint32  int64   int64   int64   int64   uint32  uint32  uint32  uint64  float64 float64 float64
uint64   uint64  float64 float64 float64 float64 uint64  uint64  uint64  uint64  float64 float64 float64
float16  float16 float16 float32 float64 float64 float16 float32 float64 float64 float16 float32 float64
float32  float32 float32 float32 float64 float64 float32 float32 float64 float64 float32 float32 float64
float64  float64 float64 float64 float64 float64 float64 float64 float64 float64 float64 float64 float64";
    let dtype = |name: &str| {
        DType::ALL
            .into_iter()
            .find(|d| d.name() == name)
            .unwrap_or_else(|| panic!("{name}"))
    };
    let rows: Vec<&str> = TABLE.trim().lines().collect();
    assert_eq!(rows.len(), NAMES.len());
    for row in rows {
        let mut cells = row.split_whitespace();
        let a = dtype(cells.next().unwrap());
        for (b, want) in NAMES.iter().zip(cells) {
            let (b, want) = (dtype(b), dtype(want));
            assert_eq!(a.promote(b), want, "promote({a}, {b})");
            assert_eq!(a.can_cast(b), a.promote(b) == b, "can_cast({a}, {b})");
        }
    }
    // bfloat16 holds every 8-bit integer (8 significant bits), as float16 does.
    for (other, want) in [
        (DType::Bool, DType::BF16),
        (DType::I8, DType::BF16),
        (DType::U8, DType::BF16),
        (DType::I16, DType::F32),
        (DType::U32, DType::F64),
        (DType::F16, DType::F32),
        (DType::F32, DType::F32),
        (DType::F64, DType::F64),
    ] {
        assert_eq!(DType::BF16.promote(other), want, "bfloat16 with {other}");
        assert_eq!(other.promote(DType::BF16), want, "{other} with bfloat16");
    }
}

#[test]
fn arithmetic_wraps_and_divides_by_zero_to_zero() {
    for device in devices("arithmetic_wraps_and_divides_by_zero_to_zero") {
        for (dtype, lo, hi) in NEW {
            let e = edge_values(lo, hi);
            // Every pair: a down the rows, b across.
            let n = e.len();
            let a_vals: Vec<i128> = (0..n * n).map(|k| e[k / n]).collect();
            let b_vals: Vec<i128> = (0..n * n).map(|k| e[k % n]).collect();
            let a = array_of(dtype, &a_vals, &[n, n]).to_device(device).unwrap();
            let b = array_of(dtype, &b_vals, &[n, n]).to_device(device).unwrap();
            let pairs = || a_vals.iter().zip(&b_vals);
            let check = |what: &str, got: Array, want: Vec<i128>| {
                assert_eq!(got.dtype(), dtype, "{what} {dtype} on {device}");
                assert_eq!(values(&got), want, "{what} {dtype} on {device}");
            };
            let w = |v: i128| wrap(v, lo, hi);
            check(
                "add",
                a.add(&b).unwrap(),
                pairs().map(|(x, y)| w(x + y)).collect(),
            );
            check(
                "sub",
                a.sub(&b).unwrap(),
                pairs().map(|(x, y)| w(x - y)).collect(),
            );
            check(
                "mul",
                a.mul(&b).unwrap(),
                pairs().map(|(x, y)| w(x.wrapping_mul(*y))).collect(),
            );
            // C's division truncates toward zero; by zero gives 0; MIN / -1 wraps.
            let div = |x: i128, y: i128| if y == 0 { 0 } else { w(x / y) };
            check(
                "div",
                a.div(&b).unwrap(),
                pairs().map(|(&x, &y)| div(x, y)).collect(),
            );
            check(
                "neg",
                a.neg().unwrap(),
                a_vals.iter().map(|x| w(-x)).collect(),
            );
            check(
                "abs",
                a.abs().unwrap(),
                a_vals.iter().map(|x| w(x.abs())).collect(),
            );
            check(
                "maximum",
                a.maximum(&b).unwrap(),
                pairs().map(|(x, y)| *x.max(y)).collect(),
            );
            check(
                "minimum",
                a.minimum(&b).unwrap(),
                pairs().map(|(x, y)| *x.min(y)).collect(),
            );
            let lt = a.lt(&b).unwrap().to_device(Device::Cpu).unwrap();
            let want: Vec<bool> = pairs().map(|(x, y)| x < y).collect();
            assert_eq!(lt.to_vec::<bool>().unwrap(), want, "lt {dtype} on {device}");
            // A scalar operand is cast to the dtype, as for int32.
            check(
                "add_scalar",
                a.add_scalar(3.0).unwrap(),
                a_vals.iter().map(|x| w(x + 3)).collect(),
            );
        }
    }
}

#[test]
fn a_scalar_the_dtype_cannot_hold_is_refused() {
    for (dtype, lo, hi) in NEW {
        let a = array_of(dtype, &[lo, hi], &[2]);
        // The bounds themselves are fine; one past either end, or a fraction, is not.
        assert!(a.maximum_scalar(lo as f64).is_ok(), "{dtype} {lo}");
        for (s, why) in [
            ((lo - 1) as f64, "out of range"),
            (hi as f64 + 1.0, "out of range"),
            (0.5, "not an integer"),
        ] {
            let e = a.add_scalar(s).unwrap_err();
            assert!(
                matches!(&e, kusari::Error::ScalarNotRepresentable { reason, .. } if *reason == why),
                "{dtype} + {s}: {e}"
            );
        }
    }
}

#[test]
fn sums_wrap_and_max_min_are_exact() {
    for device in devices("sums_wrap_and_max_min_are_exact") {
        for (dtype, lo, hi) in NEW {
            // A [3, 37] array whose rows sum past the type's range.
            let v: Vec<i128> = (0..3 * 37)
                .map(|k| wrap(k * 7919 + lo / 3 + hi / 5, lo, hi))
                .collect();
            let a = array_of(dtype, &v, &[3, 37]).to_device(device).unwrap();
            let total = a.sum().unwrap();
            assert_eq!(
                total.dtype(),
                dtype,
                "sum keeps the dtype, as kusari's int32 does"
            );
            assert_eq!(
                values(&total),
                [wrap(v.iter().sum(), lo, hi)],
                "sum {dtype} on {device}"
            );
            let rows = a.sum_axes(&[1], false).unwrap();
            let want: Vec<i128> = v.chunks(37).map(|r| wrap(r.iter().sum(), lo, hi)).collect();
            assert_eq!(values(&rows), want, "row sums {dtype} on {device}");
            let cols = a.max_axes(&[0], false).unwrap();
            let want: Vec<i128> = (0..37)
                .map(|c| (0..3).map(|r| v[r * 37 + c]).max().unwrap())
                .collect();
            assert_eq!(values(&cols), want, "column max {dtype} on {device}");
            let least = a.min().unwrap();
            assert_eq!(
                values(&least),
                [*v.iter().min().unwrap()],
                "min {dtype} on {device}"
            );
        }
    }
}

#[test]
fn conversions_wrap_saturate_and_round_as_numpy() {
    for device in devices("conversions_wrap_saturate_and_round_as_numpy") {
        // Floats to each integer: truncation toward zero, saturation at both ends, NaN to 0.
        let floats = [
            -1e30, -300.7, -128.5, -1.5, -0.5, 0.0, 0.9, 127.9, 255.5, 70000.25, 1e30,
        ];
        let mut f = floats.to_vec();
        f.push(f64::NAN);
        let x = Array::from_vec(f.clone(), &[f.len()])
            .unwrap()
            .to_device(device)
            .unwrap();
        for (dtype, lo, hi) in NEW {
            let got = values(&x.astype(dtype).unwrap());
            let want: Vec<i128> = f
                .iter()
                .map(|&v| match v.is_nan() {
                    true => 0,
                    false => (v.trunc() as i128).clamp(lo, hi),
                })
                .collect();
            assert_eq!(got, want, "float64 to {dtype} on {device}");
        }
        // Between integers: the value modulo the target's width.
        let ints: Vec<i128> = vec![
            i128::from(i64::MIN),
            -129,
            -1,
            0,
            200,
            70000,
            i128::from(i64::MAX),
        ];
        let x = array_of(DType::I64, &ints, &[ints.len()])
            .to_device(device)
            .unwrap();
        for (dtype, lo, hi) in NEW {
            let got = values(&x.astype(dtype).unwrap());
            let want: Vec<i128> = ints.iter().map(|&v| wrap(v, lo, hi)).collect();
            assert_eq!(got, want, "int64 to {dtype} on {device}");
            // And back: the wrapped values, exactly (uint64 wraps again into int64's range).
            let back = values(&x.astype(dtype).unwrap().astype(DType::I64).unwrap());
            let want: Vec<i128> = (want.iter())
                .map(|&v| wrap(v, i128::from(i64::MIN), i128::from(i64::MAX)))
                .collect();
            assert_eq!(back, want, "{dtype} to int64 on {device}");
        }
        // uint64 beyond int64 reaches floats rounded once and int64 wrapped.
        let big = [u64::MAX, (1 << 63) + 1, 1 << 53 | 1];
        let u = Array::from_vec(big.to_vec(), &[3])
            .unwrap()
            .to_device(device)
            .unwrap();
        let as_f64 = u
            .astype(DType::F64)
            .unwrap()
            .to_device(Device::Cpu)
            .unwrap();
        let want: Vec<f64> = big.iter().map(|&v| v as f64).collect();
        assert_eq!(
            as_f64.to_vec::<f64>().unwrap(),
            want,
            "uint64 to float64 on {device}"
        );
        let as_f32 = u
            .astype(DType::F32)
            .unwrap()
            .to_device(Device::Cpu)
            .unwrap();
        let want: Vec<f32> = big.iter().map(|&v| v as f32).collect();
        assert_eq!(
            as_f32.to_vec::<f32>().unwrap(),
            want,
            "uint64 to float32 on {device}"
        );
        let as_i64 = values(&u.astype(DType::I64).unwrap());
        let want: Vec<i128> = big.iter().map(|&v| i128::from(v as i64)).collect();
        assert_eq!(as_i64, want, "uint64 to int64 on {device}");
    }
}

/// A threshold of uint8 pixels into int16 differences, with CuPy's type names.
static CENTER: ElementwiseKernel = ElementwiseKernel::new(
    "center_pixels",
    "uint8 x",
    "int16 y",
    "uint8 mid",
    "y = (short)x - (short)mid",
);

/// A sum of int8 weights scaled by a uint32 factor into uint64.
static SCALED: ElementwiseKernel = ElementwiseKernel::new(
    "scaled_weights",
    "T w, uint32 k",
    "uint64 y",
    "",
    "y = (unsigned long long)(long long)w * k",
);

#[test]
fn kernels_name_every_integer_type() {
    let pixels: Vec<i128> = vec![0, 1, 127, 128, 200, 255];
    let x = array_of(DType::U8, &pixels, &[6]);
    let src = CENTER.call().arg(&x).param(128).source().unwrap();
    assert!(
        src.source.contains("const unsigned char* __restrict__"),
        "{}",
        src.source
    );
    let weights: Vec<i128> = vec![-128, -1, 0, 1, 5, 127];
    let w = array_of(DType::I8, &weights, &[6]);
    let src = SCALED.call().arg(&w).arg(Scalar::U32(3)).source().unwrap();
    assert!(
        src.source.contains("typedef signed char T;"),
        "{}",
        src.source
    );
    // A parameter that does not fit its declared width is refused.
    let e = CENTER.call().arg(&x).param(256).source().unwrap_err();
    assert!(e.to_string().contains("does not fit its type uint8"), "{e}");
    let Some(dev) = kusari::testing::cuda_or_skip("kernels_name_every_integer_type")
        .unwrap_or_else(|e| panic!("{e}"))
    else {
        return;
    };
    let y = CENTER
        .call()
        .arg(&x.to_device(dev).unwrap())
        .param(128)
        .run()
        .unwrap();
    assert_eq!(y[0].dtype(), DType::I16);
    let want: Vec<i128> = pixels.iter().map(|p| p - 128).collect();
    assert_eq!(values(&y[0]), want);
    let k = Array::from_vec(vec![u32::MAX], &[1])
        .unwrap()
        .to_device(dev)
        .unwrap();
    let y = SCALED
        .call()
        .arg(&w.to_device(dev).unwrap())
        .arg(&k)
        .run()
        .unwrap();
    let want: Vec<i128> = weights
        .iter()
        .map(|&v| wrap(v * i128::from(u32::MAX), 0, (1 << 64) - 1))
        .collect();
    assert_eq!(values(&y[0]), want);
}

#[test]
fn raw_kernels_take_arrays_and_scalars_of_every_integer_width() {
    let k = RawKernel::new(
        r#"#include <cstdint>
        extern "C" __global__ void add_bias(uint8_t* px, unsigned char bias, int16_t* out, int n) {
            int i = blockIdx.x * blockDim.x + threadIdx.x;
            if (i < n) out[i] = (int16_t)px[i] + bias;
        }"#,
        "add_bias",
    )
    .unwrap();
    assert_eq!(k.unchecked_reason(), None);
    let Some(dev) = kusari::testing::cuda_or_skip("raw_kernels_take_every_integer_width")
        .unwrap_or_else(|e| panic!("{e}"))
    else {
        return;
    };
    let px = array_of(DType::U8, &[0, 10, 255], &[3])
        .to_device(dev)
        .unwrap();
    let out = array_of(DType::I16, &[0, 0, 0], &[3])
        .to_device(dev)
        .unwrap();
    // A uint8 array where `int16_t*` is declared (a byte pointer would take any array), and a
    // bias beyond 255, are refused.
    let e = k
        .launch(1, 32, &[(&px).into(), 1.into(), (&px).into(), 3.into()])
        .unwrap_err()
        .to_string();
    assert!(
        e.contains("int16_t* out") && e.contains("uint8 array"),
        "{e}"
    );
    let e = k
        .launch(1, 32, &[(&px).into(), 256.into(), (&out).into(), 3.into()])
        .unwrap_err()
        .to_string();
    assert!(e.contains("cannot hold argument 1, 256"), "{e}");
    k.launch(
        1,
        32,
        &[(&px).into(), Scalar::U8(5).into(), (&out).into(), 3.into()],
    )
    .unwrap();
    assert_eq!(values(&out), [5, 15, 260]);
}

#[test]
fn a_matrix_product_of_small_integers_says_to_convert() {
    for (dtype, ..) in NEW {
        let a = array_of(dtype, &[1, 2, 3, 4], &[2, 2]);
        let e = a.matmul(&a).unwrap_err().to_string();
        assert!(
            e.contains("matmul") && e.contains(dtype.name()) && e.contains("astype"),
            "{e}"
        );
    }
    // Converted, the product is exact.
    let a = array_of(DType::U8, &[1, 2, 3, 4], &[2, 2])
        .astype(DType::I32)
        .unwrap();
    assert_eq!(
        a.matmul(&a).unwrap().to_vec::<i32>().unwrap(),
        vec![7, 10, 15, 22]
    );
}
