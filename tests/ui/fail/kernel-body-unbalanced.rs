use kusari::prelude::*;

struct Twice;

#[function_node]
impl Twice {
    // The body closes the loop and the kernel, then defines a second kernel whose last two
    // braces the generated code closes.
    #[forward_gpu(
        inputs = "T x",
        outputs = "T y",
        body = "y = x * 2; } } extern \"C\" __global__ void evil(float* p) { { p[0] = 1;"
    )]
    fn forward(&self, x: &Array) -> Result<Array> {
        x.mul_scalar(2.0)
    }

    fn backward(&self, gy: &Variable) -> Result<Variable> {
        gy.mul_scalar(2.0)
    }
}

fn main() {}
