//! The operators on [`Variable`] (`&x + &y`, `x * 2.0`, `&x * &array`, `-x`, ...) and
//! `Variable`'s math methods (`x.exp()`, `x.pow_scalar(2.0)`, `x.sum()`, ...): each applies the
//! differentiable function of the same name in [`crate::functions`], so `x.exp()` and `F::exp(&x)`
//! record the same node.

use crate::error::Result;
use crate::functions;
use crate::{Array, DType, Variable};

/// Arithmetic methods used by the operators (`&x + &y` calls [`Variable::add`]).
impl Variable {
    /// NumPy's indexing, `self[index]` ([`functions::get_item`]; the entries are [`Ix`](crate::Ix)).
    ///
    /// ```
    /// use kusari::prelude::*;
    /// let x = Variable::new(Array::arange(0.0, 6.0, 1.0, DType::F32).unwrap().reshape(&[2, 3]).unwrap());
    /// let y = x.get_item(&[Ix::Ellipsis, Ix::Int(-1)]).unwrap();
    /// assert_eq!(y.array().to_vec::<f32>().unwrap(), vec![2.0, 5.0]);
    /// ```
    pub fn get_item(&self, index: &[crate::Ix<'_>]) -> Result<Variable> {
        functions::get_item(self, index)
    }

    /// `self + rhs` ([`functions::add`]).
    pub fn add(&self, rhs: &Variable) -> Result<Variable> {
        functions::add(self, rhs)
    }

    /// `self - rhs`.
    pub fn sub(&self, rhs: &Variable) -> Result<Variable> {
        functions::sub(self, rhs)
    }

    /// `self * rhs`.
    pub fn mul(&self, rhs: &Variable) -> Result<Variable> {
        functions::mul(self, rhs)
    }

    /// `self / rhs`.
    pub fn div(&self, rhs: &Variable) -> Result<Variable> {
        functions::div(self, rhs)
    }

    /// `-self`.
    pub fn neg(&self) -> Result<Variable> {
        functions::neg(self)
    }

    /// `self + c`.
    pub fn add_scalar(&self, c: f64) -> Result<Variable> {
        functions::add_scalar(self, c)
    }

    /// `self - c`.
    pub fn sub_scalar(&self, c: f64) -> Result<Variable> {
        functions::sub_scalar(self, c)
    }

    /// `c - self`.
    pub fn rsub_scalar(&self, c: f64) -> Result<Variable> {
        functions::rsub_scalar(self, c)
    }

    /// `self * c`.
    pub fn mul_scalar(&self, c: f64) -> Result<Variable> {
        functions::mul_scalar(self, c)
    }

    /// `self / c`.
    pub fn div_scalar(&self, c: f64) -> Result<Variable> {
        functions::div_scalar(self, c)
    }

    /// `c / self`.
    pub fn rdiv_scalar(&self, c: f64) -> Result<Variable> {
        functions::rdiv_scalar(self, c)
    }
}

/// The math methods Array has, on variables: each is the differentiable function of the same
/// name in [`functions`] (imported as `F`).
impl Variable {
    /// `e^self` ([`functions::exp`]).
    pub fn exp(&self) -> Result<Variable> {
        functions::exp(self)
    }

    /// The error function ([`functions::erf`]).
    pub fn erf(&self) -> Result<Variable> {
        functions::erf(self)
    }

    /// `e^self - 1`, accurate near 0 ([`functions::expm1`]).
    pub fn expm1(&self) -> Result<Variable> {
        functions::expm1(self)
    }

    /// The natural logarithm ([`functions::log`]).
    pub fn log(&self) -> Result<Variable> {
        functions::log(self)
    }

    /// `ln(1 + self)`, accurate near 0 ([`functions::log1p`]).
    pub fn log1p(&self) -> Result<Variable> {
        functions::log1p(self)
    }

    /// The square root ([`functions::sqrt`]).
    pub fn sqrt(&self) -> Result<Variable> {
        functions::sqrt(self)
    }

    /// The hyperbolic tangent ([`functions::tanh`]).
    pub fn tanh(&self) -> Result<Variable> {
        functions::tanh(self)
    }

    /// The logistic sigmoid ([`functions::sigmoid`]).
    pub fn sigmoid(&self) -> Result<Variable> {
        functions::sigmoid(self)
    }

    /// The sine, in radians ([`functions::sin`]).
    pub fn sin(&self) -> Result<Variable> {
        functions::sin(self)
    }

    /// The cosine, in radians ([`functions::cos`]).
    pub fn cos(&self) -> Result<Variable> {
        functions::cos(self)
    }

    /// The absolute value (Chainer's `abs(x)`; [`functions::absolute`]).
    pub fn abs(&self) -> Result<Variable> {
        functions::absolute(self)
    }

    /// `max(self, 0)` ([`functions::relu`]).
    pub fn relu(&self) -> Result<Variable> {
        functions::relu(self)
    }

    /// `self ** rhs`, elementwise and broadcasting ([`functions::pow`]).
    pub fn pow(&self, rhs: &Variable) -> Result<Variable> {
        functions::pow(self, rhs)
    }

