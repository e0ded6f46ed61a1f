//! Elementwise arithmetic, math and comparisons: each a small named op type, dispatched on the
//! dtype once.

use num_traits::Float as _;

use crate::cpu::{map1, zip2, zip3};
use crate::dtype::{
    with_dtype, with_float_dtype, with_num_dtype, Element, FloatElement, NumElement,
};
use crate::error::{Error, Result};
use crate::layout::{broadcast_shapes, Shape};
use crate::{Array, DType};
use ndarray::{Dimension, IxDyn};

/// A binary op on numeric elements.
pub(crate) trait BinaryOp {
    const NAME: &'static str;
    fn f<T: NumElement>(a: T, b: T) -> T;
}

/// A binary op on floating-point elements.
pub(crate) trait FloatBinaryOp {
    const NAME: &'static str;
    fn f<T: FloatElement>(a: T, b: T) -> T;
}

/// A unary op on numeric elements.
pub(crate) trait UnaryOp {
    const NAME: &'static str;
    fn f<T: NumElement>(a: T) -> T;
}

/// A unary op on floating-point elements.
pub(crate) trait FloatUnaryOp {
    const NAME: &'static str;
    fn f<T: FloatElement>(a: T) -> T;
}

/// A comparison, giving `bool`.
pub(crate) trait CmpOp {
    const NAME: &'static str;
    fn f<T: PartialOrd>(a: T, b: T) -> bool;
}

macro_rules! binary_op {
    ($name:ident, $label:literal, |$a:ident, $b:ident| $e:expr) => {
        pub(crate) struct $name;
        impl BinaryOp for $name {
            const NAME: &'static str = $label;
            #[inline(always)]
            fn f<T: NumElement>($a: T, $b: T) -> T {
                $e
            }
        }
    };
}

macro_rules! float_unary_op {
    ($name:ident, $label:literal, |$a:ident| $e:expr) => {
        pub(crate) struct $name;
        impl FloatUnaryOp for $name {
            const NAME: &'static str = $label;
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
            #[inline(always)]
            fn f<T: PartialOrd>(a: T, b: T) -> bool {
                a $op b
            }
        }
    };
}

binary_op!(Add, "add", |a, b| a.plus(b));
binary_op!(Sub, "sub", |a, b| a.minus(b));
binary_op!(Mul, "mul", |a, b| a.times(b));
binary_op!(Div, "div", |a, b| a.over(b));
// NaN propagates through maximum and minimum, as in NumPy: `a != a` only holds for NaN.
#[allow(clippy::eq_op)]
fn is_nan<T: PartialOrd>(a: T) -> bool {
    a != a
}
binary_op!(Maximum, "maximum", |a, b| if is_nan(a) || a >= b {
    a
} else {
    b
});
binary_op!(Minimum, "minimum", |a, b| if is_nan(a) || a <= b {
    a
} else {
    b
});

pub(crate) struct Pow;
impl FloatBinaryOp for Pow {
    const NAME: &'static str = "pow";
    #[inline(always)]
    fn f<T: FloatElement>(a: T, b: T) -> T {
        a.powf(b)
    }
}

pub(crate) struct Neg;
impl UnaryOp for Neg {
    const NAME: &'static str = "neg";
    #[inline(always)]
    fn f<T: NumElement>(a: T) -> T {
        a.negate()
    }
}

pub(crate) struct Abs;
impl UnaryOp for Abs {
    const NAME: &'static str = "abs";
    #[inline(always)]
    fn f<T: NumElement>(a: T) -> T {
        a.magnitude()
    }
}

float_unary_op!(Exp, "exp", |a| a.exp());
float_unary_op!(Log, "log", |a| a.ln());
float_unary_op!(Sqrt, "sqrt", |a| a.sqrt());
float_unary_op!(Tanh, "tanh", |a| a.tanh());
// Written so that neither branch overflows: exp of a non-positive number only.
float_unary_op!(Sigmoid, "sigmoid", |a| if a >= T::zero() {
    T::one() / (T::one() + (-a).exp())
} else {
    let e = a.exp();
    e / (T::one() + e)
});

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
    Ok(IxDyn(&broadcast_shapes(op, a.shape(), b.shape())?))
}

impl Array {
    pub(crate) fn binary<O: BinaryOp>(&self, rhs: &Array) -> Result<Array> {
        let dims = check_binary(O::NAME, self, rhs)?;
        let shape = dims.slice();
        with_num_dtype!(self.dtype(), T => {
            let (a, b) = (self.host::<T>(O::NAME)?, rhs.host::<T>(O::NAME)?);
            Ok(Array::from_cpu_vec_shaped(zip2(a, b, shape, O::f::<T>), shape, &[self, rhs]))
        }, bool => Err(unsupported(O::NAME, self, NUMERIC)))
    }

