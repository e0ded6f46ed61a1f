//! `needs: &[usize]` before the gradient: it comes last.
use kusari::prelude::*;

struct Product;

#[function_node]
impl Product {
    #[retain(x, y)]
    fn forward(&self, x: &Array, y: &Array) -> Result<Array> {
        x * y
    }

    fn backward(
        &self,
        x: &Variable,
        y: &Variable,
        needs: &[usize],
        gz: &Variable,
    ) -> Result<(Variable, Variable)> {
        let _ = needs;
        Ok(((y * gz)?, (x * gz)?))
    }
}

fn main() {}
