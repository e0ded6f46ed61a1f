//! Elementwise arithmetic, math and comparisons: the shape checks (devices, dtypes, broadcasting,
//! scalars) before each op of [`crate::op`] goes to the storage.

use crate::cpu::map1;
use crate::dtype::{Element, with_float_dtype};
use crate::error::{Error, Result};
use crate::layout::{Layout, Shape, broadcast_shapes};
use crate::op::{
    Abs, Add, BinaryOp, CmpOp, Cos, Div, Equal, Erf, Exp, ExpM1, FloatBinaryOp, FloatUnaryOp,
    Greater, GreaterEqual, Less, LessEqual, Log, Log1p, Maximum, Minimum, Mul, Neg, NotEqual, Pow,
    Relu, Sigmoid, Sin, Sqrt, Sub, Tanh, UnaryOp,
};
use crate::{Array, DType};
use ndarray::{Dimension, IxDyn};

pub(crate) fn unsupported(op: &'static str, a: &Array, expected: &'static str) -> Error {
    crate::op::unsupported(op, a.dtype(), a.shape(), expected)
}

/// An error unless `a` has a numeric dtype (not bool).
pub(crate) fn require_numeric(op: &'static str, a: &Array) -> Result<()> {
    crate::op::require_numeric(op, a.dtype(), a.shape())
}

/// An error unless `a` has a floating-point dtype.
pub(crate) fn require_float(op: &'static str, a: &Array) -> Result<()> {
    crate::op::require_float(op, a.dtype(), a.shape())
}

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

/// The values of an integer or bool dtype as the f64 range `[min, end)` (both bounds exact
/// powers of two or zero: `end` is 2 for bool, 2^(bits-1) or 2^bits), or `None` for float
/// dtypes.
fn integer_range(dtype: DType) -> Option<(f64, f64)> {
    let bits = 8 * dtype.size_in_bytes() as i32;
    match dtype {
        DType::Bool => Some((0.0, 2.0)),
        d if d.is_signed_int() => Some((-(2f64.powi(bits - 1)), 2f64.powi(bits - 1))),
        d if d.is_unsigned() => Some((0.0, 2f64.powi(bits))),
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
        let shape = dims.slice();
        let out = self
            .storage()
            .binary::<O>(self.layout(), rhs.storage(), rhs.layout(), shape)?;
        Ok(Array::from_storage_shaped(out, shape, &[self, rhs]))
    }

    pub(crate) fn binary_scalar<O: BinaryOp>(&self, s: f64, scalar_first: bool) -> Result<Array> {
        self.check_scalar(O::NAME, s)?;
        let out = self
            .storage()
            .binary_scalar::<O>(self.layout(), s, scalar_first)?;
        Ok(Array::from_storage_like(out, self.layout()))
    }

    pub(crate) fn float_binary<O: FloatBinaryOp>(&self, rhs: &Array) -> Result<Array> {
        let dims = check_binary(O::NAME, self, rhs)?;
        let shape = dims.slice();
        let out =
            self.storage()
                .float_binary::<O>(self.layout(), rhs.storage(), rhs.layout(), shape)?;
        Ok(Array::from_storage_shaped(out, shape, &[self, rhs]))
    }

    pub(crate) fn unary<O: UnaryOp>(&self) -> Result<Array> {
        let out = self.storage().unary::<O>(self.layout())?;
        Ok(Array::from_storage_like(out, self.layout()))
    }

    pub(crate) fn float_unary<O: FloatUnaryOp>(&self) -> Result<Array> {
        let out = self.storage().float_unary::<O>(self.layout())?;
        Ok(Array::from_storage_like(out, self.layout()))
    }

    pub(crate) fn compare<O: CmpOp>(&self, rhs: &Array) -> Result<Array> {
        let dims = check_binary(O::NAME, self, rhs)?;
        let shape = dims.slice();
        let out = self
            .storage()
            .compare::<O>(self.layout(), rhs.storage(), rhs.layout(), shape)?;
        Ok(Array::from_storage_shaped(out, shape, &[self, rhs]))
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
        let out = self.storage().pow_scalar(self.layout(), p)?;
        Ok(Array::from_storage_like(out, self.layout()))
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

    /// `e ** self - 1`, accurate where `self` is near 0 (where `exp(x) - 1` loses digits).
    pub fn expm1(&self) -> Result<Array> {
        self.float_unary::<ExpM1>()
    }

    /// Natural logarithm.
    pub fn log(&self) -> Result<Array> {
        self.float_unary::<Log>()
    }

    /// `ln(1 + self)`, accurate where `self` is near 0 (where `log(1 + x)` loses digits).
    pub fn log1p(&self) -> Result<Array> {
        self.float_unary::<Log1p>()
    }

    /// Square root.
    pub fn sqrt(&self) -> Result<Array> {
        self.float_unary::<Sqrt>()
    }

    /// The error function `2/√π ∫₀ˣ e^(-t²) dt`.
    pub fn erf(&self) -> Result<Array> {
        self.float_unary::<Erf>()
    }

    /// Hyperbolic tangent.
    pub fn tanh(&self) -> Result<Array> {
        self.float_unary::<Tanh>()
    }

    /// Logistic sigmoid `1 / (1 + e ** -self)`, computed without overflow.
    pub fn sigmoid(&self) -> Result<Array> {
        self.float_unary::<Sigmoid>()
    }

    /// Sine of `self` in radians (floating point).
    ///
    /// ```
    /// use kusari::Array;
    /// let x = Array::from_vec(vec![0.0f64, std::f64::consts::FRAC_PI_2], &[2]).unwrap();
    /// assert_eq!(x.sin().unwrap().to_vec::<f64>().unwrap(), vec![0.0, 1.0]);
    /// ```
    pub fn sin(&self) -> Result<Array> {
        self.float_unary::<Sin>()
    }

    /// Cosine of `self` in radians (floating point).
    ///
    /// ```
    /// use kusari::Array;
    /// let x = Array::from_vec(vec![0.0f64, std::f64::consts::PI], &[2]).unwrap();
    /// assert_eq!(x.cos().unwrap().to_vec::<f64>().unwrap(), vec![1.0, -1.0]);
    /// ```
    pub fn cos(&self) -> Result<Array> {
        self.float_unary::<Cos>()
    }

    /// `max(self, 0)`.
    pub fn relu(&self) -> Result<Array> {
        self.unary::<Relu>()
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
        let out = self.storage().gt_scalar(self.layout(), s)?;
        Ok(Array::from_storage_like(out, self.layout()))
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
        let out = cond.storage().where_cond(
            cond.layout(),
            (a.storage(), a.layout()),
            (b.storage(), b.layout()),
            &shape,
        )?;
        Ok(Array::from_storage(out, Layout::contiguous(&shape)))
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
        let out = self.storage().mul_add(
            self.layout(),
            (y.storage(), y.layout()),
            (z.storage(), z.layout()),
            shape,
        )?;
        Ok(Array::from_storage_shaped(out, shape, &[self, y, z]))
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
        with_float_dtype!(self.dtype(), T => {
            let (storage, layout) = self.storage().on_host(self.layout())?;
            let host = storage.typed::<T>("has_nan", &layout)?;
            Ok(host.to_cow("has_nan")?.iter().any(|x| x.is_nan()))
        }, other => Ok(false))
    }
}
