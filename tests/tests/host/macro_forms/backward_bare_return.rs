//! A backward that cannot fail returns its gradients bare, without `Result`.
use kusari::prelude::*;

struct Identity;

#[function_node]
impl Identity {
    fn forward(&self, x: &Array) -> Result<Array> {
        Ok(x.clone())
    }

    fn backward(&self, gy: &Variable) -> Variable {
        gy.clone()
    }
}

/// Two inputs, a bare tuple of optional gradients.
struct First;

#[function_node]
impl First {
    fn forward(&self, x: &Array, _y: &Array) -> Result<Array> {
        Ok(x.clone())
    }

    fn backward(&self, gy: &Variable) -> (Option<Variable>, Option<Variable>) {
        (Some(gy.clone()), None)
    }
}

#[test]
fn accepted_and_runs() -> Result<()> {
    let x = Variable::new(Array::from_vec(vec![4.0], &[1])?);
    let y = Variable::new(Array::from_vec(vec![9.0], &[1])?);
    let z = first(&identity(&x)?, &y)?;
    assert_eq!(z.array().to_vec::<f64>()?, [4.0]);
    z.backward()?;
    assert_eq!(x.grad_array().expect("a gradient").to_vec::<f64>()?, [1.0]);
    assert!(y.grad_array().is_none());
    Ok(())
}
