//! Arithmetic: `+ - * /`, negation, powers, maximum, `where`, and their scalar forms.

use super::{apply1, only, sum_to};
use crate::error::Result;
use crate::graph::{BackwardContext, ForwardContext, FunctionNode};
use crate::{function_node, Array, Variable};

type Grads = Result<Vec<Option<Variable>>>;

/// Sums `g` back to the shape of input `i` (undoing broadcasting).
fn to_input(ctx: &BackwardContext<'_>, i: usize, g: Result<Variable>) -> Result<Option<Variable>> {
    Ok(Some(sum_to(&g?, ctx.input_shape(i)?)?))
}

// Add, Sub and Where are written against the trait: their backward needs the inputs' shapes
// (to sum broadcast gradients back) but not their values, and a `#[function_node]` backward
// sees only retained values. Retaining both inputs just for their shapes would keep them alive
// for nothing; the macro lacks a way to ask for input shapes (a gap noted for later).
struct Add;
impl FunctionNode for Add {
    fn forward(&mut self, _: &mut ForwardContext, x: &[Array]) -> Result<Vec<Array>> {
        Ok(vec![x[0].add(&x[1])?])
    }
    fn backward(&self, ctx: &BackwardContext<'_>, _: &[usize], gys: &[Option<Variable>]) -> Grads {
        let gy = only(gys);
        Ok(vec![
            to_input(ctx, 0, Ok(gy.clone()))?,
            to_input(ctx, 1, Ok(gy.clone()))?,
        ])
    }
}

/// `a + b`, broadcasting.
pub fn add(a: &Variable, b: &Variable) -> Result<Variable> {
    apply1(Add, &[a, b])
}

struct Sub;
impl FunctionNode for Sub {
    fn forward(&mut self, _: &mut ForwardContext, x: &[Array]) -> Result<Vec<Array>> {
        Ok(vec![x[0].sub(&x[1])?])
    }
    fn backward(&self, ctx: &BackwardContext<'_>, _: &[usize], gys: &[Option<Variable>]) -> Grads {
        let gy = only(gys);
        Ok(vec![
            to_input(ctx, 0, Ok(gy.clone()))?,
            to_input(ctx, 1, neg(gy))?,
        ])
    }
}

/// `a - b`, broadcasting.
pub fn sub(a: &Variable, b: &Variable) -> Result<Variable> {
    apply1(Sub, &[a, b])
}

/// `a * b`, broadcasting.
pub struct Mul;

#[function_node(crate = "crate")]
impl Mul {
    #[retain(a, b)]
    #[forward_gpu(inputs = "T a, T b", outputs = "T y", body = "y = a * b;")]
    fn forward(&self, a: &Array, b: &Array) -> Result<Array> {
        a.mul(b)
    }

    fn backward(
        &self,
        a: &Variable,
        b: &Variable,
        gy: &Variable,
        needs: &[usize],
    ) -> Result<(Option<Variable>, Option<Variable>)> {
        Ok((
            needed(needs, 0, || sum_to(&mul(gy, b)?, a.shape()))?,
            needed(needs, 1, || sum_to(&mul(gy, a)?, b.shape()))?,
        ))
    }
}

/// `a / b`, broadcasting.
pub struct Div;

#[function_node(crate = "crate")]
impl Div {
    #[retain(a, b)]
    // Integer division by zero gives 0, as on the host (`T(0.5) == T(0)` only for integers).
    #[forward_gpu(
        inputs = "T a, T b",
        outputs = "T y",
        body = "y = (T(0.5) == T(0) && b == T(0)) ? T(0) : T(a / b);"
    )]
    fn forward(&self, a: &Array, b: &Array) -> Result<Array> {
        a.div(b)
    }

    fn backward(
        &self,
        a: &Variable,
        b: &Variable,
        gy: &Variable,
        needs: &[usize],
    ) -> Result<(Variable, Option<Variable>)> {
        let ga = div(gy, b)?;
        // d(a/b)/db = -a / b² = -(gy / b) * (a / b)
        let gb = needed(needs, 1, || {
            sum_to(&neg(&mul(&ga, &div(a, b)?)?)?, b.shape())
        })?;
        Ok((sum_to(&ga, a.shape())?, gb))
    }
}

/// `-x`.
pub struct Neg;

#[function_node(crate = "crate")]
impl Neg {
    #[forward_gpu(inputs = "T x", outputs = "T y", body = "y = -x;")]
    fn forward(&self, x: &Array) -> Result<Array> {
        x.neg()
    }

    fn backward(&self, gy: &Variable) -> Result<Variable> {
        neg(gy)
    }
}

/// The gradient for input `i` if it is needed (`target_input_indexes`), else `None`.
fn needed(
    needs: &[usize],
    i: usize,
    grad: impl FnOnce() -> Result<Variable>,
) -> Result<Option<Variable>> {
    if needs.contains(&i) {
        grad().map(Some)
    } else {
        Ok(None)
    }
}

/// `x + c` for a constant `c`.
pub struct AddConstant {
    c: f64,
}

#[function_node(crate = "crate", name = "add_scalar")]
impl AddConstant {
    fn new(c: f64) -> Self {
        AddConstant { c }
    }

    #[forward_gpu(inputs = "T x", outputs = "T y", params = "T c", body = "y = x + c;")]
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

#[function_node(crate = "crate", name = "mul_scalar")]
impl MulConstant {
    fn new(c: f64) -> Self {
        MulConstant { c }
    }

