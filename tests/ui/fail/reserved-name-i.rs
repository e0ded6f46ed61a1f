use kusari::prelude::*;

struct Twice;

#[function_node]
impl Twice {
    #[forward_gpu(inputs = "T i", outputs = "T y", body = "y = i * 2;")]
    fn forward(&self, i: &Array) -> Result<Array> {
        i.mul_scalar(2.0)
    }

    fn backward(&self, gy: &Variable) -> Result<Variable> {
        gy.mul_scalar(2.0)
    }
}

fn main() {}
