use kusari::prelude::*;

struct MulAdd;

#[function_node]
impl MulAdd {
    #[retain(x)]
    fn forward(&self, x: &Array, y: &Array, z: &Array) -> Result<Array> {
        x * y + z
    }

    fn backward(
        &self,
        x: &Variable,
        y: &Variable,
        gw: &Variable,
    ) -> Result<(Variable, Variable, Variable)> {
        Ok(((y * gw)?, (x * gw)?, gw.clone()))
    }
}

// The generated wrapper and typed apply still exist (as stubs), so these calls add no error.
#[allow(dead_code)]
fn uses_generated_items() -> Result<()> {
    let v = Variable::new(Array::ones(&[2], DType::F32)?);
    let w = mul_add(&v, &v, &v)?;
    let (w2,) = MulAdd.apply((&v, &v, &w))?;
    println!("{:?}", w2.shape());
    Ok(())
}

fn main() {}
