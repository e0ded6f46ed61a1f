//! The operations both backends compute, described once: each elementwise op is a small type
//! with its name, its CUDA body (operands `a`, `b`, result `out`) and its host function, and a
//! reduction is a [`Reduction`]. The CPU backend calls the functions, the CUDA backend builds
//! kernels from the bodies (`cuda/kernels.rs`).

use crate::dtype::{DType, FloatElement, NumElement};
use crate::error::{Error, Result};

/// A binary op on numeric elements.
pub(crate) trait BinaryOp {
    const NAME: &'static str;
    /// The CUDA body (operands `a`, `b`, result `out`).
    const CUDA: &'static str;
    fn f<T: NumElement>(a: T, b: T) -> T;
}

/// A binary op on floating-point elements.
pub(crate) trait FloatBinaryOp {
    const NAME: &'static str;
    /// The CUDA body (operands `a`, `b`, result `out`).
    const CUDA: &'static str;
    fn f<T: FloatElement>(a: T, b: T) -> T;
}

/// A unary op on numeric elements.
pub(crate) trait UnaryOp {
    const NAME: &'static str;
    /// The CUDA body (operands `a`, `b`, result `out`).
    const CUDA: &'static str;
    fn f<T: NumElement>(a: T) -> T;
}

/// A unary op on floating-point elements.
pub(crate) trait FloatUnaryOp {
    const NAME: &'static str;
    /// The CUDA body (operands `a`, `b`, result `out`).
    const CUDA: &'static str;
    /// The host's vectorized form for float32 and float64 (`cpu::math`); `None`: [`Self::f`]
    /// one element at a time in every dtype (the standard library's function).
    const MATH: Option<MathFn>;
    /// One element, for the other float dtypes.
    fn f<T: FloatElement>(a: T) -> T;
}

/// The functions the host computes over float32 and float64 slices with SIMD (`cpu::math`).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) enum MathFn {
    Exp,
    ExpM1,
    Ln,
    Ln1p,
    Tanh,
    Sigmoid,
    Sqrt,
    Erf,
}

/// A comparison, giving `bool`.
pub(crate) trait CmpOp {
    const NAME: &'static str;
    /// The CUDA body (operands `a`, `b`, result `out`).
    const CUDA: &'static str;
    fn f<T: PartialOrd>(a: T, b: T) -> bool;
}

macro_rules! binary_op {
    ($name:ident, $label:literal, $cuda:literal, |$a:ident, $b:ident| $e:expr) => {
        pub(crate) struct $name;
        impl BinaryOp for $name {
            const NAME: &'static str = $label;
            const CUDA: &'static str = $cuda;
            #[inline(always)]
            fn f<T: NumElement>($a: T, $b: T) -> T {
                $e
            }
        }
    };
}

macro_rules! float_unary_op {
    ($name:ident, $label:literal, $cuda:literal, $math:ident, |$a:ident| $e:expr) => {
        pub(crate) struct $name;
        impl FloatUnaryOp for $name {
            const NAME: &'static str = $label;
            const CUDA: &'static str = $cuda;
            const MATH: Option<MathFn> = Some(MathFn::$math);
            #[inline(always)]
            fn f<T: FloatElement>($a: T) -> T {
                $e
            }
        }
    };
    // No vectorized form: the standard library's function, one element at a time.
    ($name:ident, $label:literal, $cuda:literal, |$a:ident| $e:expr) => {
        pub(crate) struct $name;
        impl FloatUnaryOp for $name {
            const NAME: &'static str = $label;
            const CUDA: &'static str = $cuda;
            const MATH: Option<MathFn> = None;
            #[inline(always)]
            fn f<T: FloatElement>($a: T) -> T {
                $e
            }
        }
    };
}

macro_rules! cmp_op {
    ($name:ident, $label:literal, $op:tt) => {
        pub(crate) struct $name;
        impl CmpOp for $name {
            const NAME: &'static str = $label;
            const CUDA: &'static str = concat!("out = a ", stringify!($op), " b;");
            #[inline(always)]
            fn f<T: PartialOrd>(a: T, b: T) -> bool {
                a $op b
            }
        }
    };
}

