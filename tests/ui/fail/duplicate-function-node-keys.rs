//! `crate` and `non_differentiable` given twice: an error at each second key.
use kusari::prelude::*;

struct Floor;

#[function_node(crate = "::kusari", non_differentiable, crate = "::kusari", non_differentiable)]
impl Floor {
    fn forward(&self, x: &Array) -> Result<Array> {
        Ok(x.clone())
    }
}

fn main() {}
