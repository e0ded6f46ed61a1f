//! [`Scalar`]: one value that keeps its element type, as kernels take scalar arguments.

use std::fmt;

use half::{bf16, f16};

use crate::dtype::DType;

/// One value of one of kusari's element types.
///
/// Kernels take scalar arguments as `Scalar`s, so that a value keeps its type on the way to the
/// kernel: an `i64` above 2^53 reaches an `int64` parameter exactly, where an `f64` would have
/// rounded it. Every element type converts into it (`Scalar::from(3i64)`, `2.5f32.into()`).
///
/// [`to_dtype`](Self::to_dtype) converts a value to the type a kernel declares, refusing what
/// would change it beyond a float's rounding:
///
/// ```
/// use kusari::{DType, Scalar};
/// assert_eq!(Scalar::from(3i64).to_dtype(DType::I32), Some(Scalar::I32(3)));
/// assert_eq!(Scalar::from(1i64 << 40).to_dtype(DType::I32), None); // out of range
/// assert_eq!(Scalar::from(2.0f64).to_dtype(DType::I64), Some(Scalar::I64(2)));
/// assert_eq!(Scalar::from(2.5f64).to_dtype(DType::I64), None); // not an integer
/// assert_eq!(Scalar::from(0.1f64).to_dtype(DType::F32), Some(Scalar::F32(0.1)));
/// ```
#[derive(Clone, Copy, Debug, PartialEq)]
pub enum Scalar {
    /// A `bool`.
    Bool(bool),
    /// An `i8`.
    I8(i8),
    /// An `i16`.
    I16(i16),
    /// An `i32`.
    I32(i32),
    /// An `i64`.
    I64(i64),
    /// A `u8`.
    U8(u8),
    /// A `u16`.
    U16(u16),
    /// A `u32`.
    U32(u32),
    /// A `u64` (a `usize` converts to one).
    U64(u64),
    /// An IEEE half.
    F16(f16),
    /// A bfloat16.
    BF16(bf16),
    /// An `f32`.
    F32(f32),
    /// An `f64`.
    F64(f64),
}

impl Scalar {
    /// The value's element type.
    pub fn dtype(self) -> DType {
        match self {
            Scalar::Bool(_) => DType::Bool,
            Scalar::I8(_) => DType::I8,
            Scalar::I16(_) => DType::I16,
            Scalar::I32(_) => DType::I32,
            Scalar::I64(_) => DType::I64,
            Scalar::U8(_) => DType::U8,
            Scalar::U16(_) => DType::U16,
            Scalar::U32(_) => DType::U32,
            Scalar::U64(_) => DType::U64,
            Scalar::F16(_) => DType::F16,
            Scalar::BF16(_) => DType::BF16,
            Scalar::F32(_) => DType::F32,
            Scalar::F64(_) => DType::F64,
        }
    }

    /// The value as an `f64` (exact for every type but 64-bit integers beyond 2^53, which
    /// round).
    pub fn to_f64(self) -> f64 {
        match self {
            Scalar::Bool(b) => f64::from(u8::from(b)),
            Scalar::I8(v) => f64::from(v),
            Scalar::I16(v) => f64::from(v),
            Scalar::I32(v) => f64::from(v),
            Scalar::I64(v) => v as f64,
            Scalar::U8(v) => f64::from(v),
            Scalar::U16(v) => f64::from(v),
            Scalar::U32(v) => f64::from(v),
            Scalar::U64(v) => v as f64,
            Scalar::F16(v) => f64::from(v),
            Scalar::BF16(v) => f64::from(v),
            Scalar::F32(v) => f64::from(v),
            Scalar::F64(v) => v,
        }
    }

    /// The value converted to `dtype`, or `None` where the conversion would change it beyond a
    /// float's rounding:
    ///
    /// - to `bool`: only a `bool`;
    /// - to an integer type: a `bool` (0 or 1), an integer in range, or a float that is an
    ///   integer in range (2.0, not 2.5, NaN or infinity);
    /// - to a float type: anything, rounded to the nearest value, except a finite value that
    ///   overflows the type to infinity.
    pub fn to_dtype(self, dtype: DType) -> Option<Scalar> {
        if self.dtype() == dtype {
            return Some(self);
        }
        if let Scalar::Bool(b) = self {
            return match dtype {
                DType::Bool => Some(self),
                _ => Scalar::I32(i32::from(b)).to_dtype(dtype),
            };
        }
        let int = self.to_i128();
        match dtype {
            DType::Bool => None,
            DType::I8 => int.and_then(|v| i8::try_from(v).ok()).map(Scalar::I8),
            DType::I16 => int.and_then(|v| i16::try_from(v).ok()).map(Scalar::I16),
            DType::I32 => int.and_then(|v| i32::try_from(v).ok()).map(Scalar::I32),
            DType::I64 => int.and_then(|v| i64::try_from(v).ok()).map(Scalar::I64),
            DType::U8 => int.and_then(|v| u8::try_from(v).ok()).map(Scalar::U8),
            DType::U16 => int.and_then(|v| u16::try_from(v).ok()).map(Scalar::U16),
            DType::U32 => int.and_then(|v| u32::try_from(v).ok()).map(Scalar::U32),
            DType::U64 => int.and_then(|v| u64::try_from(v).ok()).map(Scalar::U64),
            DType::F16 => finite_kept(self, f16::from_f64).map(Scalar::F16),
            DType::BF16 => finite_kept(self, bf16::from_f64).map(Scalar::BF16),
            DType::F32 => finite_kept(self, |v| v as f32).map(Scalar::F32),
            DType::F64 => Some(Scalar::F64(self.to_f64())),
        }
    }

