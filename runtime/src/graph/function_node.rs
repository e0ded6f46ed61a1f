//! [`FunctionNode`]: the contract of a differentiable function, the contexts its `forward` and
//! `backward` see ([`ForwardContext`], [`BackwardContext`]), and [`apply`], which runs one and
//! records it in the graph.

use std::borrow::Cow;
use std::sync::{Arc, Mutex};

use ndarray::Dimension;

use super::host_fallback::forward_on_host;
pub use super::node::Formula;
use super::node::{FuncNode, InputSlot, OutputSlot, RecordedFunction, VarNode, Variable};
use crate::config;
use crate::error::{Error, Result};
use crate::sync::lock;
use crate::{Array, DType, Device};

/// A differentiable function (Chainer's `FunctionNode`).
///
/// `forward` computes output arrays from input arrays and marks, through the [`ForwardContext`],
/// which inputs and outputs `backward` will need. `backward` receives those as variables through
/// the [`BackwardContext`], one gradient per output (`None` where no gradient flowed), and
/// returns one gradient per input (`None` for "no gradient"). It is written with differentiable
/// functions, so its result can be differentiated again.
///
/// A node is applied once: [`apply`] takes it by value, so reusing a node (which corrupts the
/// first graph in Chainer) does not compile.
///
/// ```
/// use kusari::prelude::*;
///
/// /// f(x, y, z) = x * y + z
/// struct MulAdd;
///
/// impl FunctionNode for MulAdd {
///     fn forward(&mut self, ctx: &mut ForwardContext, inputs: &[Array]) -> Result<Vec<Array>> {
///         ctx.retain_inputs(&[0, 1]);
///         let (x, y, z) = (&inputs[0], &inputs[1], &inputs[2]);
///         Ok(vec![(x * y + z)?])
///     }
///
///     fn backward(&self, ctx: &BackwardContext, _targets: &[usize], gys: &[Option<Variable>])
///         -> Result<Vec<Option<Variable>>> {
///         let (x, y) = (ctx.retained_input(0)?, ctx.retained_input(1)?);
///         let gw = gys[0].as_ref().expect("single output gets a gradient");
///         Ok(vec![Some((&y * gw)?), Some((&x * gw)?), Some(gw.clone())])
///     }
/// }
///
/// # fn main() -> Result<()> {
/// let v = |a: f64| Variable::new(Array::full(&[2], a, DType::F64).unwrap());
/// let (x, y, z) = (v(2.0), v(3.0), v(1.0));
/// let w = MulAdd.apply(&[&x, &y, &z])?.remove(0);
/// assert_eq!(w.array().to_vec::<f64>()?, vec![7.0, 7.0]);
/// # Ok(()) }
/// ```
pub trait FunctionNode: Send + Sync + 'static {
    /// The name used in messages; the type's name by default.
    fn label(&self) -> Cow<'static, str> {
        let full = std::any::type_name::<Self>();
        let base = full.split('<').next().unwrap_or(full);
        Cow::Borrowed(base.rsplit("::").next().unwrap_or(base))
    }

    /// Computes the outputs. By default dispatches on the inputs' device to
    /// [`forward_cpu`](Self::forward_cpu) or [`forward_gpu`](Self::forward_gpu). A function
    /// without `forward_gpu` runs `forward_cpu` on host copies of CUDA inputs (host fallback:
    /// counted, traced, and forbidden by [`crate::config::using_host_fallback`]`(false)`).
    fn forward(&mut self, ctx: &mut ForwardContext, inputs: &[Array]) -> Result<Vec<Array>> {
        match inputs.first().map_or(Device::Cpu, Array::device) {
            Device::Cpu => self.forward_cpu(ctx, inputs),
            device @ Device::Cuda(_) => match self.forward_gpu(ctx, inputs) {
                Err(Error::NotImplemented {
                    method: "forward_gpu",
                    ..
                }) => {
                    let label = self.label();
                    forward_on_host(&label, inputs, device, |host| self.forward_cpu(ctx, host))
                }
                result => result,
            },
        }
    }

    /// The forward computation on host arrays.
    fn forward_cpu(&mut self, _ctx: &mut ForwardContext, _inputs: &[Array]) -> Result<Vec<Array>> {
        Err(Error::NotImplemented {
            function: self.label().into_owned(),
            method: "forward_cpu",
            device: Device::Cpu,
        })
    }

    /// The forward computation on CUDA arrays.
    fn forward_gpu(&mut self, _ctx: &mut ForwardContext, inputs: &[Array]) -> Result<Vec<Array>> {
        Err(Error::NotImplemented {
            function: self.label().into_owned(),
            method: "forward_gpu",
            device: inputs.first().map_or(Device::Cpu, Array::device),
        })
    }

    /// Gradients of the inputs from gradients of the outputs. `target_input_indexes` lists the
    /// inputs whose gradient is needed (sorted); others may be skipped (`None`).
    fn backward(
        &self,
        ctx: &BackwardContext<'_>,
        target_input_indexes: &[usize],
        grad_outputs: &[Option<Variable>],
    ) -> Result<Vec<Option<Variable>>>;

    /// The function as one elementwise formula over its inputs, for [`crate::fuse`]: a body in
    /// the expression language whose inputs are the function's inputs and whose outputs are
    /// its outputs, in order, with the values of its parameters. `None` (the default): the
    /// function is not elementwise, and a fused closure that calls it is refused at trace
    /// time with an error naming it. The built-in elementwise functions, every
    /// [`ElementwiseOp`](crate::ElementwiseOp) and every `#[function_node(kernel(..))]` op
    /// have one; `#[function_node(formula = "..")]` declares one.
    fn formula(&self) -> Option<Formula> {
        None
    }

    /// Applies the function to `inputs` (see [`apply`]).
    fn apply(self, inputs: &[&Variable]) -> Result<Vec<Variable>>
    where
        Self: Sized,
    {
        apply(self, inputs)
    }
}