binary_op!(Add, "add", "out = a + b;", |a, b| a.plus(b));
binary_op!(Sub, "sub", "out = a - b;", |a, b| a.minus(b));
binary_op!(Mul, "mul", "out = a * b;", |a, b| a.times(b));
// Integer division by zero gives 0 and `MIN / -1` wraps to `MIN` (as on the host: `-a`, where
// the division traps on x86 and is undefined in C++); `T(0.5) == T(0)` only for integers,
// `T(-1) < T(0)` only for signed ones.
binary_op!(
    Div,
    "div",
    "out = (T(0.5) == T(0) && b == T(0)) ? T(0) \
     : (T(0.5) == T(0) && T(-1) < T(0) && b == T(-1)) ? T(0) - a : a / b;",
    |a, b| a.over(b)
);
// NaN propagates through maximum and minimum, as in NumPy: `a != a` only holds for NaN.
#[allow(clippy::eq_op)]
fn is_nan<T: PartialOrd>(a: T) -> bool {
    a != a
}
// On the host `b > a ? b : a` is one `max` instruction on x86 (its second operand, `a`, where
// either is NaN), and a NaN `b` is chosen after it: two instructions and a blend, vectorized.
binary_op!(
    Maximum,
    "maximum",
    "out = (a != a || a >= b) ? a : b;",
    |a, b| {
        let m = if b > a { b } else { a };
        if is_nan(b) { b } else { m }
    }
);
binary_op!(
    Minimum,
    "minimum",
    "out = (a != a || a <= b) ? a : b;",
    |a, b| {
        let m = if b < a { b } else { a };
        if is_nan(b) { b } else { m }
    }
);

pub(crate) struct Pow;
impl FloatBinaryOp for Pow {
    const NAME: &'static str = "pow";
    const CUDA: &'static str = "out = pow(a, b);";
    #[inline(always)]
    fn f<T: FloatElement>(a: T, b: T) -> T {
        a.powf(b)
    }
}

/// The sigmoid's gradient from its output: `gy * y * (1 - y)` with `a = y`, `b = gy` (one pass).
pub(crate) struct SigmoidGrad;
impl FloatBinaryOp for SigmoidGrad {
    const NAME: &'static str = "sigmoid_grad";
    const CUDA: &'static str = "out = b * a * (T(1) - a);";
    #[inline(always)]
    fn f<T: FloatElement>(a: T, b: T) -> T {
        b * a * (T::one() - a)
    }
}

pub(crate) struct Neg;
impl UnaryOp for Neg {
    const NAME: &'static str = "neg";
    const CUDA: &'static str = "out = -a;";
    #[inline(always)]
    fn f<T: NumElement>(a: T) -> T {
        a.negate()
    }
}

/// `max(a, 0)`, NaN kept: `0 > a ? 0 : a` is one `max` instruction on x86 (which returns its
/// second operand, here `a`, when either is NaN).
pub(crate) struct Relu;
impl UnaryOp for Relu {
    const NAME: &'static str = "relu";
    const CUDA: &'static str = "out = T(0) > a ? T(0) : a;";
    #[inline(always)]
    fn f<T: NumElement>(a: T) -> T {
        if T::zero() > a { T::zero() } else { a }
    }
}

pub(crate) struct Abs;
impl UnaryOp for Abs {
    const NAME: &'static str = "abs";
    const CUDA: &'static str = "out = a < T(0) ? T(-a) : a;";
    #[inline(always)]
    fn f<T: NumElement>(a: T) -> T {
        a.magnitude()
    }
}

