//! The backward pass: [`Variable::backward`] and the functional [`grad`].
//!
//! Functions are processed from the highest rank down (a max-heap), so every gradient reaching a
//! variable is summed before the function that created it runs. Gradients returned by user code
//! are always checked: one per input, with the input's shape, dtype and device.

use std::borrow::Cow;
use std::collections::hash_map::Entry;
use std::collections::{BinaryHeap, HashMap, HashSet};
use std::hash::{BuildHasherDefault, Hasher};
use std::sync::Arc;

use super::function_node::describe;
use super::grad_hook::{self, LeafWaits};
use super::grad_math::{add_grads, scale_grad};
use super::node::{FuncNode, VarNode, Variable};
use crate::config;
use crate::error::{Error, Result};
use crate::sync::lock;

/// Options of [`Variable::backward_with`].
#[derive(Clone, Copy, Debug, Default)]
pub struct BackwardOptions {
    /// Keep the gradients of intermediate variables (by default only leaves keep theirs).
    pub retain_grad: bool,
    /// Record the backward computation itself, so gradients can be differentiated again.
    pub enable_double_backprop: bool,
    /// Multiply the initial gradient by this factor (loss scaling for half precision); leaves
    /// remember it ([`Variable::loss_scale`]) so an optimizer can undo it.
    pub loss_scale: Option<f64>,
}

/// Options of [`grad`].
#[derive(Clone, Debug, Default)]
pub struct GradOptions {
    /// Initial gradients added to the inputs' results (one per input, `None` for none).
    pub grad_inputs: Option<Vec<Option<Variable>>>,
    /// Also store the results as the inputs' `grad`.
    pub set_grad: bool,
    /// Keep intermediate gradients on their variables.
    pub retain_grad: bool,
    /// Record the backward computation so the results can be differentiated again.
    pub enable_double_backprop: bool,
    /// Multiply the initial gradients by this factor.
    pub loss_scale: Option<f64>,
}

type NodeKey = *const VarNode;

/// Hashes pointer keys with one multiply: graph maps are hit on every gradient, and SipHash's
/// protection against chosen keys is not needed for addresses.
#[derive(Default)]
struct PtrHasher(u64);

impl Hasher for PtrHasher {
    fn write(&mut self, bytes: &[u8]) {
        for &b in bytes {
            self.0 = (self.0.rotate_left(8) ^ u64::from(b)).wrapping_mul(0x9E37_79B9_7F4A_7C15);
        }
    }

    fn write_usize(&mut self, n: usize) {
        self.0 = ((n as u64) ^ ((n as u64) >> 32)).wrapping_mul(0x9E37_79B9_7F4A_7C15);
    }

    fn finish(&self) -> u64 {
        self.0
    }
}

type PtrMap<K, V> = HashMap<K, V, BuildHasherDefault<PtrHasher>>;
type PtrSet<K> = HashSet<K, BuildHasherDefault<PtrHasher>>;

fn key(node: &Arc<VarNode>) -> NodeKey {
    Arc::as_ptr(node)
}

/// A function waiting in the heap, ordered by rank (ties by insertion order).
struct Pending {
    rank: u32,
    seq: usize,
    func: Arc<FuncNode>,
}

impl PartialEq for Pending {
    fn eq(&self, o: &Self) -> bool {
        (self.rank, self.seq) == (o.rank, o.seq)
    }
}
impl Eq for Pending {}
impl PartialOrd for Pending {
    fn partial_cmp(&self, o: &Self) -> Option<std::cmp::Ordering> {
        Some(self.cmp(o))
    }
}
impl Ord for Pending {
    fn cmp(&self, o: &Self) -> std::cmp::Ordering {
        (self.rank, std::cmp::Reverse(self.seq)).cmp(&(o.rank, std::cmp::Reverse(o.seq)))
    }
}

/// Where the gradients of leaves go.
enum Sink<'a> {
    /// `backward()`: accumulate into every leaf's `grad`.
    Leaves,
    /// `grad()`: collect for these nodes only; touch no `grad`.
    Targets(&'a PtrSet<NodeKey>),
}