/// What `forward` tells the graph: which inputs and outputs `backward` needs.
#[derive(Debug, Default)]
pub struct ForwardContext {
    retain_inputs: Indexes,
    retain_outputs: Indexes,
}

impl ForwardContext {
    /// Keeps inputs `indexes` for backward ([`BackwardContext::retained_input`]).
    pub fn retain_inputs(&mut self, indexes: &[usize]) {
        self.retain_inputs.set(indexes);
    }

    /// Keeps outputs `indexes` for backward ([`BackwardContext::retained_output`]).
    pub fn retain_outputs(&mut self, indexes: &[usize]) {
        self.retain_outputs.set(indexes);
    }
}

/// A short list of indexes, inline up to eight (every apply records two of these).
#[derive(Debug, Default)]
struct Indexes {
    inline: [usize; 8],
    len: usize,
    spilled: Vec<usize>,
}

impl Indexes {
    fn set(&mut self, indexes: &[usize]) {
        if indexes.len() <= self.inline.len() {
            self.inline[..indexes.len()].copy_from_slice(indexes);
            self.len = indexes.len();
            self.spilled.clear();
        } else {
            self.len = 0;
            self.spilled = indexes.to_vec();
        }
    }

    fn as_slice(&self) -> &[usize] {
        if self.spilled.is_empty() {
            &self.inline[..self.len]
        } else {
            &self.spilled
        }
    }

    /// Membership for indexes below `n`: a scan of the inline list, or a table for a long one
    /// (so that recording a function of many inputs stays linear in their number).
    fn mask(&self, n: usize) -> IndexMask<'_> {
        if self.spilled.is_empty() {
            IndexMask::List(&self.inline[..self.len])
        } else {
            let mut table = vec![false; n];
            for &i in &self.spilled {
                if let Some(t) = table.get_mut(i) {
                    *t = true;
                }
            }
            IndexMask::Table(table)
        }
    }
}

enum IndexMask<'a> {
    List(&'a [usize]),
    Table(Vec<bool>),
}

impl IndexMask<'_> {
    fn contains(&self, i: usize) -> bool {
        match self {
            IndexMask::List(l) => l.contains(&i),
            IndexMask::Table(t) => t.get(i).copied().unwrap_or(false),
        }
    }
}

