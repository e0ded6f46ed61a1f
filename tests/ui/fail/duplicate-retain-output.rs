//! `output = 0` retained twice: an error at the second, and none about backward's parameters.
use kusari::prelude::*;

struct Exp;

#[function_node]
impl Exp {
    #[retain(output = 0, output = 0)]
    fn forward(&self, x: &Array) -> Result<Array> {
        x.exp()
    }

    fn backward(&self, y: &Variable, gy: &Variable) -> Result<Variable> {
        y * gy
    }
}

fn main() {}
