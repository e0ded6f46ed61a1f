//! MulAdd, the tutorial's first new-style function, `w = x * y + z`, declared with
//! `#[function_node]` in the tutorial's first form: a `forward_cpu` and a `forward_gpu` method on
//! arrays and a `backward` on variables. The macro writes the `FunctionNode` impl, the typed
//! `MulAdd.apply((&x, &y, &z))` and the thin wrapper [`mul_add`]`(&x, &y, &z)`.
//!
//! `01_muladd.rs` (`cargo run --example muladd`) applies it and checks its gradients and its
//! `forward_gpu` against `forward_cpu`.

use kusari::prelude::*;

/// f(x, y, z) = x * y + z, elementwise.
pub struct MulAdd;

#[function_node]
impl MulAdd {
    /// On the host: one fused pass, with no temporary for `x * y`. Backward needs x and y; z's
    /// gradient depends on no input, so z is not kept.
    #[retain(x, y)]
    fn forward_cpu(&self, x: &Array, y: &Array, z: &Array) -> Result<Array> {
        x.mul_add(y, z)
    }

    /// On a CUDA device: array arithmetic, one kernel per operator ([`crate::muladd_kernel`]
    /// fuses them into one).
    fn forward_gpu(&self, x: &Array, y: &Array, z: &Array) -> Result<Array> {
        x * y + z
    }

    /// Written with differentiable operations on variables: no CPU or GPU variant, and the
    /// result can be differentiated again.
    fn backward(
        &self,
        x: &Variable,
        y: &Variable,
        gw: &Variable,
    ) -> Result<(Variable, Variable, Variable)> {
        Ok(((y * gw)?, (x * gw)?, gw.clone()))
    }
}
