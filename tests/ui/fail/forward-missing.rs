use kusari::prelude::*;

struct Twice;

#[function_node]
impl Twice {
    fn backward(&self, gy: &Variable) -> Result<Variable> {
        gy.mul_scalar(2.0)
    }
}

fn main() {}
