//! [`ElementwiseOp`]: a differentiable op written once, as an elementwise body, whose host
//! forward, CUDA kernel and backward all come from that body.

use std::sync::{Arc, Mutex, OnceLock};

use kusari_kernels::expr::{ArgSource, OpBody};

use crate::elementwise_kernel::ElementwiseKernel;
use crate::error::{Error, Result};
use crate::graph::{BackwardContext, Formula, ForwardContext, FunctionNode, Variable, apply};
use crate::layout::broadcast_shapes;
use crate::storage::Storage;
use crate::{Array, DType, Device, Scalar};

/// A differentiable elementwise op written once, as a body in the expression language
/// ([`kusari_kernels::expr`]): CuPy's `ElementwiseKernel` with a backward, and nothing else to
/// write.
///
/// From the one body come
///
/// - the CUDA forward: the body itself, as an [`ElementwiseKernel`] (NVRTC on a GPU, the
///   emulated device in CI);
/// - the host forward: the same expressions, run by the host executor over blocks of elements
///   (float16 and bfloat16 computed in float32, each output rounded once), so host and GPU
///   compute the same formula;
/// - the backward: derived symbolically (reverse mode, shared subexpressions, simplified),
///   itself an `ElementwiseOp` ([`backward_op`](Self::backward_op)), so its backward is
///   derived again, to any order; a node of which only some inputs want a gradient runs a
///   backward derived for those alone;
/// - what the op retains for it: exactly the inputs and outputs the derivative reads.
///
/// The inputs and outputs share one type placeholder (`T`); parameters are that placeholder or
/// concrete types, and pass no gradient. Inputs broadcast, as NumPy's do; the gradient of a
/// broadcast input is summed back to its shape. Where a function is not differentiable at a
/// point, the derivative follows Chainer's convention
/// ([`kusari_kernels::expr::derive`](fn@kusari_kernels::expr::derive)).
///
/// ```
/// use kusari::prelude::*;
/// use kusari::ElementwiseOp;
///
/// static SWISH: ElementwiseOp =
///     ElementwiseOp::new("swish", "T x, T beta", "T y", "", "y = x / (1 + exp(-beta * x))");
///
/// let x = Variable::new(Array::from_vec(vec![-1.0f64, 0.5, 2.0], &[3])?);
/// let beta = Variable::new(Array::from_vec(vec![1.5f64], &[1])?);
/// let y = &SWISH.apply(&[&x, &beta], &[])?[0];
/// F::sum(y)?.backward()?;
/// // dy/dx = s + x * beta * s * (1 - s), s = sigmoid(beta * x).
/// let s = |x: f64| 1.0 / (1.0 + (-1.5 * x).exp());
/// let gx = x.grad().unwrap().array().to_vec::<f64>()?;
/// for (g, x) in gx.iter().zip([-1.0, 0.5, 2.0]) {
///     assert!((g - (s(x) + x * 1.5 * s(x) * (1.0 - s(x)))).abs() < 1e-12);
/// }
/// // beta was broadcast: its gradient is summed back to its shape.
/// assert_eq!(beta.grad().unwrap().shape(), [1]);
/// # Ok::<(), kusari::Error>(())
/// ```
pub struct ElementwiseOp {
    kernel: ElementwiseKernel,
    parsed: OnceLock<std::result::Result<Arc<Parsed>, String>>,
    derived: OnceLock<std::result::Result<Arc<Derived>, String>>,
}

/// The checked body, made once on first use.
struct Parsed {
    kernel: ElementwiseKernel,
    op: OpBody,
}

/// The derived backward, made once on first use.
struct Derived {
    /// The inputs and outputs backward reads, by index.
    retain_inputs: Vec<usize>,
    retain_outputs: Vec<usize>,
    /// The backward for every input.
    full: Backward,
    /// The backwards for some inputs alone (a node of which only some inputs want a gradient),
    /// each made on first use: by the inputs they are for.
    partial: Mutex<Vec<Arc<Backward>>>,
    /// The forward, which the partial backwards are derived from.
    parsed: Arc<Parsed>,
}

