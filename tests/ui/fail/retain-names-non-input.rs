use kusari::prelude::*;

struct MulAdd;

#[function_node]
impl MulAdd {
    #[retain(x, w)]
    fn forward(&self, x: &Array, y: &Array, z: &Array) -> Result<Array> {
        x * y + z
    }

    fn backward(&self, x: &Variable, gw: &Variable) -> Result<(Variable, Variable, Variable)> {
        Ok((gw.clone(), (x * gw)?, gw.clone()))
    }
}

fn main() {}
