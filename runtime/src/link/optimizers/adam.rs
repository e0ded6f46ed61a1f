//! [`Adam`], with Chainer's decoupled weight decay and AMSGrad.

use super::gradient_method::{GradientMethod, UpdateRule};
use super::{Hook, Optimizer};
use crate::cpu::optim::AdamCoefficients;
use crate::dtype::Element;
use crate::error::{Error, Result};
use crate::functions::ElementwiseOp;
use crate::link::Link;
use crate::{Array, DType, Device};
use num_traits::Float;

/// Adam (Chainer's `Adam`, from Kingma & Ba), with Chainer's bias correction folded into the
/// step size. At step `t`, for each parameter with gradient `g`:
///
/// ```text
/// lr_t = alpha * sqrt(1 - beta2^t) / (1 - beta1^t)
/// m += (1 - beta1) * (g - m)
/// v += (1 - beta2) * (g² - v)
/// vhat = max(vhat, v)      (AMSGrad; otherwise vhat = v)
/// w -= eta * (lr_t * m / (sqrt(vhat) + eps) + weight_decay_rate * w)
/// ```
///
/// `m`, `v` (and `vhat`) start at zero for each parameter. `weight_decay_rate` is decoupled
/// weight decay (AdamW, Loshchilov & Hutter): it is not scaled by `lr_t`, unlike the
/// [`WeightDecay`](super::WeightDecay) hook, which adds to the gradient. `t` is the optimizer's
/// step count, so a parameter that gets its first gradient at step 5 is corrected as at step 5
/// (as in Chainer, where a parameter without a gradient still counts the step).
///
/// The math runs in the parameter's dtype: an `eps` that rounds to zero there (the default 1e-8
/// in float16) is an error, as in Chainer.
///
/// ```
/// use kusari::link::optimizers::{Adam, Optimizer};
/// use kusari::link::{initializers::Zero, Link, Parameter};
/// use kusari::{Array, DType, Result};
/// # struct Model { w: Parameter }
/// # impl Link for Model {
/// #     fn visit_params<'a>(&'a self, prefix: &str, f: &mut dyn FnMut(String, &'a Parameter)) {
/// #         f(format!("{prefix}/w"), &self.w);
/// #     }
/// # }
/// # fn main() -> Result<()> {
/// let model = Model { w: Parameter::with_shape(Zero, &[2], DType::F64)? };
/// model.w.variable()?.set_grad_array(Array::from_vec(vec![4.0f64, -0.5], &[2])?)?;
/// let mut opt = Adam::new().alpha(0.01);
/// opt.update(&model)?;
/// // The first step moves every element by about alpha against its gradient's sign.
/// let w = model.w.array()?.to_vec::<f64>()?;
/// assert!((w[0] + 0.01).abs() < 1e-6 && (w[1] - 0.01).abs() < 1e-6);
/// # Ok(()) }
/// ```
pub struct Adam {
    /// The step size (default 0.001).
    pub alpha: f64,
    /// The decay rate of the first moment (default 0.9).
    pub beta1: f64,
    /// The decay rate of the second moment (default 0.999).
    pub beta2: f64,
    /// Added to the square root of the second moment (default 1e-8).
    pub eps: f64,
    /// A multiplier of the whole step, for schedules (default 1).
    pub eta: f64,
    /// The rate of decoupled weight decay (default 0).
    pub weight_decay_rate: f64,
    /// Whether to use AMSGrad's running maximum of the second moment (default false).
    pub amsgrad: bool,
    method: GradientMethod<AdamState>,
}

impl Default for Adam {
    fn default() -> Self {
        Adam::new()
    }
}

impl Adam {
    /// Adam with Chainer's defaults: alpha 0.001, beta1 0.9, beta2 0.999, eps 1e-8, eta 1, no
    /// weight decay, no AMSGrad.
    pub fn new() -> Self {
        Adam {
            alpha: 0.001,
            beta1: 0.9,
            beta2: 0.999,
            eps: 1e-8,
            eta: 1.0,
            weight_decay_rate: 0.0,
            amsgrad: false,
            method: GradientMethod::default(),
        }
    }

    /// The optimizer with step size `alpha`.
    pub fn alpha(mut self, alpha: f64) -> Self {
        self.alpha = alpha;
        self
    }

    /// The optimizer with first-moment decay `beta1`.
    pub fn beta1(mut self, beta1: f64) -> Self {
        self.beta1 = beta1;
        self
    }

