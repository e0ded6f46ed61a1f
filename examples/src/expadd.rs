//! ExpAdd, `z = exp(x) + exp(y)`: an op whose backward is written with a built-in
//! differentiable function (`F::exp`), so its gradient can be differentiated again with `grad`.
//! The unified `forward` is the tutorial's `xp.exp(x) + xp.exp(y)`: array code that runs on any
//! device.
//!
//! `03_expadd.rs` (`cargo run --example expadd`) takes its first- and second-order gradients.

use kusari::prelude::*;

/// f(x, y) = exp(x) + exp(y), elementwise.
pub struct ExpAdd;

#[function_node]
impl ExpAdd {
    #[retain(x, y)]
    fn forward(&self, x: &Array, y: &Array) -> Result<Array> {
        x.exp()? + y.exp()?
    }

    fn backward(&self, x: &Variable, y: &Variable, gz: &Variable) -> Result<(Variable, Variable)> {
        // F::exp, not Array::exp: the gradient stays in the graph and can be differentiated.
        Ok(((gz * F::exp(x)?)?, (gz * F::exp(y)?)?))
    }
}