    #[forward_gpu(inputs = "T x", outputs = "T y", params = "T c", body = "y = x * c;")]
    fn forward(&self, x: &Array) -> Result<Array> {
        x.mul_scalar(self.c)
    }

    fn backward(&self, gy: &Variable) -> Result<Variable> {
        mul_scalar(gy, self.c)
    }
}

/// `c - x` for a constant `c`.
pub struct SubFromConstant {
    c: f64,
}

#[function_node(crate = "crate", name = "rsub_scalar")]
impl SubFromConstant {
    fn new(c: f64) -> Self {
        SubFromConstant { c }
    }

    #[forward_gpu(inputs = "T x", outputs = "T y", params = "T c", body = "y = c - x;")]
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

#[function_node(crate = "crate", name = "rdiv_scalar")]
impl DivFromConstant {
    fn new(c: f64) -> Self {
        DivFromConstant { c }
    }

    #[retain(x)]
    #[forward_gpu(
        inputs = "T x",
        outputs = "T y",
        params = "T c",
        body = "y = (T(0.5) == T(0) && x == T(0)) ? T(0) : T(c / x);"
    )]
    fn forward(&self, x: &Array) -> Result<Array> {
        x.rdiv_scalar(self.c)
    }

    fn backward(&self, x: &Variable, gy: &Variable) -> Result<Variable> {
        // d(c/x)/dx = -c / x²
        mul_scalar(&div(gy, &mul(x, x)?)?, -self.c)
    }
}

/// `x ** c` for a constant `c`.
pub struct PowConstant {
    c: f64,
}

#[function_node(crate = "crate", name = "pow_scalar")]
impl PowConstant {
    fn new(c: f64) -> Self {
        PowConstant { c }
    }

    #[retain(x)]
    #[forward_gpu(
        inputs = "T x",
        outputs = "T y",
        params = "T c",
        body = "y = pow(x, c);",
        dtypes = "float"
    )]
    fn forward(&self, x: &Array) -> Result<Array> {
        x.pow_scalar(self.c)
    }

    fn backward(&self, x: &Variable, gy: &Variable) -> Result<Variable> {
        // d(x^c)/dx = c x^(c-1)
        mul(gy, &mul_scalar(&pow_scalar(x, self.c - 1.0)?, self.c)?)
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

/// `a ** b` elementwise, broadcasting (floating point).
pub struct Pow;

#[function_node(crate = "crate")]
impl Pow {
    #[retain(a, b, output = 0)]
    #[forward_gpu(
        inputs = "T a, T b",
        outputs = "T y",
        body = "y = pow(a, b);",
        dtypes = "float"
    )]
    fn forward(&self, a: &Array, b: &Array) -> Result<Array> {
        a.pow(b)
    }

    fn backward(
        &self,
        a: &Variable,
        b: &Variable,
        y: &Variable,
        gy: &Variable,
        needs: &[usize],
    ) -> Result<(Option<Variable>, Option<Variable>)> {
        // d(a^b)/da = b a^(b-1) = b y / a;  d(a^b)/db = y ln a
        Ok((
            needed(needs, 0, || {
                sum_to(&mul(gy, &div(&mul(b, y)?, a)?)?, a.shape())
            })?,
            needed(needs, 1, || {
                sum_to(&mul(gy, &mul(y, &super::log(a)?)?)?, b.shape())
            })?,
        ))
    }
}

/// `max(a, b)` elementwise, broadcasting.
pub struct Maximum;

#[function_node(crate = "crate")]
impl Maximum {
    #[retain(a, b)]
    // NaN propagates, as in the host's maximum (`a != a` holds only for NaN).
    #[forward_gpu(
        inputs = "T a, T b",
        outputs = "T y",
        body = "y = (a != a || a >= b) ? a : b;"
    )]
    fn forward(&self, a: &Array, b: &Array) -> Result<Array> {
        a.maximum(b)
    }

    fn backward(&self, a: &Variable, b: &Variable, gy: &Variable) -> Result<(Variable, Variable)> {
        // Ties send the gradient to `a`, as Chainer does.
        let a_wins = a.array().ge(b.array())?;
        let zero = Variable::constant(gy.array().zeros_like()?);
        Ok((
            sum_to(&where_(&a_wins, gy, &zero)?, a.shape())?,
            sum_to(&where_(&a_wins, &zero, gy)?, b.shape())?,
        ))
    }
}

struct Where {
    cond: Array,
}
impl FunctionNode for Where {
    fn forward(&mut self, _: &mut ForwardContext, x: &[Array]) -> Result<Vec<Array>> {
        Ok(vec![Array::where_cond(&self.cond, &x[0], &x[1])?])
    }
    fn backward(&self, ctx: &BackwardContext<'_>, _: &[usize], gys: &[Option<Variable>]) -> Grads {
        let gy = only(gys);
        let zero = Variable::constant(gy.array().zeros_like()?);
        Ok(vec![
            to_input(ctx, 0, where_(&self.cond, gy, &zero))?,
            to_input(ctx, 1, where_(&self.cond, &zero, gy))?,
        ])
    }
}

/// Elements of `a` where `cond` (a bool array, not differentiated) holds, of `b` elsewhere.
pub fn where_(cond: &Array, a: &Variable, b: &Variable) -> Result<Variable> {
    apply1(Where { cond: cond.clone() }, &[a, b])
}
