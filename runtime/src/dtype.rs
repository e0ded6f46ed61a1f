//! Runtime element types and the Rust types that back them.

use std::fmt;

/// The element type of an [`Array`](crate::Array), known at run time.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub enum DType {
    /// `bool`
    Bool,
    /// `i8`
    I8,
    /// `i16`
    I16,
    /// `i32`
    I32,
    /// `i64`
    I64,
    /// `u8` (images arrive as `uint8`)
    U8,
    /// `u16`
    U16,
    /// `u32`
    U32,
    /// `u64`
    U64,
    /// IEEE half precision (`half::f16`); storable, computed through `f32`.
    F16,
    /// bfloat16 (`half::bf16`); storable, computed through `f32`.
    BF16,
    /// `f32`
    F32,
    /// `f64`
    F64,
}

impl DType {
    /// Every dtype: `bool`, the signed and unsigned integers by width, the floats by width.
    pub const ALL: [DType; 13] = [
        DType::Bool,
        DType::I8,
        DType::I16,
        DType::I32,
        DType::I64,
        DType::U8,
        DType::U16,
        DType::U32,
        DType::U64,
        DType::F16,
        DType::BF16,
        DType::F32,
        DType::F64,
    ];

    /// The integer dtypes: the signed ones, then the unsigned ones, each by width.
    pub const INTEGERS: [DType; 8] = [
        DType::I8,
        DType::I16,
        DType::I32,
        DType::I64,
        DType::U8,
        DType::U16,
        DType::U32,
        DType::U64,
    ];

