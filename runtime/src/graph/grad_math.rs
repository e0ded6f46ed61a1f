//! The two operations the backward pass itself applies to gradients: the sum of two gradients
//! of one variable, and the loss scaling of an initial gradient.
//!
//! They are recorded like any function (so gradients summed or scaled with double backprop on
//! can be differentiated again), but as the graph's own nodes: the built-in functions sit in a
//! layer above the graph. Their labels are those of the built-ins they match (`Add` and
//! `MulConstant`), so a recorded graph of gradients reads the same either way.

use std::borrow::Cow;

use super::function_node::{BackwardContext, ForwardContext, FunctionNode, apply};
use super::node::Variable;
use crate::Array;
use crate::error::Result;

/// `a + b` for two gradients of one variable. They have the variable's shape, dtype and device
/// (the backward pass checks every gradient against its variable), so nothing broadcasts.
pub(super) fn add_grads(a: &Variable, b: &Variable) -> Result<Variable> {
    Ok(apply(AddGrads, &[a, b])?.swap_remove(0))
}

/// `g * scale`.
pub(super) fn scale_grad(g: &Variable, scale: f64) -> Result<Variable> {
    Ok(apply(ScaleGrad { scale }, &[g])?.swap_remove(0))
}

/// The node of [`add_grads`].
struct AddGrads;

impl FunctionNode for AddGrads {
    fn label(&self) -> Cow<'static, str> {
        Cow::Borrowed("Add")
    }

    fn forward(&mut self, _: &mut ForwardContext, inputs: &[Array]) -> Result<Vec<Array>> {
        Ok(vec![inputs[0].add(&inputs[1])?])
    }

    fn backward(
        &self,
        _: &BackwardContext<'_>,
        _: &[usize],
        grad_outputs: &[Option<Variable>],
    ) -> Result<Vec<Option<Variable>>> {
        let gy = grad_outputs[0].clone();
        Ok(vec![gy.clone(), gy])
    }
}

/// The node of [`scale_grad`].
struct ScaleGrad {
    scale: f64,
}

impl FunctionNode for ScaleGrad {
    fn label(&self) -> Cow<'static, str> {
        Cow::Borrowed("MulConstant")
    }

    fn forward(&mut self, _: &mut ForwardContext, inputs: &[Array]) -> Result<Vec<Array>> {
        Ok(vec![inputs[0].mul_scalar(self.scale)?])
    }

    fn backward(
        &self,
        _: &BackwardContext<'_>,
        _: &[usize],
        grad_outputs: &[Option<Variable>],
    ) -> Result<Vec<Option<Variable>>> {
        let gx = grad_outputs[0]
            .as_ref()
            .map(|gy| scale_grad(gy, self.scale))
            .transpose()?;
        Ok(vec![gx])
    }
}
