//! Runtime element types and the Rust types that back them.

use std::fmt;

/// The element type of an [`Array`](crate::Array), known at run time.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub enum DType {
    /// `bool`
    Bool,
    /// `i32`
    I32,
    /// `i64`
    I64,
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
    /// Every dtype, in promotion order.
    pub const ALL: [DType; 7] = [
        DType::Bool,
        DType::I32,
        DType::I64,
        DType::F16,
        DType::BF16,
        DType::F32,
        DType::F64,
    ];

    /// The NumPy name of the dtype (`"float32"`), as used in kernel signatures and messages.
    ///
    /// ```
    /// assert_eq!(kusari::DType::F32.name(), "float32");
    /// ```
    pub fn name(self) -> &'static str {
        match self {
            DType::Bool => "bool",
            DType::I32 => "int32",
            DType::I64 => "int64",
            DType::F16 => "float16",
            DType::BF16 => "bfloat16",
            DType::F32 => "float32",
            DType::F64 => "float64",
        }
    }

    /// Size of one element in bytes.
    pub fn size_in_bytes(self) -> usize {
        match self {
            DType::Bool => 1,
            DType::F16 | DType::BF16 => 2,
            DType::I32 | DType::F32 => 4,
            DType::I64 | DType::F64 => 8,
        }
    }

    /// Whether the dtype is a floating-point type (the only ones that carry gradients).
    pub fn is_float(self) -> bool {
        matches!(self, DType::F16 | DType::BF16 | DType::F32 | DType::F64)
    }

    /// Whether the dtype is a signed integer type.
    pub fn is_int(self) -> bool {
        matches!(self, DType::I32 | DType::I64)
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
/// Implemented for `bool`, `i32`, `i64`, `half::f16`, `half::bf16`, `f32` and `f64`; sealed.
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

macro_rules! impl_num_int {
    ($($t:ty),*) => {$(
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
            fn magnitude(self) -> Self { self.wrapping_abs() }
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

impl_num_int!(i32, i64);
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
            [Bool: bool, I32: i32, I64: i64, F16: half::f16, BF16: half::bf16, F32: f32, F64: f64])
    };
}

/// Like [`with_dtype!`] for the numeric dtypes; `bool` evaluates `$other`.
macro_rules! with_num_dtype {
    ($dtype:expr, $T:ident => $body:expr, bool => $other:expr) => {
        $crate::dtype::match_dtype!($dtype, $T => $body,
            [I32: i32, I64: i64, F16: half::f16, BF16: half::bf16, F32: f32, F64: f64]
            $crate::DType::Bool => $other,)
    };
}

/// Like [`with_dtype!`] for the floating-point dtypes; the others evaluate `$other`.
macro_rules! with_float_dtype {
    ($dtype:expr, $T:ident => $body:expr, other => $other:expr) => {
        $crate::dtype::match_dtype!($dtype, $T => $body,
            [F16: half::f16, BF16: half::bf16, F32: f32, F64: f64]
            $crate::DType::Bool | $crate::DType::I32 | $crate::DType::I64 => $other,)
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
            DType::I32 => S::Int32,
            DType::I64 => S::Int64,
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
            S::Int32 => DType::I32,
            S::Int64 => DType::I64,
            S::Float16 => DType::F16,
            S::BFloat16 => DType::BF16,
            S::Float32 => DType::F32,
            S::Float64 => DType::F64,
        }
    }
}