    /// An integer value as `i128`: integers as they are, floats only when they are integers
    /// within ±2^64 (every 64-bit integer's range).
    fn to_i128(self) -> Option<i128> {
        match self {
            Scalar::Bool(b) => Some(i128::from(b)),
            Scalar::I8(v) => Some(i128::from(v)),
            Scalar::I16(v) => Some(i128::from(v)),
            Scalar::I32(v) => Some(i128::from(v)),
            Scalar::I64(v) => Some(i128::from(v)),
            Scalar::U8(v) => Some(i128::from(v)),
            Scalar::U16(v) => Some(i128::from(v)),
            Scalar::U32(v) => Some(i128::from(v)),
            Scalar::U64(v) => Some(i128::from(v)),
            _ => {
                let v = self.to_f64();
                // 2^64 is exactly representable; every float below it in magnitude with no
                // fraction converts exactly.
                let limit = 18_446_744_073_709_551_616.0_f64;
                (v.fract() == 0.0 && v > -limit && v < limit).then_some(v as i128)
            }
        }
    }

    /// The value's bytes as a kernel parameter takes them: the little-endian bits in the low
    /// bytes of a `u64`, and the width in bytes (1 for `bool`).
    pub fn to_bits(self) -> (u64, usize) {
        match self {
            Scalar::Bool(b) => (u64::from(b), 1),
            Scalar::I8(v) => (u64::from(v as u8), 1),
            Scalar::I16(v) => (u64::from(v as u16), 2),
            Scalar::I32(v) => (u64::from(v as u32), 4),
            Scalar::I64(v) => (v as u64, 8),
            Scalar::U8(v) => (u64::from(v), 1),
            Scalar::U16(v) => (u64::from(v), 2),
            Scalar::U32(v) => (u64::from(v), 4),
            Scalar::U64(v) => (v, 8),
            Scalar::F16(v) => (u64::from(v.to_bits()), 2),
            Scalar::BF16(v) => (u64::from(v.to_bits()), 2),
            Scalar::F32(v) => (u64::from(v.to_bits()), 4),
            Scalar::F64(v) => (v.to_bits(), 8),
        }
    }
}

/// `convert(v)` for a float target, unless a finite value overflows it to infinity.
fn finite_kept<T: Into<f64> + Copy>(v: Scalar, convert: impl Fn(f64) -> T) -> Option<T> {
    let x = v.to_f64();
    let y = convert(x);
    (x.is_finite() == y.into().is_finite() || x.is_nan()).then_some(y)
}

impl fmt::Display for Scalar {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            Scalar::Bool(v) => write!(f, "{v}"),
            Scalar::I8(v) => write!(f, "{v}"),
            Scalar::I16(v) => write!(f, "{v}"),
            Scalar::I32(v) => write!(f, "{v}"),
            Scalar::I64(v) => write!(f, "{v}"),
            Scalar::U8(v) => write!(f, "{v}"),
            Scalar::U16(v) => write!(f, "{v}"),
            Scalar::U32(v) => write!(f, "{v}"),
            Scalar::U64(v) => write!(f, "{v}"),
            Scalar::F16(v) => write!(f, "{v}"),
            Scalar::BF16(v) => write!(f, "{v}"),
            Scalar::F32(v) => write!(f, "{v}"),
            Scalar::F64(v) => write!(f, "{v}"),
        }?;
        write!(f, " ({})", self.dtype())
    }
}

macro_rules! scalar_from {
    ($($t:ty => $v:ident),* $(,)?) => {$(
        impl From<$t> for Scalar {
            fn from(v: $t) -> Scalar {
                Scalar::$v(v)
            }
        }
    )*};
}

scalar_from!(
    bool => Bool,
    i8 => I8,
    i16 => I16,
    i32 => I32,
    i64 => I64,
    u8 => U8,
    u16 => U16,
    u32 => U32,
    u64 => U64,
    f16 => F16,
    bf16 => BF16,
    f32 => F32,
    f64 => F64,
);

