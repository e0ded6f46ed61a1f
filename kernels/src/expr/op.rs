//! An elementwise op written as one body: its signature and body checked together
//! ([`OpBody::new`]) and its backward derived into a second op ([`OpBody::derive`]). The runtime's
//! `ElementwiseOp` and the `#[function_node(kernel(..))]` macro both start here, so a body the
//! macro accepts at compile time is one the runtime runs.

use crate::{ElementwiseSignature, ParamType, SignatureList};

use super::{Body, ExprError, Program, Scope, derive, parse_body};

/// What is wrong with an op's signature or body, and in which of its strings.
#[derive(Clone, Debug, PartialEq)]
pub enum OpError {
    /// The signature does not parse: each mistake names its list.
    Signature(Vec<crate::SignatureError>),
    /// The signature parses but is not an op's: `list` says which string to point at.
    Types {
        /// The list holding the parameter at fault.
        list: SignatureList,
        /// What is wrong.
        message: String,
    },
    /// The body is outside the expression language (or cannot be derived).
    Body(ExprError),
}

impl OpError {
    /// The whole message, with the body's line underlined for a body error.
    pub fn render(&self, body: &str) -> String {
        match self {
            OpError::Signature(errors) => errors
                .iter()
                .map(ToString::to_string)
                .collect::<Vec<_>>()
                .join("; "),
            OpError::Types { message, .. } => message.clone(),
            OpError::Body(e) => format!(
                "the body is not in the expression language, so its backward cannot be \
                 derived: {}",
                e.render(body)
            ),
        }
    }
}

/// An op's signature and body, checked: every input and output is an element of one type
/// placeholder (`T`), so that the gradients have that type, and the body is in the expression
/// language.
#[derive(Clone, Debug, PartialEq)]
pub struct OpBody {
    /// The signature.
    pub sig: ElementwiseSignature,
    /// The placeholder of the inputs and outputs.
    pub placeholder: char,
    /// The names the body sees.
    pub scope: Scope,
    /// The body, parsed.
    pub body: Body,
    /// The body as straight-line instructions, for the host.
    pub program: Program,
}

/// Where an input of a derived backward comes from in the forward op.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum ArgSource {
    /// The forward's input of this index (retained).
    Input(usize),
    /// The forward's output of this index (retained).
    Output(usize),
    /// The incoming gradient of the forward's output of this index.
    Grad(usize),
}

/// A derived backward, as an op of its own and as what the forward must keep for it.
#[derive(Clone, Debug, PartialEq)]
pub struct OpBackward {
    /// The forward inputs it reads (which the forward retains), by index.
    pub retain_inputs: Vec<usize>,
    /// The forward outputs it reads (which the forward retains), by index.
    pub retain_outputs: Vec<usize>,
    /// Where each of its inputs comes from.
    pub args: Vec<ArgSource>,
    /// The forward parameter each of its parameters is, by index.
    pub params: Vec<usize>,
    /// Its signature's inputs (`T x, T grad_y`), outputs (`T grad_x`) and parameters, and its
    /// body, as an elementwise kernel takes them.
    pub inputs_sig: String,
    /// See [`inputs_sig`](Self::inputs_sig).
    pub outputs_sig: String,
    /// See [`inputs_sig`](Self::inputs_sig).
    pub params_sig: String,
    /// See [`inputs_sig`](Self::inputs_sig).
    pub body: String,
}

