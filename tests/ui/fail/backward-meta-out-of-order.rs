use kusari::prelude::*;

struct Scale;

#[function_node]
impl Scale {
    #[retain(meta(a), b)]
    fn forward(&self, a: &Array, b: &Array) -> Result<Array> {
        a * b
    }

    fn backward(&self, b: &Variable, a: &InputMeta, gy: &Variable) -> Result<(Variable, Variable)> {
        Ok((F::sum_to(&(gy * b)?, a.shape())?, gy.clone()))
    }
}

fn main() {}
