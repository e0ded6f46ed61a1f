//! Elementwise arithmetic, math and comparisons: each a small named op type, dispatched on the
//! dtype once.

use num_traits::Float as _;

use crate::cpu::{map1, zip2, zip3};
use crate::dtype::{
    with_dtype, with_float_dtype, with_num_dtype, Element, FloatElement, NumElement,
};
use crate::error::{Error, Result};
use crate::kernel::ElementwiseKernel;
use crate::layout::{broadcast_shapes, Shape};
use crate::{Array, DType};
use ndarray::{Dimension, IxDyn};

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
    fn f<T: FloatElement>(a: T) -> T;
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
    ($name:ident, $label:literal, $cuda:literal, |$a:ident| $e:expr) => {
        pub(crate) struct $name;
        impl FloatUnaryOp for $name {
            const NAME: &'static str = $label;
            const CUDA: &'static str = $cuda;
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
// Integer division by zero gives 0 (as on the host); `T(0.5) == T(0)` only for integers.
binary_op!(
    Div,
    "div",
    "out = (T(0.5) == T(0) && b == T(0)) ? T(0) : a / b;",
    |a, b| a.over(b)
);
// NaN propagates through maximum and minimum, as in NumPy: `a != a` only holds for NaN.
#[allow(clippy::eq_op)]
fn is_nan<T: PartialOrd>(a: T) -> bool {
    a != a
}
binary_op!(
    Maximum,
    "maximum",
    "out = (a != a || a >= b) ? a : b;",
    |a, b| if is_nan(a) || a >= b { a } else { b }
);
binary_op!(
    Minimum,
    "minimum",
    "out = (a != a || a <= b) ? a : b;",
    |a, b| if is_nan(a) || a <= b { a } else { b }
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

pub(crate) struct Neg;
impl UnaryOp for Neg {
    const NAME: &'static str = "neg";
    const CUDA: &'static str = "out = -a;";
    #[inline(always)]
    fn f<T: NumElement>(a: T) -> T {
        a.negate()
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

float_unary_op!(Exp, "exp", "out = exp(a);", |a| a.exp());
float_unary_op!(Log, "log", "out = log(a);", |a| a.ln());
float_unary_op!(Sqrt, "sqrt", "out = sqrt(a);", |a| a.sqrt());
float_unary_op!(Tanh, "tanh", "out = tanh(a);", |a| a.tanh());
// Written so that neither branch overflows: exp of a non-positive number only.
float_unary_op!(
    Sigmoid,
    "sigmoid",
    "out = a >= T(0) ? T(1) / (T(1) + exp(-a)) : exp(a) / (T(1) + exp(a));",
    |a| if a >= T::zero() {
        T::one() / (T::one() + (-a).exp())
    } else {
        let e = a.exp();
        e / (T::one() + e)
    }
);

cmp_op!(Equal, "equal", ==);
cmp_op!(NotEqual, "not_equal", !=);
cmp_op!(Less, "less", <);
cmp_op!(LessEqual, "less_equal", <=);
cmp_op!(Greater, "greater", >);
cmp_op!(GreaterEqual, "greater_equal", >=);

pub(crate) fn unsupported(op: &'static str, a: &Array, expected: &'static str) -> Error {
    Error::UnsupportedDType {
        op,
        dtype: a.dtype(),
        shape: a.shape().to_vec(),
        expected,
    }
}

fn binary_kernel<O: BinaryOp>() -> ElementwiseKernel {
    ElementwiseKernel::new(O::NAME, "T a, T b", "T out", "", O::CUDA)
}

/// The same body with the scalar parameter as `b` (or as `a` when it comes first).
fn scalar_kernel<O: BinaryOp>(scalar_first: bool) -> ElementwiseKernel {
    if scalar_first {
        ElementwiseKernel::new(O::NAME, "T b", "T out", "T a", O::CUDA)
    } else {
        ElementwiseKernel::new(O::NAME, "T a", "T out", "T b", O::CUDA)
    }
}

fn float_binary_kernel<O: FloatBinaryOp>() -> ElementwiseKernel {
    ElementwiseKernel::new(O::NAME, "T a, T b", "T out", "", O::CUDA)
}

fn unary_kernel<O: UnaryOp>() -> ElementwiseKernel {
    ElementwiseKernel::new(O::NAME, "T a", "T out", "", O::CUDA)
}

fn float_unary_kernel<O: FloatUnaryOp>() -> ElementwiseKernel {
    ElementwiseKernel::new(O::NAME, "T a", "T out", "", O::CUDA)
}

fn compare_kernel<O: CmpOp>() -> ElementwiseKernel {
    ElementwiseKernel::new(O::NAME, "T a, T b", "bool out", "", O::CUDA)
}

static POW_SCALAR: ElementwiseKernel =
    ElementwiseKernel::new("pow", "T a", "T out", "T b", Pow::CUDA);
static GREATER_SCALAR: ElementwiseKernel =
    ElementwiseKernel::new("greater", "T a", "bool out", "T b", Greater::CUDA);
static WHERE: ElementwiseKernel =
    ElementwiseKernel::new("where", "bool c, T a, T b", "T out", "", "out = c ? a : b;");
static MUL_ADD: ElementwiseKernel =
    ElementwiseKernel::new("mul_add", "T x, T y, T z", "T w", "", "w = x * y + z;");

/// Every kernel the elementwise operations launch on CUDA, with the dtypes its `T` takes there.
pub(crate) fn op_kernels() -> Vec<(ElementwiseKernel, &'static [DType])> {
    const NUM: &[DType] = &[DType::I32, DType::I64, DType::F32, DType::F64];
    const FLOAT: &[DType] = &[DType::F32, DType::F64];
    const CMP: &[DType] = &[DType::Bool, DType::I32, DType::I64, DType::F32, DType::F64];
    let mut all = Vec::new();
    macro_rules! binary {
        ($($o:ty),*) => {$(
            all.push((binary_kernel::<$o>(), NUM));
            all.push((scalar_kernel::<$o>(false), NUM));
            all.push((scalar_kernel::<$o>(true), NUM));
        )*};
    }
    binary!(Add, Sub, Mul, Div, Maximum, Minimum);
    all.push((float_binary_kernel::<Pow>(), FLOAT));
    all.push((unary_kernel::<Neg>(), NUM));
    all.push((unary_kernel::<Abs>(), NUM));
    for k in [
        float_unary_kernel::<Exp>(),
        float_unary_kernel::<Log>(),
        float_unary_kernel::<Sqrt>(),
        float_unary_kernel::<Tanh>(),
        float_unary_kernel::<Sigmoid>(),
    ] {
        all.push((k, FLOAT));
    }
    for k in [
        compare_kernel::<Equal>(),
        compare_kernel::<NotEqual>(),
        compare_kernel::<Less>(),
        compare_kernel::<LessEqual>(),
        compare_kernel::<Greater>(),
        compare_kernel::<GreaterEqual>(),
    ] {
        all.push((k, CMP));
    }
    all.push((POW_SCALAR, FLOAT));
    all.push((GREATER_SCALAR, CMP));
    all.push((WHERE, CMP));
    all.push((MUL_ADD, NUM));
    all
}

/// Runs an op's kernel on CUDA operands, returning its one output. Half-precision operands
/// compute in float32, as on the host; with `keep_dtype` the result goes back to their dtype.
fn cuda_op(
    kernel: &ElementwiseKernel,
    inputs: &[&Array],
    params: &[f64],
    keep_dtype: bool,
) -> Result<Array> {
    let half = inputs
        .iter()
        .map(|a| a.dtype())
        .find(|d| matches!(d, DType::F16 | DType::BF16));
    let Some(half) = half else {
        return Ok(crate::cuda::launch(kernel, inputs, params, None)?.remove(0));
    };
    let wide = inputs
        .iter()
        .map(|a| {
            if a.dtype() == half {
                a.astype(DType::F32)
            } else {
                Ok((*a).clone())
            }
        })
        .collect::<Result<Vec<Array>>>()?;
    let refs: Vec<&Array> = wide.iter().collect();
    let out = crate::cuda::launch(kernel, &refs, params, None)?.remove(0);
    if keep_dtype {
        out.astype(half)
    } else {
        Ok(out)
    }
}

pub(crate) fn require_numeric(op: &'static str, a: &Array) -> Result<()> {
    if a.dtype() == DType::Bool {
        return Err(unsupported(op, a, NUMERIC));
    }
    Ok(())
}

pub(crate) fn require_float(op: &'static str, a: &Array) -> Result<()> {
    if !a.dtype().is_float() {
        return Err(unsupported(op, a, FLOATING));
    }
    Ok(())
}

pub(crate) const NUMERIC: &str = "a numeric dtype (not bool)";
pub(crate) const FLOATING: &str = "a floating-point dtype (float16, bfloat16, float32, float64)";

/// Checks that two operands share a device and dtype and returns their broadcast shape.
pub(crate) fn check_binary(op: &'static str, a: &Array, b: &Array) -> Result<Shape> {
    if a.device() != b.device() {
        return Err(Error::DeviceMismatch {
            op: op.to_string(),
            lhs: a.device(),
            rhs: b.device(),
        });
    }
    if a.dtype() != b.dtype() {
        return Err(Error::DTypeMismatch {
            op,
            lhs: a.dtype(),
            lhs_shape: a.shape().to_vec(),
            rhs: b.dtype(),
            rhs_shape: b.shape().to_vec(),
        });
    }
    if a.shape() == b.shape() {
        return Ok(a.layout().dims().clone());
    }
    let shape = broadcast_shapes(op, a.shape(), b.shape())?;
    // Two views broadcast against each other can name more elements than memory holds.
    crate::layout::checked_size(op, &shape, a.dtype())?;
    Ok(IxDyn(&shape))
}

/// The values of an integer or bool dtype as the f64 range `[min, end)` (both bounds exact:
/// `end` is 2, 2^31 or 2^63), or `None` for float dtypes.
fn integer_range(dtype: DType) -> Option<(f64, f64)> {
    match dtype {
        DType::Bool => Some((0.0, 2.0)),
        DType::I32 => Some((f64::from(i32::MIN), 2f64.powi(31))),
        DType::I64 => Some((-(2f64.powi(63)), 2f64.powi(63))),
        _ => None,
    }
}

impl Array {
    /// Refuses a scalar operand that this array's dtype cannot hold exactly: on an integer array
    /// `x * 0.5` would otherwise compute `x * 0`.
    pub(crate) fn check_scalar(&self, op: &'static str, s: f64) -> Result<()> {
        let reason = match (self.dtype(), integer_range(self.dtype())) {
            // Bool arrays take no arithmetic scalars; floats hold every f64 well enough.
            (DType::Bool, _) | (_, None) => return Ok(()),
            _ if !s.is_finite() || s.fract() != 0.0 => "not an integer",
            (_, Some((min, end))) if s < min || s >= end => "out of range",
            _ => return Ok(()),
        };
        Err(Error::ScalarNotRepresentable {
            op,
            scalar: s,
            dtype: self.dtype(),
            shape: self.shape().to_vec(),
            reason,
        })
    }

    pub(crate) fn binary<O: BinaryOp>(&self, rhs: &Array) -> Result<Array> {
        let dims = check_binary(O::NAME, self, rhs)?;
        if self.on_cuda() {
            require_numeric(O::NAME, self)?;
            return cuda_op(&binary_kernel::<O>(), &[self, rhs], &[], true);
        }
        let shape = dims.slice();
        with_num_dtype!(self.dtype(), T => {
            let (a, b) = (self.host::<T>(O::NAME)?, rhs.host::<T>(O::NAME)?);
            Ok(Array::from_cpu_vec_shaped(zip2(O::NAME, a, b, shape, O::f::<T>)?, shape, &[self, rhs]))
        }, bool => Err(unsupported(O::NAME, self, NUMERIC)))
    }

    pub(crate) fn binary_scalar<O: BinaryOp>(&self, s: f64, scalar_first: bool) -> Result<Array> {
        self.check_scalar(O::NAME, s)?;
        if self.on_cuda() {
            require_numeric(O::NAME, self)?;
            return cuda_op(&scalar_kernel::<O>(scalar_first), &[self], &[s], true);
        }
        with_num_dtype!(self.dtype(), T => {
            let a = self.host::<T>(O::NAME)?;
            let s = <T as crate::Element>::from_f64(s);
            let v = if scalar_first { map1(O::NAME, a, |x| O::f(s, x))? } else { map1(O::NAME, a, |x| O::f(x, s))? };
            Ok(Array::from_cpu_vec_like(v, self.layout()))
        }, bool => Err(unsupported(O::NAME, self, NUMERIC)))
    }

    pub(crate) fn float_binary<O: FloatBinaryOp>(&self, rhs: &Array) -> Result<Array> {
        let dims = check_binary(O::NAME, self, rhs)?;
        if self.on_cuda() {
            require_float(O::NAME, self)?;
            return cuda_op(&float_binary_kernel::<O>(), &[self, rhs], &[], true);
        }
        let shape = dims.slice();
        with_float_dtype!(self.dtype(), T => {
            let (a, b) = (self.host::<T>(O::NAME)?, rhs.host::<T>(O::NAME)?);
            Ok(Array::from_cpu_vec_shaped(zip2(O::NAME, a, b, shape, O::f::<T>)?, shape, &[self, rhs]))
        }, other => Err(unsupported(O::NAME, self, FLOATING)))
    }

    pub(crate) fn unary<O: UnaryOp>(&self) -> Result<Array> {
        if self.on_cuda() {
            require_numeric(O::NAME, self)?;
            return cuda_op(&unary_kernel::<O>(), &[self], &[], true);
        }
        with_num_dtype!(self.dtype(), T => {
            Ok(Array::from_cpu_vec_like(map1(O::NAME, self.host::<T>(O::NAME)?, O::f::<T>)?, self.layout()))
        }, bool => Err(unsupported(O::NAME, self, NUMERIC)))
    }

    pub(crate) fn float_unary<O: FloatUnaryOp>(&self) -> Result<Array> {
        if self.on_cuda() {
            require_float(O::NAME, self)?;
            return cuda_op(&float_unary_kernel::<O>(), &[self], &[], true);
        }
        with_float_dtype!(self.dtype(), T => {
            Ok(Array::from_cpu_vec_like(map1(O::NAME, self.host::<T>(O::NAME)?, O::f::<T>)?, self.layout()))
        }, other => Err(unsupported(O::NAME, self, FLOATING)))
    }

    pub(crate) fn compare<O: CmpOp>(&self, rhs: &Array) -> Result<Array> {
        let dims = check_binary(O::NAME, self, rhs)?;
        if self.on_cuda() {
            return cuda_op(&compare_kernel::<O>(), &[self, rhs], &[], false);
        }
        let shape = dims.slice();
        with_dtype!(self.dtype(), T => {
            let (a, b) = (self.host::<T>(O::NAME)?, rhs.host::<T>(O::NAME)?);
            Ok(Array::from_cpu_vec_shaped(zip2(O::NAME, a, b, shape, O::f::<T>)?, shape, &[self, rhs]))
        })
    }

    /// `self + rhs`, broadcasting.
    pub fn add(&self, rhs: &Array) -> Result<Array> {
        self.binary::<Add>(rhs)
    }

    /// `self - rhs`, broadcasting.
    pub fn sub(&self, rhs: &Array) -> Result<Array> {
        self.binary::<Sub>(rhs)
    }

    /// `self * rhs`, broadcasting.
    pub fn mul(&self, rhs: &Array) -> Result<Array> {
        self.binary::<Mul>(rhs)
    }

    /// `self / rhs`, broadcasting (integer division by zero gives 0).
    pub fn div(&self, rhs: &Array) -> Result<Array> {
        self.binary::<Div>(rhs)
    }

    /// Elementwise `self ** rhs` for floating-point arrays.
    pub fn pow(&self, rhs: &Array) -> Result<Array> {
        self.float_binary::<Pow>(rhs)
    }

    /// Elementwise maximum (NaN propagates).
    pub fn maximum(&self, rhs: &Array) -> Result<Array> {
        self.binary::<Maximum>(rhs)
    }

    /// Elementwise minimum (NaN propagates).
    pub fn minimum(&self, rhs: &Array) -> Result<Array> {
        self.binary::<Minimum>(rhs)
    }

    /// `self + s` (`s` cast to the dtype).
    pub fn add_scalar(&self, s: f64) -> Result<Array> {
        self.binary_scalar::<Add>(s, false)
    }

    /// `self - s`.
    pub fn sub_scalar(&self, s: f64) -> Result<Array> {
        self.binary_scalar::<Sub>(s, false)
    }

    /// `s - self`.
    pub fn rsub_scalar(&self, s: f64) -> Result<Array> {
        self.binary_scalar::<Sub>(s, true)
    }

    /// `self * s`.
    pub fn mul_scalar(&self, s: f64) -> Result<Array> {
        self.binary_scalar::<Mul>(s, false)
    }

    /// `self / s`.
    pub fn div_scalar(&self, s: f64) -> Result<Array> {
        self.binary_scalar::<Div>(s, false)
    }

    /// `s / self`.
    pub fn rdiv_scalar(&self, s: f64) -> Result<Array> {
        self.binary_scalar::<Div>(s, true)
    }

    /// `max(self, s)` elementwise.
    pub fn maximum_scalar(&self, s: f64) -> Result<Array> {
        self.binary_scalar::<Maximum>(s, false)
    }

    /// `self ** p` for floating-point arrays.
    pub fn pow_scalar(&self, p: f64) -> Result<Array> {
        if self.on_cuda() {
            require_float("pow", self)?;
            return cuda_op(&POW_SCALAR, &[self], &[p], true);
        }
        with_float_dtype!(self.dtype(), T => {
            let p = <T as crate::Element>::from_f64(p);
            Ok(Array::from_cpu_vec_like(map1("pow", self.host::<T>("pow")?, |x| x.powf(p))?, self.layout()))
        }, other => Err(unsupported("pow", self, FLOATING)))
    }

    /// `-self` (integers wrap).
    pub fn neg(&self) -> Result<Array> {
        self.unary::<Neg>()
    }

    /// `|self|`.
    pub fn abs(&self) -> Result<Array> {
        self.unary::<Abs>()
    }

    /// `e ** self`.
    pub fn exp(&self) -> Result<Array> {
        self.float_unary::<Exp>()
    }

    /// Natural logarithm.
    pub fn log(&self) -> Result<Array> {
        self.float_unary::<Log>()
    }

    /// Square root.
    pub fn sqrt(&self) -> Result<Array> {
        self.float_unary::<Sqrt>()
    }

    /// Hyperbolic tangent.
    pub fn tanh(&self) -> Result<Array> {
        self.float_unary::<Tanh>()
    }

    /// Logistic sigmoid `1 / (1 + e ** -self)`, computed without overflow.
    pub fn sigmoid(&self) -> Result<Array> {
        self.float_unary::<Sigmoid>()
    }

    /// `max(self, 0)`.
    pub fn relu(&self) -> Result<Array> {
        self.maximum_scalar(0.0)
    }

    /// `self == rhs` as a bool array.
    pub fn eq(&self, rhs: &Array) -> Result<Array> {
        self.compare::<Equal>(rhs)
    }

    /// `self != rhs` as a bool array.
    pub fn ne(&self, rhs: &Array) -> Result<Array> {
        self.compare::<NotEqual>(rhs)
    }

    /// `self < rhs` as a bool array.
    pub fn lt(&self, rhs: &Array) -> Result<Array> {
        self.compare::<Less>(rhs)
    }

    /// `self <= rhs` as a bool array.
    pub fn le(&self, rhs: &Array) -> Result<Array> {
        self.compare::<LessEqual>(rhs)
    }

    /// `self > rhs` as a bool array.
    pub fn gt(&self, rhs: &Array) -> Result<Array> {
        self.compare::<Greater>(rhs)
    }

    /// `self >= rhs` as a bool array.
    pub fn ge(&self, rhs: &Array) -> Result<Array> {
        self.compare::<GreaterEqual>(rhs)
    }

    /// `self > s` as a bool array, exact for every scalar (as NumPy compares): a threshold the
    /// dtype cannot hold (`0.5` against integers, `0.1` against float16) is not rounded first.
    // `x > s` is generic; clippy sees its `bool` instance as a comparison of booleans.
    #[allow(clippy::bool_comparison)]
    pub fn gt_scalar(&self, s: f64) -> Result<Array> {
        let all = |value: bool| {
            Array::full_on(
                self.shape(),
                f64::from(u8::from(value)),
                DType::Bool,
                self.device(),
            )
        };
        if s.is_nan() {
            return all(false);
        }
        let s = match integer_range(self.dtype()) {
            Some((min, end)) => {
                // For an integer x, x > s exactly when x > floor(s).
                let t = s.floor();
                if t < min {
                    return all(true);
                }
                // No value of the dtype exceeds its largest one.
                if t >= end - 1.0 {
                    return all(false);
                }
                t
            }
            None if self.dtype() == DType::F64 => s,
            None => {
                let rounded = with_float_dtype!(self.dtype(), T => <T as crate::Element>::from_f64(s).to_f64(), other => s);
                if rounded != s {
                    return self.astype(DType::F64)?.gt_scalar(s);
                }
                s
            }
        };
        if self.on_cuda() {
            return cuda_op(&GREATER_SCALAR, &[self], &[s], false);
        }
        with_dtype!(self.dtype(), T => {
            let s = <T as crate::Element>::from_f64(s);
            Ok(Array::from_cpu_vec_like(map1("greater", self.host::<T>("greater")?, |x| x > s)?, self.layout()))
        })
    }

    /// Elements of `a` where `cond` is true, of `b` elsewhere (all three broadcast together).
    ///
    /// ```
    /// use kusari::Array;
    /// let c = Array::from_vec(vec![true, false], &[2]).unwrap();
    /// let a = Array::full(&[2], 1.0, kusari::DType::F32).unwrap();
    /// let b = Array::zeros(&[2, 2], kusari::DType::F32).unwrap();
    /// let w = Array::where_cond(&c, &a, &b).unwrap();
    /// assert_eq!(w.to_vec::<f32>().unwrap(), vec![1.0, 0.0, 1.0, 0.0]);
    /// ```
    pub fn where_cond(cond: &Array, a: &Array, b: &Array) -> Result<Array> {
        const OP: &str = "where";
        if cond.dtype() != DType::Bool {
            return Err(unsupported(OP, cond, "a bool condition"));
        }
        let ab = check_binary(OP, a, b)?;
        if cond.device() != a.device() {
            return Err(Error::DeviceMismatch {
                op: OP.to_string(),
                lhs: cond.device(),
                rhs: a.device(),
            });
        }
        let shape = broadcast_shapes(OP, cond.shape(), ab.slice())?;
        if a.on_cuda() {
            return cuda_op(&WHERE, &[cond, a, b], &[], true);
        }
        let c = cond.host::<bool>(OP)?;
        with_dtype!(a.dtype(), T => {
            let (x, y) = (a.host::<T>(OP)?, b.host::<T>(OP)?);
            Ok(Array::from_cpu_vec(zip3(OP, c, x, y, &shape, |c, x, y| if c { x } else { y })?, &shape))
        })
    }

    /// `x * y + z` in one pass: the fused multiply-add of the tutorial's MulAdd, broadcasting.
    pub fn mul_add(&self, y: &Array, z: &Array) -> Result<Array> {
        const OP: &str = "mul_add";
        let xy = check_binary(OP, self, y)?;
        check_binary(OP, self, z)?;
        let dims = if z.shape() == xy.slice() {
            xy
        } else {
            IxDyn(&broadcast_shapes(OP, xy.slice(), z.shape())?)
        };
        let shape = dims.slice();
        if self.on_cuda() {
            require_numeric(OP, self)?;
            return cuda_op(&MUL_ADD, &[self, y, z], &[], true);
        }
        with_num_dtype!(self.dtype(), T => {
            let (a, b, c) = (self.host::<T>(OP)?, y.host::<T>(OP)?, z.host::<T>(OP)?);
            Ok(Array::from_cpu_vec_shaped(zip3(OP, a, b, c, shape, |a, b, c| a.times(b).plus(c))?, shape, &[self, y, z]))
        }, bool => Err(unsupported(OP, self, NUMERIC)))
    }

    /// Applies `f` to every element of a `T` array (`T` must be the dtype), into a new array.
    pub fn map<T: Element, O: Element>(&self, f: impl Fn(T) -> O + Sync + Send) -> Result<Array> {
        Ok(Array::from_cpu_vec(
            map1("map", self.host::<T>("map")?, f)?,
            self.shape(),
        ))
    }
}

impl Array {
    /// Whether any element is NaN (always false for integer and bool arrays).
    pub fn has_nan(&self) -> Result<bool> {
        if self.on_cuda() {
            return self.to_device(crate::Device::Cpu)?.has_nan();
        }
        with_float_dtype!(self.dtype(), T => {
            Ok(self.host::<T>("has_nan")?.to_cow("has_nan")?.iter().any(|x| x.is_nan()))
        }, other => Ok(false))
    }
}