    /// The NumPy name of the dtype (`"float32"`), as used in kernel signatures and messages.
    ///
    /// ```
    /// assert_eq!(kusari::DType::F32.name(), "float32");
    /// ```
    pub fn name(self) -> &'static str {
        match self {
            DType::Bool => "bool",
            DType::I8 => "int8",
            DType::I16 => "int16",
            DType::I32 => "int32",
            DType::I64 => "int64",
            DType::U8 => "uint8",
            DType::U16 => "uint16",
            DType::U32 => "uint32",
            DType::U64 => "uint64",
            DType::F16 => "float16",
            DType::BF16 => "bfloat16",
            DType::F32 => "float32",
            DType::F64 => "float64",
        }
    }

    /// Size of one element in bytes.
    pub fn size_in_bytes(self) -> usize {
        match self {
            DType::Bool | DType::I8 | DType::U8 => 1,
            DType::I16 | DType::U16 | DType::F16 | DType::BF16 => 2,
            DType::I32 | DType::U32 | DType::F32 => 4,
            DType::I64 | DType::U64 | DType::F64 => 8,
        }
    }

    /// Whether the dtype is a floating-point type (the only ones that carry gradients).
    pub fn is_float(self) -> bool {
        matches!(self, DType::F16 | DType::BF16 | DType::F32 | DType::F64)
    }

    /// Whether the dtype is an integer type, signed or unsigned (not `bool`).
    pub fn is_int(self) -> bool {
        self.is_signed_int() || self.is_unsigned()
    }

    /// Whether the dtype is a signed integer type.
    pub fn is_signed_int(self) -> bool {
        matches!(self, DType::I8 | DType::I16 | DType::I32 | DType::I64)
    }

    /// Whether the dtype is an unsigned integer type.
    pub fn is_unsigned(self) -> bool {
        matches!(self, DType::U8 | DType::U16 | DType::U32 | DType::U64)
    }

    /// The dtype that both `self` and `other` convert to without losing values, NumPy's
    /// `numpy.promote_types`: the larger of two floats, integers or unsigned integers; a signed
    /// and an unsigned integer meet in the smallest signed integer that holds both (`int8` and
    /// `uint8` → `int16`), and `int64` with `uint64`, which no integer holds, in `float64`; an
    /// integer and a float meet in the smallest float that holds the integer (`uint8` with
    /// `float16` → `float16`, `int16` with `float16` → `float32`, `int32` with `float32` →
    /// `float64`); `bool` meets anything in the other. `bfloat16` (not NumPy's) holds what
    /// `float16` holds: with `float16` it meets in `float32`.
    ///
    /// kusari's operations take operands of one dtype, as Chainer's do: convert both with
    /// [`Array::astype`](crate::Array::astype) to this dtype first.
    ///
    /// ```
    /// use kusari::DType::*;
    /// assert_eq!(I64.promote(U64), F64);
    /// assert_eq!(I8.promote(U8), I16);
    /// assert_eq!(U16.promote(F16), F32);
    /// assert_eq!(I32.promote(F32), F64);
    /// assert_eq!(Bool.promote(U8), U8);
    /// ```
    pub fn promote(self, other: DType) -> DType {
        use DType::*;
        let (a, b) = (self, other);
        if a == b {
            return a;
        }
        match (a, b) {
            (Bool, t) | (t, Bool) => t,
            (F16, BF16) | (BF16, F16) => F32,
            _ if a.is_float() && b.is_float() => {
                if a.size_in_bytes() >= b.size_in_bytes() {
                    a
                } else {
                    b
                }
            }
            _ if a.is_float() || b.is_float() => {
                let (f, i) = if a.is_float() { (a, b) } else { (b, a) };
                // The smallest float whose significand holds every value of the integer.
                let needed = match i.size_in_bytes() {
                    1 => F16,
                    2 => F32,
                    _ => F64,
                };
                match (needed, f) {
                    (F16, _) => f,
                    (F32, F16 | BF16) => F32,
                    (F32, _) => f,
                    _ => F64,
                }
            }
            _ if a.is_signed_int() == b.is_signed_int() => {
                if a.size_in_bytes() >= b.size_in_bytes() {
                    a
                } else {
                    b
                }
            }
            _ => {
                let (s, u) = if a.is_signed_int() { (a, b) } else { (b, a) };
                if s.size_in_bytes() > u.size_in_bytes() {
                    return s;
                }
                match u.size_in_bytes() {
                    1 => I16,
                    2 => I32,
                    4 => I64,
                    _ => F64,
                }
            }
        }
    }

    /// Whether every value of `self` converts to `to` exactly, NumPy's
    /// `numpy.can_cast(self, to, casting="safe")`: `to` is what `self` promotes to with it.
    ///
    /// ```
    /// use kusari::DType::*;
    /// assert!(U8.can_cast(I16) && U8.can_cast(F16) && !I8.can_cast(U64) && !I64.can_cast(F32));
    /// ```
    pub fn can_cast(self, to: DType) -> bool {
        self.promote(to) == to
    }
}

impl fmt::Display for DType {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(self.name())
    }
}

mod sealed {
    pub trait Sealed {}
}

/// A Rust type that can be the element of an [`Array`](crate::Array).
///
/// Implemented for `bool`, `i8`, `i16`, `i32`, `i64`, `u8`, `u16`, `u32`, `u64`, `half::f16`,
/// `half::bf16`, `f32` and `f64`; sealed.
pub trait Element:
    sealed::Sealed + Copy + Send + Sync + fmt::Debug + PartialEq + PartialOrd + 'static
{
    /// The runtime dtype of this type.
    const DTYPE: DType;
    /// Converts to `f64` (`true` is 1).
    fn to_f64(self) -> f64;
    /// Converts from `f64` with Rust's `as` semantics (saturating for integers, non-zero is `true`).
    fn from_f64(v: f64) -> Self;
    /// The value as an `i64`, exactly, for `bool` and the integer types; `None` for floats.
    fn to_i64(self) -> Option<i64>;
    /// Converts from `i64` as NumPy's `astype` does: integers wrap, floats round once to
    /// nearest, non-zero is `true`.
    fn from_i64(v: i64) -> Self;
    /// The value as an `i128`, exactly, for `bool` and every integer type (`u64` included);
    /// `None` for floats.
    fn to_wide(self) -> Option<i128> {
        let v = self.to_i64()?;
        Some(match Self::DTYPE {
            DType::U64 => i128::from(v as u64),
            _ => i128::from(v),
        })
    }
    /// Converts from `i128` as NumPy's `astype` does: integers wrap, floats round once to
    /// nearest (the half types through float32, as on CUDA), non-zero is `true`.
    fn from_wide(v: i128) -> Self {
        match Self::DTYPE {
            DType::Bool => Self::from_i64(i64::from(v != 0)),
            DType::F16 | DType::BF16 => Self::from_f64(f64::from(v as f32)),
            DType::F32 => Self::from_f64(f64::from(v as f32)),
            DType::F64 => Self::from_f64(v as f64),
            _ => Self::from_i64(v as i64),
        }
    }
}