float_unary_op!(Exp, "exp", "out = exp(a);", Exp, |a| a.exp());
float_unary_op!(ExpM1, "expm1", "out = expm1(a);", ExpM1, |a| a.exp_m1());
float_unary_op!(Log, "log", "out = log(a);", Ln, |a| a.ln());
float_unary_op!(Log1p, "log1p", "out = log1p(a);", Ln1p, |a| a.ln_1p());
float_unary_op!(Sqrt, "sqrt", "out = sqrt(a);", Sqrt, |a| a.sqrt());
// float16 and bfloat16 through float64 (exact in both directions but the final rounding).
float_unary_op!(Erf, "erf", "out = erf(a);", Erf, |a| T::from_f64(
    libm::erf(a.to_f64())
));
float_unary_op!(Tanh, "tanh", "out = tanh(a);", Tanh, |a| a.tanh());
// Written so that neither branch overflows: exp of a non-positive number only.
float_unary_op!(
    Sigmoid,
    "sigmoid",
    "out = a >= T(0) ? T(1) / (T(1) + exp(-a)) : exp(a) / (T(1) + exp(a));",
    Sigmoid,
    |a| if a >= T::zero() {
        T::one() / (T::one() + (-a).exp())
    } else {
        let e = a.exp();
        e / (T::one() + e)
    }
);
// Sine and cosine (radians): the standard library's, element by element (half types through
// float32, as every float op).
float_unary_op!(Sin, "sin", "out = sin(a);", |a| a.sin());
float_unary_op!(Cos, "cos", "out = cos(a);", |a| a.cos());

cmp_op!(Equal, "equal", ==);
cmp_op!(NotEqual, "not_equal", !=);
cmp_op!(Less, "less", <);
cmp_op!(LessEqual, "less_equal", <=);
cmp_op!(Greater, "greater", >);
cmp_op!(GreaterEqual, "greater_equal", >=);

/// `a ** p` with a scalar exponent `p`.
pub(crate) const POW_SCALAR_CUDA: &str = Pow::CUDA;
/// `c ? a : b`.
pub(crate) const WHERE_CUDA: &str = "out = c ? a : b;";
/// `x * y + z`.
pub(crate) const MUL_ADD_CUDA: &str = "w = x * y + z;";

pub(crate) const NUMERIC: &str = "a numeric dtype (not bool)";
pub(crate) const FLOATING: &str = "a floating-point dtype (float16, bfloat16, float32, float64)";

/// An op given an operand of a dtype it does not take.
pub(crate) fn unsupported(
    op: &'static str,
    dtype: DType,
    shape: &[usize],
    expected: &'static str,
) -> Error {
    Error::UnsupportedDType {
        op,
        dtype,
        shape: shape.to_vec(),
        expected,
    }
}

/// An error unless `dtype` is numeric (not bool).
pub(crate) fn require_numeric(op: &'static str, dtype: DType, shape: &[usize]) -> Result<()> {
    if dtype == DType::Bool {
        return Err(unsupported(op, dtype, shape, NUMERIC));
    }
    Ok(())
}

/// An error unless `dtype` is a floating-point one.
pub(crate) fn require_float(op: &'static str, dtype: DType, shape: &[usize]) -> Result<()> {
    if !dtype.is_float() {
        return Err(unsupported(op, dtype, shape, FLOATING));
    }
    Ok(())
}

/// What a softmax along an axis gives.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) enum SoftmaxForm {
    /// `exp(x - m) / Σ exp(x - m)`.
    Softmax,
    /// `x - m - ln Σ exp(x - m)`.
    LogSoftmax,
}

impl SoftmaxForm {
    /// The op's name in errors.
    pub(crate) fn name(self) -> &'static str {
        match self {
            SoftmaxForm::Softmax => "softmax",
            SoftmaxForm::LogSoftmax => "log_softmax",
        }
    }
}

/// Which reduction to run.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) enum Reduction {
    Sum,
    Max,
    Min,
}

impl Reduction {
    pub(crate) fn identity<T: NumElement>(self) -> T {
        match self {
            Reduction::Sum => T::zero(),
            // `from_f64` saturates, so integers get their MIN / MAX.
            Reduction::Max => <T as crate::Element>::from_f64(f64::NEG_INFINITY),
            Reduction::Min => <T as crate::Element>::from_f64(f64::INFINITY),
        }
    }
}

/// Rows of `S` elements, `(N, P)` of them: row `r` is channel `r % P`.
#[derive(Clone, Copy, Debug)]
pub(crate) struct BnDims {
    pub(crate) n: usize,
    pub(crate) p: usize,
    pub(crate) s: usize,
}
