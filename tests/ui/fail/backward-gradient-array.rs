//! A gradient taken as an `&Array`: gradients are `Variable`s (they can be differentiated).
use kusari::prelude::*;

struct Twice;

#[function_node]
impl Twice {
    fn forward(&self, x: &Array) -> Result<Array> {
        x.mul_scalar(2.0)
    }

    fn backward(&self, gy: &Array) -> Result<Variable> {
        Ok(Variable::constant(gy.mul_scalar(2.0)?))
    }
}

fn main() {}
