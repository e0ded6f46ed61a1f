//! Chainer's `backward(self, inputs, grad_outputs)`: the gradients as one slice.
use kusari::prelude::*;

struct MulAdd;

#[function_node]
impl MulAdd {
    #[retain(x, y)]
    fn forward(&self, x: &Array, y: &Array, z: &Array) -> Result<Array> {
        x * y + z
    }

    fn backward(
        &self,
        x: &Variable,
        y: &Variable,
        grad_outputs: &[Option<Variable>],
    ) -> Result<(Variable, Variable, Variable)> {
        let gw = grad_outputs[0].clone().expect("a gradient");
        Ok(((y * &gw)?, (x * &gw)?, gw))
    }
}

fn main() {}
