use kusari::prelude::*;

struct Double;

#[function_node]
impl Double {
    #[retain(meta(output = 0))]
    fn forward(&self, x: &Array) -> Result<Array> {
        x * 2.0
    }

    fn backward(&self, gy: &Variable) -> Result<Variable> {
        gy * 2.0
    }
}

fn main() {}
