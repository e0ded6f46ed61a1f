use kusari::prelude::*;

struct Twice;

#[function_node]
impl Twice {
    // The preamble, loop_prep and after_loop are checked as the body is, each at its string.
    #[forward_gpu(
        inputs = "T x",
        outputs = "T y",
        preamble = "__device__ T twice(T v) { return v * 2; } }",
        loop_prep = "#define HIDE {",
        after_loop = "(",
        body = "y = twice(x);"
    )]
    fn forward(&self, x: &Array) -> Result<Array> {
        x.mul_scalar(2.0)
    }

    fn backward(&self, gy: &Variable) -> Result<Variable> {
        gy.mul_scalar(2.0)
    }
}

fn main() {}