/// A `usize` (a size, an index) as a `u64`, which holds every `usize` kusari's targets have.
impl From<usize> for Scalar {
    fn from(v: usize) -> Scalar {
        Scalar::U64(v as u64)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn integers_keep_every_bit() {
        let big = (1i64 << 53) + 1;
        assert_eq!(
            Scalar::from(big).to_dtype(DType::I64),
            Some(Scalar::I64(big))
        );
        assert_eq!(Scalar::from(big).to_bits(), (big as u64, 8));
        assert_eq!(Scalar::from(-1i32).to_bits(), (0xffff_ffff, 4));
        assert_eq!(
            Scalar::from(-1i32).to_dtype(DType::I64),
            Some(Scalar::I64(-1))
        );
    }

    #[test]
    fn integer_targets_refuse_what_they_cannot_hold() {
        assert_eq!(
            Scalar::from(i64::from(i32::MAX) + 1).to_dtype(DType::I32),
            None
        );
        assert_eq!(
            Scalar::from(i64::from(i32::MIN)).to_dtype(DType::I32),
            Some(Scalar::I32(i32::MIN))
        );
        assert_eq!(Scalar::from(2.5f32).to_dtype(DType::I32), None);
        assert_eq!(Scalar::from(f64::NAN).to_dtype(DType::I64), None);
        assert_eq!(Scalar::from(f64::INFINITY).to_dtype(DType::I64), None);
        assert_eq!(Scalar::from(2f64.powi(63)).to_dtype(DType::I64), None);
        assert_eq!(
            Scalar::from(-(2f64.powi(63))).to_dtype(DType::I64),
            Some(Scalar::I64(i64::MIN))
        );
        assert_eq!(
            Scalar::from(true).to_dtype(DType::I64),
            Some(Scalar::I64(1))
        );
        assert_eq!(Scalar::from(1i32).to_dtype(DType::Bool), None);
    }

    #[test]
    fn float_targets_round_but_do_not_overflow() {
        assert_eq!(Scalar::from(1e300).to_dtype(DType::F32), None);
        assert_eq!(Scalar::from(1e5).to_dtype(DType::F16), None);
        assert_eq!(
            Scalar::from(f64::INFINITY).to_dtype(DType::F32),
            Some(Scalar::F32(f32::INFINITY))
        );
        assert!(
            matches!(Scalar::from(f64::NAN).to_dtype(DType::F32), Some(Scalar::F32(v)) if v.is_nan())
        );
        assert_eq!(
            Scalar::from(1.5f64).to_dtype(DType::BF16),
            Some(Scalar::BF16(bf16::from_f32(1.5)))
        );
        assert_eq!(
            Scalar::from(3i32).to_dtype(DType::F64),
            Some(Scalar::F64(3.0))
        );
        assert_eq!(Scalar::from(1.0f32).to_bits(), (0x3f80_0000, 4));
        assert_eq!(Scalar::from(f16::ONE).to_bits(), (0x3c00, 2));
    }

    #[test]
    fn every_integer_width_holds_its_range_and_refuses_beyond() {
        // Each type's bounds, and one past them, from every source type that can hold them.
        let cases: [(DType, i128, i128); 8] = [
            (DType::I8, -128, 127),
            (DType::I16, -32768, 32767),
            (DType::I32, -(1 << 31), (1 << 31) - 1),
            (DType::I64, -(1 << 63), (1 << 63) - 1),
            (DType::U8, 0, 255),
            (DType::U16, 0, 65535),
            (DType::U32, 0, (1 << 32) - 1),
            (DType::U64, 0, (1 << 64) - 1),
        ];
        let from_i128 = |v: i128| match (i64::try_from(v), u64::try_from(v)) {
            (Ok(v), _) => Scalar::I64(v),
            (_, Ok(v)) => Scalar::U64(v),
            _ => Scalar::F64(v as f64),
        };
        for (dtype, lo, hi) in cases {
            for v in [lo, hi] {
                let got = from_i128(v).to_dtype(dtype).unwrap();
                assert_eq!(
                    (got.dtype(), got.to_i128()),
                    (dtype, Some(v)),
                    "{v} → {dtype}"
                );
            }
            // One past each end; past the 64-bit ones, the nearest float beyond (2^63 + 1
            // rounds to 2^63 itself).
            let below = if lo - 1 < i128::from(i64::MIN) {
                lo - 4096
            } else {
                lo - 1
            };
            let above = if hi + 1 > i128::from(u64::MAX) {
                hi + 4097
            } else {
                hi + 1
            };
            assert_eq!(from_i128(below).to_dtype(dtype), None, "{below} → {dtype}");
            assert_eq!(from_i128(above).to_dtype(dtype), None, "{above} → {dtype}");
        }
        // A u64 beyond i64 keeps every bit, and a usize arrives as one.
        assert_eq!(Scalar::from(u64::MAX).to_bits(), (u64::MAX, 8));
        assert_eq!(Scalar::from(7usize), Scalar::U64(7));
        assert_eq!(Scalar::from(-1i8).to_bits(), (0xff, 1));
        assert_eq!(Scalar::from(-2i16).to_dtype(DType::U16), None);
        assert_eq!(
            Scalar::from(2.0f32).to_dtype(DType::U8),
            Some(Scalar::U8(2))
        );
        assert_eq!(Scalar::from(2f64.powi(64)).to_dtype(DType::U64), None);
    }

    #[test]
    fn display_names_the_type() {
        assert_eq!(Scalar::from(3i64).to_string(), "3 (int64)");
        assert_eq!(Scalar::from(0.5f32).to_string(), "0.5 (float32)");
    }
}