/// What `backward` can read: the retained inputs and outputs as variables, and the shapes and
/// dtypes of every input and output.
pub struct BackwardContext<'a> {
    node: &'a Arc<FuncNode>,
}

impl BackwardContext<'_> {
    /// The function's label.
    pub fn label(&self) -> Cow<'static, str> {
        self.node.label()
    }

    /// Number of inputs.
    pub fn n_inputs(&self) -> usize {
        self.node.inputs.len()
    }

    /// Number of outputs.
    pub fn n_outputs(&self) -> usize {
        self.node.outputs.len()
    }

    /// Input `i` as a variable in the graph (gradients of it flow on to the input), if it was
    /// retained in forward.
    pub fn retained_input(&self, i: usize) -> Result<Variable> {
        let slot = self
            .node
            .inputs
            .get(i)
            .ok_or_else(|| self.out_of_range("input", i, self.n_inputs()))?;
        let array = slot
            .retained
            .clone()
            .ok_or_else(|| self.not_retained("input", i))?;
        Ok(Variable::from_node(slot.node.clone(), array))
    }

    /// Output `i` as a variable in the graph, if it was retained in forward.
    pub fn retained_output(&self, i: usize) -> Result<Variable> {
        let slot = self
            .node
            .outputs
            .get(i)
            .ok_or_else(|| self.out_of_range("output", i, self.n_outputs()))?;
        let array = slot
            .retained
            .clone()
            .ok_or_else(|| self.not_retained("output", i))?;
        let mut weak = lock(&slot.node);
        let node = match weak.upgrade() {
            Some(node) => node,
            // The output variable is gone. Recreate its node with this function as creator (as
            // Chainer does), so gradients that reach it in a later backward pass (double
            // backprop) still flow through this function to the inputs.
            None => {
                let node = Arc::new(VarNode::new(&array, true, self.node.rank + 1));
                *lock(&node.creator) = Some(self.node.clone());
                *weak = Arc::downgrade(&node);
                node
            }
        };
        Ok(Variable::from_node(node, array))
    }

    /// All retained inputs, in index order (Chainer's `get_retained_inputs`).
    pub fn retained_inputs(&self) -> Vec<Variable> {
        (0..self.n_inputs())
            .filter_map(|i| self.retained_input(i).ok())
            .collect()
    }

    /// All retained outputs, in index order (Chainer's `get_retained_outputs`).
    pub fn retained_outputs(&self) -> Vec<Variable> {
        (0..self.n_outputs())
            .filter_map(|i| self.retained_output(i).ok())
            .collect()
    }

    fn input_node(&self, i: usize) -> Result<&VarNode> {
        self.node
            .inputs
            .get(i)
            .map(|s| &*s.node)
            .ok_or_else(|| self.out_of_range("input", i, self.n_inputs()))
    }

    fn output_slot(&self, i: usize) -> Result<&OutputSlot> {
        self.node
            .outputs
            .get(i)
            .ok_or_else(|| self.out_of_range("output", i, self.n_outputs()))
    }

    fn out_of_range(&self, what: &'static str, i: usize, n: usize) -> Error {
        Error::IndexOutOfRange {
            function: self.label().into_owned(),
            what,
            index: i,
            count: n,
        }
    }

    /// Shape of input `i` (known whether or not it was retained).
    pub fn input_shape(&self, i: usize) -> Result<&[usize]> {
        Ok(self.input_node(i)?.shape())
    }

    /// Dtype of input `i`.
    pub fn input_dtype(&self, i: usize) -> Result<DType> {
        Ok(self.input_node(i)?.dtype)
    }

    /// Shape, dtype and device of input `i`, known whether or not it was retained: what
    /// `#[retain(meta(x))]` passes to a `#[function_node]` backward.
    pub fn input_meta(&self, i: usize) -> Result<InputMeta<'_>> {
        let node = self.input_node(i)?;
        Ok(InputMeta {
            shape: node.shape(),
            dtype: node.dtype,
            device: node.device,
        })
    }

    /// Shape of output `i`.
    pub fn output_shape(&self, i: usize) -> Result<&[usize]> {
        Ok(self.output_slot(i)?.shape.slice())
    }

    /// Dtype of output `i`.
    pub fn output_dtype(&self, i: usize) -> Result<DType> {
        Ok(self.output_slot(i)?.dtype)
    }

    /// A zero gradient for output `i` (for outputs that received none), on its device.
    pub fn zeros_for_output(&self, i: usize) -> Result<Variable> {
        let slot = self.output_slot(i)?;
        Ok(Variable::constant(Array::zeros_on(
            slot.shape.slice(),
            slot.dtype,
            slot.device,
        )?))
    }

    fn not_retained(&self, what: &'static str, i: usize) -> Error {
        Error::NotRetained {
            function: self.label().into_owned(),
            what,
            index: i,
        }
    }
}

