//! MulAdd written by hand against the [`FunctionNode`] trait: what `#[function_node]` writes for
//! you (`01_muladd.rs` to `04_muladd_kernel.rs`). `forward` gets the inputs as a slice and marks
//! the retained ones on the context; `backward` fetches them from its context and gets one
//! `Option` per output gradient; the thin wrapper is written by hand too. Applied to random 3x2
//! `float32` inputs and differentiated.
//!
//! Run with `cargo run --example muladd_by_hand`.

use kusari::prelude::*;
use kusari_examples::allclose;

/// f(x, y, z) = x * y + z, elementwise.
struct MulAdd;

impl FunctionNode for MulAdd {
    fn forward(&mut self, ctx: &mut ForwardContext, inputs: &[Array]) -> Result<Vec<Array>> {
        // Backward needs x and y; z's gradient depends on no input, so z is not kept.
        ctx.retain_inputs(&[0, 1]);
        let (x, y, z) = (&inputs[0], &inputs[1], &inputs[2]);
        // One fused pass instead of `(x * y)? + z`: no temporary for x * y.
        Ok(vec![x.mul_add(y, z)?])
    }

    fn backward(
        &self,
        ctx: &BackwardContext<'_>,
        _target_input_indexes: &[usize],
        grad_outputs: &[Option<Variable>],
    ) -> Result<Vec<Option<Variable>>> {
        // Retained inputs come back as variables: this backward is itself differentiable.
        let (x, y) = (ctx.retained_input(0)?, ctx.retained_input(1)?);
        let gw = grad_outputs[0]
            .as_ref()
            .expect("backward runs only when its single output has a gradient");
        let gx = (&y * gw)?;
        let gy = (&x * gw)?;
        let gz = gw.clone();
        Ok(vec![Some(gx), Some(gy), Some(gz)])
    }
}

/// The thin wrapper that hides the node: every function in `kusari::functions` looks like this.
pub fn muladd(x: &Variable, y: &Variable, z: &Variable) -> Result<Variable> {
    Ok(MulAdd.apply(&[x, y, z])?.remove(0))
}

fn main() -> Result<()> {
    let mut rng = Rng::seed(0);
    let mut uniform =
        || Variable::new(Array::uniform(&[3, 2], -1.0, 1.0, DType::F32, &mut rng).unwrap());
    let (x, y, z) = (uniform(), uniform(), uniform());

    let w = muladd(&x, &y, &z)?;
    // w has 6 elements, so backward needs its gradient set first: gw = ones.
    w.set_grad_array(w.array().ones_like()?)?;
    w.backward()?;

    let grad_of = |v: &Variable| v.grad_array().ok_or_else(|| Error::msg("no gradient"));
    let (gx, gy, gz) = (grad_of(&x)?, grad_of(&y)?, grad_of(&z)?);
    println!("w = x * y + z =\n{}", w.array());
    println!("gx =\n{gx}\ngy =\n{gy}\ngz =\n{gz}");

    // The hand formula, from the arrays: w = x*y + z, and with gw = 1: gx = y, gy = x, gz = 1.
    let (xa, ya, za) = (x.array(), y.array(), z.array());
    assert!(allclose(w.array(), &((xa * ya)? + za)?, 1e-6)?);
    assert_eq!(gx.to_vec::<f32>()?, ya.to_vec::<f32>()?);
    assert_eq!(gy.to_vec::<f32>()?, xa.to_vec::<f32>()?);
    assert_eq!(gz.to_vec::<f32>()?, vec![1.0; 6]);
    println!("ok: gx == y, gy == x, gz == 1");
    Ok(())
}
