//! MulAdd written by hand against the [`FunctionNode`] trait: what `#[function_node]` writes for
//! you ([`crate::muladd`] to [`crate::muladd_kernel`]). `forward` gets the inputs as a slice and
//! marks the retained ones on the context; `backward` fetches them from its context and gets one
//! `Option` per output gradient; the thin wrapper [`muladd`] is written by hand too.
//!
//! `07_muladd_by_hand.rs` (`cargo run --example muladd_by_hand`) applies it to random 3x2
//! `float32` inputs and differentiates it.

use kusari::prelude::*;

/// f(x, y, z) = x * y + z, elementwise.
pub struct MulAdd;

impl FunctionNode for MulAdd {
    fn forward(&mut self, ctx: &mut ForwardContext, inputs: &[Array]) -> Result<Vec<Array>> {
        // Backward needs x and y; z's gradient depends on no input, so z is not kept.
        ctx.retain_inputs(&[0, 1]);
        let (x, y, z) = (&inputs[0], &inputs[1], &inputs[2]);
        // One fused pass instead of `(x * y)? + z`: no temporary for x * y.
        Ok(vec![x.mul_add(y, z)?])
    }

    fn backward(
        &self,
        ctx: &BackwardContext<'_>,
        _target_input_indexes: &[usize],
        grad_outputs: &[Option<Variable>],
    ) -> Result<Vec<Option<Variable>>> {
        // Retained inputs come back as variables: this backward is itself differentiable.
        let (x, y) = (ctx.retained_input(0)?, ctx.retained_input(1)?);
        let gw = grad_outputs[0]
            .as_ref()
            .expect("backward runs only when its single output has a gradient");
        let gx = (&y * gw)?;
        let gy = (&x * gw)?;
        let gz = gw.clone();
        Ok(vec![Some(gx), Some(gy), Some(gz)])
    }
}

/// The thin wrapper that hides the node: every function in `kusari::functions` looks like this.
pub fn muladd(x: &Variable, y: &Variable, z: &Variable) -> Result<Variable> {
    Ok(MulAdd.apply(&[x, y, z])?.remove(0))
}
