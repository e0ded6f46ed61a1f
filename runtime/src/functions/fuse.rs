//! [`fuse`]: a closure over variables, traced once into one elementwise body and run as one
//! [`ElementwiseOp`] — one kernel forward, one derived kernel backward.

use std::collections::HashMap;
use std::sync::{Arc, Mutex};

use kusari_kernels::expr::{CType, Expr, OpBody, Stmt, TypeKind};

use crate::error::{Error, Result};
use crate::graph::{Formula, GraphNode, Variable};
use crate::sync::lock;
use crate::{Array, DType, Device, ElementwiseOp, config};

use super::elementwise_op::one_float_dtype;

/// A closure over variables made one elementwise op (CuPy's `cupy.fuse`, with the backward
/// `cupy.fuse` lacks): see [`fuse`].
pub struct Fused<F> {
    name: String,
    f: F,
    traces: Mutex<HashMap<TraceKey, Arc<Trace>>>,
}

/// What a trace is made for: the dtype, and each input's number of dimensions.
type TraceKey = (DType, Vec<usize>);

/// A fused plain function (not a capturing closure), the form to keep in a `static`:
///
/// ```
/// use std::sync::LazyLock;
/// use kusari::prelude::*;
/// use kusari::{FusedFn, fuse};
///
/// fn softsign(v: &[Variable]) -> Result<Variable> {
///     &v[0] / &F::add_scalar(&F::absolute(&v[0])?, 1.0)?
/// }
/// static SOFTSIGN: LazyLock<FusedFn> = LazyLock::new(|| fuse("softsign", softsign));
///
/// let x = Variable::new(Array::from_vec(vec![-3.0f64, 1.0], &[2])?);
/// assert_eq!(SOFTSIGN.apply(&[&x])?.array().to_vec::<f64>()?, [-0.75, 0.5]);
/// # Ok::<(), kusari::Error>(())
/// ```
pub type FusedFn<R = Variable> = Fused<fn(&[Variable]) -> Result<R>>;

/// One trace: the op, and which of the closure's inputs it reads.
struct Trace {
    op: Arc<ElementwiseOp>,
    used: Vec<usize>,
}

/// What a fused closure returns: one variable, or several.
pub trait FusedOutputs: Sized {
    /// As a list.
    fn into_list(self) -> Vec<Variable>;
    /// Back from a list of the same length.
    fn from_list(list: Vec<Variable>) -> Self;
}

impl FusedOutputs for Variable {
    fn into_list(self) -> Vec<Variable> {
        vec![self]
    }
    fn from_list(mut list: Vec<Variable>) -> Self {
        list.remove(0)
    }
}

impl FusedOutputs for Vec<Variable> {
    fn into_list(self) -> Vec<Variable> {
        self
    }
    fn from_list(list: Vec<Variable>) -> Self {
        list
    }
}

impl FusedOutputs for (Variable, Variable) {
    fn into_list(self) -> Vec<Variable> {
        vec![self.0, self.1]
    }
    fn from_list(list: Vec<Variable>) -> Self {
        let mut it = list.into_iter();
        let (Some(a), Some(b)) = (it.next(), it.next()) else {
            unreachable!("a trace of two outputs gives two")
        };
        (a, b)
    }
}

/// Makes `f`, a closure over variables built of elementwise functions (`F::exp`, `F::tanh`,
/// `F::sigmoid`, `F::relu`, ..., operators and scalars), one elementwise op named `name`.
///
/// On the first [`apply`](Fused::apply) for a dtype and a number of dimensions of each input,
/// `f` runs once on one-element variables and what it did is read back from the graph it
/// recorded: each function's [`formula`](crate::FunctionNode::formula), substituted into one
/// body. From then on every call runs that body as one [`ElementwiseOp`]: one kernel on CUDA,
/// one pass of the host executor over blocks of elements (no temporaries of the inputs' size),
/// and one derived backward of the same kind, to any order. Inputs broadcast as they do for
/// the unfused closure.
///
/// A function without a formula (a reduction, a matmul, a reshape, an indexing) is refused
/// when the closure is traced, with an [`Error::InvalidArgument`] naming the function: a
/// fused closure is elementwise through and through (the chain is not cut into pieces). So is
/// a variable the closure captures rather than takes as an input. What the closure captures
/// otherwise (a scalar) is a constant of the trace. The closure's inputs and outputs are
/// floating-point.
///
/// ```
/// use kusari::prelude::*;
///
/// // x · σ(x) + b, forward and backward as one kernel each.
/// let swish_bias = kusari::fuse("swish_bias", |v: &[Variable]| {
///     &v[0] * &F::sigmoid(&v[0])? + &v[1]
/// });
/// let x = Variable::new(Array::from_vec(vec![-1.0f64, 0.0, 2.0], &[3])?);
/// let b = Variable::new(Array::from_vec(vec![0.5f64], &[1])?);
/// let y = swish_bias.apply(&[&x, &b])?;
/// F::sum(&y)?.backward()?;
/// let s = |x: f64| 1.0 / (1.0 + (-x).exp());
/// for (i, x0) in [-1.0, 0.0, 2.0].into_iter().enumerate() {
///     let want = s(x0) + x0 * s(x0) * (1.0 - s(x0));
///     assert!((x.grad().unwrap().array().to_vec::<f64>()?[i] - want).abs() < 1e-12);
/// }
/// assert_eq!(b.grad().unwrap().array().to_vec::<f64>()?, [3.0]);
/// // The traced body:
/// let op = swish_bias.trace(&[&x, &b])?;
/// assert_eq!(op.kernel().inputs, "T x0, T x1");
/// # Ok::<(), kusari::Error>(())
/// ```
pub fn fuse<F, R>(name: &str, f: F) -> Fused<F>
where
    F: Fn(&[Variable]) -> Result<R>,
    R: FusedOutputs,
{
    Fused {
        name: name.to_string(),
        f,
        traces: Mutex::new(HashMap::new()),
    }
}

