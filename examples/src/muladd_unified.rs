//! MulAdd with one unified `forward`: when the CPU and GPU methods are the same array code, one
//! method serves every device, as the tutorial reduces `forward_cpu` and `forward_gpu` to
//! `forward`.
//!
//! `02_muladd_unified.rs` (`cargo run --example muladd_unified`) runs it on the host and on
//! `cuda:0`.

use kusari::prelude::*;

/// f(x, y, z) = x * y + z, elementwise.
pub struct MulAdd;

#[function_node]
impl MulAdd {
    /// Runs on whatever device the inputs are on.
    #[retain(x, y)]
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
