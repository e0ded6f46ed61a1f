//! A non-unit struct whose `new` returns `Result<Self>`: the wrapper forwards its error.
use kusari::prelude::*;

/// y = x ^ p, for p >= 0.
struct PowScalar {
    p: f64,
}

#[function_node]
impl PowScalar {
    fn new(p: f64) -> Result<Self> {
        if p < 0.0 {
            return Err(Error::msg(format!("PowScalar: p must be >= 0, got {p}")));
        }
        Ok(PowScalar { p })
    }

    #[retain(x)]
    fn forward(&self, x: &Array) -> Result<Array> {
        x.pow_scalar(self.p)
    }

    fn backward(&self, x: &Variable, gy: &Variable) -> Result<Variable> {
        let slope = x.array().pow_scalar(self.p - 1.0)?.mul_scalar(self.p)?;
        &Variable::constant(slope) * gy
    }
}

#[test]
fn accepted_and_runs() -> Result<()> {
    let x = Variable::new(Array::from_vec(vec![3.0], &[1])?);
    let y = pow_scalar(&x, 2.0)?;
    assert_eq!(y.array().to_vec::<f64>()?, [9.0]);
    y.backward()?;
    assert_eq!(x.grad_array().expect("a gradient").to_vec::<f64>()?, [6.0]);

    let err = pow_scalar(&x, -1.0).expect_err("negative p");
    assert!(err.to_string().contains("p must be >= 0"), "{err}");
    Ok(())
}
