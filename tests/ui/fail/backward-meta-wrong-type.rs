//! A `meta(b)` input taken as `&Array`: backward takes it as `&InputMeta`.
use kusari::prelude::*;

struct BroadcastAdd;

#[function_node]
impl BroadcastAdd {
    #[retain(meta(a, b))]
    fn forward(&self, a: &Array, b: &Array) -> Result<Array> {
        a + b
    }

    fn backward(&self, a: &InputMeta, b: &Array, gy: &Variable) -> Result<(Variable, Variable)> {
        Ok((F::sum_to(gy, a.shape())?, F::sum_to(gy, b.shape())?))
    }
}

fn main() {}