    /// The optimizer with second-moment decay `beta2`.
    pub fn beta2(mut self, beta2: f64) -> Self {
        self.beta2 = beta2;
        self
    }

    /// The optimizer with `eps`.
    pub fn eps(mut self, eps: f64) -> Self {
        self.eps = eps;
        self
    }

    /// The optimizer with step multiplier `eta`.
    pub fn eta(mut self, eta: f64) -> Self {
        self.eta = eta;
        self
    }

    /// The optimizer with decoupled weight decay rate `rate`.
    pub fn weight_decay_rate(mut self, rate: f64) -> Self {
        self.weight_decay_rate = rate;
        self
    }

    /// The optimizer with AMSGrad on or off.
    pub fn amsgrad(mut self, amsgrad: bool) -> Self {
        self.amsgrad = amsgrad;
        self
    }

    /// The bias-corrected step size of step `t` (counted from 1).
    ///
    /// ```
    /// let adam = kusari::link::optimizers::Adam::new().alpha(0.5).beta1(0.5).beta2(0.75);
    /// assert_eq!(adam.lr(1), 0.5 * 0.25f64.sqrt() / 0.5);
    /// ```
    pub fn lr(&self, t: u64) -> f64 {
        self.rule().lr(t)
    }

    fn rule(&self) -> AdamRule {
        AdamRule {
            alpha: self.alpha,
            beta1: self.beta1,
            beta2: self.beta2,
            eps: self.eps,
            eta: self.eta,
            weight_decay_rate: self.weight_decay_rate,
            amsgrad: self.amsgrad,
        }
    }
}

impl Optimizer for Adam {
    fn update(&mut self, link: &dyn Link) -> Result<()> {
        let rule = self.rule();
        self.method.step(link, &rule)
    }

    fn add_hook(&mut self, hook: Box<dyn Hook>) {
        self.method.add_hook(hook);
    }

    fn t(&self) -> u64 {
        self.method.t()
    }
}

/// Adam's per-parameter moments.
struct AdamState {
    m: Array,
    v: Array,
    /// The running maximum of `v`, with AMSGrad.
    vhat: Option<Array>,
}

/// A copy of [`Adam`]'s hyperparameters for one step.
struct AdamRule {
    alpha: f64,
    beta1: f64,
    beta2: f64,
    eps: f64,
    eta: f64,
    weight_decay_rate: f64,
    amsgrad: bool,
}

impl AdamRule {
    fn lr(&self, t: u64) -> f64 {
        let t = t as f64;
        self.alpha * (1.0 - self.beta2.powf(t)).sqrt() / (1.0 - self.beta1.powf(t))
    }
}

impl AdamRule {
    /// [`ADAM_STEP`] on the host as one loop with the moments updated in place
    /// ([`crate::cpu::optim::adam`]: the same operations in the same order, so the same bits,
    /// without the elementwise op's dispatch and fresh moments at each step). `None` where it
    /// does not apply: an array on a GPU, of another dtype or shape, or a gradient or value that
    /// is not contiguous.
    fn host_step<T: Element + Float>(
        &self,
        t: u64,
        value: &Array,
        grad: &Array,
        m: &mut Array,
        v: &mut Array,
    ) -> Result<Option<Array>> {
        let shape = value.shape();
        if [grad.shape(), m.shape(), v.shape()]
            .iter()
            .any(|s| *s != shape)
        {
            return Ok(None);
        }
        let (Some(g), Some(x)) = (grad.host_slice::<T>(), value.host_slice::<T>()) else {
            return Ok(None);
        };
        for s in [&mut *m, &mut *v] {
            if s.host_slice_mut::<T>().is_none() {
                // Shared with another holder, or not contiguous: a buffer of
                // its own, once.
                if s.device() != Device::Cpu || s.dtype() != T::DTYPE {
                    return Ok(None);
                }
                *s = Array::from_cpu_vec(s.to_vec::<T>()?, shape);
            }
        }
        let (Some(ms), Some(vs)) = (m.host_slice_mut::<T>(), v.host_slice_mut::<T>()) else {
            return Ok(None);
        };
        let c = |f: f64| <T as Element>::from_f64(f);
        let out = crate::cpu::optim::adam(
            g,
            x,
            ms,
            vs,
            AdamCoefficients {
                b1c: c(1.0 - self.beta1),
                b2c: c(1.0 - self.beta2),
                lr: c(self.lr(t)),
                eps: c(self.eps),
                wd: c(self.weight_decay_rate),
                eta: c(self.eta),
            },
        )?;
        Ok(Some(Array::from_cpu_vec(out, shape)))
    }
}

