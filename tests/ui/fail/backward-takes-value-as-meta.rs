use kusari::prelude::*;

struct Scale;

#[function_node]
impl Scale {
    #[retain(a, b)]
    fn forward(&self, a: &Array, b: &Array) -> Result<Array> {
        a * b
    }

    fn backward(&self, a: &InputMeta, b: &Variable, gy: &Variable) -> Result<(Variable, Variable)> {
        Ok((F::sum_to(&(gy * b)?, a.shape())?, gy.clone()))
    }
}

fn main() {}
