//! `forward_cpu` with a `forward_gpu` method of the same shape instead of a kernel attribute.
use kusari::prelude::*;

struct Double;

#[function_node]
impl Double {
    fn forward_cpu(&self, x: &Array) -> Result<Array> {
        x.mul_scalar(2.0)
    }

    fn forward_gpu(&self, x: &Array) -> Result<Array> {
        x + x
    }

    fn backward(&self, gy: &Variable) -> Result<Variable> {
        gy.mul_scalar(2.0)
    }
}

#[test]
fn accepted_and_runs() -> Result<()> {
    let x = Variable::new(Array::from_vec(vec![1.5, 2.0], &[2])?);
    let y = double(&x)?;
    assert_eq!(y.array().to_vec::<f64>()?, [3.0, 4.0]);
    y.set_grad_array(Array::ones(&[2], DType::F64)?)?;
    y.backward()?;
    assert_eq!(
        x.grad_array().expect("a gradient").to_vec::<f64>()?,
        [2.0, 2.0]
    );
    Ok(())
}
