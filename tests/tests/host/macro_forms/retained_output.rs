//! `#[retain(output = 0)]`: backward receives the output (after the retained inputs, before the
//! gradients).
use kusari::prelude::*;

/// y = exp(x), dy/dx = y
struct Exp;

#[function_node]
impl Exp {
    #[retain(output = 0)]
    #[forward_gpu(inputs = "T x", outputs = "T y", body = "y = exp(x);")]
    fn forward(&self, x: &Array) -> Result<Array> {
        x.exp()
    }

    fn backward(&self, y: &Variable, gy: &Variable) -> Result<Variable> {
        y * gy
    }
}

/// z = x * exp(x): a retained input and a retained output.
struct XExp;

#[function_node]
impl XExp {
    #[retain(x, output = 0)]
    fn forward(&self, x: &Array) -> Result<Array> {
        x * &x.exp()?
    }

    fn backward(&self, x: &Variable, z: &Variable, gz: &Variable) -> Result<Variable> {
        // d/dx x e^x = e^x + x e^x = z / x + z
        (&(z / x)? + z)? * gz
    }
}

#[test]
fn accepted_and_runs() -> Result<()> {
    let x = Variable::new(Array::from_vec(vec![0.0, 1.0], &[2])?);
    let y = exp(&x)?;
    y.set_grad_array(Array::ones(&[2], DType::F64)?)?;
    y.backward()?;
    let g = x.grad_array().expect("a gradient").to_vec::<f64>()?;
    // e to within an ulp or two (the host's exp is within an ulp of the exact value).
    assert_eq!(g[0], 1.0);
    assert!((g[1] - std::f64::consts::E).abs() <= 1e-15, "{g:?}");

    let x = Variable::new(Array::from_vec(vec![1.0], &[1])?);
    let z = x_exp(&x)?;
    z.backward()?;
    let g = x.grad_array().expect("a gradient").to_vec::<f64>()?;
    assert!((g[0] - 2.0 * std::f64::consts::E).abs() <= 2e-15, "{g:?}");
    Ok(())
}