    pub(crate) fn binary_scalar<O: BinaryOp>(&self, s: f64, scalar_first: bool) -> Result<Array> {
        with_num_dtype!(self.dtype(), T => {
            let a = self.host::<T>(O::NAME)?;
            let s = T::from_f64(s);
            let v = if scalar_first { map1(a, |x| O::f(s, x)) } else { map1(a, |x| O::f(x, s)) };
            Ok(Array::from_cpu_vec_like(v, self.layout()))
        }, bool => Err(unsupported(O::NAME, self, NUMERIC)))
    }

    pub(crate) fn float_binary<O: FloatBinaryOp>(&self, rhs: &Array) -> Result<Array> {
        let dims = check_binary(O::NAME, self, rhs)?;
        let shape = dims.slice();
        with_float_dtype!(self.dtype(), T => {
            let (a, b) = (self.host::<T>(O::NAME)?, rhs.host::<T>(O::NAME)?);
            Ok(Array::from_cpu_vec_shaped(zip2(a, b, shape, O::f::<T>), shape, &[self, rhs]))
        }, other => Err(unsupported(O::NAME, self, FLOATING)))
    }

    pub(crate) fn unary<O: UnaryOp>(&self) -> Result<Array> {
        with_num_dtype!(self.dtype(), T => {
            Ok(Array::from_cpu_vec_like(map1(self.host::<T>(O::NAME)?, O::f::<T>), self.layout()))
        }, bool => Err(unsupported(O::NAME, self, NUMERIC)))
    }

    pub(crate) fn float_unary<O: FloatUnaryOp>(&self) -> Result<Array> {
        with_float_dtype!(self.dtype(), T => {
            Ok(Array::from_cpu_vec_like(map1(self.host::<T>(O::NAME)?, O::f::<T>), self.layout()))
        }, other => Err(unsupported(O::NAME, self, FLOATING)))
    }

    pub(crate) fn compare<O: CmpOp>(&self, rhs: &Array) -> Result<Array> {
        let dims = check_binary(O::NAME, self, rhs)?;
        let shape = dims.slice();
        with_dtype!(self.dtype(), T => {
            let (a, b) = (self.host::<T>(O::NAME)?, rhs.host::<T>(O::NAME)?);
            Ok(Array::from_cpu_vec_shaped(zip2(a, b, shape, O::f::<T>), shape, &[self, rhs]))
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
        with_float_dtype!(self.dtype(), T => {
            let p = T::from_f64(p);
            Ok(Array::from_cpu_vec_like(map1(self.host::<T>("pow")?, |x| x.powf(p)), self.layout()))
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

    /// `self > s` as a bool array.
    // `x > s` is generic; clippy sees its `bool` instance as a comparison of booleans.
    #[allow(clippy::bool_comparison)]
    pub fn gt_scalar(&self, s: f64) -> Result<Array> {
        with_dtype!(self.dtype(), T => {
            let s = T::from_f64(s);
            Ok(Array::from_cpu_vec_like(map1(self.host::<T>("greater")?, |x| x > s), self.layout()))
        })
    }

    /// Elements of `a` where `cond` is true, of `b` elsewhere (all three broadcast together).
    ///
    /// ```
    /// use kusari::Array;
    /// let c = Array::from_vec(vec![true, false], &[2]).unwrap();
    /// let a = Array::full(&[2], 1.0, kusari::DType::F32);
    /// let b = Array::zeros(&[2, 2], kusari::DType::F32);
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
        let c = cond.host::<bool>(OP)?;
        with_dtype!(a.dtype(), T => {
            let (x, y) = (a.host::<T>(OP)?, b.host::<T>(OP)?);
            Ok(Array::from_cpu_vec(zip3(c, x, y, &shape, |c, x, y| if c { x } else { y }), &shape))
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
        with_num_dtype!(self.dtype(), T => {
            let (a, b, c) = (self.host::<T>(OP)?, y.host::<T>(OP)?, z.host::<T>(OP)?);
            Ok(Array::from_cpu_vec_shaped(zip3(a, b, c, shape, |a, b, c| a.times(b).plus(c)), shape, &[self, y, z]))
        }, bool => Err(unsupported(OP, self, NUMERIC)))
    }

    /// Applies `f` to every element of a `T` array (`T` must be the dtype), into a new array.
    pub fn map<T: Element, O: Element>(&self, f: impl Fn(T) -> O + Sync + Send) -> Result<Array> {
        Ok(Array::from_cpu_vec(
            map1(self.host::<T>("map")?, f),
            self.shape(),
        ))
    }
}

impl Array {
    /// Whether any element is NaN (always false for integer and bool arrays).
    pub fn has_nan(&self) -> Result<bool> {
        with_float_dtype!(self.dtype(), T => {
            Ok(self.host::<T>("has_nan")?.to_cow().iter().any(|x| x.is_nan()))
        }, other => Ok(false))
    }
}
