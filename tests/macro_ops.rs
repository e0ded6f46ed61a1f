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
fn smoke() -> Result<()> {
    let v = |a: f64| Variable::new(Array::full(&[2], a, DType::F64));
    let (x, y, z) = (v(2.0), v(3.0), v(1.0));
    let w = mul_add(&x, &y, &z)?;
    assert_eq!(w.array().to_vec::<f64>()?, vec![7.0, 7.0]);
    let (w2,) = MulAdd.apply((&x, &y, &z))?;
    F::sum(&(&w + &w2)?)?.backward()?;
    assert_eq!(x.grad_array().unwrap().to_vec::<f64>()?, vec![6.0, 6.0]);
    let s = scale(&x, 2.5)?;
    assert_eq!(s.array().to_vec::<f64>()?, vec![5.0, 5.0]);
    Ok(())
}
