//! MulAdd with elementwise CUDA kernels, the tutorial's `cuda.elementwise`: `#[forward_gpu(..)]`
//! declares the forward's kernel (CuPy's signature grammar; `T` is any dtype), and backward
//! applies `MulAddGrad`, an op whose kernel computes both `gx` and `gy` in one pass.
//!
//! Run with `cargo run --example muladd_kernel`. The kernels need a CUDA build of kusari and a
//! CUDA device; kusari has no CUDA backend yet, so the example runs the CPU path and shows what
//! the generated kernel launch reports. `tests/macro_ops.rs` includes this file to check the ops'
//! gradients (hence the `pub`).

use kusari::prelude::*;

/// f(x, y, z) = x * y + z, elementwise.
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

fn main() -> Result<()> {
    let mut rng = Rng::seed(0);
    let mut uniform = || Variable::new(Array::uniform(&[3, 2], -1.0, 1.0, DType::F32, &mut rng));
    let (x, y, z) = (uniform(), uniform(), uniform());

    let w = mul_add(&x, &y, &z)?;
    let record = GradOptions {
        enable_double_backprop: true,
        ..Default::default()
    };
    let gw = Variable::new(w.array().ones_like());
    let grads = grad(&[&w], &[&x, &y, &z], Some(&[Some(gw)]), record)?;
    let [Some(gx), Some(gy), Some(gz)] = grads.as_slice() else {
        return Err(Error::msg("expected gradients for x, y and z"));
    };
    println!("w = x * y + z =\n{}", w.array());
    println!("gx =\n{}\ngy =\n{}", gx.array(), gy.array());
    // Backward applied MulAddGrad: both gradients are its outputs.
    println!("gx and gy computed by: {:?}", gx.creator_label());
    assert_eq!(gx.creator_label().as_deref(), Some("MulAddGrad"));
    assert_eq!(gx.array().to_vec::<f32>()?, y.array().to_vec::<f32>()?);
    assert_eq!(gy.array().to_vec::<f32>()?, x.array().to_vec::<f32>()?);
    assert_eq!(gz.array().to_vec::<f32>()?, vec![1.0; 6]);
    println!("ok: forward ran on the CPU; gx == y, gy == x, gz == 1");

    // Called directly (as `apply` does for CUDA inputs), each generated `forward_gpu` checks the
    // inputs against its kernel's signature, then launches it: here, a typed error.
    let inputs = [x.array(), y.array(), z.array()].map(Array::clone);
    let launches = [
        FunctionNode::forward_gpu(&mut MulAdd, &mut ForwardContext::default(), &inputs),
        FunctionNode::forward_gpu(&mut MulAddGrad, &mut ForwardContext::default(), &inputs),
    ];
    for launch in launches {
        let Err(err) = launch else {
            return Err(Error::msg("this build has no CUDA backend"));
        };
        println!("forward_gpu: {err}");
        assert!(matches!(err, Error::CudaUnavailable { .. }));
    }
    Ok(())
}