/// A derived backward op, and how a node calls it.
struct Backward {
    /// The inputs whose gradients it computes, in the order of its outputs.
    targets: Vec<usize>,
    /// Where each of its inputs comes from.
    args: Vec<ArgSource>,
    /// The forward parameter each of its parameters is.
    params: Vec<usize>,
    op: Arc<ElementwiseOp>,
}

impl Backward {
    fn new(name: &str, targets: Vec<usize>, b: kusari_kernels::expr::OpBackward) -> Backward {
        let i = crate::intern;
        Backward {
            targets,
            args: b.args,
            params: b.params,
            op: Arc::new(ElementwiseOp::new(
                i(name),
                i(&b.inputs_sig),
                i(&b.outputs_sig),
                i(&b.params_sig),
                i(&b.body),
            )),
        }
    }
}

impl ElementwiseOp {
    /// An op from its parts, as [`ElementwiseKernel::new`] takes them (usable in a `static`).
    /// Nothing is checked here: the first [`apply`](Self::apply) (or [`check`](Self::check))
    /// parses the signature and the body and derives the backward, and reports any mistake.
    pub const fn new(
        name: &'static str,
        inputs: &'static str,
        outputs: &'static str,
        params: &'static str,
        body: &'static str,
    ) -> Self {
        ElementwiseOp {
            kernel: ElementwiseKernel::new(name, inputs, outputs, params, body),
            parsed: OnceLock::new(),
            derived: OnceLock::new(),
        }
    }

    /// [`new`](Self::new) from strings made at run time (kept for the process by
    /// [`crate::intern`]), checked at once.
    pub fn try_new(
        name: impl AsRef<str>,
        inputs: impl AsRef<str>,
        outputs: impl AsRef<str>,
        params: impl AsRef<str>,
        body: impl AsRef<str>,
    ) -> Result<Self> {
        let op = ElementwiseOp {
            kernel: ElementwiseKernel::try_new(name, inputs, outputs, params, body)?,
            parsed: OnceLock::new(),
            derived: OnceLock::new(),
        };
        op.check()?;
        Ok(op)
    }

