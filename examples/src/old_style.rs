//! MulAdd as an old-style [`Function`]: forward and backward both on arrays. First-order
//! gradients work as with a FunctionNode; differentiating such a gradient again is a clear error,
//! because an array-level backward leaves no graph to walk.
//!
//! `08_old_style.rs` (`cargo run --example old_style`) takes its first-order gradients and shows
//! the error of the second order.

use kusari::prelude::*;

/// f(x, y, z) = x * y + z, old style: every input is kept for backward automatically.
pub struct MulAdd;

impl Function for MulAdd {
    fn forward(&mut self, inputs: &[Array]) -> Result<Vec<Array>> {
        let (x, y, z) = (&inputs[0], &inputs[1], &inputs[2]);
        Ok(vec![x.mul_add(y, z)?])
    }

    fn backward(
        &self,
        inputs: &[Array],
        grad_outputs: &[Option<Array>],
    ) -> Result<Vec<Option<Array>>> {
        let (x, y) = (&inputs[0], &inputs[1]);
        let gw = grad_outputs[0]
            .as_ref()
            .expect("backward runs only when its single output has a gradient");
        Ok(vec![Some((y * gw)?), Some((x * gw)?), Some(gw.clone())])
    }
}

/// The thin wrapper: `call` applies the old-style function to variables.
pub fn muladd(x: &Variable, y: &Variable, z: &Variable) -> Result<Variable> {
    Ok(MulAdd.call(&[x, y, z])?.remove(0))
}