/// An element type with arithmetic: every dtype but `bool`.
///
/// The arithmetic methods never panic: integers wrap on overflow (as NumPy does) and an integer
/// division by zero gives zero.
pub trait NumElement: Element + num_traits::Num + Default {
    /// `self + o`
    fn plus(self, o: Self) -> Self;
    /// `self - o`
    fn minus(self, o: Self) -> Self;
    /// `self * o`
    fn times(self, o: Self) -> Self;
    /// `self / o`
    fn over(self, o: Self) -> Self;
    /// `-self`
    fn negate(self) -> Self;
    /// `|self|`
    fn magnitude(self) -> Self;
}

/// A floating-point element type: `f16`, `bf16`, `f32`, `f64`.
pub trait FloatElement: NumElement + num_traits::Float {}

macro_rules! impl_element {
    ($t:ty, $dtype:ident, $to:expr, $from:expr, $to_i64:expr, $from_i64:expr) => {
        impl sealed::Sealed for $t {}
        impl Element for $t {
            const DTYPE: DType = DType::$dtype;
            #[inline(always)]
            fn to_f64(self) -> f64 {
                ($to)(self)
            }
            #[inline(always)]
            fn from_f64(v: f64) -> Self {
                ($from)(v)
            }
            #[inline(always)]
            fn to_i64(self) -> Option<i64> {
                ($to_i64)(self)
            }
            #[inline(always)]
            fn from_i64(v: i64) -> Self {
                ($from_i64)(v)
            }
        }
    };
}

impl_element!(
    bool,
    Bool,
    |v: bool| v as u8 as f64,
    |v: f64| v != 0.0,
    |v: bool| Some(i64::from(v)),
    |v: i64| v != 0
);
/// The integers narrower than 64 bits, which `f64` and `i64` hold exactly.
macro_rules! impl_small_int_element {
    ($($t:ty => $dtype:ident),*) => {$(
        impl_element!(
            $t,
            $dtype,
            |v: $t| f64::from(v),
            |v: f64| v as $t,
            |v: $t| Some(i64::from(v)),
            |v: i64| v as $t
        );
    )*};
}
impl_small_int_element!(i8 => I8, i16 => I16, u8 => U8, u16 => U16, u32 => U32);
impl_element!(
    i32,
    I32,
    |v: i32| v as f64,
    |v: f64| v as i32,
    |v: i32| Some(i64::from(v)),
    |v: i64| v as i32
);
impl_element!(
    i64,
    I64,
    |v: i64| v as f64,
    |v: f64| v as i64,
    Some,
    |v: i64| v
);
// `to_i64` of a `u64` is its bits as an `i64` (wrapping past `i64::MAX`), so that a conversion
// to another integer wraps as NumPy's `astype` does; conversions to floats go through
// `Element::to_wide`, which holds every value.
impl_element!(
    u64,
    U64,
    |v: u64| v as f64,
    |v: f64| v as u64,
    |v: u64| Some(v as i64),
    |v: i64| v as u64
);
/// `v` as `f32` rounded to odd: an inexact result gets its last bit set. Rounding that to a half
/// type (to nearest even) rounds `v` once, where going through `v as f32` could round twice
/// (the `half` crate's `from_f64` goes through `f32` where the CPU converts in hardware). CUDA's
/// cast kernels do the same.
fn f64_to_f32_odd(v: f64) -> f32 {
    let f = v as f32;
    if f.is_nan() || f64::from(f) == v {
        return f;
    }
    let mut bits = f.to_bits();
    if f64::from(f).abs() > v.abs() {
        bits -= 1; // the truncated value: one step toward zero
    }
    f32::from_bits(bits | 1)
}

