use kusari::prelude::*;

struct Größe;

#[function_node]
impl Größe {
    #[forward_gpu(inputs = "T x", outputs = "T y", body = "y = x * 2;")]
    fn forward(&self, x: &Array) -> Result<Array> {
        x.mul_scalar(2.0)
    }

    fn backward(&self, gy: &Variable) -> Result<Variable> {
        gy.mul_scalar(2.0)
    }
}

fn main() {}
