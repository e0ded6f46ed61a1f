//! Arithmetic: `+ - * /`, negation, powers, maximum, `where`, and their scalar forms.

use super::{apply1, only, sum_to};
use crate::error::Result;
use crate::function_node::{BackwardContext, ForwardContext, FunctionNode};
use crate::{Array, Variable};

type Grads = Result<Vec<Option<Variable>>>;

/// Sums `g` back to the shape of input `i` (undoing broadcasting).
fn to_input(ctx: &BackwardContext<'_>, i: usize, g: Result<Variable>) -> Result<Option<Variable>> {
    Ok(Some(sum_to(&g?, ctx.input_shape(i)?)?))
}

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

struct Mul;
impl FunctionNode for Mul {
    fn forward(&mut self, ctx: &mut ForwardContext, x: &[Array]) -> Result<Vec<Array>> {
        ctx.retain_inputs(&[0, 1]);
        Ok(vec![x[0].mul(&x[1])?])
    }
    fn backward(
        &self,
        ctx: &BackwardContext<'_>,
        targets: &[usize],
        gys: &[Option<Variable>],
    ) -> Grads {
        let gy = only(gys);
        let (a, b) = (ctx.retained_input(0)?, ctx.retained_input(1)?);
        Ok(vec![
            if targets.contains(&0) {
                to_input(ctx, 0, mul(gy, &b))?
            } else {
                None
            },
            if targets.contains(&1) {
                to_input(ctx, 1, mul(gy, &a))?
            } else {
                None
            },
        ])
    }
}

/// `a * b`, broadcasting.
pub fn mul(a: &Variable, b: &Variable) -> Result<Variable> {
    apply1(Mul, &[a, b])
}

struct Div;
impl FunctionNode for Div {
    fn forward(&mut self, ctx: &mut ForwardContext, x: &[Array]) -> Result<Vec<Array>> {
        ctx.retain_inputs(&[0, 1]);
        Ok(vec![x[0].div(&x[1])?])
    }
    fn backward(
        &self,
        ctx: &BackwardContext<'_>,
        targets: &[usize],
        gys: &[Option<Variable>],
    ) -> Grads {
        let gy = only(gys);
        let (a, b) = (ctx.retained_input(0)?, ctx.retained_input(1)?);
        let ga = div(gy, &b)?;
        let gb = if targets.contains(&1) {
            // d(a/b)/db = -a / b² = -(gy / b) * (a / b)
            to_input(ctx, 1, neg(&mul(&ga, &div(&a, &b)?)?))?
        } else {
            None
        };
        Ok(vec![to_input(ctx, 0, Ok(ga))?, gb])
    }
}

/// `a / b`, broadcasting.
pub fn div(a: &Variable, b: &Variable) -> Result<Variable> {
    apply1(Div, &[a, b])
}

struct Neg;
impl FunctionNode for Neg {
    fn forward(&mut self, _: &mut ForwardContext, x: &[Array]) -> Result<Vec<Array>> {
        Ok(vec![x[0].neg()?])
    }
    fn backward(&self, _: &BackwardContext<'_>, _: &[usize], gys: &[Option<Variable>]) -> Grads {
        Ok(vec![Some(neg(only(gys))?)])
    }
}

/// `-x`.
pub fn neg(x: &Variable) -> Result<Variable> {
    apply1(Neg, &[x])
}

/// `x op c` for a constant `c`, with the derivative `d(x op c)/dx` given as a function of `c`.
struct ScalarOp {
    op: ScalarKind,
    c: f64,
}

#[derive(Clone, Copy)]
enum ScalarKind {
    Add,
    Mul,
    RSub,
    RDiv,
    Pow,
}

impl FunctionNode for ScalarOp {
    fn label(&self) -> std::borrow::Cow<'static, str> {
        match self.op {
            ScalarKind::Add => "AddConstant",
            ScalarKind::Mul => "MulConstant",
            ScalarKind::RSub => "SubFromConstant",
            ScalarKind::RDiv => "DivFromConstant",
            ScalarKind::Pow => "PowConstant",
        }
        .into()
    }
    fn forward(&mut self, ctx: &mut ForwardContext, x: &[Array]) -> Result<Vec<Array>> {
        let x = &x[0];
        Ok(vec![match self.op {
            ScalarKind::Add => x.add_scalar(self.c)?,
            ScalarKind::Mul => x.mul_scalar(self.c)?,
            ScalarKind::RSub => x.rsub_scalar(self.c)?,
            ScalarKind::RDiv => {
                ctx.retain_inputs(&[0]);
                x.rdiv_scalar(self.c)?
            }
            ScalarKind::Pow => {
                ctx.retain_inputs(&[0]);
                x.pow_scalar(self.c)?
            }
        }])
    }
    fn backward(&self, ctx: &BackwardContext<'_>, _: &[usize], gys: &[Option<Variable>]) -> Grads {
        let gy = only(gys);
        let c = self.c;
        Ok(vec![Some(match self.op {
            ScalarKind::Add => gy.clone(),
            ScalarKind::Mul => mul_scalar(gy, c)?,
            ScalarKind::RSub => neg(gy)?,
            ScalarKind::RDiv => {
                // d(c/x)/dx = -c / x²
                let x = ctx.retained_input(0)?;
                mul_scalar(&div(gy, &mul(&x, &x)?)?, -c)?
            }
            ScalarKind::Pow => {
                // d(x^c)/dx = c x^(c-1)
                let x = ctx.retained_input(0)?;
                mul(gy, &mul_scalar(&pow_scalar(&x, c - 1.0)?, c)?)?
            }
        })])
    }
}

