//! An optional gradient written `Option<Variable>`, not `Option<&Variable>`, and one written
//! `&Option<Variable>`: each is reported at its type.
use kusari::prelude::*;

struct Fork;

#[function_node]
impl Fork {
    fn forward(&self, x: &Array) -> Result<(Array, Array)> {
        Ok((x.clone(), x.mul_scalar(2.0)?))
    }

    fn backward(&self, ga: Option<Variable>, gb: &Option<Variable>) -> Result<Variable> {
        let _ = gb;
        Ok(ga.expect("a gradient"))
    }
}

fn main() {}
