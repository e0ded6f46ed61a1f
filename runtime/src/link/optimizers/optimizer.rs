//! The [`Optimizer`] trait: what every optimizer does with a link's parameters.

use super::Hook;
use super::Link;
#[cfg(doc)]
use crate::Array;
use crate::error::Result;

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
