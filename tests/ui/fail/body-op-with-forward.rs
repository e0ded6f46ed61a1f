use kusari::prelude::*;

struct Twice;

#[function_node(kernel(inputs = "T x", outputs = "T y", body = "y = x * 2"))]
impl Twice {
    fn forward(&self, x: &Array) -> Result<Array> {
        x.mul_scalar(2.0)
    }
}

fn main() {}
