use kusari::prelude::*;

struct MulAdd;

#[function_node]
impl MulAdd {
    #[retain(x, y)]
    fn forward(&self, x: &Array, y: &Array, z: &Array) -> Result<Array> {
        x * y + z
    }

    fn backward(&self, x: &Variable, y: &Variable, gw: &Variable) -> Result<(Variable, Variable)> {
        Ok(((y * gw)?, (x * gw)?))
    }
}

fn main() {}
