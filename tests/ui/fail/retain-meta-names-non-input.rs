use kusari::prelude::*;

struct BroadcastAdd;

#[function_node]
impl BroadcastAdd {
    #[retain(meta(a, c))]
    fn forward(&self, a: &Array, b: &Array) -> Result<Array> {
        a + b
    }

    fn backward(&self, a: &InputMeta, gy: &Variable) -> Result<(Variable, Variable)> {
        Ok((F::sum_to(gy, a.shape())?, gy.clone()))
    }
}

fn main() {}
