//! A gradient taken by value (`Variable`), not as `&Variable`.
use kusari::prelude::*;

struct Twice;

#[function_node]
impl Twice {
    fn forward(&self, x: &Array) -> Result<Array> {
        x.mul_scalar(2.0)
    }

    fn backward(&self, gy: Variable) -> Result<Variable> {
        gy.mul_scalar(2.0)
    }
}

fn main() {}