struct Engine<'a> {
    sink: Sink<'a>,
    retain_grad: bool,
    double: bool,
    loss_scale: Option<f64>,
    s: ScratchBox,
    /// `backward()` with gradient-ready hooks registered: the hooked leaves still waiting.
    waits: Option<LeafWaits>,
}

/// The engine's containers, kept per thread between backward passes so that a small backward
/// allocates nothing for its bookkeeping. Always cleared before being put back.
#[derive(Default)]
struct Scratch {
    grads: PtrMap<NodeKey, (Arc<VarNode>, Variable)>,
    heap: BinaryHeap<Pending>,
    queued: PtrSet<*const FuncNode>,
    /// For `grad()`: functions below which a target lies (memoised).
    reaches: PtrMap<*const FuncNode, bool>,
    gys: Vec<Option<Variable>>,
    targets: Vec<usize>,
}

/// Containers that grew past this many entries are not kept (one huge graph should not pin
/// memory for the rest of the thread's life).
const SCRATCH_KEEP_MAX: usize = 4096;

thread_local! {
    // Boxed, so that taking and giving back moves a pointer rather than the containers
    // (a few hundred bytes, copied twice per backward pass).
    static SCRATCH: std::cell::Cell<Option<Box<Scratch>>> = const { std::cell::Cell::new(None) };
}

/// The engine's hold on the thread's [`Scratch`]: there from [`Engine::new`] until the engine
/// drops, when it goes back.
struct ScratchBox(Option<Box<Scratch>>);

impl std::ops::Deref for ScratchBox {
    type Target = Scratch;
    fn deref(&self) -> &Scratch {
        self.0
            .as_deref()
            .unwrap_or_else(|| unreachable!("the scratch is held until drop"))
    }
}

impl std::ops::DerefMut for ScratchBox {
    fn deref_mut(&mut self) -> &mut Scratch {
        self.0
            .as_deref_mut()
            .unwrap_or_else(|| unreachable!("the scratch is held until drop"))
    }
}

impl Drop for ScratchBox {
    fn drop(&mut self) {
        if let Some(s) = self.0.take() {
            s.give_back();
        }
    }
}

impl Scratch {
    fn take() -> ScratchBox {
        let s = SCRATCH.with(|c| c.take()).unwrap_or_else(|| {
            Box::new(Scratch {
                grads: PtrMap::with_capacity_and_hasher(8, Default::default()),
                ..Scratch::default()
            })
        });
        ScratchBox(Some(s))
    }

    fn give_back(mut self: Box<Self>) {
        self.grads.clear();
        self.heap.clear();
        self.queued.clear();
        self.reaches.clear();
        self.gys.clear();
        self.targets.clear();
        let big = self
            .grads
            .capacity()
            .max(self.queued.capacity())
            .max(self.reaches.capacity())
            > SCRATCH_KEEP_MAX;
        if !big {
            SCRATCH.with(|c| c.set(Some(self)));
        }
    }
}

impl<'a> Engine<'a> {
    fn new(sink: Sink<'a>, retain_grad: bool, double: bool, loss_scale: Option<f64>) -> Self {
        Engine {
            sink,
            retain_grad,
            double,
            loss_scale,
            s: Scratch::take(),
            waits: None,
        }
    }

    fn is_target(&self, node: &Arc<VarNode>) -> bool {
        match self.sink {
            Sink::Leaves => false,
            Sink::Targets(t) => t.contains(&key(node)),
        }
    }

    /// Whether a gradient flowing into `node` can reach a target (always, for `backward()`).
    fn leads_to_target(&mut self, node: &Arc<VarNode>) -> bool {
        match self.sink {
            Sink::Leaves => true,
            Sink::Targets(targets) => targets.contains(&key(node)) || self.leads_below(node),
        }
    }

    /// Whether a target lies below the function that created `node`.
    fn leads_below(&mut self, node: &Arc<VarNode>) -> bool {
        node.creator().is_some_and(|f| self.func_reaches(f))
    }