/// The graph runs a recorded function's backward through this, with the function's own node.
impl<F: FunctionNode> RecordedFunction for F {
    fn recorded_label(&self) -> Cow<'static, str> {
        self.label()
    }

    fn recorded_formula(&self) -> Option<Formula> {
        self.formula()
    }

    fn recorded_backward(
        &self,
        func: &Arc<FuncNode>,
        target_input_indexes: &[usize],
        grad_outputs: &[Option<Variable>],
    ) -> Result<Vec<Option<Variable>>> {
        let ctx = BackwardContext { node: func };
        self.backward(&ctx, target_input_indexes, grad_outputs)
    }
}

/// An input's shape, dtype and device without its data, for a backward that needs only those
/// (to sum a broadcast gradient back to the input's shape, or to cast it back to the input's
/// dtype). The function's node records them for every input, so asking for them keeps no array
/// alive, unlike retaining the input. `#[retain(meta(x))]` passes one to a `#[function_node]`
/// backward as `x: &InputMeta`; [`BackwardContext::input_meta`] returns one.
///
/// ```
/// use kusari::prelude::*;
///
/// /// `a + b`, broadcasting: the gradients are summed back to each input's shape.
/// struct BroadcastAdd;
///
/// #[function_node]
/// impl BroadcastAdd {
///     #[retain(meta(a, b))]
///     fn forward(&self, a: &Array, b: &Array) -> Result<Array> {
///         a + b
///     }
///
///     fn backward(&self, a: &InputMeta, b: &InputMeta, gy: &Variable)
///         -> Result<(Variable, Variable)> {
///         Ok((F::sum_to(gy, a.shape())?, F::sum_to(gy, b.shape())?))
///     }
/// }
///
/// # fn main() -> Result<()> {
/// let a = Variable::new(Array::zeros(&[2, 3], DType::F32)?);
/// let b = Variable::new(Array::zeros(&[3], DType::F32)?);
/// F::sum(&broadcast_add(&a, &b)?)?.backward()?;
/// assert_eq!(b.grad_array().expect("b.grad").to_vec::<f32>()?, vec![2.0; 3]);
/// # Ok(()) }
/// ```
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct InputMeta<'a> {
    shape: &'a [usize],
    dtype: DType,
    device: Device,
}

impl<'a> InputMeta<'a> {
    /// The input's shape.
    pub fn shape(&self) -> &'a [usize] {
        self.shape
    }

    /// The input's dtype.
    pub fn dtype(&self) -> DType {
        self.dtype
    }

    /// The device the input was on.
    pub fn device(&self) -> Device {
        self.device
    }

    /// The input's number of axes.
    pub fn ndim(&self) -> usize {
        self.shape.len()
    }
}

/// Describes arrays as `float32[3, 2], float32[3, 2]` for messages.
pub(crate) fn describe(arrays: &[Array]) -> String {
    arrays
        .iter()
        .map(|a| format!("{}{:?}", a.dtype(), a.shape()))
        .collect::<Vec<_>>()
        .join(", ")
}

