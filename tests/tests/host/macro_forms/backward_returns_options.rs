//! A backward returning `Option<Variable>` per input: `None` for an input with no gradient.
use kusari::prelude::*;

/// x shifted by a constant offset array that gets no gradient.
struct Shift;

#[function_node]
impl Shift {
    fn forward(&self, x: &Array, offset: &Array) -> Result<Array> {
        x + offset
    }

    fn backward(&self, gy: &Variable) -> Result<(Option<Variable>, Option<Variable>)> {
        Ok((Some(gy.clone()), None))
    }
}

#[test]
fn accepted_and_runs() -> Result<()> {
    let x = Variable::new(Array::from_vec(vec![1.0], &[1])?);
    let offset = Variable::new(Array::from_vec(vec![4.0], &[1])?);
    let y = shift(&x, &offset)?;
    assert_eq!(y.array().to_vec::<f64>()?, [5.0]);
    y.backward()?;
    assert_eq!(x.grad_array().expect("a gradient").to_vec::<f64>()?, [1.0]);
    assert!(offset.grad_array().is_none());
    Ok(())
}