    /// Whether a target lies among the inputs of `root` or below them (iterative post-order
    /// walk, memoised per function).
    fn func_reaches(&mut self, root: Arc<FuncNode>) -> bool {
        let Sink::Targets(targets) = self.sink else {
            return true;
        };
        let root_key = Arc::as_ptr(&root);
        let mut stack = vec![(root, false)];
        while let Some((f, expanded)) = stack.pop() {
            let fk = Arc::as_ptr(&f);
            if self.s.reaches.contains_key(&fk) {
                continue;
            }
            let inputs = f.inputs.iter().filter(|s| s.node.requires_grad);
            if expanded {
                let hit = inputs.clone().any(|s| {
                    targets.contains(&key(&s.node))
                        || s.node.creator().is_some_and(|c| {
                            self.s
                                .reaches
                                .get(&Arc::as_ptr(&c))
                                .copied()
                                .unwrap_or(false)
                        })
                });
                self.s.reaches.insert(fk, hit);
            } else {
                let children: Vec<Arc<FuncNode>> =
                    inputs.filter_map(|s| s.node.creator()).collect();
                stack.push((f, true));
                stack.extend(children.into_iter().map(|c| (c, false)));
            }
        }
        self.s.reaches[&root_key]
    }

    /// Whether backprop must continue into the creator of `node` once it holds a gradient.
    fn continues_below(&mut self, node: &Arc<VarNode>) -> bool {
        match self.sink {
            Sink::Leaves => true,
            Sink::Targets(_) if self.is_target(node) => self.leads_below(node),
            Sink::Targets(_) => self.leads_to_target(node),
        }
    }

    fn push_creator(&mut self, node: &Arc<VarNode>) {
        if let Some(f) = node.creator()
            && self.s.queued.insert(Arc::as_ptr(&f))
        {
            let seq = self.s.queued.len();
            self.s.heap.push(Pending {
                rank: f.rank,
                seq,
                func: f,
            });
        }
    }

    /// Adds `g` to the pending gradient of `node`.
    fn add_grad(&mut self, node: &Arc<VarNode>, g: Variable) -> Result<()> {
        match self.s.grads.entry(key(node)) {
            Entry::Occupied(mut e) => {
                let sum = add_grads(&e.get().1, &g)?;
                e.get_mut().1 = sum;
            }
            Entry::Vacant(e) => {
                e.insert((node.clone(), g));
            }
        }
        Ok(())
    }

    fn seed(&mut self, node: &Arc<VarNode>, g: Variable) -> Result<()> {
        let g = match self.loss_scale {
            Some(s) => scale_grad(&g, s)?,
            None => g,
        };
        self.add_grad(node, g)?;
        if self.continues_below(node) {
            self.push_creator(node);
        }
        Ok(())
    }

    fn run(&mut self) -> Result<()> {
        // Sums of gradients are recorded only when the backward computation is.
        let _mode = config::using_backprop(self.double);
        while let Some(Pending { func, .. }) = self.s.heap.pop() {
            self.step(&func)?;
        }
        if let Sink::Leaves = self.sink {
            // What is left are gradients of leaves (and of the roots when they are leaves).
            for (_, (node, g)) in self.s.grads.drain() {
                if node.creator().is_none() && node.requires_grad {
                    store_grad(&node, g, true, self.loss_scale)?;
                }
            }
            // Hooked leaves under functions no gradient reached are complete now.
            if let Some(waits) = &mut self.waits {
                for node in waits.rest() {
                    grad_hook::call_hooks(&node);
                }
            }
        }
        Ok(())
    }

    /// Stores the gradients of the hooked leaves `func`'s backward completed and calls their
    /// hooks.
    fn finish_leaves(&mut self, func: &FuncNode) -> Result<()> {
        let Some(waits) = &mut self.waits else {
            return Ok(());
        };
        for node in waits.ran(func) {
            if let Some((_, g)) = self.s.grads.remove(&key(&node)) {
                store_grad(&node, g, true, self.loss_scale)?;
            }
            grad_hook::call_hooks(&node);
        }
        Ok(())
    }