    /// The op's name.
    pub fn name(&self) -> &'static str {
        self.kernel.name
    }

    /// The forward kernel (what runs on CUDA).
    pub fn kernel(&self) -> &ElementwiseKernel {
        &self.kernel
    }

    /// Checks the signature and the body and derives the backward: a signature mistake is an
    /// [`Error::InvalidKernel`], a body outside the expression language an
    /// [`Error::InvalidKernel`] whose message underlines the construct.
    pub fn check(&self) -> Result<()> {
        self.derived().map(drop)
    }

    /// The derived backward: an op whose inputs are the forward inputs and outputs it reads and
    /// one incoming gradient per output (`grad_y`), and whose outputs are the gradients of the
    /// inputs (`grad_x`). Its [`kernel`](Self::kernel)'s body is the derived source.
    ///
    /// ```
    /// use kusari::ElementwiseOp;
    /// static EXP_ADD: ElementwiseOp =
    ///     ElementwiseOp::new("exp_add", "T x, T y", "T z", "", "z = exp(x) + exp(y)");
    /// let b = EXP_ADD.backward_op().unwrap();
    /// assert_eq!(b.kernel().inputs, "T x, T y, T grad_z");
    /// assert_eq!(b.kernel().body, "grad_x = exp(x) * grad_z;\ngrad_y = exp(y) * grad_z;\n");
    /// ```
    pub fn backward_op(&self) -> Result<&ElementwiseOp> {
        Ok(&self.derived()?.full.op)
    }

    /// What the forward keeps for the derived backward: the indexes of the inputs and of the
    /// outputs it reads.
    ///
    /// ```
    /// use kusari::ElementwiseOp;
    /// static TANH: ElementwiseOp = ElementwiseOp::new("tanh", "T x", "T y", "", "y = tanh(x)");
    /// // d tanh(x)/dx = 1 - y²: the output is kept, not the input.
    /// assert_eq!(TANH.retained().unwrap(), (&[][..], &[0][..]));
    /// ```
    pub fn retained(&self) -> Result<(&[usize], &[usize])> {
        let d = self.derived()?;
        Ok((&d.retain_inputs, &d.retain_outputs))
    }

    fn invalid(&self, message: &str) -> Error {
        Error::InvalidKernel {
            kernel: self.name().to_string(),
            message: message.to_string(),
        }
    }

    fn parsed(&self) -> Result<&Arc<Parsed>> {
        let def = &self.kernel;
        let made = self.parsed.get_or_init(|| {
            let op = OpBody::new(def.inputs, def.outputs, def.params, def.body)
                .map_err(|e| e.render(def.body))?;
            Ok(Arc::new(Parsed {
                kernel: self.kernel,
                op,
            }))
        });
        made.as_ref().map_err(|m| self.invalid(m))
    }

    fn derived(&self) -> Result<&Arc<Derived>> {
        let parsed = self.parsed()?;
        let def = &self.kernel;
        let made = self.derived.get_or_init(|| {
            let b = parsed.op.derive().map_err(|e| e.render(def.body))?;
            let (retain_inputs, retain_outputs) =
                (b.retain_inputs.clone(), b.retain_outputs.clone());
            let all = (0..parsed.op.sig.inputs.len()).collect();
            Ok(Arc::new(Derived {
                retain_inputs,
                retain_outputs,
                full: Backward::new(&format!("{}_grad", def.name), all, b),
                partial: Mutex::new(Vec::new()),
                parsed: parsed.clone(),
            }))
        });
        made.as_ref().map_err(|m| self.invalid(m))
    }

    /// Applies the op to `inputs` (broadcast together, one float dtype, one device) with the
    /// scalar `params`: its outputs, recorded for backward. A count that differs from the
    /// signature's is an [`Error::KernelArguments`] naming the op; inputs of different dtypes
    /// an [`Error::DTypeMismatch`]; a body or signature mistake an [`Error::InvalidKernel`].
    pub fn apply(&self, inputs: &[&Variable], params: &[Scalar]) -> Result<Vec<Variable>> {
        let parsed = self.parsed()?.clone();
        let arrays: Vec<&Array> = inputs.iter().map(|v| v.array()).collect();
        check_call(&parsed, &arrays, params)?;
        let derived = self.derived()?.clone();
        apply(
            Node {
                parsed,
                derived,
                params: params.to_vec(),
            },
            inputs,
        )
    }

    /// Runs the forward on arrays, outside the graph: the kernel on CUDA, the body's program
    /// on the host. The checks are [`apply`](Self::apply)'s.
    pub fn forward(&self, inputs: &[&Array], params: &[Scalar]) -> Result<Vec<Array>> {
        let parsed = self.parsed()?;
        check_call(parsed, inputs, params)?;
        forward_arrays(parsed, inputs, params)
    }

    /// A node's forward: keeps what the derived backward reads (with `retain`), then runs.
    pub(crate) fn node_forward(
        &self,
        ctx: &mut ForwardContext,
        inputs: &[Array],
        params: &[Scalar],
        retain: bool,
    ) -> Result<Vec<Array>> {
        if retain {
            let d = self.derived()?;
            ctx.retain_inputs(&d.retain_inputs);
            ctx.retain_outputs(&d.retain_outputs);
        }
        let parsed = self.parsed()?;
        let refs: Vec<&Array> = inputs.iter().collect();
        check_call(parsed, &refs, params)?;
        forward_arrays(parsed, &refs, params)
    }

    /// A node's backward by the derived op: the gradients of the `targets` inputs, each
    /// summed back to its input's shape.
    pub(crate) fn node_backward(
        &self,
        ctx: &BackwardContext<'_>,
        targets: &[usize],
        grads: &[Option<Variable>],
        params: &[Scalar],
    ) -> Result<Vec<Option<Variable>>> {
        self.derived()?.op_backward(ctx, targets, grads, params)
    }
}

