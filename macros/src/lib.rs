//! `#[function_node]`: one annotation declares a differentiable op for kusari; and
//! `#[derive(Link)]`, which finds a model's parameters from its fields.
//!
//! Use them through `kusari` (`use kusari::prelude::*;`), which re-exports them. The pipeline is
//! visible in the file list: `attr.rs` parses the attributes, `ast.rs` reads the `impl`,
//! `valid.rs` holds every rule a user can break, `expand.rs` only generates code, and
//! `fallback.rs` is what is emitted when there are mistakes. `link/` has the same files for the
//! derive.

mod ast;
mod attr;
mod ctxt;
mod expand;
mod fallback;
mod kw;
mod link;
mod valid;

use proc_macro::TokenStream;

/// Declares a differentiable op from an `impl` block with `forward` and `backward`.
///
/// ```ignore
/// use kusari::prelude::*;
///
/// /// f(x, y, z) = x * y + z
/// struct MulAdd;
///
/// #[function_node]
/// impl MulAdd {
///     #[retain(x, y)]
///     #[forward_gpu(inputs = "T x, T y, T z", outputs = "T w", body = "w = x * y + z;")]
///     fn forward(&self, x: &Array, y: &Array, z: &Array) -> Result<Array> {
///         x * y + z
///     }
///
///     fn backward(&self, x: &Variable, y: &Variable, gw: &Variable)
///         -> Result<(Variable, Variable, Variable)> {
///         Ok(((y * gw)?, (x * gw)?, gw.clone()))
///     }
/// }
///
/// let w = mul_add(&x, &y, &z)?;            // the generated wrapper
/// let (w,) = MulAdd.apply((&x, &y, &z))?;  // the generated typed apply; consumes the node
/// ```
///
/// # What it accepts
///
/// - `forward(&self, x: &Array, ..) -> Result<Array>` (or a tuple of arrays for several
///   outputs; `&mut self` when forward stores state for backward, such as a dropout mask) runs on
///   every device; or `forward_cpu` with an optional `forward_gpu` method of the
///   same shape; or `#[forward_gpu(inputs = "..", outputs = "..", body = "..")]` on `forward`
///   (or `forward_cpu`): an elementwise CUDA kernel in CuPy's signature grammar, with optional
///   `params = "T alpha"` (scalars read from the struct's fields), `name = ".."`, and CuPy's
///   `preamble = ".."` (device code before the kernel), `loop_prep = ".."` and
///   `after_loop = ".."` (code before and after the loop).
/// - `#[retain(x, y, output = 0)]` on the forward: the inputs (by name) and outputs (by index)
///   that `backward` receives as `&Variable`s. `meta(..)` among them, as in
///   `#[retain(x, meta(b))]`, names inputs whose shape, dtype and device alone `backward` needs:
///   it receives each as `b: &InputMeta` (`b.shape()`, `b.dtype()`, `b.device()`), and the
///   input's data is not kept alive for it (what an op that sums a broadcast gradient back to an
///   input's shape needs, as `F::add` does).
/// - `backward(&self, <retained inputs, values and metas, in #[retain] order>, <retained
///   outputs>, <one gradient per output>, [needs: &[usize]])`: a gradient parameter typed
///   `&Variable` gets zeros when no
///   gradient reached that output, one typed `Option<&Variable>` gets `None`; the optional last
///   `&[usize]` lists the inputs whose gradients are wanted. It returns one `Variable` or
///   `Option<Variable>` per input (a tuple, or a single value for one input), bare or in `Result`.
/// - `new(..)`: the wrapper takes the inputs followed by `new`'s parameters (`scale(&x, 2.0)`);
///   without `new` the type must be a unit struct.
/// - `#[function_node(name = "muladd")]` renames the wrapper (default: the type in snake_case);
///   `#[function_node(crate = "crate")]` sets the path of the kusari crate;
///   `#[function_node(non_differentiable)]` declares an op without `backward`.
///
/// The typed `Op.apply((&x, ..))` shadows the trait's slice form `FunctionNode::apply(&[..])`;
/// the untyped form stays available as `kusari::apply(op, &[..])`. The wrapper always applies the
/// op: a function that behaves differently by mode (dropout in test mode) renames the generated
/// wrapper with `name = ".."` and wraps it in a hand-written function.
///
/// # What it checks at compile time
///
/// Every mistake is reported at once, each at the user's token, and a mistake gives one error:
///
/// - backward's parameters: an input read that forward does not retain; parameters that are
///   not the retained values (in `#[retain]` order), the retained outputs and one gradient per
///   output; a parameter whose type the generated call cannot pass, reported at that type with
///   the op, the parameter and the accepted forms: a gradient that is not `&Variable` or
///   `Option<&Variable>` (Chainer's `grad_outputs: &[Option<Variable>]`, `gy: Variable` by
///   value, `gy: &Array`, `needs: &[usize]` anywhere but last), a retained input or output that
///   is not `&Variable`, a `meta(..)` input that is not `&InputMeta`. A type the macro cannot
///   judge (an alias, a generic) is left to the compiler, whose mismatch then points at that
///   type too;
/// - a backward returning a number of gradients other than forward's number of inputs;
/// - `#[retain]` naming a non-input, an input or an output twice, an input both by value and as
///   `meta(..)`, an empty `meta()`, an output out of range, or anything but input names,
///   `meta(..)` and `output = N`;
/// - unknown attribute keys, and a key given twice in `#[function_node(..)]` or
///   `#[forward_gpu(..)]` (at the second: no value silently wins over another), or a helper
///   attribute written twice;
/// - kernel inputs that are not forward's parameters, or a kernel output count that is not
///   forward's; placeholders bound by no array input; unknown types or keywords, reserved names
///   (`i`, `n`, a leading `_`) and duplicate names in signatures;
/// - a missing forward or backward, and a default wrapper name that is a keyword
///   (`struct Where` gives `where`).
///
/// # What it generates
///
/// For `MulAdd` above (paths shortened):
///
/// ```ignore
/// impl MulAdd { /* forward and backward as written, helper attributes removed */ }
///
/// impl FunctionNode for MulAdd {
///     fn label(&self) -> Cow<'static, str> { Cow::Borrowed("MulAdd") }
///     fn forward_cpu(&mut self, ctx: &mut ForwardContext, inputs: &[Array]) -> Result<Vec<Array>> {
///         let __inputs = macro_support::inputs::<3>("MulAdd", inputs)?;
///         ctx.retain_inputs(&[0, 1]);
///         Ok(vec![<MulAdd>::forward(self, __inputs[0], __inputs[1], __inputs[2])?])
///     }
///     fn forward_gpu(&mut self, ctx: &mut ForwardContext, inputs: &[Array]) -> Result<Vec<Array>> {
///         let __inputs = macro_support::inputs::<3>("MulAdd", inputs)?;
///         ctx.retain_inputs(&[0, 1]);
///         let params = [];
///         <MulAdd>::KERNELS[0].launch(&[__inputs[0], __inputs[1], __inputs[2]], &params)
///     }
///     fn backward(&self, ctx: &BackwardContext<'_>, target_input_indexes: &[usize],
///                 grad_outputs: &[Option<Variable>]) -> Result<Vec<Option<Variable>>> {
///         let __arg0 = ctx.retained_input(0)?;
///         let __arg1 = ctx.retained_input(1)?;
///         let __arg2 = macro_support::grad_or_zeros(ctx, grad_outputs, 0)?;
///         // Each argument carries the span of its parameter's type, where a mismatch is shown.
///         let (__grad0, __grad1, __grad2) = <MulAdd>::backward(self, &__arg0, &__arg1, &__arg2)?;
///         Ok(vec![__grad0.into_grad(), __grad1.into_grad(), __grad2.into_grad()])
///     }
/// }
///
/// impl MulAdd {
///     pub const KERNELS: &'static [ElementwiseKernel] =
///         &[ElementwiseKernel::new("mul_add_fwd", "T x, T y, T z", "T w", "", "w = x * y + z;")];
///     pub fn apply(self, inputs: (&Variable, &Variable, &Variable)) -> Result<(Variable,)> {
///         let mut outputs = kusari::apply(self, &[inputs.0, inputs.1, inputs.2])?.into_iter();
///         Ok((macro_support::next_output(&mut outputs, "MulAdd")?,))
///     }
/// }
///
/// pub fn mul_add(x: &Variable, y: &Variable, z: &Variable) -> Result<Variable> {
///     let (__out0,) = MulAdd.apply((x, y, z))?;
///     Ok(__out0)
/// }
/// ```
///
/// An input retained as `meta(b)` is left out of `ctx.retain_inputs` (its node records its
/// shape, dtype and device anyway), and backward gets `ctx.input_meta(i)?` for it: nothing is
/// allocated for it in forward or backward.
#[proc_macro_attribute]
pub fn function_node(args: TokenStream, input: TokenStream) -> TokenStream {
    let item = match syn::parse::<syn::ItemImpl>(input) {
        Ok(item) => item,
        Err(e) => {
            let msg = format!("#[function_node] goes on an `impl` block: {e}");
            return syn::Error::new(e.span(), msg).to_compile_error().into();
        }
    };
    let cx = ctxt::Ctxt::new();
    let options = attr::parse_options(&cx, args.into());
    let node = ast::Node::from_impl(&cx, &item, options);
    if let Some(node) = &node {
        valid::check(&cx, node);
    }
    match cx.check() {
        Ok(()) => match &node {
            Some(node) => expand::expand(node).into(),
            None => TokenStream::new(),
        },
        Err(errors) => fallback::expand(node.as_ref(), &item, errors).into(),
    }
}