    fn step(&mut self, func: &Arc<FuncNode>) -> Result<()> {
        let mut gys = std::mem::take(&mut self.s.gys);
        gys.clear();
        for slot in &func.outputs {
            let node = lock(&slot.node).upgrade();
            let g = node.and_then(|n| {
                let g = if self.is_target(&n) {
                    self.s.grads.get(&key(&n)).map(|(_, g)| g.clone())
                } else {
                    self.s.grads.remove(&key(&n)).map(|(_, g)| g)
                };
                if self.retain_grad
                    && let Some(g) = &g
                {
                    let mut state = lock(&n.grad);
                    if n.has_handles() {
                        state.grad = Some(g.clone());
                    }
                }
                g
            });
            gys.push(g);
        }
        let mut targets = std::mem::take(&mut self.s.targets);
        targets.clear();
        if gys.iter().any(Option::is_some) {
            for (i, slot) in func.inputs.iter().enumerate() {
                if slot.node.requires_grad && self.leads_to_target(&slot.node) {
                    targets.push(i);
                }
            }
        }
        let result = if targets.is_empty() {
            Ok(())
        } else {
            self.call_backward(func, &targets, &gys)
        };
        gys.clear();
        self.s.gys = gys;
        self.s.targets = targets;
        result?;
        self.finish_leaves(func)
    }

    /// Runs one function's backward and routes its gradients to its inputs.
    fn call_backward(
        &mut self,
        func: &Arc<FuncNode>,
        targets: &[usize],
        gys: &[Option<Variable>],
    ) -> Result<()> {
        let gxs = {
            let _mode = config::using_backprop(self.double);
            func.function
                .recorded_backward(func, targets, gys)
                .map_err(|e| Error::Backward {
                    function: func.label().into_owned(),
                    grad_outputs: describe_grads(gys),
                    source: Box::new(e),
                })?
        };
        check_grads(func, &gxs)?;
        // `targets` is sorted: walk it beside the gradients (linear in the number of inputs).
        let mut wanted = targets.iter().copied().peekable();
        for (i, gx) in gxs.into_iter().enumerate() {
            while wanted.next_if(|&t| t < i).is_some() {}
            if wanted.next_if_eq(&i).is_none() {
                continue;
            }
            let Some(gx) = gx else { continue };
            let node = func.inputs[i].node.clone();
            self.add_grad(&node, gx)?;
            if self.continues_below(&node) {
                self.push_creator(&node);
            }
        }
        Ok(())
    }
}

fn describe_grads(gys: &[Option<Variable>]) -> String {
    gys.iter()
        .map(|g| match g {
            Some(g) => describe(std::slice::from_ref(g.array())),
            None => "None".to_string(),
        })
        .collect::<Vec<_>>()
        .join(", ")
}

/// Checks a backward's result: one gradient per input, each like its input.
fn check_grads(func: &FuncNode, gxs: &[Option<Variable>]) -> Result<()> {
    let function = || func.label().into_owned();
    if gxs.len() != func.inputs.len() {
        return Err(Error::GradientCount {
            function: function(),
            expected: func.inputs.len(),
            actual: gxs.len(),
        });
    }
    for (input, (g, slot)) in gxs.iter().zip(&func.inputs).enumerate() {
        let Some(g) = g else { continue };
        if let Some((what, expected, actual)) = slot.node.mismatch(g) {
            return Err(Error::GradientMismatch {
                function: function(),
                input,
                what,
                expected,
                actual,
            });
        }
        if config::debug() && g.array().has_nan()? {
            return Err(Error::NanDetected {
                function: function(),
                stage: "backward",
                index: input,
                shape: g.shape().to_vec(),
            });
        }
    }
    Ok(())
}

/// Stores `g` as the node's gradient, summed with the one already there when `accumulate_old`.
///
/// The lock is held from reading the old gradient to storing the sum, so backward passes on
/// several threads into one variable lose no update. A node no [`Variable`] holds any more gets
/// nothing: nobody could read it, and a gradient with a graph would keep the node alive.
fn store_grad(
    node: &Arc<VarNode>,
    g: Variable,
    accumulate_old: bool,
    loss_scale: Option<f64>,
) -> Result<()> {
    let mut state = lock(&node.grad);
    if !node.has_handles() {
        return Ok(());
    }
    let new = match state.grad.take() {
        Some(old) if accumulate_old => match add_grads(&old, &g) {
            Ok(sum) => sum,
            Err(e) => {
                state.grad = Some(old);
                return Err(e);
            }
        },
        _ => g,
    };
    state.grad = Some(new);
    if loss_scale.is_some() {
        state.loss_scale = loss_scale;
    }
    Ok(())
}

