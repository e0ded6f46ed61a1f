use kusari::prelude::*;

struct First;

#[function_node(formula = "x[0] * 2")]
impl First {
    fn forward(&self, x: &Array) -> Result<Array> {
        x.mul_scalar(2.0)
    }

    fn backward(&self, gy: &Variable) -> Result<Variable> {
        gy.mul_scalar(2.0)
    }
}

fn main() {}
