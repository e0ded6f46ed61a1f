//! Elementwise math: exp, log, sqrt, tanh, sigmoid, relu.

use super::{apply1, div, mul, mul_scalar, only, rsub_scalar};
use crate::error::Result;
use crate::function_node::{BackwardContext, ForwardContext, FunctionNode};
use crate::{Array, Variable};

type Grads = Result<Vec<Option<Variable>>>;

struct Exp;
impl FunctionNode for Exp {
    fn forward(&mut self, ctx: &mut ForwardContext, x: &[Array]) -> Result<Vec<Array>> {
        ctx.retain_outputs(&[0]);
        Ok(vec![x[0].exp()?])
    }
    fn backward(&self, ctx: &BackwardContext<'_>, _: &[usize], gys: &[Option<Variable>]) -> Grads {
        Ok(vec![Some(mul(only(gys), &ctx.retained_output(0)?)?)])
    }
}

/// `e ** x`.
pub fn exp(x: &Variable) -> Result<Variable> {
    apply1(Exp, &[x])
}

struct Log;
impl FunctionNode for Log {
    fn forward(&mut self, ctx: &mut ForwardContext, x: &[Array]) -> Result<Vec<Array>> {
        ctx.retain_inputs(&[0]);
        Ok(vec![x[0].log()?])
    }
    fn backward(&self, ctx: &BackwardContext<'_>, _: &[usize], gys: &[Option<Variable>]) -> Grads {
        Ok(vec![Some(div(only(gys), &ctx.retained_input(0)?)?)])
    }
}

/// Natural logarithm.
pub fn log(x: &Variable) -> Result<Variable> {
    apply1(Log, &[x])
}

struct Sqrt;
impl FunctionNode for Sqrt {
    fn forward(&mut self, ctx: &mut ForwardContext, x: &[Array]) -> Result<Vec<Array>> {
        ctx.retain_outputs(&[0]);
        Ok(vec![x[0].sqrt()?])
    }
    fn backward(&self, ctx: &BackwardContext<'_>, _: &[usize], gys: &[Option<Variable>]) -> Grads {
        let y = ctx.retained_output(0)?;
        Ok(vec![Some(div(only(gys), &mul_scalar(&y, 2.0)?)?)])
    }
}

/// Square root.
pub fn sqrt(x: &Variable) -> Result<Variable> {
    apply1(Sqrt, &[x])
}

struct Tanh;
impl FunctionNode for Tanh {
    fn forward(&mut self, ctx: &mut ForwardContext, x: &[Array]) -> Result<Vec<Array>> {
        ctx.retain_outputs(&[0]);
        Ok(vec![x[0].tanh()?])
    }
    fn backward(&self, ctx: &BackwardContext<'_>, _: &[usize], gys: &[Option<Variable>]) -> Grads {
        let y = ctx.retained_output(0)?;
        Ok(vec![Some(mul(
            only(gys),
            &rsub_scalar(&mul(&y, &y)?, 1.0)?,
        )?)])
    }
}

/// Hyperbolic tangent.
pub fn tanh(x: &Variable) -> Result<Variable> {
    apply1(Tanh, &[x])
}

struct Sigmoid;
impl FunctionNode for Sigmoid {
    fn forward(&mut self, ctx: &mut ForwardContext, x: &[Array]) -> Result<Vec<Array>> {
        ctx.retain_outputs(&[0]);
        Ok(vec![x[0].sigmoid()?])
    }
    fn backward(&self, ctx: &BackwardContext<'_>, _: &[usize], gys: &[Option<Variable>]) -> Grads {
        let y = ctx.retained_output(0)?;
        Ok(vec![Some(mul(
            only(gys),
            &mul(&y, &rsub_scalar(&y, 1.0)?)?,
        )?)])
    }
}

/// Logistic sigmoid.
pub fn sigmoid(x: &Variable) -> Result<Variable> {
    apply1(Sigmoid, &[x])
}

struct Relu;
impl FunctionNode for Relu {
    fn forward(&mut self, ctx: &mut ForwardContext, x: &[Array]) -> Result<Vec<Array>> {
        ctx.retain_outputs(&[0]);
        Ok(vec![x[0].relu()?])
    }
    fn backward(&self, ctx: &BackwardContext<'_>, _: &[usize], gys: &[Option<Variable>]) -> Grads {
        let y = ctx.retained_output(0)?;
        let mask = Variable::constant(y.array().gt_scalar(0.0)?.astype(y.dtype())?);
        Ok(vec![Some(mul(only(gys), &mask)?)])
    }
}

/// `max(x, 0)`.
pub fn relu(x: &Variable) -> Result<Variable> {
    apply1(Relu, &[x])
}