// Integers reach the half types through float32, as on CUDA (`(float)a`), so both devices give
// the same bits.
impl_element!(
    half::f16,
    F16,
    |v: half::f16| v.to_f64(),
    |v: f64| half::f16::from_f32(f64_to_f32_odd(v)),
    |_| None,
    |v: i64| half::f16::from_f32(v as f32)
);
impl_element!(
    half::bf16,
    BF16,
    |v: half::bf16| v.to_f64(),
    |v: f64| half::bf16::from_f32(f64_to_f32_odd(v)),
    |_| None,
    |v: i64| half::bf16::from_f32(v as f32)
);
impl_element!(
    f32,
    F32,
    |v: f32| v as f64,
    |v: f64| v as f32,
    |_| None,
    |v: i64| v as f32
);
impl_element!(f64, F64, |v: f64| v, |v: f64| v, |_| None, |v: i64| v
    as f64);

/// The integers' arithmetic: wrapping, division by zero giving 0, and `magnitude` as given
/// (`wrapping_abs` for the signed ones, the value itself for the unsigned ones).
macro_rules! impl_num_int {
    (|$v:ident| $magnitude:expr; $($t:ty),*) => {$(
        impl NumElement for $t {
            #[inline(always)]
            fn plus(self, o: Self) -> Self { self.wrapping_add(o) }
            #[inline(always)]
            fn minus(self, o: Self) -> Self { self.wrapping_sub(o) }
            #[inline(always)]
            fn times(self, o: Self) -> Self { self.wrapping_mul(o) }
            #[inline(always)]
            fn over(self, o: Self) -> Self { if o == 0 { 0 } else { self.wrapping_div(o) } }
            #[inline(always)]
            fn negate(self) -> Self { self.wrapping_neg() }
            #[inline(always)]
            fn magnitude(self) -> Self { let $v = self; $magnitude }
        }
    )*};
}

macro_rules! impl_num_float {
    ($($t:ty),*) => {$(
        impl NumElement for $t {
            #[inline(always)]
            fn plus(self, o: Self) -> Self { self + o }
            #[inline(always)]
            fn minus(self, o: Self) -> Self { self - o }
            #[inline(always)]
            fn times(self, o: Self) -> Self { self * o }
            #[inline(always)]
            fn over(self, o: Self) -> Self { self / o }
            #[inline(always)]
            fn negate(self) -> Self { -self }
            #[inline(always)]
            fn magnitude(self) -> Self { num_traits::Float::abs(self) }
        }
    )*};
}

impl_num_int!(|v| v.wrapping_abs(); i8, i16, i32, i64);
impl_num_int!(|v| v; u8, u16, u32, u64);
impl_num_float!(half::f16, half::bf16, f32, f64);

impl FloatElement for half::f16 {}
impl FloatElement for half::bf16 {}
impl FloatElement for f32 {}
impl FloatElement for f64 {}

/// Matches `$dtype` against the listed variants, running `$body` with the type alias `$T` bound
/// to each variant's Rust type; further match arms follow the list.
macro_rules! match_dtype {
    ($dtype:expr, $T:ident => $body:expr, [$($variant:ident: $ty:ty),*] $($arms:tt)*) => {
        match $dtype {
            $($crate::DType::$variant => {
                type $T = $ty;
                $body
            })*
            $($arms)*
        }
    };
}

