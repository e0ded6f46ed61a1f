//! `#[function_node(name = "muladd")]` renames the wrapper; the label stays the type's name.
use kusari::prelude::*;

struct MulAdd;

#[function_node(name = "muladd")]
impl MulAdd {
    #[retain(x, y)]
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

#[test]
fn accepted_and_runs() -> Result<()> {
    let v = |a: f64| Variable::new(Array::full(&[1], a, DType::F64).unwrap());
    let w = muladd(&v(2.0), &v(3.0), &v(1.0))?;
    assert_eq!(w.array().to_vec::<f64>()?, [7.0]);
    assert_eq!(w.creator_label().as_deref(), Some("MulAdd"));
    Ok(())
}