/// Implements `kusari::link::Link` for a struct from its named fields, in order: a parameter's
/// path is the field names down to it (`/l1/W`).
///
/// ```ignore
/// use kusari::prelude::*;
/// use kusari::link::{Linear, Parameter};
///
/// #[derive(Link)]
/// struct Mlp {
///     l1: Linear,              // a child link: its parameters are /l1/W and /l1/b
///     l2: Linear,
///     scale: Parameter,        // a parameter: /scale
///     gate: Option<Parameter>, // a parameter when Some: /gate
///     blocks: Vec<Linear>,     // child links /blocks/0, /blocks/1, ...
///     #[kusari(skip)]
///     ratio: f64,              // no parameters: must be skipped
/// }
/// ```
///
/// A field's type must implement `kusari::link::LinkField` (a `Parameter`, an `Option` or `Vec`
/// of link fields, or any `Link`); one that does not, a `f64` say, is an error at its type
/// unless the field is marked `#[kusari(skip)]`. Generic structs get a `FieldType: LinkField`
/// bound for each field whose type names a type parameter. `#[kusari(crate = "crate")]` on the
/// struct sets the path of the kusari crate (default `::kusari`). Tuple structs, enums and unions
/// are rejected, and so are unknown `#[kusari(..)]` keys and keys given twice (in one
/// `#[kusari(..)]` or across several), each at its token.
#[proc_macro_derive(Link, attributes(kusari))]
pub fn derive_link(input: TokenStream) -> TokenStream {
    let input = syn::parse_macro_input!(input as syn::DeriveInput);
    link::derive(&input).into()
}
