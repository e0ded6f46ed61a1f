use kusari::prelude::*;

/// No `backward`: it is derived from the formula, and so is what the op keeps.
struct Cube;

#[function_node(formula = "x * x * x")]
impl Cube {
    #[retain(x)]
    fn forward(&self, x: &Array) -> Result<Array> {
        x.mul(x)?.mul(x)
    }
}

fn main() {}