/// The initial gradient of an output: its `grad`, or ones for a one-element output.
fn initial_grad(out: &Variable, given: Option<&Variable>) -> Result<Variable> {
    if let Some(g) = given.cloned().or_else(|| out.grad()) {
        return Ok(g);
    }
    if out.size() == 1 {
        return Ok(Variable::constant(out.array().ones_like()?));
    }
    Err(Error::GradRequired {
        shape: out.shape().to_vec(),
    })
}

impl Variable {
    /// Computes the gradients of every leaf this variable depends on, accumulating them into the
    /// leaves' `grad` (Chainer's `backward()`): see [`BackwardOptions`] for the defaults.
    ///
    /// A one-element output with no `grad` is seeded with one; any other output needs its
    /// `grad` set first.
    pub fn backward(&self) -> Result<()> {
        self.backward_with(BackwardOptions::default())
    }

    /// [`backward`](Self::backward) with options.
    pub fn backward_with(&self, options: BackwardOptions) -> Result<()> {
        let seed = initial_grad(self, None)?;
        if self.grad().is_none() {
            lock(&self.node.grad).grad = Some(seed.clone());
        }
        if self.node.creator().is_none() {
            return Ok(());
        }
        let mut engine = Engine::new(
            Sink::Leaves,
            options.retain_grad,
            options.enable_double_backprop,
            options.loss_scale,
        );
        if grad_hook::any()
            && let Some(root) = self.node.creator()
        {
            engine.waits = Some(LeafWaits::count(&root));
        }
        engine.seed(&self.node, seed)?;
        engine.run()
    }
}

/// Checks that each gradient given to [`grad`] (as `what[i]`) has the shape, dtype and device of
/// its variable: a mismatched one would broadcast silently or come back as a wrong result.
fn check_given(what: &str, vars: &[&Variable], grads: &[Option<Variable>]) -> Result<()> {
    for (i, (v, g)) in vars.iter().zip(grads).enumerate() {
        let Some(g) = g else { continue };
        if let Some((field, expected, actual)) = v.node.mismatch(g) {
            return Err(Error::GradArguments {
                msg: format!(
                    "{what}[{i}] has {field} {actual}, but its variable{} has {expected}",
                    v.node.name_suffix()
                ),
            });
        }
    }
    Ok(())
}

/// The initial gradients of [`grad`]'s outputs, one per output (Chainer's `grad_outputs`).
///
/// - `None`: each output's `grad`, or ones for a one-element output;
/// - `&[&gy]`, `&[gy]`, `&[&gy0, &gy1]` (arrays, slices or a `Vec` of variables): one gradient per
///   output, in order;
/// - `&[Some(gy0), None][..]` or `Some(..)` of it, or a `&Vec<Option<Variable>>`: Chainer's
///   list, where `None` leaves that output to its `grad` or ones.
#[diagnostic::on_unimplemented(
    message = "`{Self}` cannot give grad's grad_outputs",
    label = "grad_outputs: write `None`, `&[&gy]` (one gradient per output) or `&[Some(gy), None][..]`",
    note = "see `kusari::GradOutputs` for every accepted form"
)]
pub trait GradOutputs<'a> {
    /// The gradients, one per output (`None` for an absent list).
    fn into_grad_outputs(self) -> Option<Cow<'a, [Option<Variable>]>>;
}

impl<'a> GradOutputs<'a> for Option<&'a [Option<Variable>]> {
    fn into_grad_outputs(self) -> Option<Cow<'a, [Option<Variable>]>> {
        self.map(Cow::Borrowed)
    }
}

impl<'a> GradOutputs<'a> for &'a [Option<Variable>] {
    fn into_grad_outputs(self) -> Option<Cow<'a, [Option<Variable>]>> {
        Some(Cow::Borrowed(self))
    }
}

