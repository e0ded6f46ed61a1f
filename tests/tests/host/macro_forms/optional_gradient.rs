//! A gradient parameter typed `Option<&Variable>` gets `None` when no gradient reached that
//! output; one typed `&Variable` gets zeros.
use std::cell::Cell;

use kusari::prelude::*;

thread_local! {
    static SAW_NO_GRAD_FOR_B: Cell<bool> = const { Cell::new(false) };
}

/// (x, 2x)
struct Fork;

#[function_node]
impl Fork {
    fn forward(&self, x: &Array) -> Result<(Array, Array)> {
        Ok((x.clone(), x.mul_scalar(2.0)?))
    }

    fn backward(&self, ga: &Variable, gb: Option<&Variable>) -> Result<Variable> {
        match gb {
            Some(gb) => ga + &gb.mul_scalar(2.0)?,
            None => {
                SAW_NO_GRAD_FOR_B.with(|c| c.set(true));
                Ok(ga.clone())
            }
        }
    }
}

#[test]
fn accepted_and_runs() -> Result<()> {
    let x = Variable::new(Array::from_vec(vec![3.0], &[1])?);
    let (a, _b) = fork(&x)?;
    a.backward()?;
    assert!(SAW_NO_GRAD_FOR_B.with(Cell::get));
    assert_eq!(x.grad_array().expect("a gradient").to_vec::<f64>()?, [1.0]);

    let x = Variable::new(Array::from_vec(vec![3.0], &[1])?);
    let (a, b) = fork(&x)?;
    (&a + &b)?.backward()?;
    assert_eq!(x.grad_array().expect("a gradient").to_vec::<f64>()?, [3.0]);
    Ok(())
}
