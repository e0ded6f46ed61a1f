//! The tutorial's LinearFunction, `y = x Wᵀ + b`, declared with `#[function_node]`: its backward
//! takes the optional needs-grad list (`target_input_indexes`) and computes only the gradients
//! asked for. The generated wrapper is named [`linear`].
//!
//! `06_linear.rs` (`cargo run --example linear`) checks it against the built-in `F::linear`, then
//! trains it by plain gradient descent on a small synthetic regression problem.

use kusari::prelude::*;

/// y = x Wᵀ + b for x: (N, in), W: (out, in), b: (out,).
pub struct LinearFunction;

#[function_node(name = "linear")]
impl LinearFunction {
    #[retain(x, w)]
    fn forward(&self, x: &Array, w: &Array, b: &Array) -> Result<Array> {
        x.matmul(&w.t())? + b
    }

    /// `needs` lists the inputs whose gradients are wanted: in training, x is data and needs none.
    fn backward(
        &self,
        x: &Variable,
        w: &Variable,
        gy: &Variable,
        needs: &[usize],
    ) -> Result<(Option<Variable>, Option<Variable>, Option<Variable>)> {
        let wanted = |i: usize| needs.contains(&i);
        let gx = wanted(0).then(|| F::matmul(gy, w)).transpose()?;
        let gw = wanted(1)
            .then(|| F::matmul(&F::transpose(gy, None)?, x))
            .transpose()?;
        let gb = wanted(2)
            .then(|| F::sum_axes(gy, &[0], false))
            .transpose()?;
        Ok((gx, gw, gb))
    }
}