/// Adam's step without AMSGrad, as one elementwise op: the moments' updates and the new value,
/// each operation of [`AdamRule::apply`]'s array form in its order.
static ADAM_STEP: ElementwiseOp = ElementwiseOp::new(
    "adam_step",
    "T grad, T value, T m0, T v0",
    "T m, T v, T out",
    "T b1c, T b2c, T lr, T eps, T wd, T eta",
    "m = m0 + (grad - m0) * b1c; \
     v = v0 + (grad * grad - v0) * b2c; \
     out = value - (m * lr / (sqrt(v) + eps) + value * wd) * eta;",
);

impl UpdateRule for AdamRule {
    type State = AdamState;
    const NAME: &'static str = "Adam";

    fn check(&self, path: &str, value: &Array) -> Result<()> {
        for (name, beta) in [("beta1", self.beta1), ("beta2", self.beta2)] {
            if !(0.0..1.0).contains(&beta) {
                return Err(Error::InvalidArgument {
                    op: "Adam".to_string(),
                    msg: format!(
                        "{name} must be in [0, 1), not {beta} (the bias correction divides by 1 - {name}^t)"
                    ),
                });
            }
        }
        // Checks that eps does not underflow in the parameter's dtype (Chainer's _check_eps).
        let eps_in_dtype = crate::dtype::with_dtype!(value.dtype(), T => {
            <T as Element>::from_f64(self.eps).to_f64()
        });
        if self.eps != 0.0 && eps_in_dtype == 0.0 {
            return Err(Error::InvalidArgument {
                op: "Adam".to_string(),
                msg: format!(
                    "eps {} is too small for parameter {path} of dtype {} (it rounds to 0); use a larger eps or a wider dtype",
                    self.eps,
                    value.dtype()
                ),
            });
        }
        Ok(())
    }

    fn init_state(&self, value: &Array) -> Result<AdamState> {
        Ok(AdamState {
            m: value.zeros_like()?,
            v: value.zeros_like()?,
            vhat: if self.amsgrad {
                Some(value.zeros_like()?)
            } else {
                None
            },
        })
    }

    fn state_arrays(state: &mut AdamState) -> Vec<&mut Array> {
        let AdamState { m, v, vhat } = state;
        let mut arrays = vec![m, v];
        arrays.extend(vhat.as_mut());
        arrays
    }

    fn apply(&self, t: u64, value: &Array, grad: &Array, state: &mut AdamState) -> Result<Array> {
        let AdamState { m, v, vhat } = state;
        if vhat.is_none() && matches!(value.dtype(), DType::F32 | DType::F64) {
            let host = match value.dtype() {
                DType::F32 => self.host_step::<f32>(t, value, grad, m, v)?,
                _ => self.host_step::<f64>(t, value, grad, m, v)?,
            };
            if let Some(new_value) = host {
                return Ok(new_value);
            }
            // One pass (one kernel on CUDA) instead of fifteen array operations, the same
            // operations in the same order: the same bits on the host.
            let mut out = ADAM_STEP.forward(
                &[grad, value, m, v],
                &[
                    (1.0 - self.beta1).into(),
                    (1.0 - self.beta2).into(),
                    self.lr(t).into(),
                    self.eps.into(),
                    self.weight_decay_rate.into(),
                    self.eta.into(),
                ],
            )?;
            let new_value = out.pop().expect("three outputs");
            *v = out.pop().expect("three outputs");
            *m = out.pop().expect("three outputs");
            return Ok(new_value);
        }
        *m = m.add(&grad.sub(m)?.mul_scalar(1.0 - self.beta1)?)?;
        *v = v.add(&grad.mul(grad)?.sub(v)?.mul_scalar(1.0 - self.beta2)?)?;
        let second = if self.amsgrad {
            // AMSGrad switched on after some steps starts its maximum from the current v.
            let max = match vhat.take() {
                Some(h) => h.maximum(v)?,
                None => v.clone(),
            };
            vhat.insert(max).clone()
        } else {
            v.clone()
        };
        let step = m
            .mul_scalar(self.lr(t))?
            .div(&second.sqrt()?.add_scalar(self.eps)?)?;
        let step = step.add(&value.mul_scalar(self.weight_decay_rate)?)?;
        value.sub(&step.mul_scalar(self.eta)?)
    }
}
