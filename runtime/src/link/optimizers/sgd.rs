//! Stochastic gradient descent, plain ([`SGD`]) and with momentum ([`MomentumSGD`]).

use super::gradient_method::{GradientMethod, UpdateRule};
use super::{Hook, Optimizer};
use crate::builtin_kernels::{MOMENTUM_SGD_UPDATE, SGD_UPDATE};
use crate::error::Result;
use crate::link::Link;
use crate::{Array, DType, Device, ElementwiseKernel};

/// Whether `arrays` can be updated in place by one kernel, as Chainer's optimizers update CUDA
/// parameters: all on one CUDA device, float32 or float64 (the half types keep the host's
/// float32 arithmetic through the array ops), one shape, C-contiguous. The first is the
/// parameter.
fn in_place(arrays: &[&Array]) -> bool {
    let first = arrays[0];
    matches!(first.device(), Device::Cuda(_))
        && matches!(first.dtype(), DType::F32 | DType::F64)
        && arrays.iter().all(|a| {
            a.device() == first.device()
                && a.dtype() == first.dtype()
                && a.shape() == first.shape()
                && a.is_contiguous()
        })
}

/// Vanilla stochastic gradient descent (Chainer's `SGD`): `w -= lr * g`.
///
/// On CUDA, a float32 or float64 parameter is updated in place by one kernel, as Chainer's
/// `SGD` updates it: no new buffer, and every array sharing the parameter's buffer sees the
/// new values ([`KernelCall`](crate::KernelCall)). Elsewhere the update makes a new array.
///
/// The hyperparameter is a public field, so it can be changed between steps (a learning-rate
/// schedule).
///
/// ```
/// use kusari::link::optimizers::{Optimizer, SGD};
/// use kusari::link::{initializers::Constant, Link, Parameter};
/// use kusari::{Array, DType, Result};
/// # struct Model { w: Parameter }
/// # impl Link for Model {
/// #     fn visit_params<'a>(&'a self, prefix: &str, f: &mut dyn FnMut(String, &'a Parameter)) {
/// #         f(format!("{prefix}/w"), &self.w);
/// #     }
/// # }
/// # fn main() -> Result<()> {
/// let model = Model { w: Parameter::with_shape(Constant(1.0), &[2], DType::F32)? };
/// model.w.variable()?.set_grad_array(Array::from_vec(vec![1.0f32, -2.0], &[2])?)?;
/// let mut opt = SGD::new().lr(0.25);
/// opt.update(&model)?;
/// assert_eq!(model.w.array()?.to_vec::<f32>()?, vec![0.75, 1.5]);
/// opt.lr = 0.5;
/// opt.update(&model)?;
/// assert_eq!(model.w.array()?.to_vec::<f32>()?, vec![0.25, 2.5]);
/// # Ok(()) }
/// ```
pub struct SGD {
    /// The learning rate (default 0.01).
    pub lr: f64,
    method: GradientMethod<()>,
}

impl Default for SGD {
    fn default() -> Self {
        SGD::new()
    }
}

impl SGD {
    /// SGD with Chainer's default learning rate, 0.01.
    pub fn new() -> Self {
        SGD {
            lr: 0.01,
            method: GradientMethod::default(),
        }
    }

    /// The optimizer with learning rate `lr`.
    pub fn lr(mut self, lr: f64) -> Self {
        self.lr = lr;
        self
    }
}

struct SgdRule {
    lr: f64,
}

impl UpdateRule for SgdRule {
    type State = ();
    const NAME: &'static str = "SGD";

    fn init_state(&self, _value: &Array) -> Result<()> {
        Ok(())
    }

    fn state_arrays(_state: &mut ()) -> Vec<&mut Array> {
        Vec::new()
    }

    /// On CUDA, one kernel writes `value` in place (Chainer's `param -= lr * grad`): every
    /// array sharing the parameter's buffer sees the new values.
    fn apply(&self, _t: u64, value: &Array, grad: &Array, _state: &mut ()) -> Result<Array> {
        if in_place(&[value, grad]) {
            ElementwiseKernel::from(SGD_UPDATE)
                .call()
                .arg(grad)
                .param(self.lr)
                .out(value)
                .run()?;
            return Ok(value.clone());
        }
        value.sub(&grad.mul_scalar(self.lr)?)
    }
}

