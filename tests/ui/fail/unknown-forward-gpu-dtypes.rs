use kusari::prelude::*;

struct Exp;

#[function_node]
impl Exp {
    #[retain(output = 0)]
    #[forward_gpu(inputs = "T x", outputs = "T y", body = "y = exp(x);", dtypes = "floats")]
    fn forward(&self, x: &Array) -> Result<Array> {
        x.exp()
    }

    fn backward(&self, y: &Variable, gy: &Variable) -> Result<Variable> {
        gy * y
    }
}

fn main() {}
