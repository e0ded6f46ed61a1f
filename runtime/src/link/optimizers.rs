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
mod optimizer;
mod sgd;

pub use adam::Adam;
pub use hooks::{GradientClipping, Hook, ParamGrad, WeightDecay};
pub use optimizer::Optimizer;
pub use sgd::{MomentumSGD, SGD};

use super::Link;
#[cfg(doc)]
use crate::Array;
