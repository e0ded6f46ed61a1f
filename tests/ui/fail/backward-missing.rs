use kusari::prelude::*;

struct Twice;

#[function_node]
impl Twice {
    fn forward(&self, x: &Array) -> Result<Array> {
        x.mul_scalar(2.0)
    }
}

fn main() {}
