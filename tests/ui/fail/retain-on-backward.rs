use kusari::prelude::*;

struct Square;

#[function_node]
impl Square {
    fn forward(&self, x: &Array) -> Result<Array> {
        x * x
    }

    #[retain(x)]
    fn backward(&self, gy: &Variable) -> Result<Variable> {
        gy.mul_scalar(2.0)
    }
}

fn main() {}
