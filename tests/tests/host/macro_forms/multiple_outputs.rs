//! A forward returning two arrays: `apply` and the wrapper return tuples.
use kusari::prelude::*;

/// (x + y, x - y)
struct SumDiff;

#[function_node]
impl SumDiff {
    #[forward_gpu(
        inputs = "T x, T y",
        outputs = "T s, T d",
        body = "s = x + y; d = x - y;"
    )]
    fn forward(&self, x: &Array, y: &Array) -> Result<(Array, Array)> {
        Ok(((x + y)?, (x - y)?))
    }

    fn backward(&self, gs: &Variable, gd: &Variable) -> Result<(Variable, Variable)> {
        Ok(((gs + gd)?, (gs - gd)?))
    }
}

fn var(values: &[f64]) -> Result<Variable> {
    Ok(Variable::new(Array::from_vec(
        values.to_vec(),
        &[values.len()],
    )?))
}

#[test]
fn accepted_and_runs() -> Result<()> {
    let (x, y) = (var(&[5.0])?, var(&[3.0])?);
    let (s, d): (Variable, Variable) = sum_diff(&x, &y)?;
    assert_eq!(s.array().to_vec::<f64>()?, [8.0]);
    assert_eq!(d.array().to_vec::<f64>()?, [2.0]);

    let (s, d) = SumDiff.apply((&x, &y))?;
    // d/dx (2s + 3d) = 2 + 3, d/dy = 2 - 3
    let loss = (&s.mul_scalar(2.0)? + &d.mul_scalar(3.0)?)?;
    loss.backward()?;
    assert_eq!(x.grad_array().expect("a gradient").to_vec::<f64>()?, [5.0]);
    assert_eq!(y.grad_array().expect("a gradient").to_vec::<f64>()?, [-1.0]);
    Ok(())
}
