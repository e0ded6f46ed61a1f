//! #[retain(..)] and #[forward_gpu(..)] each written twice on one forward: an error at each
//! second attribute.
use kusari::prelude::*;

struct Product;

#[function_node]
impl Product {
    #[retain(x)]
    #[retain(y)]
    #[forward_gpu(inputs = "T x, T y", outputs = "T z", body = "z = x * y;")]
    #[forward_gpu(inputs = "T x, T y", outputs = "T z", body = "z = y * x;")]
    fn forward(&self, x: &Array, y: &Array) -> Result<Array> {
        x * y
    }

    fn backward(&self, x: &Variable, gz: &Variable) -> Result<(Variable, Variable)> {
        Ok((gz.clone(), (x * gz)?))
    }
}

fn main() {}
