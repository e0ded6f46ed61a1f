//! An input retained twice: an error at the second, and none about backward's parameters.
use kusari::prelude::*;

struct Square;

#[function_node]
impl Square {
    #[retain(x, x)]
    fn forward(&self, x: &Array) -> Result<Array> {
        x * x
    }

    fn backward(&self, x: &Variable, gy: &Variable) -> Result<Variable> {
        (x * gy)?.mul_scalar(2.0)
    }
}

fn main() {}