/// The checks of a call: the counts of inputs and parameters, and the inputs' dtypes.
fn check_call(p: &Parsed, inputs: &[&Array], params: &[Scalar]) -> Result<()> {
    let (n_inputs, n_params) = (p.op.sig.inputs.len(), p.op.sig.params.len());
    if inputs.len() != n_inputs || params.len() != n_params {
        return Err(Error::KernelArguments {
            kernel: p.kernel.name.to_string(),
            msg: format!(
                "it takes {} input(s) and {} parameter(s), but {} and {} were given",
                n_inputs,
                n_params,
                inputs.len(),
                params.len()
            ),
        });
    }
    one_float_dtype(p.kernel.name, inputs)
}

/// Every input of one floating-point dtype (an op whose body runs on the host in float32 or
/// float64): a [`Error::DTypeMismatch`] or an [`Error::UnsupportedDType`] naming `op`
/// otherwise.
pub(super) fn one_float_dtype(op: &'static str, inputs: &[&Array]) -> Result<()> {
    let Some(first) = inputs.first() else {
        return Ok(());
    };
    for x in &inputs[1..] {
        if x.dtype() != first.dtype() {
            return Err(Error::DTypeMismatch {
                op,
                lhs: first.dtype(),
                rhs: x.dtype(),
                lhs_shape: first.shape().to_vec(),
                rhs_shape: x.shape().to_vec(),
            });
        }
    }
    if !first.dtype().is_float() {
        return Err(Error::UnsupportedDType {
            op,
            dtype: first.dtype(),
            shape: first.shape().to_vec(),
            expected: "a floating-point dtype",
        });
    }
    Ok(())
}

/// The forward on arrays, after the checks of [`check_call`] (made once by each caller).
fn forward_arrays(p: &Parsed, inputs: &[&Array], params: &[Scalar]) -> Result<Vec<Array>> {
    let Some(first) = inputs.first() else {
        return Ok(Vec::new());
    };
    match first.device() {
        Device::Cuda(_) if matches!(first.dtype(), DType::F16 | DType::BF16) => {
            // kusari's half structs convert to and from `float` implicitly, so a body that mixes
            // the two in `c ? x : x * s` is ambiguous C++. The body runs in float32 on float32
            // copies, each output rounded once: what the host does, to the same bits.
            let dtype = first.dtype();
            let wide: Vec<Array> = inputs
                .iter()
                .map(|x| x.astype(DType::F32))
                .collect::<Result<_>>()?;
            let refs: Vec<&Array> = wide.iter().collect();
            p.kernel
                .launch(&refs, params)?
                .iter()
                .map(|y| y.astype(dtype))
                .collect()
        }
        Device::Cuda(_) => p.kernel.launch(inputs, params),
        Device::Cpu => {
            let mut shape: Vec<usize> = Vec::new();
            for x in inputs {
                shape = broadcast_shapes("ElementwiseOp", &shape, x.shape())?;
            }
            let parts: Vec<(&Storage, &crate::layout::Layout)> =
                inputs.iter().map(|x| (x.storage(), x.layout())).collect();
            let params: Vec<f64> = params.iter().map(|p| p.to_f64()).collect();
            Ok(
                Storage::run_expr("ElementwiseOp", &p.op.program, &parts, &params, &shape)?
                    .into_iter()
                    .map(|s| Array::from_storage(s, crate::layout::Layout::contiguous(&shape)))
                    .collect(),
            )
        }
    }
}