impl OpBody {
    /// Checks an op's signature (CuPy's grammar) and body.
    ///
    /// ```
    /// use kusari_kernels::expr::{OpBody, OpError};
    /// let op = OpBody::new("T x", "T y", "T beta", "y = beta * x * x").unwrap();
    /// let b = op.derive().unwrap();
    /// assert_eq!((b.inputs_sig.as_str(), b.outputs_sig.as_str()), ("T x, T grad_y", "T grad_x"));
    /// assert_eq!(b.retain_inputs, [0]);
    /// // Two placeholders: the gradients would have no single type.
    /// let e = OpBody::new("T x, U y", "T z", "", "z = x * y").unwrap_err();
    /// assert!(matches!(e, OpError::Types { .. }));
    /// ```
    pub fn new(inputs: &str, outputs: &str, params: &str, body: &str) -> Result<OpBody, OpError> {
        let sig = ElementwiseSignature::new(inputs, outputs, params).map_err(OpError::Signature)?;
        let t = match sig.inputs.first().map(|p| p.ty) {
            Some(ParamType::Placeholder(c)) => c,
            _ => {
                return Err(OpError::Types {
                    list: SignatureList::Inputs,
                    message: "an op written as a body has inputs and outputs of one type \
                              placeholder (`T x, T y`), so that its gradients have their type"
                        .to_string(),
                });
            }
        };
        let bad = sig
            .inputs
            .iter()
            .map(|p| (SignatureList::Inputs, p))
            .chain(sig.outputs.iter().map(|p| (SignatureList::Outputs, p)))
            .find(|(_, p)| p.raw || p.ty != ParamType::Placeholder(t));
        if let Some((list, p)) = bad {
            return Err(OpError::Types {
                list,
                message: format!(
                    "`{} {}` is {}: the inputs and outputs of an op written as a body are all \
                     `{t}` elements, so that each gradient has its input's type",
                    p.ty,
                    p.name,
                    if p.raw {
                        "raw".to_string()
                    } else {
                        format!("not of type `{t}`")
                    }
                ),
            });
        }
        let scope = Scope::of(&sig);
        let body = parse_body(body, &scope).map_err(OpError::Body)?;
        let program = Program::lower(&body, &scope);
        Ok(OpBody {
            sig,
            placeholder: t,
            scope,
            body,
            program,
        })
    }

    /// The backward: the gradient of every input from those of the outputs, derived from the
    /// body ([`derive`](fn@derive)).
    pub fn derive(&self) -> Result<OpBackward, OpError> {
        let all: Vec<usize> = (0..self.scope.inputs.len()).collect();
        self.derive_for(&all)
    }

    /// The backward for the gradients of the inputs `targets` alone (by index, in the order
    /// given): what a node needs when only some of its inputs want a gradient. It reads no
    /// more than [`derive`](Self::derive)'s backward.
    ///
    /// ```
    /// use kusari_kernels::expr::OpBody;
    /// let op = OpBody::new("T a, T b", "T y", "", "y = a * b").unwrap();
    /// let b = op.derive_for(&[1]).unwrap();
    /// assert_eq!(b.outputs_sig, "T grad_b");
    /// assert_eq!(b.body, "grad_b = a * grad_y;\n");
    /// assert_eq!(b.retain_inputs, [0]);
    /// ```
    ///
    /// # Panics
    ///
    /// When a target is not an input's index.
    pub fn derive_for(&self, targets: &[usize]) -> Result<OpBackward, OpError> {
        let scope = &self.scope;
        let wrt: Vec<&str> = targets.iter().map(|&i| scope.inputs[i].as_str()).collect();
        let t = self.placeholder.to_string();
        let d = derive(&self.body, scope, &wrt, &t).map_err(OpError::Body)?;
        let index = |names: &[String], n: &str| names.iter().position(|m| m == n);
        let args = d
            .scope
            .inputs
            .iter()
            .map(|n| {
                if let Some(i) = index(&scope.inputs, n) {
                    ArgSource::Input(i)
                } else if let Some(j) = index(&scope.outputs, n) {
                    ArgSource::Output(j)
                } else {
                    ArgSource::Grad(index(&d.grad_outputs, n).expect("a gradient"))
                }
            })
            .collect();
        let typed = |names: &[String]| {
            names
                .iter()
                .map(|n| format!("{t} {n}"))
                .collect::<Vec<_>>()
                .join(", ")
        };
        let params_sig = d
            .params_read
            .iter()
            .map(|n| {
                let p = self.sig.params.iter().find(|p| &p.name == n);
                format!("{} {n}", p.expect("a parameter").ty)
            })
            .collect::<Vec<_>>()
            .join(", ");
        Ok(OpBackward {
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
            args,
            params: d
                .params_read
                .iter()
                .map(|n| index(&scope.params, n).expect("a parameter"))
                .collect(),
            inputs_sig: typed(&d.scope.inputs),
            outputs_sig: typed(&d.scope.outputs),
            params_sig,
            body: d.body.to_c(Some(&t)),
        })
    }
}
