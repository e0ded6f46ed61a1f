//! The optional last backward parameter `needs: &[usize]` lists the inputs whose gradients
//! are wanted; a gradient nobody wants may be `None`.
use kusari::prelude::*;

/// x * y
struct Product;

#[function_node]
impl Product {
    #[retain(x, y)]
    fn forward(&self, x: &Array, y: &Array) -> Result<Array> {
        x * y
    }

    fn backward(
        &self,
        x: &Variable,
        y: &Variable,
        gz: &Variable,
        needs: &[usize],
    ) -> Result<(Option<Variable>, Option<Variable>)> {
        let gx = if needs.contains(&0) {
            Some((y * gz)?)
        } else {
            None
        };
        let gy = if needs.contains(&1) {
            Some((x * gz)?)
        } else {
            None
        };
        Ok((gx, gy))
    }
}

#[test]
fn accepted_and_runs() -> Result<()> {
    let x = Variable::new(Array::from_vec(vec![2.0], &[1])?);
    let y = Variable::constant(Array::from_vec(vec![7.0], &[1])?);
    let z = product(&x, &y)?;
    assert_eq!(z.array().to_vec::<f64>()?, [14.0]);
    z.backward()?;
    assert_eq!(x.grad_array().expect("a gradient").to_vec::<f64>()?, [7.0]);
    assert!(y.grad_array().is_none());
    Ok(())
}