impl<F, R> Fused<F>
where
    F: Fn(&[Variable]) -> Result<R>,
    R: FusedOutputs,
{
    /// Runs the fused op on `inputs`, tracing the closure first if this dtype and these
    /// numbers of dimensions are new.
    pub fn apply(&self, inputs: &[&Variable]) -> Result<R> {
        let trace = self.traced(inputs)?;
        let args: Vec<&Variable> = trace.used.iter().map(|&i| inputs[i]).collect();
        Ok(R::from_list(trace.op.apply(&args, &[])?))
    }

    /// The op a call with `inputs` runs: its [`kernel`](ElementwiseOp::kernel) is the traced
    /// body (over the inputs it reads, `x0`, `x1`, ..., in order, and outputs `y0`, ...), and
    /// its [`backward_op`](ElementwiseOp::backward_op) the derived backward.
    pub fn trace(&self, inputs: &[&Variable]) -> Result<Arc<ElementwiseOp>> {
        Ok(self.traced(inputs)?.op.clone())
    }

    fn traced(&self, inputs: &[&Variable]) -> Result<Arc<Trace>> {
        let dtype = match inputs.first() {
            Some(x) => x.dtype(),
            None => return Err(self.refuse("a fused closure takes at least one input")),
        };
        let arrays: Vec<&Array> = inputs.iter().map(|x| x.array()).collect();
        one_float_dtype("fuse", &arrays)?;
        let key = (dtype, inputs.iter().map(|x| x.ndim()).collect::<Vec<_>>());
        if let Some(t) = lock(&self.traces).get(&key) {
            return Ok(t.clone());
        }
        let trace = Arc::new(self.make_trace(dtype, &key.1)?);
        Ok(lock(&self.traces).entry(key).or_insert(trace).clone())
    }

    fn refuse(&self, message: impl std::fmt::Display) -> Error {
        refuse(&self.name, message)
    }

    /// Runs the closure on one-element variables and reads its graph back into one op.
    fn make_trace(&self, dtype: DType, ndims: &[usize]) -> Result<Trace> {
        let _backprop = config::using_backprop(true);
        let _device = config::using_device(Device::Cpu)?;
        let vars: Vec<Variable> = ndims
            .iter()
            .map(|&n| Array::full(&vec![1; n], 0.5, dtype).map(Variable::new))
            .collect::<Result<_>>()?;
        let outputs = (self.f)(&vars)?.into_list();
        if outputs.is_empty() {
            return Err(self.refuse("the closure returns no variable"));
        }
        let mut b = Builder {
            name: &self.name,
            inputs: vars.iter().map(Variable::node_key).collect(),
            values: HashMap::new(),
            stmts: Vec::new(),
            used: vec![false; vars.len()],
            count: 0,
        };
        let mut results = Vec::new();
        for y in &outputs {
            results.push(b.value(&y.graph_node())?);
        }
        let mut stmts = b.stmts;
        let used: Vec<usize> = (0..vars.len()).filter(|&i| b.used[i]).collect();
        if used.is_empty() {
            return Err(self.refuse(
                "the closure's outputs read none of its inputs (a constant is not an \
                 elementwise op)",
            ));
        }
        for (j, r) in results.into_iter().enumerate() {
            stmts.push(Stmt {
                target: format!("y{j}"),
                local: None,
                value: r,
                span: 0..0,
            });
        }
        // The inputs are renamed in the order they are read: x0, x1, ...
        let rename: HashMap<String, String> = used
            .iter()
            .enumerate()
            .map(|(k, &i)| (input_name(i), format!("x{k}")))
            .collect();
        for st in &mut stmts {
            st.value = st.value.map_vars(&mut |n| {
                Expr::Var(rename.get(n).cloned().unwrap_or_else(|| n.to_string()))
            });
        }
        let body = kusari_kernels::expr::Body { stmts };
        let list = |prefix: &str, n: usize| {
            (0..n)
                .map(|k| format!("T {prefix}{k}"))
                .collect::<Vec<_>>()
                .join(", ")
        };
        let op = ElementwiseOp::try_new(
            &self.name,
            list("x", used.len()),
            list("y", outputs.len()),
            "",
            body.to_c(Some("T")),
        )?;
        Ok(Trace {
            op: Arc::new(op),
            used,
        })
    }
}

