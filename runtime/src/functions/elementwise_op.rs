//! [`ElementwiseOp`]: a differentiable op written once, as an elementwise body, whose host
//! forward, CUDA kernel and backward all come from that body.

use std::sync::{Arc, OnceLock};

use kusari_kernels::expr::{Program, Scope, derive, parse_body};
use kusari_kernels::{ElementwiseSignature, ParamType};

use crate::elementwise_kernel::ElementwiseKernel;
use crate::error::{Error, Result};
use crate::graph::{BackwardContext, ForwardContext, FunctionNode, Variable, apply};
use crate::layout::broadcast_shapes;
use crate::storage::Storage;
use crate::{Array, Device, Scalar};

/// A differentiable elementwise op written once, as a body in the expression language
/// ([`kusari_kernels::expr`]): CuPy's `ElementwiseKernel` with a backward, and nothing else to
/// write.
///
/// From the one body come
///
/// - the CUDA forward: the body itself, as an [`ElementwiseKernel`] (NVRTC on a GPU, the
///   emulated device in CI);
/// - the host forward: the same expressions, run by the host executor over blocks of elements
///   (float32 and float64), so host and GPU compute the same formula;
/// - the backward: derived symbolically (reverse mode, shared subexpressions, simplified),
///   itself an `ElementwiseOp` ([`backward_op`](Self::backward_op)), so its backward is
///   derived again, to any order;
/// - what the op retains for it: exactly the inputs and outputs the derivative reads.
///
/// The inputs and outputs share one type placeholder (`T`); parameters are that placeholder or
/// concrete types, and pass no gradient. Inputs broadcast, as NumPy's do; the gradient of a
/// broadcast input is summed back to its shape. Where a function is not differentiable at a
/// point, the derivative follows Chainer's convention ([`derive`](fn@derive)).
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
    derived: OnceLock<std::result::Result<Arc<Derived>, String>>,
}

/// What the body gives, made once on first use.
struct Derived {
    name: &'static str,
    kernel: ElementwiseKernel,
    program: Program,
    n_inputs: usize,
    n_params: usize,
    /// The inputs and outputs backward reads, by index.
    retain_inputs: Vec<usize>,
    retain_outputs: Vec<usize>,
    /// Where each input of the backward op comes from.
    backward_args: Vec<Source>,
    /// The forward parameter each parameter of the backward op is.
    backward_params: Vec<usize>,
    backward: Arc<ElementwiseOp>,
}

#[derive(Clone, Copy, Debug)]
enum Source {
    Input(usize),
    Output(usize),
    Grad(usize),
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
        Ok(&self.derived_ref()?.backward)
    }

    fn derived_ref(&self) -> Result<&Arc<Derived>> {
        match self.derived.get_or_init(|| self.derive().map(Arc::new)) {
            Ok(d) => Ok(d),
            Err(message) => Err(Error::InvalidKernel {
                kernel: self.name().to_string(),
                message: message.clone(),
            }),
        }
    }

    fn derived(&self) -> Result<Arc<Derived>> {
        self.derived_ref().cloned()
    }

    /// Parses, checks and derives.
    fn derive(&self) -> std::result::Result<Derived, String> {
        let def = &self.kernel;
        let sig = ElementwiseSignature::new(def.inputs, def.outputs, def.params).map_err(|e| {
            e.iter()
                .map(ToString::to_string)
                .collect::<Vec<_>>()
                .join("; ")
        })?;
        let t = match sig.inputs.first().map(|p| p.ty) {
            Some(ParamType::Placeholder(c)) => c,
            _ => {
                return Err(
                    "an ElementwiseOp's inputs and outputs share one type placeholder \
                     (`T x, T y`), so that its gradients have their type"
                        .to_string(),
                );
            }
        };
        if let Some(p) = sig
            .inputs
            .iter()
            .chain(&sig.outputs)
            .find(|p| p.raw || p.ty != ParamType::Placeholder(t))
        {
            return Err(format!(
                "`{}` is {}: an ElementwiseOp's inputs and outputs are all `{t}` elements, \
                 not raw",
                p.name,
                if p.raw { "raw" } else { "of another type" }
            ));
        }
        let scope = Scope::of(&sig);
        let body = parse_body(def.body, &scope).map_err(|e| {
            format!(
                "the body is not in the expression language, so its backward cannot be \
                 derived: {}",
                e.render(def.body)
            )
        })?;
        let program = Program::lower(&body, &scope);
        let wrt: Vec<&str> = scope.inputs.iter().map(String::as_str).collect();
        let placeholder = t.to_string();
        let d = derive(&body, &scope, &wrt, &placeholder).map_err(|e| e.message)?;
        let index = |names: &[String], n: &str| names.iter().position(|m| m == n);
        let backward_args = d
            .scope
            .inputs
            .iter()
            .map(|n| {
                if let Some(i) = index(&scope.inputs, n) {
                    Source::Input(i)
                } else if let Some(j) = index(&scope.outputs, n) {
                    Source::Output(j)
                } else {
                    Source::Grad(index(&d.grad_outputs, n).expect("a gradient"))
                }
            })
            .collect();
        let backward_params: Vec<usize> = d
            .params_read
            .iter()
            .map(|n| index(&scope.params, n).expect("a parameter"))
            .collect();
        let typed = |names: &[String]| -> String {
            names
                .iter()
                .map(|n| format!("{t} {n}"))
                .collect::<Vec<_>>()
                .join(", ")
        };
        let params = d
            .params_read
            .iter()
            .map(|n| {
                let p = sig
                    .params
                    .iter()
                    .find(|p| &p.name == n)
                    .expect("a parameter");
                format!("{} {n}", p.ty)
            })
            .collect::<Vec<_>>()
            .join(", ");
        let i = crate::intern;
        let backward = ElementwiseOp::new(
            i(&format!("{}_grad", def.name)),
            i(&typed(&d.scope.inputs)),
            i(&typed(&d.scope.outputs)),
            i(&params),
            i(&d.body.to_c(Some(&placeholder))),
        );
        Ok(Derived {
            name: def.name,
            kernel: self.kernel,
            program,
            n_inputs: sig.inputs.len(),
            n_params: sig.params.len(),
            retain_inputs: d
                .inputs_read
                .iter()
                .filter_map(|n| index(&scope.inputs, n))
                .collect(),
            retain_outputs: d
                .outputs_read
                .iter()
                .filter_map(|n| index(&scope.outputs, n))
                .collect(),
            backward_args,
            backward_params,
            backward: Arc::new(backward),
        })
    }

    /// Applies the op to `inputs` (broadcast together, one float dtype, one device) with the
    /// scalar `params`: its outputs, recorded for backward. A count that differs from the
    /// signature's is an [`Error::KernelArguments`] naming the op; inputs of different dtypes
    /// an [`Error::DTypeMismatch`]; a body or signature mistake an [`Error::InvalidKernel`].
    pub fn apply(&self, inputs: &[&Variable], params: &[Scalar]) -> Result<Vec<Variable>> {
        let d = self.derived()?;
        if inputs.len() != d.n_inputs || params.len() != d.n_params {
            return Err(Error::KernelArguments {
                kernel: d.name.to_string(),
                msg: format!(
                    "it takes {} input(s) and {} parameter(s), but {} and {} were given",
                    d.n_inputs,
                    d.n_params,
                    inputs.len(),
                    params.len()
                ),
            });
        }
        if let Some(first) = inputs.first() {
            for x in &inputs[1..] {
                if x.dtype() != first.dtype() {
                    return Err(Error::DTypeMismatch {
                        op: "ElementwiseOp",
                        lhs: first.dtype(),
                        rhs: x.dtype(),
                        lhs_shape: first.shape().to_vec(),
                        rhs_shape: x.shape().to_vec(),
                    });
                }
            }
            if !first.dtype().is_float() {
                return Err(Error::UnsupportedDType {
                    op: "ElementwiseOp",
                    dtype: first.dtype(),
                    shape: first.shape().to_vec(),
                    expected: "a floating-point dtype",
                });
            }
        }
        apply(
            Node {
                derived: d,
                params: params.to_vec(),
            },
            inputs,
        )
    }
}

