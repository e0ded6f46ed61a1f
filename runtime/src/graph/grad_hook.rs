//! Gradient-ready hooks on leaves: [`Variable::on_grad_ready`] registers a callback that
//! `backward()` calls as soon as that leaf's gradient of the pass is complete, while the rest
//! of the graph is still being differentiated. A data-parallel optimizer starts exchanging a
//! group of parameters' gradients from there (PyTorch's DDP does the same with its autograd
//! hooks), overlapping the exchange with the rest of backward.
//!
//! When at least one hook is registered anywhere, `backward()` first counts, for every hooked
//! leaf, the edges from the functions it can reach to that leaf ([`LeafWaits::count`]). Each
//! function that has run its backward takes its edges off; a leaf whose count reaches zero has
//! its gradient stored and its hooks called. Leaves under functions that never receive a
//! gradient are finished at the end of the pass. Without hooks, backward does one atomic load
//! more and nothing else.

use std::collections::HashMap;
use std::sync::atomic::{AtomicU64, AtomicUsize, Ordering};
use std::sync::{Arc, Weak};

use super::node::{FuncNode, LeafHook, VarNode, Variable};
use crate::error::{Error, Result};
use crate::sync::lock;

/// How many hooks are registered in the process: backward counts edges only when some are.
static REGISTERED: AtomicUsize = AtomicUsize::new(0);
static NEXT_ID: AtomicU64 = AtomicU64::new(1);

/// Whether any hook is registered.
pub(super) fn any() -> bool {
    REGISTERED.load(Ordering::Relaxed) > 0
}

/// A registered gradient-ready hook: dropping it unregisters the hook.
#[must_use = "the hook is unregistered when this is dropped"]
pub struct GradReadyHook {
    node: Weak<VarNode>,
    id: u64,
}

impl std::fmt::Debug for GradReadyHook {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("GradReadyHook")
            .field("id", &self.id)
            .finish()
    }
}

impl Drop for GradReadyHook {
    fn drop(&mut self) {
        if let Some(node) = self.node.upgrade() {
            lock(&node.grad).hooks.retain(|(id, _)| *id != self.id);
        }
        REGISTERED.fetch_sub(1, Ordering::Relaxed);
    }
}

impl Variable {
    /// Registers `hook`, called by every later [`backward`](Self::backward) of a graph this
    /// leaf is in, as soon as the leaf's gradient of that pass is complete and stored (so
    /// [`grad`](Self::grad) reads it, accumulated with what was there), before backward goes
    /// on with the rest of the graph. A leaf that gets no gradient in a pass is called at the
    /// end of it. The hook runs on the thread running backward; it should hand heavy work to
    /// another thread. [`grad`](crate::grad) does not call it.
    ///
    /// Only a leaf that requires a gradient can have one (an error otherwise). The hook stays
    /// until the returned [`GradReadyHook`] is dropped.
    ///
    /// ```
    /// use std::sync::{Arc, Mutex};
    /// use kusari::prelude::*;
    ///
    /// # fn main() -> Result<()> {
    /// let w1 = Variable::new(Array::from_vec(vec![2.0f64], &[1])?);
    /// let w2 = Variable::new(Array::from_vec(vec![3.0f64], &[1])?);
    /// let seen = Arc::new(Mutex::new(Vec::new()));
    /// let hooks = [(&w1, "w1"), (&w2, "w2")].map(|(w, name)| {
    ///     let (seen, w) = (seen.clone(), w.clone());
    ///     w.clone().on_grad_ready(move || {
    ///         let g = w.grad_array().unwrap().to_vec::<f64>().unwrap()[0];
    ///         seen.lock().unwrap().push((name, g));
    ///     })
    /// });
    /// // y = (w1 x) w2: backward reaches w2 first, then w1.
    /// let x = Variable::constant(Array::from_vec(vec![5.0f64], &[1])?);
    /// let y = (&(&w1 * &x)? * &w2)?;
    /// F::sum(&y)?.backward()?;
    /// assert_eq!(*seen.lock().unwrap(), vec![("w2", 10.0), ("w1", 15.0)]);
    /// drop(hooks);
    /// # Ok(()) }
    /// ```
    pub fn on_grad_ready(&self, hook: impl Fn() + Send + Sync + 'static) -> Result<GradReadyHook> {
        if !self.node.requires_grad || self.node.creator().is_some() {
            return Err(Error::InvalidArgument {
                op: "Variable::on_grad_ready".into(),
                msg: format!(
                    "only a leaf that requires a gradient has one to be ready; this variable \
                     {}",
                    if self.node.requires_grad {
                        "was computed by a function"
                    } else {
                        "is a constant"
                    }
                ),
            });
        }
        let id = NEXT_ID.fetch_add(1, Ordering::Relaxed);
        let hook: LeafHook = Arc::new(hook);
        lock(&self.node.grad).hooks.push((id, hook));
        REGISTERED.fetch_add(1, Ordering::Relaxed);
        Ok(GradReadyHook {
            node: Arc::downgrade(&self.node),
            id,
        })
    }
}

