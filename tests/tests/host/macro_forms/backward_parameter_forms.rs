//! The ways of writing backward's parameters that the macro's type checks must accept: full
//! paths, named lifetimes, `std::option::Option`, and a type alias of `Variable` (which the
//! macro cannot see through, and leaves to the compiler).
use kusari::prelude::*;

type Grad = Variable;

/// (x * y, x + y): retained inputs, a retained output, one gradient of each form and `needs`.
struct ProdSum;

#[function_node]
impl ProdSum {
    #[retain(x, meta(y), output = 0)]
    fn forward(&self, x: &Array, y: &Array) -> Result<(Array, Array)> {
        Ok(((x * y)?, (x + y)?))
    }

    fn backward<'a>(
        &self,
        x: &'a kusari::Variable,
        y: &kusari::InputMeta,
        p: &Grad,
        gp: &'a Grad,
        gs: std::option::Option<&kusari::Variable>,
        needs: &[usize],
    ) -> Result<(Variable, Variable)> {
        assert_eq!(needs, [0, 1]);
        assert_eq!(y.shape(), x.shape());
        // d(xy)/dx = y = p / x, d(xy)/dy = x; d(x+y)/dx = d(x+y)/dy = 1.
        let gs = gs.expect("a gradient for the sum");
        let gx = (&(&(p / x)? * gp)? + gs)?;
        let gy = (&(x * gp)? + gs)?;
        Ok((gx, gy))
    }
}

#[test]
fn accepted_and_runs() -> Result<()> {
    let x = Variable::new(Array::from_vec(vec![2.0], &[1])?);
    let y = Variable::new(Array::from_vec(vec![5.0], &[1])?);
    let (p, s) = prod_sum(&x, &y)?;
    (&p + &s)?.backward()?;
    assert_eq!(x.grad_array().expect("a gradient").to_vec::<f64>()?, [6.0]);
    assert_eq!(y.grad_array().expect("a gradient").to_vec::<f64>()?, [3.0]);
    Ok(())
}
