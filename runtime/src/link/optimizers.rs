//! Optimizers (Chainer's `chainer.optimizers`): they update a [`Link`]'s parameters from their
//! gradients, one step per [`Optimizer::update`].
//!
//! A step follows Chainer's `GradientMethod`:
//!
//! 1. every initialised parameter that has a gradient is taken, with its path
//!    ([`Link::named_params`]); the others are skipped and keep no state;
//! 2. the [`Hook`]s ([`WeightDecay`], [`GradientClipping`], or your own) rewrite those gradients,
//!    in the order they were added;
//! 3. the step count [`t`](Optimizer::t) goes up by one;
//! 4. the update rule ([`SGD`], [`MomentumSGD`], [`Adam`]) computes each parameter's new values
//!    from its values, its (hooked) gradient and its state, and
//!    [`Parameter::set_array`](super::Parameter::set_array) stores them.
//!
//! Hooks work on copies of the gradient handles: a parameter's stored gradient is never changed
//! by an update, so [`Parameter::grad`](super::Parameter::grad) still reads what backward
//! computed. Clear gradients yourself ([`Link::cleargrads`]) before the next backward, or they
//! accumulate.
//!
//! The math is done with [`Array`] operations in the parameter's dtype, on the parameter's
//! device. Per-parameter state (momentum, Adam's moments) is kept by path and follows the
//! parameter to its device; a parameter whose shape or dtype no longer matches its state is an
//! error naming it, raised before anything is changed.
//!
//! ```
//! use kusari::link::optimizers::{Adam, GradientClipping, Optimizer};
//! use kusari::link::{initializers::Zero, Link, Parameter};
//! use kusari::prelude::*;
//!
//! struct Model {
//!     w: Parameter,
//! }
//! impl Link for Model {
//!     fn visit_params<'a>(&'a self, prefix: &str, f: &mut dyn FnMut(String, &'a Parameter)) {
//!         f(format!("{prefix}/w"), &self.w);
//!     }
//! }
//!
//! # fn main() -> Result<()> {
//! let model = Model { w: Parameter::with_shape(Zero, &[3], DType::F64)? };
//! let target = Variable::constant(Array::from_vec(vec![1.0f64, -2.0, 0.5], &[3])?);
//! let mut opt = Adam::new().alpha(0.1).with_hook(GradientClipping::new(10.0));
//! for _ in 0..500 {
//!     model.cleargrads();
//!     let diff = (&model.w.variable()? - &target)?;
//!     F::sum(&(&diff * &diff)?)?.backward()?;
//!     opt.update(&model)?;
//! }
//! assert_eq!(opt.t(), 500);
//! let w = model.w.array()?.to_vec::<f64>()?;
//! assert!((w[1] + 2.0).abs() < 1e-3);
//! # Ok(()) }
//! ```

mod adam;
mod gradient_method;
mod hooks;
mod sgd;

pub use adam::Adam;
pub use hooks::{GradientClipping, Hook, ParamGrad, WeightDecay};
pub use sgd::{MomentumSGD, SGD};

use super::Link;
use crate::error::Result;
#[cfg(doc)]
use crate::Array;

/// Updates a [`Link`]'s parameters from their gradients (Chainer's `Optimizer`).
///
/// ```
/// use kusari::link::optimizers::{Optimizer, WeightDecay, SGD};
/// use kusari::link::{initializers::Constant, Link, Parameter};
/// use kusari::{Array, DType, Result};
///
/// struct Model {
///     w: Parameter,
/// }
/// impl Link for Model {
///     fn visit_params<'a>(&'a self, prefix: &str, f: &mut dyn FnMut(String, &'a Parameter)) {
///         f(format!("{prefix}/w"), &self.w);
///     }
/// }
///
/// # fn main() -> Result<()> {
/// let model = Model { w: Parameter::with_shape(Constant(1.0), &[2], DType::F64)? };
/// model.w.variable()?.set_grad_array(Array::from_vec(vec![0.5f64, -1.0], &[2])?)?;
/// let mut opt: Box<dyn Optimizer> = Box::new(SGD::new().lr(0.5));
/// opt.add_hook(Box::new(WeightDecay::new(0.5))); // g + 0.5 w = [1.0, -0.5]
/// opt.update(&model)?;
/// assert_eq!(model.w.array()?.to_vec::<f64>()?, vec![0.5, 1.25]);
/// assert_eq!(opt.t(), 1);
/// # Ok(()) }
/// ```
pub trait Optimizer {
    /// One step over the link's initialised parameters that have a gradient: hooks, then the
    /// update rule. [`t`](Self::t) goes up by one even when no parameter has a gradient. An
    /// error from a hook or from checking the state leaves the parameters, the state and `t` as
    /// they were.
    fn update(&mut self, link: &dyn Link) -> Result<()>;

    /// Adds a hook, run on the gradients before the update rule, after the hooks added before.
    fn add_hook(&mut self, hook: Box<dyn Hook>);

    /// The optimizer with `hook` added (builder style).
    ///
    /// ```
    /// use kusari::link::optimizers::{GradientClipping, MomentumSGD, Optimizer, WeightDecay};
    /// let opt = MomentumSGD::new()
    ///     .with_hook(WeightDecay::new(1e-4))
    ///     .with_hook(GradientClipping::new(5.0));
    /// assert_eq!(opt.t(), 0);
    /// ```
    fn with_hook(mut self, hook: impl Hook + 'static) -> Self
    where
        Self: Sized,
    {
        self.add_hook(Box::new(hook));
        self
    }

    /// The number of steps taken (calls to [`update`](Self::update) that succeeded past the
    /// hooks).
    fn t(&self) -> u64;
}
