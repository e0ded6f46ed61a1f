//! Every other key of #[forward_gpu(..)] given twice: an error at each second key.
use kusari::prelude::*;

struct Scale {
    alpha: f64,
}

#[function_node]
impl Scale {
    #[forward_gpu(
        inputs = "T x",
        inputs = "T x",
        outputs = "T y",
        outputs = "T y",
        params = "T alpha",
        params = "T alpha",
        name = "scale_a",
        name = "scale_b",
        dtypes = "float",
        dtypes = "numeric",
        preamble = "",
        preamble = "",
        loop_prep = "",
        loop_prep = "",
        after_loop = "",
        after_loop = "",
        body = "y = x * alpha;"
    )]
    fn forward(&self, x: &Array) -> Result<Array> {
        x.mul_scalar(self.alpha)
    }

    fn backward(&self, gy: &Variable) -> Result<Variable> {
        gy.mul_scalar(self.alpha)
    }
}

fn main() {}
