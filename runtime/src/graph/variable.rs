//! [`Variable`]'s methods: its data, its place in the graph, its gradient and its name. The type
//! is declared with the graph's other node types in `node.rs`; `backward` is in `backward.rs`,
//! and the operators and arithmetic methods are in `functions/operators.rs`, beside the
//! functions they apply.

use std::fmt;
use std::sync::Arc;

use super::node::{FuncNode, Variable};
use crate::error::{Error, Result};
use crate::sync::lock;
use crate::{Array, DType, Device};

impl Variable {
    /// A leaf variable that requires gradients (Chainer's default).
    pub fn new(array: Array) -> Self {
        Self::with_requires_grad(array, true)
    }

    /// A leaf variable that gets no gradient (data such as labels, masks or inputs).
    pub fn constant(array: Array) -> Self {
        Self::with_requires_grad(array, false)
    }

    /// A leaf variable, requiring gradients or not.
    pub fn with_requires_grad(array: Array, requires_grad: bool) -> Self {
        Variable::with_new_node(array, requires_grad, 0)
    }

    /// The same variable with a name, shown in messages and `Debug`.
    pub fn with_name(self, name: &str) -> Self {
        self.set_name(Some(name));
        self
    }

    /// The data.
    pub fn array(&self) -> &Array {
        &self.array
    }

    /// The data's shape.
    pub fn shape(&self) -> &[usize] {
        self.array.shape()
    }

    /// The data's number of dimensions.
    pub fn ndim(&self) -> usize {
        self.array.ndim()
    }

    /// The data's number of elements.
    pub fn size(&self) -> usize {
        self.array.size()
    }

    /// The data's dtype.
    pub fn dtype(&self) -> DType {
        self.array.dtype()
    }

    /// The data's device.
    pub fn device(&self) -> Device {
        self.array.device()
    }

    /// Whether gradients flow to this variable.
    pub fn requires_grad(&self) -> bool {
        self.node.requires_grad
    }

    /// The variable's position in the graph: 0 for leaves, creator's rank + 1 otherwise.
    pub fn rank(&self) -> u32 {
        self.node.rank
    }

    /// The variable's name.
    pub fn name(&self) -> Option<String> {
        lock(&self.node.name).as_deref().map(str::to_string)
    }

    /// Sets or clears the name (shared by clones).
    pub fn set_name(&self, name: Option<&str>) {
        *lock(&self.node.name) = name.map(Arc::from);
    }

    /// The label of the function that created this variable, if it has one.
    pub fn creator_label(&self) -> Option<String> {
        self.node.creator().map(|f| f.label().into_owned())
    }

    /// Whether this variable was created by a function whose graph is still attached.
    pub fn has_creator(&self) -> bool {
        lock(&self.node.creator).is_some()
    }

    /// Whether two variables share one graph node (clones do).
    pub fn same_node(&self, other: &Variable) -> bool {
        Arc::ptr_eq(&self.node, &other.node)
    }

    /// The gradient, if one has been computed or set.
    pub fn grad(&self) -> Option<Variable> {
        lock(&self.node.grad).grad.clone()
    }

    /// The gradient's data.
    pub fn grad_array(&self) -> Option<Array> {
        self.grad().map(|g| g.array.clone())
    }

    /// The loss scale of the last `backward` that reached this leaf, if one was given.
    pub fn loss_scale(&self) -> Option<f64> {
        lock(&self.node.grad).loss_scale
    }

    /// Sets the gradient (checked against the variable's shape, dtype and device) or clears it.
    pub fn set_grad(&self, grad: Option<Variable>) -> Result<()> {
        if let Some((what, expected, actual)) = grad.as_ref().and_then(|g| self.node.mismatch(g)) {
            return Err(Error::GradDoesNotMatch {
                name: self.node.name_suffix(),
                what,
                expected,
                actual,
            });
        }
        lock(&self.node.grad).grad = grad;
        Ok(())
    }

    /// Sets the gradient from an array (as a constant variable).
    pub fn set_grad_array(&self, grad: Array) -> Result<()> {
        self.set_grad(Some(Variable::constant(grad)))
    }

    /// Clears the gradient (Chainer's `cleargrad`).
    pub fn cleargrad(&self) {
        let mut g = lock(&self.node.grad);
        g.grad = None;
        g.loss_scale = None;
    }

    /// A constant variable with the same data and no graph behind it.
    pub fn detach(&self) -> Variable {
        Variable::constant(self.array.clone())
    }

    /// Cuts the link to the creator: backward stops here. Shared by clones.
    pub fn unchain(&self) {
        lock(&self.node.creator).take();
    }

    /// Cuts every link in the graph behind this variable, freeing the functions and the arrays
    /// they retained (other variables of that graph lose their creators too).
    pub fn unchain_backward(&self) {
        let mut stack: Vec<Arc<FuncNode>> = lock(&self.node.creator).take().into_iter().collect();
        while let Some(f) = stack.pop() {
            for slot in &f.inputs {
                stack.extend(lock(&slot.node.creator).take());
            }
        }
    }
}

impl fmt::Debug for Variable {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        let mut d = f.debug_struct("Variable");
        if let Some(name) = self.name() {
            d.field("name", &name);
        }
        if let Some(c) = self.creator_label() {
            d.field("creator", &c);
        }
        d.field("array", &self.array).finish()
    }
}

impl From<Array> for Variable {
    fn from(array: Array) -> Self {
        Variable::new(array)
    }
}
