//! `new(..)`'s parameters follow the inputs in the wrapper; `params = "T alpha"` reads the field.
use kusari::prelude::*;

/// y = alpha * x
struct Scale {
    alpha: f64,
}

#[function_node]
impl Scale {
    fn new(alpha: f64) -> Self {
        Scale { alpha }
    }

    #[forward_gpu(
        inputs = "T x",
        outputs = "T y",
        params = "T alpha",
        body = "y = x * alpha;"
    )]
    fn forward(&self, x: &Array) -> Result<Array> {
        x.mul_scalar(self.alpha)
    }

    fn backward(&self, gy: &Variable) -> Result<Variable> {
        gy.mul_scalar(self.alpha)
    }
}

#[test]
fn accepted_and_runs() -> Result<()> {
    let x = Variable::new(Array::from_vec(vec![1.0, -2.0], &[2])?);
    let y = scale(&x, 2.0)?;
    assert_eq!(y.array().to_vec::<f64>()?, [2.0, -4.0]);

    let (y,) = Scale::new(0.5).apply((&x,))?;
    assert_eq!(y.array().to_vec::<f64>()?, [0.5, -1.0]);
    y.set_grad_array(Array::ones(&[2], DType::F64)?)?;
    y.backward()?;
    assert_eq!(
        x.grad_array().expect("a gradient").to_vec::<f64>()?,
        [0.5, 0.5]
    );
    Ok(())
}
