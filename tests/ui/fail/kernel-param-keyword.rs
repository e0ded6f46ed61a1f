use kusari::prelude::*;

struct Twice;

#[function_node]
impl Twice {
    #[forward_gpu(inputs = "T x", outputs = "T int", body = "int = x * 2;")]
    fn forward(&self, x: &Array) -> Result<Array> {
        x.mul_scalar(2.0)
    }

    fn backward(&self, gy: &Variable) -> Result<Variable> {
        gy.mul_scalar(2.0)
    }
}

fn main() {}
