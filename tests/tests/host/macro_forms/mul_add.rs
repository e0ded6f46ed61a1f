//! The target from the macro's docs: a kernel attribute and `#[retain]`.
use kusari::prelude::*;

/// f(x, y, z) = x * y + z
struct MulAdd;

#[function_node]
impl MulAdd {
    #[retain(x, y)]
    #[forward_gpu(inputs = "T x, T y, T z", outputs = "T w", body = "w = x * y + z;")]
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

fn var(values: &[f64]) -> Result<Variable> {
    Ok(Variable::new(Array::from_vec(
        values.to_vec(),
        &[values.len()],
    )?))
}

#[test]
fn accepted_and_runs() -> Result<()> {
    let (x, y, z) = (var(&[1.0, 2.0])?, var(&[3.0, 4.0])?, var(&[5.0, 6.0])?);
    let w = mul_add(&x, &y, &z)?;
    assert_eq!(w.array().to_vec::<f64>()?, [8.0, 14.0]);
    assert_eq!(w.creator_label().as_deref(), Some("MulAdd"));

    let (w,) = MulAdd.apply((&x, &y, &z))?;
    w.set_grad_array(Array::from_vec(vec![1.0, 10.0], &[2])?)?;
    w.backward()?;
    let grad = |v: &Variable| v.grad_array().expect("a gradient").to_vec::<f64>();
    assert_eq!(grad(&x)?, [3.0, 40.0]);
    assert_eq!(grad(&y)?, [1.0, 20.0]);
    assert_eq!(grad(&z)?, [1.0, 10.0]);
    Ok(())
}