/// One application of an [`ElementwiseOp`] in the graph.
struct Node {
    derived: Arc<Derived>,
    params: Vec<Scalar>,
}

impl FunctionNode for Node {
    fn label(&self) -> std::borrow::Cow<'static, str> {
        self.derived.name.into()
    }

    fn forward(&mut self, ctx: &mut ForwardContext, inputs: &[Array]) -> Result<Vec<Array>> {
        let d = &self.derived;
        ctx.retain_inputs(&d.retain_inputs);
        ctx.retain_outputs(&d.retain_outputs);
        match inputs.first().map_or(Device::Cpu, Array::device) {
            Device::Cuda(_) => {
                let refs: Vec<&Array> = inputs.iter().collect();
                d.kernel.launch(&refs, &self.params)
            }
            Device::Cpu => {
                let mut shape: Vec<usize> = Vec::new();
                for x in inputs {
                    shape = broadcast_shapes("ElementwiseOp", &shape, x.shape())?;
                }
                let parts: Vec<(&Storage, &crate::layout::Layout)> =
                    inputs.iter().map(|x| (x.storage(), x.layout())).collect();
                let params: Vec<f64> = self.params.iter().map(|p| p.to_f64()).collect();
                Ok(
                    Storage::run_expr("ElementwiseOp", &d.program, &parts, &params, &shape)?
                        .into_iter()
                        .map(|s| Array::from_storage(s, crate::layout::Layout::contiguous(&shape)))
                        .collect(),
                )
            }
        }
    }

    fn backward(
        &self,
        ctx: &BackwardContext<'_>,
        targets: &[usize],
        grads: &[Option<Variable>],
    ) -> Result<Vec<Option<Variable>>> {
        let d = &self.derived;
        let args: Vec<Variable> = d
            .backward_args
            .iter()
            .map(|s| match *s {
                Source::Input(i) => ctx.retained_input(i),
                Source::Output(j) => ctx.retained_output(j),
                Source::Grad(j) => match &grads[j] {
                    Some(g) => Ok(g.clone()),
                    None => ctx.zeros_for_output(j),
                },
            })
            .collect::<Result<_>>()?;
        let refs: Vec<&Variable> = args.iter().collect();
        let params: Vec<Scalar> = d.backward_params.iter().map(|&k| self.params[k]).collect();
        let gxs = d.backward.apply(&refs, &params)?;
        gxs.into_iter()
            .enumerate()
            .map(|(i, g)| {
                if !targets.contains(&i) {
                    return Ok(None);
                }
                let shape = ctx.input_shape(i)?;
                Ok(Some(if g.shape() == shape {
                    g
                } else {
                    super::sum_to(&g, shape)?
                }))
            })
            .collect()
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
