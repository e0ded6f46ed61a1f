//! The gradients of two outputs as one slice: one error at the slice, none about the count.
use kusari::prelude::*;

struct Fork;

#[function_node]
impl Fork {
    fn forward(&self, x: &Array) -> Result<(Array, Array)> {
        Ok((x.clone(), x.mul_scalar(2.0)?))
    }

    fn backward(&self, grad_outputs: &[Option<Variable>]) -> Result<Variable> {
        Ok(grad_outputs[0].clone().expect("a gradient"))
    }
}

fn main() {}