impl Optimizer for SGD {
    fn update(&mut self, link: &dyn Link) -> Result<()> {
        self.method.step(link, &SgdRule { lr: self.lr })
    }

    fn add_hook(&mut self, hook: Box<dyn Hook>) {
        self.method.add_hook(hook);
    }

    fn t(&self) -> u64 {
        self.method.t()
    }
}

/// Stochastic gradient descent with momentum (Chainer's `MomentumSGD`):
/// `v = momentum * v - lr * g; w += v`, with `v` starting at zero for each parameter.
///
/// On CUDA, float32 and float64 parameters and their `v` are updated in place by one kernel,
/// as [`SGD`]'s are.
///
/// ```
/// use kusari::link::optimizers::{MomentumSGD, Optimizer};
/// use kusari::link::{initializers::Zero, Link, Parameter};
/// use kusari::{Array, DType, Result};
/// # struct Model { w: Parameter }
/// # impl Link for Model {
/// #     fn visit_params<'a>(&'a self, prefix: &str, f: &mut dyn FnMut(String, &'a Parameter)) {
/// #         f(format!("{prefix}/w"), &self.w);
/// #     }
/// # }
/// # fn main() -> Result<()> {
/// let model = Model { w: Parameter::with_shape(Zero, &[1], DType::F64)? };
/// model.w.variable()?.set_grad_array(Array::from_vec(vec![1.0f64], &[1])?)?;
/// let mut opt = MomentumSGD::new().lr(0.5).momentum(0.5);
/// opt.update(&model)?; // v = -0.5, w = -0.5
/// opt.update(&model)?; // v = 0.5 * -0.5 - 0.5 = -0.75, w = -1.25
/// assert_eq!(model.w.array()?.to_vec::<f64>()?, vec![-1.25]);
/// # Ok(()) }
/// ```
pub struct MomentumSGD {
    /// The learning rate (default 0.01).
    pub lr: f64,
    /// The fraction of the previous step kept (default 0.9).
    pub momentum: f64,
    /// Per parameter, the velocity `v`.
    method: GradientMethod<Array>,
}

impl Default for MomentumSGD {
    fn default() -> Self {
        MomentumSGD::new()
    }
}

impl MomentumSGD {
    /// Momentum SGD with Chainer's defaults: learning rate 0.01, momentum 0.9.
    pub fn new() -> Self {
        MomentumSGD {
            lr: 0.01,
            momentum: 0.9,
            method: GradientMethod::default(),
        }
    }

    /// The optimizer with learning rate `lr`.
    pub fn lr(mut self, lr: f64) -> Self {
        self.lr = lr;
        self
    }

    /// The optimizer with momentum `momentum`.
    pub fn momentum(mut self, momentum: f64) -> Self {
        self.momentum = momentum;
        self
    }
}

struct MomentumRule {
    lr: f64,
    momentum: f64,
}

impl UpdateRule for MomentumRule {
    type State = Array;
    const NAME: &'static str = "MomentumSGD";

    fn init_state(&self, value: &Array) -> Result<Array> {
        value.zeros_like()
    }

    fn state_arrays(v: &mut Array) -> Vec<&mut Array> {
        vec![v]
    }

    /// On CUDA, one kernel writes `value` and `v` in place (Chainer's update kernel).
    fn apply(&self, _t: u64, value: &Array, grad: &Array, v: &mut Array) -> Result<Array> {
        if in_place(&[value, grad, v]) {
            ElementwiseKernel::from(MOMENTUM_SGD_UPDATE)
                .call()
                .arg(grad)
                .param(self.lr)
                .param(self.momentum)
                .out(value)
                .out(v)
                .run()?;
            return Ok(value.clone());
        }
        *v = v
            .mul_scalar(self.momentum)?
            .sub(&grad.mul_scalar(self.lr)?)?;
        value.add(v)
    }
}

impl Optimizer for MomentumSGD {
    fn update(&mut self, link: &dyn Link) -> Result<()> {
        let rule = MomentumRule {
            lr: self.lr,
            momentum: self.momentum,
        };
        self.method.step(link, &rule)
    }

    fn add_hook(&mut self, hook: Box<dyn Hook>) {
        self.method.add_hook(hook);
    }

    fn t(&self) -> u64 {
        self.method.t()
    }
}