/// Runs `function` on `inputs` and, when backprop is enabled and an input requires a gradient,
/// records it in the graph. Returns the outputs as variables.
///
/// Errors from `forward` are wrapped with the function's label and the inputs' dtypes and shapes.
pub fn apply<F: FunctionNode>(function: F, inputs: &[&Variable]) -> Result<Vec<Variable>> {
    // Small-input applies dominate tiny ops: keep their array list on the stack.
    let a = |i: usize| inputs[i].array.clone();
    match inputs.len() {
        1 => apply_with(function, inputs, &[a(0)]),
        2 => apply_with(function, inputs, &[a(0), a(1)]),
        3 => apply_with(function, inputs, &[a(0), a(1), a(2)]),
        4 => apply_with(function, inputs, &[a(0), a(1), a(2), a(3)]),
        _ => apply_with(
            function,
            inputs,
            &inputs.iter().map(|v| v.array.clone()).collect::<Vec<_>>(),
        ),
    }
}

fn apply_with<F: FunctionNode>(
    mut function: F,
    inputs: &[&Variable],
    arrays: &[Array],
) -> Result<Vec<Variable>> {
    if let Some(first) = arrays.first()
        && let Some(other) = arrays.iter().find(|a| a.device() != first.device())
    {
        return Err(Error::DeviceMismatch {
            op: function.label().into_owned(),
            lhs: first.device(),
            rhs: other.device(),
        });
    }
    let mut ctx = ForwardContext::default();
    let outputs = function
        .forward(&mut ctx, arrays)
        .map_err(|e| Error::Forward {
            function: function.label().into_owned(),
            inputs: describe(arrays),
            source: Box::new(e),
        })?;
    check_outputs(&function, &ctx, arrays, &outputs)?;

    let requires_grad = inputs.iter().any(|v| v.node.requires_grad);
    if !(requires_grad && config::enable_backprop()) {
        return Ok(outputs
            .into_iter()
            .map(|a| Variable::with_requires_grad(a, requires_grad))
            .collect());
    }

    let rank = inputs.iter().map(|v| v.node.rank).max().unwrap_or(0);
    let results: Vec<Variable> = outputs
        .into_iter()
        .map(|a| Variable::with_new_node(a, true, rank + 1))
        .collect();
    let retain_in = ctx.retain_inputs.mask(inputs.len());
    let input_slots: Vec<InputSlot> = inputs
        .iter()
        .zip(arrays)
        .enumerate()
        .map(|(i, (v, a))| InputSlot {
            node: v.node.clone(),
            retained: retain_in.contains(i).then(|| a.clone()),
        })
        .collect();
    let retain_out = ctx.retain_outputs.mask(results.len());
    let output_slots: Vec<OutputSlot> = results
        .iter()
        .enumerate()
        .map(|(i, v)| OutputSlot {
            node: Mutex::new(Arc::downgrade(&v.node)),
            retained: retain_out.contains(i).then(|| v.array.clone()),
            shape: v.node.shape.clone(),
            dtype: v.node.dtype,
            device: v.node.device,
        })
        .collect();
    let func = Arc::new(FuncNode {
        function: Box::new(function),
        inputs: input_slots,
        outputs: output_slots,
        rank,
    });
    for v in &results {
        *lock(&v.node.creator) = Some(func.clone());
    }
    Ok(results)
}

fn check_outputs<F: FunctionNode>(
    function: &F,
    ctx: &ForwardContext,
    inputs: &[Array],
    outputs: &[Array],
) -> Result<()> {
    if outputs.is_empty() {
        return Err(Error::OutputCount {
            function: function.label().into_owned(),
            expected: 1,
            actual: 0,
        });
    }
    let bad_index = |what: &'static str, i: usize, n: usize| Error::RetainOutOfRange {
        function: function.label().into_owned(),
        what,
        index: i,
        count: n,
    };
    if let Some(&i) = ctx
        .retain_inputs
        .as_slice()
        .iter()
        .find(|&&i| i >= inputs.len())
    {
        return Err(bad_index("input", i, inputs.len()));
    }
    if let Some(&i) = ctx
        .retain_outputs
        .as_slice()
        .iter()
        .find(|&&i| i >= outputs.len())
    {
        return Err(bad_index("output", i, outputs.len()));
    }
    if config::debug() {
        for (index, out) in outputs.iter().enumerate() {
            if out.has_nan()? {
                return Err(Error::NanDetected {
                    function: function.label().into_owned(),
                    stage: "forward",
                    index,
                    shape: out.shape().to_vec(),
                });
            }
        }
    }
    Ok(())
}