fn scalar_op(x: &Variable, op: ScalarKind, c: f64) -> Result<Variable> {
    apply1(ScalarOp { op, c }, &[x])
}

/// `x + c`.
pub fn add_scalar(x: &Variable, c: f64) -> Result<Variable> {
    scalar_op(x, ScalarKind::Add, c)
}

/// `x - c`.
pub fn sub_scalar(x: &Variable, c: f64) -> Result<Variable> {
    scalar_op(x, ScalarKind::Add, -c)
}

/// `c - x`.
pub fn rsub_scalar(x: &Variable, c: f64) -> Result<Variable> {
    scalar_op(x, ScalarKind::RSub, c)
}

/// `x * c`.
pub fn mul_scalar(x: &Variable, c: f64) -> Result<Variable> {
    scalar_op(x, ScalarKind::Mul, c)
}

/// `x / c`.
pub fn div_scalar(x: &Variable, c: f64) -> Result<Variable> {
    scalar_op(x, ScalarKind::Mul, 1.0 / c)
}

/// `c / x`.
pub fn rdiv_scalar(x: &Variable, c: f64) -> Result<Variable> {
    scalar_op(x, ScalarKind::RDiv, c)
}

/// `x ** c`.
pub fn pow_scalar(x: &Variable, c: f64) -> Result<Variable> {
    scalar_op(x, ScalarKind::Pow, c)
}

struct Pow;
impl FunctionNode for Pow {
    fn forward(&mut self, ctx: &mut ForwardContext, x: &[Array]) -> Result<Vec<Array>> {
        ctx.retain_inputs(&[0, 1]);
        ctx.retain_outputs(&[0]);
        Ok(vec![x[0].pow(&x[1])?])
    }
    fn backward(
        &self,
        ctx: &BackwardContext<'_>,
        targets: &[usize],
        gys: &[Option<Variable>],
    ) -> Grads {
        let gy = only(gys);
        let (a, b) = (ctx.retained_input(0)?, ctx.retained_input(1)?);
        let y = ctx.retained_output(0)?;
        // d(a^b)/da = b a^(b-1) = b y / a;  d(a^b)/db = y ln a
        let ga = if targets.contains(&0) {
            to_input(ctx, 0, mul(gy, &div(&mul(&b, &y)?, &a)?))?
        } else {
            None
        };
        let gb = if targets.contains(&1) {
            to_input(ctx, 1, mul(gy, &mul(&y, &super::log(&a)?)?))?
        } else {
            None
        };
        Ok(vec![ga, gb])
    }
}

/// `a ** b` elementwise, broadcasting (floating point).
pub fn pow(a: &Variable, b: &Variable) -> Result<Variable> {
    apply1(Pow, &[a, b])
}

struct Maximum;
impl FunctionNode for Maximum {
    fn forward(&mut self, ctx: &mut ForwardContext, x: &[Array]) -> Result<Vec<Array>> {
        ctx.retain_inputs(&[0, 1]);
        Ok(vec![x[0].maximum(&x[1])?])
    }
    fn backward(&self, ctx: &BackwardContext<'_>, _: &[usize], gys: &[Option<Variable>]) -> Grads {
        let gy = only(gys);
        let (a, b) = (ctx.retained_input(0)?, ctx.retained_input(1)?);
        // Ties send the gradient to `a`, as Chainer does.
        let a_wins = a.array().ge(b.array())?;
        let zero = Variable::constant(gy.array().zeros_like());
        Ok(vec![
            to_input(ctx, 0, where_(&a_wins, gy, &zero))?,
            to_input(ctx, 1, where_(&a_wins, &zero, gy))?,
        ])
    }
}

/// `max(a, b)` elementwise, broadcasting.
pub fn maximum(a: &Variable, b: &Variable) -> Result<Variable> {
    apply1(Maximum, &[a, b])
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
        let zero = Variable::constant(gy.array().zeros_like());
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