/// Runs `$body` with the type alias `$T` bound to the Rust type of `$dtype`, for every dtype.
macro_rules! with_dtype {
    ($dtype:expr, $T:ident => $body:expr) => {
        $crate::dtype::match_dtype!($dtype, $T => $body,
            [Bool: bool, I8: i8, I16: i16, I32: i32, I64: i64, U8: u8, U16: u16, U32: u32,
             U64: u64, F16: half::f16, BF16: half::bf16, F32: f32, F64: f64])
    };
}

/// Like [`with_dtype!`] for the numeric dtypes; `bool` evaluates `$other`.
macro_rules! with_num_dtype {
    ($dtype:expr, $T:ident => $body:expr, bool => $other:expr) => {
        $crate::dtype::match_dtype!($dtype, $T => $body,
            [I8: i8, I16: i16, I32: i32, I64: i64, U8: u8, U16: u16, U32: u32, U64: u64,
             F16: half::f16, BF16: half::bf16, F32: f32, F64: f64]
            $crate::DType::Bool => $other,)
    };
}

/// Like [`with_dtype!`] for the floating-point dtypes; the others evaluate `$other`.
macro_rules! with_float_dtype {
    ($dtype:expr, $T:ident => $body:expr, other => $other:expr) => {
        $crate::dtype::match_dtype!($dtype, $T => $body,
            [F16: half::f16, BF16: half::bf16, F32: f32, F64: f64]
            $crate::DType::Bool
            | $crate::DType::I8
            | $crate::DType::I16
            | $crate::DType::I32
            | $crate::DType::I64
            | $crate::DType::U8
            | $crate::DType::U16
            | $crate::DType::U32
            | $crate::DType::U64 => $other,)
    };
}

pub(crate) use {match_dtype, with_dtype, with_float_dtype, with_num_dtype};

/// Moves a typed value into an `Option` slot read back as `Any` (used to go from a generic
/// `T: Element` to the storage variant of `T::DTYPE` without unsafe code).
pub(crate) fn take_as<T: 'static, U: 'static>(value: T) -> Option<U> {
    let mut slot = Some(value);
    (&mut slot as &mut dyn std::any::Any)
        .downcast_mut::<Option<U>>()
        .and_then(Option::take)
}

/// The kernel signature's name for a dtype (NumPy's names, as in CuPy's signatures).
impl From<DType> for kusari_kernels::ScalarType {
    fn from(d: DType) -> Self {
        use kusari_kernels::ScalarType as S;
        match d {
            DType::Bool => S::Bool,
            DType::I8 => S::Int8,
            DType::I16 => S::Int16,
            DType::I32 => S::Int32,
            DType::I64 => S::Int64,
            DType::U8 => S::UInt8,
            DType::U16 => S::UInt16,
            DType::U32 => S::UInt32,
            DType::U64 => S::UInt64,
            DType::F16 => S::Float16,
            DType::BF16 => S::BFloat16,
            DType::F32 => S::Float32,
            DType::F64 => S::Float64,
        }
    }
}

/// The dtype a kernel signature's type names.
impl From<kusari_kernels::ScalarType> for DType {
    fn from(t: kusari_kernels::ScalarType) -> Self {
        use kusari_kernels::ScalarType as S;
        match t {
            S::Bool => DType::Bool,
            S::Int8 => DType::I8,
            S::Int16 => DType::I16,
            S::Int32 => DType::I32,
            S::Int64 => DType::I64,
            S::UInt8 => DType::U8,
            S::UInt16 => DType::U16,
            S::UInt32 => DType::U32,
            S::UInt64 => DType::U64,
            S::Float16 => DType::F16,
            S::BFloat16 => DType::BF16,
            S::Float32 => DType::F32,
            S::Float64 => DType::F64,
        }
    }
}