/// The hooked leaves of one backward pass and how many edges each still waits for.
#[derive(Default)]
pub(super) struct LeafWaits {
    waits: HashMap<*const VarNode, (Arc<VarNode>, usize)>,
}

impl LeafWaits {
    /// Counts the edges into hooked leaves from every function reachable from `root`.
    pub(super) fn count(root: &Arc<FuncNode>) -> LeafWaits {
        let mut waits: HashMap<*const VarNode, (Arc<VarNode>, usize)> = HashMap::new();
        let mut seen = std::collections::HashSet::new();
        let mut stack = vec![root.clone()];
        seen.insert(Arc::as_ptr(root));
        while let Some(f) = stack.pop() {
            for slot in &f.inputs {
                let node = &slot.node;
                if !node.requires_grad {
                    continue;
                }
                match node.creator() {
                    Some(c) => {
                        if seen.insert(Arc::as_ptr(&c)) {
                            stack.push(c);
                        }
                    }
                    None => {
                        if !lock(&node.grad).hooks.is_empty() {
                            waits
                                .entry(Arc::as_ptr(node))
                                .or_insert_with(|| (node.clone(), 0))
                                .1 += 1;
                        }
                    }
                }
            }
        }
        LeafWaits { waits }
    }

    /// Takes `func`'s edges off; returns the leaves that now wait for nothing.
    pub(super) fn ran(&mut self, func: &FuncNode) -> Vec<Arc<VarNode>> {
        let mut done = Vec::new();
        for slot in &func.inputs {
            let key = Arc::as_ptr(&slot.node);
            if let Some((_, n)) = self.waits.get_mut(&key) {
                *n -= 1;
                if *n == 0 {
                    done.extend(self.waits.remove(&key).map(|(node, _)| node));
                }
            }
        }
        done
    }

    /// The leaves still waiting at the end of the pass.
    pub(super) fn rest(&mut self) -> Vec<Arc<VarNode>> {
        self.waits.drain().map(|(_, (node, _))| node).collect()
    }
}

/// Calls `node`'s hooks (outside its lock: a hook reads the gradient).
pub(super) fn call_hooks(node: &VarNode) {
    let hooks: Vec<LeafHook> = lock(&node.grad)
        .hooks
        .iter()
        .map(|(_, h)| h.clone())
        .collect();
    for hook in hooks {
        hook();
    }
}

#[cfg(test)]
mod tests {
    use std::sync::Mutex;

    use super::*;
    use crate::Array;
    use crate::prelude::F;

    fn leaf(v: f64) -> Variable {
        Variable::new(Array::from_vec(vec![v], &[1]).unwrap())
    }

