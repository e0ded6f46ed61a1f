//! `#[function_node(non_differentiable)]`: no `backward`; applying works, and backward through
//! it fails with `Error::NotDifferentiable`.
use kusari::prelude::*;

/// 1 where x > 0, else 0.
struct Positive;

#[function_node(non_differentiable)]
impl Positive {
    fn forward(&self, x: &Array) -> Result<Array> {
        x.gt_scalar(0.0)?.astype(x.dtype())
    }
}

#[test]
fn accepted_and_runs() -> Result<()> {
    let x = Variable::new(Array::from_vec(vec![-1.0, 2.0], &[2])?);
    let y = positive(&x)?;
    assert_eq!(y.array().to_vec::<f64>()?, [0.0, 1.0]);

    let (y,) = Positive.apply((&x,))?;
    y.set_grad_array(Array::ones(&[2], DType::F64)?)?;
    let err = y.backward().expect_err("Positive has no backward");
    assert!(
        matches!(err.root_cause(), Error::NotDifferentiable { function } if function == "Positive"),
        "{err}"
    );
    Ok(())
}
