//! The graph's node types: [`Variable`] (a handle on a node), [`VarNode`] (a variable's node) and
//! [`FuncNode`] (an applied function with its inputs' and outputs' nodes).
//!
//! They refer to one another (a variable's node holds its creator and its gradient, a
//! variable; a function's node holds its inputs' nodes), so they live in one file, which imports
//! nothing else from the graph. The function a [`FuncNode`] holds is seen through
//! [`RecordedFunction`], implemented for every [`FunctionNode`](crate::FunctionNode) next to
//! that trait.

use std::borrow::Cow;
use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::{Arc, Mutex, Weak};

use ndarray::{Dimension, IxDyn};

use crate::elementwise_kernel::ElementwiseKernel;
use crate::error::Result;
use crate::layout::first_difference;
use crate::sync::lock;
use crate::{Array, DType, Device, Scalar};

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
    /// Called by `backward()` once this leaf's gradient of the pass is complete, by id
    /// (see `grad_hook.rs`).
    pub(crate) hooks: Vec<(u64, LeafHook)>,
}

/// What [`Variable::on_grad_ready`](crate::Variable::on_grad_ready) registers.
pub(crate) type LeafHook = Arc<dyn Fn() + Send + Sync>;

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
        let g = &g.array;
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
    /// The last handle of a node takes its gradient with it (see `VarNode::grad`).
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
}

/// What the graph keeps of an applied function: its label and its backward. Every
/// [`FunctionNode`](crate::FunctionNode) is one; the trait is declared here, apart from
/// `FunctionNode`, because `FunctionNode`'s contexts refer to the node types.
pub(crate) trait RecordedFunction: Send + Sync {
    /// The function's label ([`FunctionNode::label`](crate::FunctionNode::label)).
    fn recorded_label(&self) -> Cow<'static, str>;

    /// The function's formula ([`FunctionNode::formula`](crate::FunctionNode::formula)(crate::FunctionNode::formula)).
    fn recorded_formula(&self) -> Option<Formula>;

    /// The function's backward, run for `func`, the node that recorded it.
    fn recorded_backward(
        &self,
        func: &Arc<FuncNode>,
        target_input_indexes: &[usize],
        grad_outputs: &[Option<Variable>],
    ) -> Result<Vec<Option<Variable>>>;
}

pub(crate) struct InputSlot {
    pub(crate) node: Arc<VarNode>,
    pub(crate) retained: Option<Array>,
}

pub(crate) struct OutputSlot {
    /// The output's node; replaced by
    /// [`BackwardContext::retained_output`](crate::BackwardContext::retained_output) when it
    /// has gone.
    pub(crate) node: Mutex<Weak<VarNode>>,
    pub(crate) retained: Option<Array>,
    pub(crate) shape: IxDyn,
    pub(crate) dtype: DType,
    pub(crate) device: Device,
}

/// A function applied in the graph: the user's node, its inputs' nodes (strong) and its outputs'
/// nodes (weak: outputs own their creator, never the reverse, so there are no cycles).
pub(crate) struct FuncNode {
    pub(crate) function: Box<dyn RecordedFunction>,
    pub(crate) inputs: Vec<InputSlot>,
    pub(crate) outputs: Vec<OutputSlot>,
    pub(crate) rank: u32,
}

impl FuncNode {
    pub(crate) fn label(&self) -> Cow<'static, str> {
        self.function.recorded_label()
    }
}

impl Drop for FuncNode {
    /// Frees a long chain iteratively: a recursive drop of a graph thousands of functions deep
    /// would overflow the stack.
    fn drop(&mut self) {
        let mut pending: Vec<Arc<FuncNode>> = Vec::new();
        let release = |inputs: Vec<InputSlot>, pending: &mut Vec<Arc<FuncNode>>| {
            for slot in inputs {
                if let Ok(node) = Arc::try_unwrap(slot.node) {
                    pending.extend(node.creator.into_inner().unwrap_or_else(|e| e.into_inner()));
                }
            }
        };
        release(std::mem::take(&mut self.inputs), &mut pending);
        while let Some(f) = pending.pop() {
            if let Ok(mut f) = Arc::try_unwrap(f) {
                release(std::mem::take(&mut f.inputs), &mut pending);
            }
        }
    }
}

/// A function's computation as one elementwise body ([`FunctionNode::formula`](crate::FunctionNode::formula)): the kernel
/// whose inputs and outputs are the function's, and the values of its parameters.
#[derive(Clone, Debug)]
pub struct Formula {
    /// The signature and the body (its name is used in messages; `preamble` and the other
    /// parts around the loop are not read).
    pub kernel: ElementwiseKernel,
    /// The value of each of the kernel's parameters, in order.
    pub params: Vec<Scalar>,
}

/// A variable's node seen from outside the graph module, for [`crate::fuse`], which reads back
/// what a traced closure recorded.
pub(crate) struct GraphNode(Arc<VarNode>);

/// The function that made a [`GraphNode`]'s variable.
pub(crate) struct Creator {
    pub(crate) label: Cow<'static, str>,
    /// Its inputs' nodes, in order.
    pub(crate) inputs: Vec<GraphNode>,
    /// Which of its outputs the variable is.
    pub(crate) index: usize,
    pub(crate) formula: Option<Formula>,
}

impl GraphNode {
    /// The node's identity.
    pub(crate) fn key(&self) -> usize {
        Arc::as_ptr(&self.0) as usize
    }

    /// The function that made the variable; `None` for a leaf.
    pub(crate) fn creator(&self) -> Option<Creator> {
        let func = self.0.creator()?;
        let me = Arc::as_ptr(&self.0);
        let index = func
            .outputs
            .iter()
            .position(|o| std::ptr::eq(lock(&o.node).as_ptr(), me))?;
        Some(Creator {
            label: func.label(),
            inputs: func
                .inputs
                .iter()
                .map(|s| GraphNode(s.node.clone()))
                .collect(),
            index,
            formula: func.function.recorded_formula(),
        })
    }
}

impl Variable {
    /// The variable's node ([`GraphNode`]).
    pub(crate) fn graph_node(&self) -> GraphNode {
        GraphNode(self.node.clone())
    }

    /// The identity of the variable's node.
    pub(crate) fn node_key(&self) -> usize {
        Arc::as_ptr(&self.node) as usize
    }
}
