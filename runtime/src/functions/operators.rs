//! The operators on [`Variable`] (`&x + &y`, `x * 2.0`, `-x`, ...) and the arithmetic methods
//! they call: each applies the differentiable function of the same name in [`crate::functions`].

use crate::error::Result;
use crate::functions;
use crate::Variable;

/// Arithmetic methods used by the operators (`&x + &y` calls [`Variable::add`]).
impl Variable {
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

crate::ops_macros::impl_arith_ops!(Variable);
