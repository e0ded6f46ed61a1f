use kusari::prelude::*;

struct BroadcastAdd;

#[function_node]
impl BroadcastAdd {
    #[retain(shape(a), meta(b))]
    fn forward(&self, a: &Array, b: &Array) -> Result<Array> {
        a + b
    }

    fn backward(&self, b: &InputMeta, gy: &Variable) -> Result<(Variable, Variable)> {
        Ok((gy.clone(), F::sum_to(gy, b.shape())?))
    }
}

fn main() {}
