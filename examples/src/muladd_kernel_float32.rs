//! The tutorial's first elementwise kernels, written with concrete types: MulAdd's forward and
//! MulAddGrad's `(gx, gy)` each run as one CUDA kernel whose signature names `float32`, so they
//! take float32 arrays only ([`crate::muladd_kernel`] writes them with the placeholder `T`, for
//! any dtype). As in the tutorial, [`MulAddGrad`] has no backward, so [`MulAdd`] is
//! differentiable once.
//!
//! `10_muladd_kernel_float32.rs` (`cargo run --example muladd_kernel_float32`) runs the kernels
//! on a GPU and shows that a float64 argument is rejected.

use kusari::prelude::*;

/// f(x, y, z) = x * y + z, elementwise, for float32 arrays.
pub struct MulAdd;

#[function_node]
impl MulAdd {
    #[retain(x, y)]
    #[forward_gpu(
        inputs = "float32 x, float32 y, float32 z",
        outputs = "float32 w",
        body = "w = x * y + z;",
        name = "muladd_fwd_f32"
    )]
    fn forward(&self, x: &Array, y: &Array, z: &Array) -> Result<Array> {
        x.mul_add(y, z)
    }

    fn backward(
        &self,
        x: &Variable,
        y: &Variable,
        gw: &Variable,
    ) -> Result<(Variable, Variable, Variable)> {
        let (gx, gy) = mul_add_grad(x, y, gw)?;
        Ok((gx, gy, gw.clone()))
    }
}

/// MulAdd's gradients (gx, gy) = (y * gw, x * gw) for float32 arrays: two outputs, one kernel.
pub struct MulAddGrad;

#[function_node(non_differentiable)]
impl MulAddGrad {
    #[forward_gpu(
        inputs = "float32 x, float32 y, float32 gw",
        outputs = "float32 gx, float32 gy",
        body = "gx = y * gw; gy = x * gw;",
        name = "muladd_bwd_f32"
    )]
    fn forward(&self, x: &Array, y: &Array, gw: &Array) -> Result<(Array, Array)> {
        Ok(((y * gw)?, (x * gw)?))
    }
}
