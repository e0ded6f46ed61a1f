//! Arithmetic: `+ - * /`, negation, constant powers, maximum, `where`, and their scalar forms
//! (`a ** b` of two variables, whose gradient needs `log`, is in `math.rs`).
//!
//! The backwards of `*`, `/`, maximum and the scalar forms of `*`, `/` and `**` are derived from
//! their formulas (one fused kernel for the inputs that want a gradient). Those of `+`, `-`,
//! negation and the scalar `+` and `-` are written by hand: they pass the gradient on (summed to
//! an input's shape, or negated), where a derived one would copy it through a kernel.

use super::sum_to;
use crate::error::Result;
use crate::{Array, InputMeta, Variable, function_node};

/// `a + b`, broadcasting.
pub struct Add;

#[function_node(crate = "crate", formula = "a + b")]
impl Add {
    #[retain(meta(a, b))]
    fn forward(&self, a: &Array, b: &Array) -> Result<Array> {
        a.add(b)
    }

    fn backward(
        &self,
        a: &InputMeta,
        b: &InputMeta,
        gy: &Variable,
    ) -> Result<(Variable, Variable)> {
        Ok((sum_to(gy, a.shape())?, sum_to(gy, b.shape())?))
    }
}

/// `a - b`, broadcasting.
pub struct Sub;

#[function_node(crate = "crate", formula = "a - b")]
impl Sub {
    #[retain(meta(a, b))]
    fn forward(&self, a: &Array, b: &Array) -> Result<Array> {
        a.sub(b)
    }

    fn backward(
        &self,
        a: &InputMeta,
        b: &InputMeta,
        gy: &Variable,
    ) -> Result<(Variable, Variable)> {
        Ok((sum_to(gy, a.shape())?, sum_to(&neg(gy)?, b.shape())?))
    }
}

/// `a * b`, broadcasting.
pub struct Mul;

#[function_node(crate = "crate", formula = "a * b")]
impl Mul {
    fn forward(&self, a: &Array, b: &Array) -> Result<Array> {
        a.mul(b)
    }
}

/// `a / b`, broadcasting.
pub struct Div;

#[function_node(crate = "crate", formula = "a / b")]
impl Div {
    fn forward(&self, a: &Array, b: &Array) -> Result<Array> {
        a.div(b)
    }
}

/// `-x`.
pub struct Neg;

#[function_node(crate = "crate", formula = "-x")]
impl Neg {
    fn forward(&self, x: &Array) -> Result<Array> {
        x.neg()
    }

    fn backward(&self, gy: &Variable) -> Result<Variable> {
        neg(gy)
    }
}

/// `x + c` for a constant `c`.
pub struct AddConstant {
    c: f64,
}

#[function_node(crate = "crate", name = "add_scalar", formula = "x + c")]
impl AddConstant {
    fn new(c: f64) -> Self {
        AddConstant { c }
    }

    fn forward(&self, x: &Array) -> Result<Array> {
        x.add_scalar(self.c)
    }

    fn backward(&self, gy: &Variable) -> Variable {
        gy.clone()
    }
}

/// `x * c` for a constant `c`.
pub struct MulConstant {
    c: f64,
}

#[function_node(crate = "crate", name = "mul_scalar", formula = "x * c")]
impl MulConstant {
    fn new(c: f64) -> Self {
        MulConstant { c }
    }

    fn forward(&self, x: &Array) -> Result<Array> {
        x.mul_scalar(self.c)
    }
}

/// `c - x` for a constant `c`.
pub struct SubFromConstant {
    c: f64,
}

#[function_node(crate = "crate", name = "rsub_scalar", formula = "c - x")]
impl SubFromConstant {
    fn new(c: f64) -> Self {
        SubFromConstant { c }
    }

    fn forward(&self, x: &Array) -> Result<Array> {
        x.rsub_scalar(self.c)
    }

    fn backward(&self, gy: &Variable) -> Result<Variable> {
        neg(gy)
    }
}

/// `c / x` for a constant `c`.
pub struct DivFromConstant {
    c: f64,
}

#[function_node(crate = "crate", name = "rdiv_scalar", formula = "c / x")]
impl DivFromConstant {
    fn new(c: f64) -> Self {
        DivFromConstant { c }
    }

    fn forward(&self, x: &Array) -> Result<Array> {
        x.rdiv_scalar(self.c)
    }
}

/// `x ** c` for a constant `c`.
pub struct PowConstant {
    c: f64,
}

#[function_node(crate = "crate", name = "pow_scalar", formula = "pow(x, c)")]
impl PowConstant {
    fn new(c: f64) -> Self {
        PowConstant { c }
    }

    fn forward(&self, x: &Array) -> Result<Array> {
        x.pow_scalar(self.c)
    }
}

/// `x - c`.
pub fn sub_scalar(x: &Variable, c: f64) -> Result<Variable> {
    add_scalar(x, -c)
}

/// `x / c`.
pub fn div_scalar(x: &Variable, c: f64) -> Result<Variable> {
    mul_scalar(x, 1.0 / c)
}

/// `max(a, b)` elementwise, broadcasting.
pub struct Maximum;

#[function_node(crate = "crate", formula = "a >= b ? a : b")]
impl Maximum {
    fn forward(&self, a: &Array, b: &Array) -> Result<Array> {
        a.maximum(b)
    }
}

/// Elements of `a` where `cond` holds, of `b` elsewhere (the node of [`where_`]).
struct Where {
    cond: Array,
}

#[function_node(crate = "crate", name = "where_node")]
impl Where {
    fn new(cond: &Array) -> Self {
        Where { cond: cond.clone() }
    }

    #[retain(meta(a, b))]
    fn forward(&self, a: &Array, b: &Array) -> Result<Array> {
        Array::where_cond(&self.cond, a, b)
    }

    fn backward(
        &self,
        a: &InputMeta,
        b: &InputMeta,
        gy: &Variable,
    ) -> Result<(Variable, Variable)> {
        let zero = Variable::constant(gy.array().zeros_like()?);
        Ok((
            sum_to(&where_(&self.cond, gy, &zero)?, a.shape())?,
            sum_to(&where_(&self.cond, &zero, gy)?, b.shape())?,
        ))
    }
}

/// Elements of `a` where `cond` (a bool array, not differentiated) holds, of `b` elsewhere.
pub fn where_(cond: &Array, a: &Variable, b: &Variable) -> Result<Variable> {
    where_node(a, b, cond)
}
