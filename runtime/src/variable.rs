//! [`Variable`]: an array with a place in the backward graph.

use std::fmt;
use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::{Arc, Mutex};

use ndarray::{Dimension, IxDyn};

use crate::error::{Error, Result};
use crate::function_node::FuncNode;
use crate::layout::first_difference;
use crate::sync::lock;
use crate::{Array, DType, Device};

/// A variable's node in the graph: what backward needs, without the data (so intermediate arrays
/// are freed as soon as no variable and no retaining function holds them).
pub(crate) struct VarNode {
    pub(crate) requires_grad: bool,
    pub(crate) rank: u32,
    pub(crate) shape: IxDyn,
    pub(crate) dtype: DType,
    pub(crate) device: Device,
    pub(crate) creator: Mutex<Option<Arc<FuncNode>>>,
    /// The gradient belongs to the variable, not to the graph (as in Chainer, where the graph
    /// holds `VariableNode`s and the gradient lives on the `Variable`): it is dropped with the
    /// last [`Variable`] handle of this node. A gradient recorded for double backprop has a
    /// graph that leads back to this node, so a node owning its gradient past its last handle
    /// would be a reference cycle, leaking both.
    pub(crate) grad: Mutex<GradState>,
    /// How many [`Variable`] handles (clones included) point at this node. The graph's own
    /// references (function inputs) are not handles.
    pub(crate) handles: AtomicUsize,
    pub(crate) name: Mutex<Option<Arc<str>>>,
}

#[derive(Default)]
pub(crate) struct GradState {
    pub(crate) grad: Option<Variable>,
    pub(crate) loss_scale: Option<f64>,
}

impl VarNode {
    pub(crate) fn new(array: &Array, requires_grad: bool, rank: u32) -> Self {
        Self::with_handles(array, requires_grad, rank, 0)
    }

    #[inline]
    fn with_handles(array: &Array, requires_grad: bool, rank: u32, handles: usize) -> Self {
        VarNode {
            requires_grad,
            rank,
            shape: array.layout().dims().clone(),
            dtype: array.dtype(),
            device: array.device(),
            creator: Mutex::new(None),
            grad: Mutex::new(GradState::default()),
            handles: AtomicUsize::new(handles),
            name: Mutex::new(None),
        }
    }

    pub(crate) fn creator(&self) -> Option<Arc<FuncNode>> {
        lock(&self.creator).clone()
    }

    pub(crate) fn shape(&self) -> &[usize] {
        self.shape.slice()
    }

    /// The first of shape, dtype and device in which a gradient `g` differs from this node, as
    /// `(what, expected, actual)` for a message.
    pub(crate) fn mismatch(&self, g: &Variable) -> Option<(&'static str, String, String)> {
        first_difference(
            (self.shape(), self.dtype, self.device),
            (g.shape(), g.dtype(), g.device()),
        )
    }

    /// Whether a [`Variable`] still holds this node, so a gradient stored on it can be read.
    pub(crate) fn has_handles(&self) -> bool {
        self.handles.load(Ordering::Acquire) > 0
    }

    /// `" (name)"` or empty, for messages.
    pub(crate) fn name_suffix(&self) -> String {
        lock(&self.name)
            .as_ref()
            .map(|n| format!(" ({n})"))
            .unwrap_or_default()
    }
}

/// An [`Array`] with a node in the backward graph: its gradient, the function that created it,
/// and whether gradients flow to it.
///
/// Cloning is cheap and clones share the node (so they share `grad`). `Variable` is
/// `Send + Sync`. Operators (`+ - * /`, with `f64` too) apply differentiable functions:
///
/// ```
/// use kusari::prelude::*;
/// # fn main() -> Result<()> {
/// let x = Variable::new(Array::from_vec(vec![3.0f64], &[1])?);
/// let y = (&x * &x)?;            // y = x²
/// y.backward()?;
/// assert_eq!(x.grad_array().unwrap().to_vec::<f64>()?, vec![6.0]);
/// # Ok(()) }
/// ```
pub struct Variable {
    pub(crate) node: Arc<VarNode>,
    pub(crate) array: Array,
}

impl Clone for Variable {
    fn clone(&self) -> Self {
        Variable::from_node(self.node.clone(), self.array.clone())
    }
}

impl Drop for Variable {
    /// The last handle of a node takes its gradient with it (see [`VarNode::grad`]).
    fn drop(&mut self) {
        // When this handle also holds the node's last reference, the node and its gradient go
        // right after this: nothing to break, and no lock to take.
        if self.node.handles.fetch_sub(1, Ordering::AcqRel) == 1
            && Arc::strong_count(&self.node) > 1
        {
            let grad = lock(&self.node.grad).grad.take();
            drop(grad);
        }
    }
}

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

    /// A variable on a new node (its first handle, counted without an atomic operation).
    #[inline]
    pub(crate) fn with_new_node(array: Array, requires_grad: bool, rank: u32) -> Self {
        Variable {
            node: Arc::new(VarNode::with_handles(&array, requires_grad, rank, 1)),
            array,
        }
    }

    /// A new handle on `node` (every other `Variable` is made here, so the count is exact).
    pub(crate) fn from_node(node: Arc<VarNode>, array: Array) -> Self {
        node.handles.fetch_add(1, Ordering::Relaxed);
        Variable { node, array }
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

/// Arithmetic methods used by the operators (`&x + &y` calls [`Variable::add`]); each applies
/// the differentiable function of the same name in [`crate::functions`].
impl Variable {
    /// `self + rhs` ([`functions::add`](crate::functions::add)).
    pub fn add(&self, rhs: &Variable) -> Result<Variable> {
        crate::functions::add(self, rhs)
    }

    /// `self - rhs`.
    pub fn sub(&self, rhs: &Variable) -> Result<Variable> {
        crate::functions::sub(self, rhs)
    }

    /// `self * rhs`.
    pub fn mul(&self, rhs: &Variable) -> Result<Variable> {
        crate::functions::mul(self, rhs)
    }

    /// `self / rhs`.
    pub fn div(&self, rhs: &Variable) -> Result<Variable> {
        crate::functions::div(self, rhs)
    }

    /// `-self`.
    pub fn neg(&self) -> Result<Variable> {
        crate::functions::neg(self)
    }

    /// `self + c`.
    pub fn add_scalar(&self, c: f64) -> Result<Variable> {
        crate::functions::add_scalar(self, c)
    }

    /// `self - c`.
    pub fn sub_scalar(&self, c: f64) -> Result<Variable> {
        crate::functions::sub_scalar(self, c)
    }

    /// `c - self`.
    pub fn rsub_scalar(&self, c: f64) -> Result<Variable> {
        crate::functions::rsub_scalar(self, c)
    }

    /// `self * c`.
    pub fn mul_scalar(&self, c: f64) -> Result<Variable> {
        crate::functions::mul_scalar(self, c)
    }

    /// `self / c`.
    pub fn div_scalar(&self, c: f64) -> Result<Variable> {
        crate::functions::div_scalar(self, c)
    }

    /// `c / self`.
    pub fn rdiv_scalar(&self, c: f64) -> Result<Variable> {
        crate::functions::rdiv_scalar(self, c)
    }
}

crate::ops_macros::impl_arith_ops!(Variable);
