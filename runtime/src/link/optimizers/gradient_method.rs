//! The step every optimizer shares (Chainer's `GradientMethod`): gather the parameters with
//! gradients, run the hooks, then apply an [`UpdateRule`] to each parameter with its state.

use std::collections::hash_map::Entry;
use std::collections::{HashMap, HashSet};

use super::{Hook, ParamGrad};
use crate::Array;
use crate::error::{Error, Result};
use crate::layout::first_difference;
use crate::link::{Link, Parameter};

/// How one optimizer turns a parameter's values, gradient and state into new values.
pub(super) trait UpdateRule {
    /// What the rule keeps per parameter: arrays of the parameter's shape and dtype.
    type State;

    /// The optimizer's name, for messages.
    const NAME: &'static str;

    /// Rejects hyperparameters the rule cannot work with, for the parameter at `path` with
    /// `value`'s dtype.
    fn check(&self, _path: &str, _value: &Array) -> Result<()> {
        Ok(())
    }

    /// The state of a parameter seen for the first time.
    fn init_state(&self, value: &Array) -> Result<Self::State>;

    /// The arrays of a state, to check them and move them to the parameter's device.
    fn state_arrays(state: &mut Self::State) -> Vec<&mut Array>;

    /// The new values after step `t` (counted from 1), updating `state` in place.
    fn apply(&self, t: u64, value: &Array, grad: &Array, state: &mut Self::State) -> Result<Array>;
}

/// Hooks, the step count and the per-parameter state `S`, by path.
pub(super) struct GradientMethod<S> {
    hooks: Vec<Box<dyn Hook>>,
    t: u64,
    states: HashMap<String, S>,
}

impl<S> Default for GradientMethod<S> {
    fn default() -> Self {
        GradientMethod {
            hooks: Vec::new(),
            t: 0,
            states: HashMap::new(),
        }
    }
}

impl<S> GradientMethod<S> {
    pub(super) fn add_hook(&mut self, hook: Box<dyn Hook>) {
        self.hooks.push(hook);
    }

    pub(super) fn t(&self) -> u64 {
        self.t
    }

    /// One step of `rule` over `link`'s parameters.
    pub(super) fn step<R: UpdateRule<State = S>>(
        &mut self,
        link: &dyn Link,
        rule: &R,
    ) -> Result<()> {
        let (params, mut grads) = gather(link)?;
        for entry in &grads {
            rule.check(&entry.path, &entry.value)?;
            if let Some(state) = self.states.get_mut(&entry.path) {
                check_state(R::NAME, entry, R::state_arrays(state))?;
            }
        }
        for hook in &mut self.hooks {
            hook.apply(&mut grads)?;
            check_hooked(hook.name(), &grads)?;
        }
        self.t += 1;
        for (param, entry) in params.into_iter().zip(&grads) {
            let state = match self.states.entry(entry.path.clone()) {
                Entry::Occupied(e) => e.into_mut(),
                Entry::Vacant(e) => e.insert(rule.init_state(&entry.value)?),
            };
            // Chainer moves the state along with a parameter moved to another device.
            for s in R::state_arrays(state) {
                *s = s.to_device(entry.value.device())?;
            }
            let updated = rule.apply(self.t, &entry.value, &entry.grad, state)?;
            param.set_array(updated)?;
        }
        Ok(())
    }
}

/// The initialised parameters that have a gradient, with their values and gradients.
fn gather(link: &dyn Link) -> Result<(Vec<&Parameter>, Vec<ParamGrad>)> {
    let mut seen = HashSet::new();
    let mut params = Vec::new();
    let mut grads = Vec::new();
    for (path, param) in link.named_params() {
        if !seen.insert(path.clone()) {
            return Err(Error::Optimizer {
                op: "optimizer".to_string(),
                msg: format!(
                    "two parameters are named {path}; the optimizer keeps its state by path, so paths must be unique"
                ),
            });
        }
        // An uninitialised parameter has no gradient either.
        let Some(grad) = param.grad() else { continue };
        let value = param.array()?;
        params.push(param);
        grads.push(ParamGrad { path, value, grad });
    }
    Ok((params, grads))
}

/// An error unless `state` was made for a parameter of `entry`'s shape and dtype.
fn check_state(optimizer: &str, entry: &ParamGrad, state: Vec<&mut Array>) -> Result<()> {
    for s in state {
        if s.shape() != entry.value.shape() {
            return Err(Error::Shape {
                op: "Optimizer::update",
                msg: format!(
                    "parameter {} has shape {:?}, but its {optimizer} state was made for shape {:?} (another parameter under the same path?)",
                    entry.path,
                    entry.value.shape(),
                    s.shape()
                ),
            });
        }
        if s.dtype() != entry.value.dtype() {
            return Err(Error::Optimizer {
                op: "Optimizer::update".to_string(),
                msg: format!(
                    "parameter {} is {}, but its {optimizer} state is {} (another parameter under the same path?)",
                    entry.path,
                    entry.value.dtype(),
                    s.dtype()
                ),
            });
        }
    }
    Ok(())
}

/// An error unless every gradient a hook left still matches its parameter.
fn check_hooked(hook: &str, grads: &[ParamGrad]) -> Result<()> {
    for entry in grads {
        let (g, v) = (&entry.grad, &entry.value);
        if let Some((what, expected, actual)) = first_difference(
            (v.shape(), v.dtype(), v.device()),
            (g.shape(), g.dtype(), g.device()),
        ) {
            return Err(Error::Mismatch {
                op: format!("optimizer hook {hook}"),
                subject: format!("the gradient of parameter {} now", entry.path),
                what,
                actual,
                expected,
            });
        }
    }
    Ok(())
}