impl Derived {
    /// The backward for the gradients of `targets` (sorted, distinct): the full one when they
    /// are every input, else one derived for them alone on first use. A partial backward that
    /// would read what the forward does not keep (it never should) gives way to the full one.
    fn backward_for(&self, targets: &[usize]) -> Result<Arc<Backward>> {
        let mut partial = self.partial.lock().unwrap_or_else(|e| e.into_inner());
        if let Some(b) = partial.iter().find(|b| b.targets == targets) {
            return Ok(b.clone());
        }
        let p = &self.parsed;
        let b = p.op.derive_for(targets).map_err(|e| Error::InvalidKernel {
            kernel: p.kernel.name.to_string(),
            message: e.render(p.kernel.body),
        })?;
        let kept = b.args.iter().all(|a| match *a {
            ArgSource::Input(i) => self.retain_inputs.contains(&i),
            ArgSource::Output(j) => self.retain_outputs.contains(&j),
            ArgSource::Grad(_) => true,
        });
        let suffix: String = targets.iter().map(|t| format!("_{t}")).collect();
        let made = Arc::new(if kept {
            Backward::new(
                &format!("{}_grad{suffix}", p.kernel.name),
                targets.to_vec(),
                b,
            )
        } else {
            Backward {
                targets: self.full.targets.clone(),
                args: self.full.args.clone(),
                params: self.full.params.clone(),
                op: self.full.op.clone(),
            }
        });
        partial.push(made.clone());
        Ok(made)
    }

    /// The gradients of the `targets` inputs by the backward op, each summed back to its
    /// input's shape.
    fn op_backward(
        &self,
        ctx: &BackwardContext<'_>,
        targets: &[usize],
        grads: &[Option<Variable>],
        params: &[Scalar],
    ) -> Result<Vec<Option<Variable>>> {
        let n = self.full.targets.len();
        let mut wanted: Vec<usize> = targets.iter().copied().filter(|&t| t < n).collect();
        wanted.sort_unstable();
        wanted.dedup();
        if wanted.is_empty() {
            return Ok(vec![None; n]);
        }
        let partial;
        let d: &Backward = if wanted.len() == n {
            &self.full
        } else {
            partial = self.backward_for(&wanted)?;
            &partial
        };
        let args: Vec<Variable> = d
            .args
            .iter()
            .map(|s| match *s {
                ArgSource::Input(i) => ctx.retained_input(i),
                ArgSource::Output(j) => ctx.retained_output(j),
                ArgSource::Grad(j) => match grads.get(j) {
                    Some(Some(g)) => Ok(g.clone()),
                    _ => ctx.zeros_for_output(j),
                },
            })
            .collect::<Result<_>>()?;
        let refs: Vec<&Variable> = args.iter().collect();
        let params: Vec<Scalar> = d
            .params
            .iter()
            .map(|&k| params.get(k).copied().unwrap_or(Scalar::F64(0.0)))
            .collect();
        let mut out: Vec<Option<Variable>> = vec![None; n];
        for (&i, g) in d.targets.iter().zip(d.op.apply(&refs, &params)?) {
            if !wanted.contains(&i) {
                continue;
            }
            let shape = ctx.input_shape(i)?;
            out[i] = Some(if g.shape() == shape {
                g
            } else {
                super::sum_to(&g, shape)?
            });
        }
        Ok(out)
    }
}

/// One application of an [`ElementwiseOp`] in the graph.
struct Node {
    parsed: Arc<Parsed>,
    derived: Arc<Derived>,
    params: Vec<Scalar>,
}

impl FunctionNode for Node {
    fn label(&self) -> std::borrow::Cow<'static, str> {
        self.parsed.kernel.name.into()
    }

    fn formula(&self) -> Option<Formula> {
        Some(Formula {
            kernel: self.parsed.kernel,
            params: self.params.clone(),
        })
    }

    fn forward(&mut self, ctx: &mut ForwardContext, inputs: &[Array]) -> Result<Vec<Array>> {
        ctx.retain_inputs(&self.derived.retain_inputs);
        ctx.retain_outputs(&self.derived.retain_outputs);
        // `ElementwiseOp::apply`, which alone makes this node, has checked the call.
        let refs: Vec<&Array> = inputs.iter().collect();
        forward_arrays(&self.parsed, &refs, &self.params)
    }

    fn backward(
        &self,
        ctx: &BackwardContext<'_>,
        targets: &[usize],
        grads: &[Option<Variable>],
    ) -> Result<Vec<Option<Variable>>> {
        self.derived.op_backward(ctx, targets, grads, &self.params)
    }
}

impl std::fmt::Debug for ElementwiseOp {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("ElementwiseOp")
            .field("name", &self.name())
            .field("body", &self.kernel.body)
            .finish()
    }
}