    /// Registers a hook on `w` that records `name` and `w`'s gradient at the call.
    fn record(
        w: &Variable,
        name: &'static str,
        log: &Arc<Mutex<Vec<(&'static str, f64)>>>,
    ) -> GradReadyHook {
        let (w2, log) = (w.clone(), log.clone());
        w.on_grad_ready(move || {
            let g = w2
                .grad_array()
                .map_or(f64::NAN, |g| g.to_vec::<f64>().unwrap()[0]);
            log.lock().unwrap().push((name, g));
        })
        .unwrap()
    }

    #[test]
    fn a_leaf_used_twice_is_called_once_with_the_sum_and_an_unreached_one_at_the_end() {
        let log = Arc::new(Mutex::new(Vec::new()));
        let (a, b, c) = (leaf(2.0), leaf(3.0), leaf(7.0));
        let hooks = [
            record(&a, "a", &log),
            record(&b, "b", &log),
            record(&c, "c", &log),
        ];
        // y = a b + a²; c is in no graph of y, so its hook is not called.
        let ab = (&a * &b).unwrap();
        let aa = (&a * &a).unwrap();
        let y = (&ab + &aa).unwrap();
        F::sum(&y).unwrap().backward().unwrap();
        // dy/da = b + 2a = 7, dy/db = a = 2; each called once, after its last edge.
        let got = log.lock().unwrap().clone();
        assert_eq!(got.len(), 2, "{got:?}");
        assert!(
            got.contains(&("a", 7.0)) && got.contains(&("b", 2.0)),
            "{got:?}"
        );
        // A second pass accumulates: the hook sees the total.
        log.lock().unwrap().clear();
        F::sum(&(&a * &b).unwrap()).unwrap().backward().unwrap();
        let got = log.lock().unwrap().clone();
        assert!(
            got.contains(&("a", 10.0)) && got.contains(&("b", 4.0)),
            "{got:?}"
        );
        // Dropped hooks are gone.
        drop(hooks);
        log.lock().unwrap().clear();
        F::sum(&(&a * &b).unwrap()).unwrap().backward().unwrap();
        assert!(log.lock().unwrap().is_empty());
    }

    /// The identity, whose backward passes no gradient.
    struct Stop;

    impl crate::FunctionNode for Stop {
        fn forward(
            &mut self,
            _ctx: &mut crate::ForwardContext,
            inputs: &[Array],
        ) -> Result<Vec<Array>> {
            Ok(vec![inputs[0].clone()])
        }

        fn backward(
            &self,
            _ctx: &crate::BackwardContext<'_>,
            _targets: &[usize],
            _gys: &[Option<Variable>],
        ) -> Result<Vec<Option<Variable>>> {
            Ok(vec![None])
        }
    }

    #[test]
    fn a_hooked_leaf_that_no_gradient_reaches_is_called_at_the_end_of_the_pass() {
        use crate::FunctionNode;
        let log = Arc::new(Mutex::new(Vec::new()));
        let (a, c) = (leaf(2.0), leaf(-1.0));
        let _hooks = [record(&a, "a", &log), record(&c, "c", &log)];
        // y = a² + stop(c²): the function c² is reachable but never runs its backward.
        let stopped = Stop.apply(&[&(&c * &c).unwrap()]).unwrap().remove(0);
        let y = (&(&a * &a).unwrap() + &stopped).unwrap();
        F::sum(&y).unwrap().backward().unwrap();
        let got = log.lock().unwrap().clone();
        assert_eq!(got.len(), 2, "{got:?}");
        assert_eq!(got[0], ("a", 4.0), "{got:?}");
        assert_eq!(got[1].0, "c");
        assert!(got[1].1.is_nan(), "c has no gradient: {got:?}");
    }

    #[test]
    fn only_leaves_that_require_a_gradient_take_hooks() {
        let x = Variable::constant(Array::from_vec(vec![1.0f64], &[1]).unwrap());
        let err = x.on_grad_ready(|| {}).unwrap_err().to_string();
        assert!(err.contains("is a constant"), "{err}");
        let y = (&leaf(1.0) * &leaf(2.0)).unwrap();
        let err = y.on_grad_ready(|| {}).unwrap_err().to_string();
        assert!(err.contains("was computed by a function"), "{err}");
    }
}
