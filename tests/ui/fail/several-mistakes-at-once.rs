use kusari::prelude::*;

struct MulAdd;

#[function_node]
impl MulAdd {
    #[retain(x, y)]
    #[forward_gpu(inputs = "T x, T y, flaot z", outputs = "T w", body = "w = x * y + z;")]
    fn forward(&self, x: &Array, y: &Array, z: &Array) -> Result<Array> {
        x * y + z
    }

    fn backward(
        &self,
        x: &Variable,
        z: &Variable,
        gw: &Variable,
    ) -> Result<(Variable, Variable, Variable)> {
        Ok(((z * gw)?, (x * gw)?, gw.clone()))
    }
}

fn main() {}
