//! MulAdd as an old-style [`Function`]: forward and backward both on arrays. First-order
//! gradients work as with a FunctionNode; differentiating such a gradient again is a clear error,
//! because an array-level backward leaves no graph to walk.
//!
//! Run with `cargo run --example old_style`.

use kusari::prelude::*;

/// f(x, y, z) = x * y + z, old style: every input is kept for backward automatically.
struct MulAdd;

impl Function for MulAdd {
    fn forward(&mut self, inputs: &[Array]) -> Result<Vec<Array>> {
        let (x, y, z) = (&inputs[0], &inputs[1], &inputs[2]);
        Ok(vec![x.mul_add(y, z)?])
    }

    fn backward(
        &self,
        inputs: &[Array],
        grad_outputs: &[Option<Array>],
    ) -> Result<Vec<Option<Array>>> {
        let (x, y) = (&inputs[0], &inputs[1]);
        let gw = grad_outputs[0]
            .as_ref()
            .expect("backward runs only when its single output has a gradient");
        Ok(vec![Some((y * gw)?), Some((x * gw)?), Some(gw.clone())])
    }
}

pub fn muladd(x: &Variable, y: &Variable, z: &Variable) -> Result<Variable> {
    Ok(MulAdd.call(&[x, y, z])?.remove(0))
}

fn main() -> Result<()> {
    let mut rng = Rng::seed(0);
    let mut uniform =
        || Variable::new(Array::uniform(&[3, 2], -1.0, 1.0, DType::F32, &mut rng).unwrap());
    let (x, y, z) = (uniform(), uniform(), uniform());

    // First order: as with the FunctionNode version.
    let loss = F::sum(&muladd(&x, &y, &z)?)?;
    loss.backward()?;
    let gx = x.grad_array().ok_or_else(|| Error::msg("no gradient"))?;
    println!("gx =\n{gx}");
    assert_eq!(gx.to_vec::<f32>()?, y.array().to_vec::<f32>()?);

    // Second order: record the first backward, then differentiate gx = y * gw with respect to y.
    let record = GradOptions {
        enable_double_backprop: true,
        ..Default::default()
    };
    let gx = grad(&[&loss], &[&x], None, record)?.remove(0);
    let gx = gx.ok_or_else(|| Error::msg("no gradient"))?;
    let err = match grad(&[&F::sum(&gx)?], &[&y], None, GradOptions::default()) {
        Ok(_) => return Err(Error::msg("an old-style gradient was differentiated again")),
        Err(err) => err,
    };
    println!("differentiating again fails:\n  {err}");
    assert!(matches!(
        err.root_cause(),
        Error::DoubleBackwardUnsupported { function } if function == "MulAdd"
    ));
    println!("ok: first order works, second order is refused by name");
    Ok(())
}
