//! MulAdd with elementwise CUDA kernels, the tutorial's `cuda.elementwise`: `#[forward_gpu(..)]`
//! declares the forward's kernel in CuPy's signature grammar with the type placeholder `T`, bound
//! to the inputs' dtype at launch, so one kernel serves float32 and float64. Backward applies
//! [`MulAddGrad`], an op whose kernel computes both `gx` and `gy` in one pass.
//! ([`crate::muladd_kernel_float32`] writes the same kernels with concrete `float32` types.)
//!
//! `04_muladd_kernel.rs` (`cargo run --example muladd_kernel`) runs the kernels on a GPU and
//! checks them against the CPU.

use kusari::prelude::*;

/// f(x, y, z) = x * y + z, elementwise, for any dtype.
pub struct MulAdd;

#[function_node]
impl MulAdd {
    #[retain(x, y)]
    #[forward_gpu(
        inputs = "T x, T y, T z",
        outputs = "T w",
        body = "w = x * y + z;",
        name = "muladd_fwd"
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

/// MulAdd's gradients (gx, gy) = (y * gw, x * gw): two outputs, one kernel.
pub struct MulAddGrad;

#[function_node]
impl MulAddGrad {
    #[retain(x, y, gw)]
    #[forward_gpu(
        inputs = "T x, T y, T gw",
        outputs = "T gx, T gy",
        body = "gx = y * gw; gy = x * gw;",
        name = "muladd_bwd"
    )]
    fn forward(&self, x: &Array, y: &Array, gw: &Array) -> Result<(Array, Array)> {
        Ok(((y * gw)?, (x * gw)?))
    }

    /// The tutorial leaves this unimplemented; written, it gives MulAdd second-order gradients.
    /// An output that got no gradient arrives as `None`.
    fn backward(
        &self,
        x: &Variable,
        y: &Variable,
        gw: &Variable,
        ggx: Option<&Variable>,
        ggy: Option<&Variable>,
    ) -> Result<(Option<Variable>, Option<Variable>, Option<Variable>)> {
        let times = |g: Option<&Variable>, v: &Variable| g.map(|g| g * v).transpose();
        let ggw = match (times(ggx, y)?, times(ggy, x)?) {
            (Some(a), Some(b)) => Some((a + b)?),
            (a, b) => a.or(b),
        };
        Ok((times(ggy, gw)?, times(ggx, gw)?, ggw))
    }
}
