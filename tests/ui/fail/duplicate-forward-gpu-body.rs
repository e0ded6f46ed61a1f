//! `body` given twice in #[forward_gpu(..)]: an error at the second.
use kusari::prelude::*;

struct Twice;

#[function_node]
impl Twice {
    #[forward_gpu(inputs = "T x", outputs = "T y", body = "y = x * 2;", body = "y = x * 3;")]
    fn forward(&self, x: &Array) -> Result<Array> {
        x.mul_scalar(2.0)
    }

    fn backward(&self, gy: &Variable) -> Result<Variable> {
        gy.mul_scalar(2.0)
    }
}

fn main() {}
