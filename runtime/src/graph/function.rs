//! Old-style functions (Chainer's `Function`): forward and backward both on arrays.
//!
//! They run through an adapter [`FunctionNode`] that retains every input. Their gradients are
//! computed on arrays, so they cannot be differentiated again: doing so is an error naming the
//! function, not a silently wrong result.

use std::borrow::Cow;

use super::function_node::{BackwardContext, ForwardContext, FunctionNode, apply};
use super::node::Variable;
use crate::Array;
use crate::config;
use crate::error::{Error, Result};

/// An old-style function: array-level `forward` and `backward` (Chainer's `Function`).
///
/// ```
/// use kusari::prelude::*;
///
/// struct Square;
/// impl Function for Square {
///     fn forward(&mut self, x: &[Array]) -> Result<Vec<Array>> {
///         Ok(vec![(&x[0] * &x[0])?])
///     }
///     fn backward(&self, x: &[Array], gy: &[Option<Array>]) -> Result<Vec<Option<Array>>> {
///         let gy = gy[0].as_ref().expect("one output");
///         Ok(vec![Some(((&x[0] * gy)? * 2.0)?)])
///     }
/// }
///
/// # fn main() -> Result<()> {
/// let x = Variable::new(Array::from_vec(vec![3.0f64], &[1])?);
/// let y = Square.call(&[&x])?.remove(0);
/// y.backward()?;
/// assert_eq!(x.grad_array().unwrap().to_vec::<f64>()?, vec![6.0]);
/// # Ok(()) }
/// ```
pub trait Function: Send + Sync + 'static {
    /// The name used in messages; the type's name by default.
    fn label(&self) -> Cow<'static, str> {
        let full = std::any::type_name::<Self>();
        Cow::Borrowed(full.rsplit("::").next().unwrap_or(full))
    }

    /// Output arrays from input arrays.
    fn forward(&mut self, inputs: &[Array]) -> Result<Vec<Array>>;

    /// Input gradients from the inputs and the output gradients (`None` where none flowed).
    fn backward(
        &self,
        inputs: &[Array],
        grad_outputs: &[Option<Array>],
    ) -> Result<Vec<Option<Array>>>;

    /// Applies the function to variables, recording it in the graph.
    fn call(self, inputs: &[&Variable]) -> Result<Vec<Variable>>
    where
        Self: Sized,
    {
        apply(FunctionAdapter(self), inputs)
    }
}

struct FunctionAdapter<F>(F);

impl<F: Function> FunctionNode for FunctionAdapter<F> {
    fn label(&self) -> Cow<'static, str> {
        self.0.label()
    }

    fn forward(&mut self, ctx: &mut ForwardContext, inputs: &[Array]) -> Result<Vec<Array>> {
        ctx.retain_inputs(&(0..inputs.len()).collect::<Vec<_>>());
        self.0.forward(inputs)
    }

    fn backward(
        &self,
        ctx: &BackwardContext<'_>,
        _: &[usize],
        grad_outputs: &[Option<Variable>],
    ) -> Result<Vec<Option<Variable>>> {
        let inputs = ctx.retained_inputs();
        let xs: Vec<Array> = inputs.iter().map(|v| v.array().clone()).collect();
        let gys: Vec<Option<Array>> = grad_outputs
            .iter()
            .map(|g| g.as_ref().map(|g| g.array().clone()))
            .collect();
        let gxs = self.0.backward(&xs, &gys)?;
        if !config::enable_backprop() {
            return Ok(gxs.into_iter().map(|g| g.map(Variable::constant)).collect());
        }
        // Double backprop was asked for: link the gradients to what they were computed from,
        // through a node whose own backward reports that this cannot be differentiated.
        let present: Vec<Array> = gxs.iter().flatten().cloned().collect();
        if present.is_empty() {
            return Ok(gxs.into_iter().map(|_| None).collect());
        }
        let mut sources: Vec<&Variable> = inputs.iter().collect();
        sources.extend(grad_outputs.iter().flatten());
        let mut linked = apply(
            OldStyleGrad {
                label: self.0.label(),
                grads: present,
            },
            &sources,
        )?
        .into_iter();
        Ok(gxs
            .into_iter()
            .map(|g| g.and_then(|_| linked.next()))
            .collect())
    }
}

/// Gradients of an old-style function, recorded so that differentiating them fails clearly.
struct OldStyleGrad {
    label: Cow<'static, str>,
    grads: Vec<Array>,
}

impl FunctionNode for OldStyleGrad {
    fn label(&self) -> Cow<'static, str> {
        format!("GradientOf{}", self.label).into()
    }

    fn forward(&mut self, _: &mut ForwardContext, _: &[Array]) -> Result<Vec<Array>> {
        Ok(std::mem::take(&mut self.grads))
    }

    fn backward(
        &self,
        _: &BackwardContext<'_>,
        _: &[usize],
        _: &[Option<Variable>],
    ) -> Result<Vec<Option<Variable>>> {
        Err(Error::DoubleBackwardUnsupported {
            function: self.label.clone().into_owned(),
        })
    }
}