fn refuse(name: &str, message: impl std::fmt::Display) -> Error {
    Error::InvalidArgument {
        op: format!("fuse `{name}`"),
        msg: message.to_string(),
    }
}

/// The name of the closure's input `i` while the body is built (renamed at the end).
fn input_name(i: usize) -> String {
    format!("in{i}")
}

/// Builds the body from the graph, a function at a time.
struct Builder<'a> {
    name: &'a str,
    /// The closure's inputs, by their nodes.
    inputs: Vec<usize>,
    /// The expression of each variable already reached, by its node.
    values: HashMap<usize, Expr>,
    stmts: Vec<Stmt>,
    used: Vec<bool>,
    count: usize,
}

impl Builder<'_> {
    fn refuse(&self, message: impl std::fmt::Display) -> Error {
        refuse(self.name, message)
    }

    /// The expression of the variable of `node`: an input, or the output of a function with
    /// a formula.
    fn value(&mut self, node: &GraphNode) -> Result<Expr> {
        let key = node.key();
        if let Some(e) = self.values.get(&key) {
            return Ok(e.clone());
        }
        if let Some(i) = self.inputs.iter().position(|&x| x == key) {
            self.used[i] = true;
            let e = Expr::Var(input_name(i));
            self.values.insert(key, e.clone());
            return Ok(e);
        }
        let Some(creator) = node.creator() else {
            return Err(self.refuse(
                "the closure reads a variable that is none of its inputs (one it captured?): \
                 pass it as an input",
            ));
        };
        let func = creator.label;
        let Some(formula) = creator.formula else {
            return Err(self.refuse(format!(
                "`{func}` is not elementwise (it has no formula), so it cannot be fused: \
                 call it outside the fused closure"
            )));
        };
        let mut args = Vec::new();
        for x in &creator.inputs {
            args.push(self.value(x)?);
        }
        let outputs = self.inline(&func, &formula, &args)?;
        let e = outputs
            .get(creator.index)
            .cloned()
            .ok_or_else(|| self.refuse(format!("`{func}`'s formula has too few outputs")))?;
        self.values.insert(key, e.clone());
        Ok(e)
    }

    /// Appends a function's body, its names prefixed and its inputs and parameters
    /// substituted; returns the expressions of its outputs.
    fn inline(&mut self, func: &str, formula: &Formula, args: &[Expr]) -> Result<Vec<Expr>> {
        let k = &formula.kernel;
        let op = OpBody::new(k.inputs, k.outputs, k.params, k.body)
            .map_err(|e| self.refuse(format!("`{func}`'s formula: {}", e.render(k.body))))?;
        if op.scope.params.len() != formula.params.len() {
            return Err(self.refuse(format!(
                "`{func}`'s formula has {} parameter(s) but {} value(s)",
                op.scope.params.len(),
                formula.params.len()
            )));
        }
        let prefix = format!("f{}_", self.count);
        self.count += 1;
        let placeholder = op.placeholder.to_string();
        let ty = |t: &CType| {
            if t.kind == TypeKind::Float && t.name == placeholder {
                CType {
                    name: "T".to_string(),
                    kind: TypeKind::Float,
                }
            } else {
                t.clone()
            }
        };
        let mut declared: Vec<String> = Vec::new();
        for s in &op.body.stmts {
            let mut sub = |n: &str| {
                if let Some(i) = op.scope.inputs.iter().position(|m| m == n) {
                    args[i].clone()
                } else if let Some(j) = op.scope.params.iter().position(|m| m == n) {
                    Expr::Lit(formula.params[j].to_f64())
                } else {
                    Expr::Var(format!("{prefix}{n}"))
                }
            };
            let value = s.value.rewrite(&mut sub, &ty);
            let target = format!("{prefix}{}", s.target);
            let local = match &s.local {
                Some(t) => Some(ty(t)),
                // An output's first assignment declares it here.
                None if !declared.contains(&s.target) => Some(CType {
                    name: "T".to_string(),
                    kind: TypeKind::Float,
                }),
                None => None,
            };
            declared.push(s.target.clone());
            self.stmts.push(Stmt {
                target,
                local,
                value,
                span: 0..0,
            });
        }
        Ok(op
            .scope
            .outputs
            .iter()
            .map(|o| Expr::Var(format!("{prefix}{o}")))
            .collect())
    }
}
