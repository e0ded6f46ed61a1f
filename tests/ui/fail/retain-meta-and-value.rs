use kusari::prelude::*;

struct Scale;

#[function_node]
impl Scale {
    #[retain(a, meta(a))]
    fn forward(&self, a: &Array, b: &Array) -> Result<Array> {
        a * b
    }

    fn backward(
        &self,
        a: &Variable,
        a_meta: &InputMeta,
        gy: &Variable,
    ) -> Result<(Variable, Variable)> {
        Ok((F::sum_to(gy, a_meta.shape())?, (gy * a)?))
    }
}

fn main() {}