impl<'a> GradOutputs<'a> for &'a Vec<Option<Variable>> {
    fn into_grad_outputs(self) -> Option<Cow<'a, [Option<Variable>]>> {
        Some(Cow::Borrowed(self))
    }
}

impl<'a> GradOutputs<'a> for &'a [Variable] {
    fn into_grad_outputs(self) -> Option<Cow<'a, [Option<Variable>]>> {
        Some(Cow::Owned(self.iter().cloned().map(Some).collect()))
    }
}

impl<'a> GradOutputs<'a> for &'a [&'a Variable] {
    fn into_grad_outputs(self) -> Option<Cow<'a, [Option<Variable>]>> {
        Some(Cow::Owned(self.iter().map(|&g| Some(g.clone())).collect()))
    }
}

impl<'a, const N: usize> GradOutputs<'a> for &'a [Variable; N] {
    fn into_grad_outputs(self) -> Option<Cow<'a, [Option<Variable>]>> {
        self.as_slice().into_grad_outputs()
    }
}

impl<'a, const N: usize> GradOutputs<'a> for &'a [&'a Variable; N] {
    fn into_grad_outputs(self) -> Option<Cow<'a, [Option<Variable>]>> {
        self.as_slice().into_grad_outputs()
    }
}

impl<'a> GradOutputs<'a> for &'a Vec<Variable> {
    fn into_grad_outputs(self) -> Option<Cow<'a, [Option<Variable>]>> {
        self.as_slice().into_grad_outputs()
    }
}

/// Gradients of `outputs` with respect to `inputs`, returned rather than stored (Chainer's
/// `chainer.grad`). `grad_outputs` gives each output's initial gradient: `None` (each output's
/// `grad`, or ones for a one-element output), `&[&gy]`, or another form of [`GradOutputs`]. With `enable_double_backprop`, the results carry a graph and
/// can be differentiated again, e.g. for gradient penalties or Hessian-vector products.
///
/// ```
/// use kusari::prelude::*;
/// # fn main() -> Result<()> {
/// let x = Variable::new(Array::from_vec(vec![2.0f64], &[1])?);
/// let y = (&(&x * &x)? * &x)?;                               // x³
/// let opts = GradOptions { enable_double_backprop: true, ..Default::default() };
/// let gx = grad(&[&y], &[&x], None, opts)?.remove(0).unwrap();  // 3x² = 12
/// let ggx = grad(&[&gx], &[&x], None, GradOptions::default())?.remove(0).unwrap(); // 6x
/// assert_eq!(ggx.array().to_vec::<f64>()?, vec![12.0]);
///
/// // An output gradient other than ones: d(x³)/dx · 0.5
/// let gy = Variable::new(Array::from_vec(vec![0.5f64], &[1])?);
/// let gx = grad(&[&y], &[&x], &[&gy], GradOptions::default())?.remove(0).unwrap();
/// assert_eq!(gx.array().to_vec::<f64>()?, vec![6.0]);
/// # Ok(()) }
/// ```
pub fn grad<'a>(
    outputs: &[&Variable],
    inputs: &[&Variable],
    grad_outputs: impl GradOutputs<'a>,
    options: GradOptions,
) -> Result<Vec<Option<Variable>>> {
    let grad_outputs = grad_outputs.into_grad_outputs();
    let grad_outputs = grad_outputs.as_deref();
    if outputs.is_empty() || inputs.is_empty() {
        return Err(Error::GradArguments {
            msg: format!(
                "needs at least one output and one input, got {} and {}",
                outputs.len(),
                inputs.len()
            ),
        });
    }
    if let Some(g) = grad_outputs {
        if g.len() != outputs.len() {
            return Err(Error::GradArguments {
                msg: format!("{} grad_outputs for {} outputs", g.len(), outputs.len()),
            });
        }
        check_given("grad_outputs", outputs, g)?;
    }
    if let Some(g) = &options.grad_inputs {
        if g.len() != inputs.len() {
            return Err(Error::GradArguments {
                msg: format!("{} grad_inputs for {} inputs", g.len(), inputs.len()),
            });
        }
        check_given("grad_inputs", inputs, g)?;
    }
    let targets: PtrSet<NodeKey> = inputs.iter().map(|v| key(&v.node)).collect();
    let mut engine = Engine::new(
        Sink::Targets(&targets),
        options.retain_grad,
        options.enable_double_backprop,
        options.loss_scale,
    );
    if let Some(gis) = &options.grad_inputs {
        for (v, g) in inputs.iter().zip(gis) {
            if let Some(g) = g {
                engine.add_grad(&v.node, g.clone())?;
            }
        }
    }
    for (i, out) in outputs.iter().enumerate() {
        let given = grad_outputs.and_then(|g| g[i].as_ref());
        let seed = initial_grad(out, given)?;
        engine.seed(&out.node, seed)?;
    }
    engine.run()?;
    let _mode = config::using_backprop(options.enable_double_backprop);
    let results: Vec<Option<Variable>> = inputs
        .iter()
        .map(|v| engine.s.grads.get(&key(&v.node)).map(|(_, g)| g.clone()))
        .collect();
    if options.set_grad {
        for (v, g) in inputs.iter().zip(&results) {
            if let Some(g) = g {
                store_grad(&v.node, g.clone(), false, None)?;
            }
        }
    }
    Ok(results)
}