    /// `self ** c` (Chainer's `x ** 2`; [`functions::pow_scalar`]).
    pub fn pow_scalar(&self, c: f64) -> Result<Variable> {
        functions::pow_scalar(self, c)
    }

    /// The elementwise maximum, broadcasting ([`functions::maximum`]).
    pub fn maximum(&self, rhs: &Variable) -> Result<Variable> {
        functions::maximum(self, rhs)
    }

    /// The matrix product (Chainer's `x @ w`; [`functions::matmul`]).
    pub fn matmul(&self, rhs: &Variable) -> Result<Variable> {
        functions::matmul(self, rhs)
    }

    /// Sum of all elements, a 0-dimensional variable ([`functions::sum`]).
    pub fn sum(&self) -> Result<Variable> {
        functions::sum(self)
    }

    /// Sum over `axes` (negative axes count from the end), keeping them as length 1 when
    /// `keepdims` ([`functions::sum_axes`]).
    pub fn sum_axes(&self, axes: &[isize], keepdims: bool) -> Result<Variable> {
        functions::sum_axes(self, axes, keepdims)
    }

    /// Mean of all elements ([`functions::mean`]).
    pub fn mean(&self) -> Result<Variable> {
        functions::mean(self)
    }

    /// Mean over `axes` ([`functions::mean_axes`]).
    pub fn mean_axes(&self, axes: &[isize], keepdims: bool) -> Result<Variable> {
        functions::mean_axes(self, axes, keepdims)
    }

    /// Maximum of all elements ([`functions::max`]).
    pub fn max(&self) -> Result<Variable> {
        functions::max(self)
    }

    /// Maximum over `axes` ([`functions::max_axes`]).
    pub fn max_axes(&self, axes: &[isize], keepdims: bool) -> Result<Variable> {
        functions::max_axes(self, axes, keepdims)
    }

    /// Minimum of all elements ([`functions::min`]).
    pub fn min(&self) -> Result<Variable> {
        functions::min(self)
    }

    /// Minimum over `axes` ([`functions::min_axes`]).
    pub fn min_axes(&self, axes: &[isize], keepdims: bool) -> Result<Variable> {
        functions::min_axes(self, axes, keepdims)
    }

    /// The same elements in `shape` ([`functions::reshape`]).
    pub fn reshape(&self, shape: &[usize]) -> Result<Variable> {
        functions::reshape(self, shape)
    }

    /// Axes permuted by `axes` (`None`: reversed; [`functions::transpose`]).
    pub fn transpose(&self, axes: Option<&[usize]>) -> Result<Variable> {
        functions::transpose(self, axes)
    }

    /// The axes reversed (Chainer's `x.T`).
    pub fn t(&self) -> Result<Variable> {
        functions::transpose(self, None)
    }

    /// Broadcast to `shape` ([`functions::broadcast_to`]).
    pub fn broadcast_to(&self, shape: &[usize]) -> Result<Variable> {
        functions::broadcast_to(self, shape)
    }

    /// Broadcast axes summed away to give `shape` ([`functions::sum_to`]).
    pub fn sum_to(&self, shape: &[usize]) -> Result<Variable> {
        functions::sum_to(self, shape)
    }

    /// Length-1 axes removed (`None`: all of them; [`functions::squeeze`]).
    pub fn squeeze(&self, axes: Option<&[isize]>) -> Result<Variable> {
        functions::squeeze(self, axes)
    }

    /// A length-1 axis inserted at `axis` ([`functions::expand_dims`]).
    pub fn expand_dims(&self, axis: isize) -> Result<Variable> {
        functions::expand_dims(self, axis)
    }

    /// Converted to `dtype`; the gradient converts back ([`functions::astype`]).
    pub fn astype(&self, dtype: DType) -> Result<Variable> {
        functions::astype(self, dtype)
    }
}

crate::ops_macros::impl_arith_ops!(Variable);

/// `&variable op &array` and `&array op &variable`: the array takes part as a constant (no
/// gradient flows to it), as Chainer's `gx * ggx` with an ndarray `ggx`.
macro_rules! variable_array_ops {
    ($($Trait:ident $method:ident),*) => {$(
        impl std::ops::$Trait<&Array> for &Variable {
            type Output = Result<Variable>;
            fn $method(self, rhs: &Array) -> Result<Variable> {
                functions::$method(self, &Variable::constant(rhs.clone()))
            }
        }
        impl std::ops::$Trait<&Array> for Variable {
            type Output = Result<Variable>;
            fn $method(self, rhs: &Array) -> Result<Variable> {
                functions::$method(&self, &Variable::constant(rhs.clone()))
            }
        }
        impl std::ops::$Trait<&Variable> for &Array {
            type Output = Result<Variable>;
            fn $method(self, rhs: &Variable) -> Result<Variable> {
                functions::$method(&Variable::constant(self.clone()), rhs)
            }
        }
        impl std::ops::$Trait<Variable> for &Array {
            type Output = Result<Variable>;
            fn $method(self, rhs: Variable) -> Result<Variable> {
                functions::$method(&Variable::constant(self.clone()), &rhs)
            }
        }
    )*};
}

variable_array_ops!(Add add, Sub sub, Mul mul, Div div);
