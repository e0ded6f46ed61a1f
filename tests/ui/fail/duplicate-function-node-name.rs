//! `name` given twice: an error at the second, not the last one silently winning.
use kusari::prelude::*;

struct Twice;

#[function_node(name = "a", name = "b")]
impl Twice {
    fn forward(&self, x: &Array) -> Result<Array> {
        x.mul_scalar(2.0)
    }

    fn backward(&self, gy: &Variable) -> Result<Variable> {
        gy.mul_scalar(2.0)
    }
}

fn main() {}