#[cfg(test)]
mod tests {
    //! The gradient sums and scales of the backward pass (`grad_math`), differentiated again.

    use super::*;
    use crate::Array;

    fn var(values: &[f64]) -> Variable {
        Variable::new(Array::from_vec(values.to_vec(), &[values.len()]).unwrap())
    }

    fn values(v: &Variable) -> Vec<f64> {
        v.array().to_vec::<f64>().unwrap()
    }

    fn double() -> GradOptions {
        GradOptions {
            enable_double_backprop: true,
            ..GradOptions::default()
        }
    }

    /// The gradient of `y` with respect to `x`, seeded with `seed`, kept differentiable.
    fn grad_of(y: &Variable, x: &Variable, seed: &Variable) -> Variable {
        grad(&[y], &[x], &[seed], double())
            .unwrap()
            .remove(0)
            .unwrap()
    }

    #[test]
    fn add_grads_sums_and_passes_its_gradient_to_both_sides() {
        let (a, b) = (var(&[1.0, 2.0]), var(&[10.0, 20.0]));
        let s = add_grads(&a, &b).unwrap();
        assert_eq!(values(&s), [11.0, 22.0]);
        assert_eq!(s.creator_label().as_deref(), Some("Add"));
        let g = var(&[3.0, 4.0]);
        let grads = grad(&[&s], &[&a, &b], &[g], double()).unwrap();
        for gx in grads {
            assert_eq!(values(&gx.unwrap()), [3.0, 4.0]);
        }
    }

    #[test]
    fn add_grads_is_differentiable_again() {
        // s = a + a; ds/da seeded with g is 2g, and d(2g)/dg seeded with ones is 2.
        let (a, g) = (var(&[1.0, 2.0]), var(&[3.0, 4.0]));
        let s = add_grads(&a, &a).unwrap();
        let ga = grad_of(&s, &a, &g);
        assert_eq!(values(&ga), [6.0, 8.0]);
        let ggg = grad_of(&ga, &g, &var(&[1.0, 1.0]));
        assert_eq!(values(&ggg), [2.0, 2.0]);
    }

    #[test]
    fn scale_grad_scales_to_every_order() {
        let (x, g) = (var(&[1.0, -2.0]), var(&[5.0, 7.0]));
        let y = scale_grad(&x, 3.0).unwrap();
        assert_eq!(values(&y), [3.0, -6.0]);
        assert_eq!(y.creator_label().as_deref(), Some("MulConstant"));
        let gx = grad_of(&y, &x, &g);
        assert_eq!(values(&gx), [15.0, 21.0]);
        assert_eq!(gx.creator_label().as_deref(), Some("MulConstant"));
        let ggx = grad_of(&gx, &g, &var(&[1.0, 1.0]));
        assert_eq!(values(&ggx), [3.0, 3.0]);
    }
}
