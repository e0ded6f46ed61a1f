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
/// This is the attribute's reference: what it accepts, what it checks at compile time and what
/// it generates. The guide's chapter "Declaring ops" (`docs/guide/declaring-ops.md` in the
/// repository) teaches it by example, and "GPUs" its kernels.
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
/// The attribute goes on an `impl` block of the op's type. In it:
///
/// - `forward(&self, x: &Array, ..) -> Result<Array>` computes the output array from one or
///   more input arrays (`Result` of a tuple of arrays for several outputs), and runs on every
///   device. It takes `&mut self` when it keeps something for backward, such as a dropout mask.
/// - Or `forward_cpu` with an optional `forward_gpu` method of the same shape: the first runs
///   for host inputs, the second for CUDA inputs. A `forward_cpu` alone runs on host copies of
///   CUDA inputs (the host fallback).
/// - Or `#[forward_gpu(..)]` on `forward` (or `forward_cpu`): an elementwise CUDA kernel that
///   runs the forward for CUDA inputs, while the method runs for host inputs (its keys and
///   rules are below).
/// - `#[retain(x, y, output = 0)]` on the forward: the inputs (by name) and outputs (by index)
///   that `backward` receives as `&Variable`s. `meta(..)` among them, as in
///   `#[retain(x, meta(b))]`, names inputs whose shape, dtype and device alone `backward` needs:
///   it receives each as `b: &InputMeta` (`b.shape()`, `b.dtype()`, `b.device()`), in
///   `#[retain]` order among the retained values, and the input's data is not kept alive for it
///   (what an op that sums a broadcast gradient back to an input's shape needs: the built-in
///   `F::add`, `F::sub`, `F::where_`, `F::reshape`, `F::sum`, ... are declared so).
/// - `backward(&self, <retained inputs, values and metas, in #[retain] order>, <retained
///   outputs>, <one gradient per output>, [needs: &[usize]])`. It is written with
///   differentiable operations on variables, so it has no CPU or GPU variant and can itself be
///   differentiated. A gradient parameter typed `&Variable` gets zeros when no gradient reached
///   that output, one typed `Option<&Variable>` gets `None`; the optional last `needs: &[usize]`
///   lists the inputs whose gradients are wanted, so that backward can skip the others. It
///   returns one `Variable` or `Option<Variable>` (`None`: no gradient) per input, as a tuple,
///   or a single value for one input, bare or in `Result`.
/// - `new(..)`, returning `Self` or `Result<Self>`: the wrapper takes the inputs followed by
///   `new`'s parameters (`Dropout::new(ratio)` gives `dropout(&x, ratio)`) and returns `new`'s
///   error, if any. Without `new` the type must be a unit struct.
///
/// The keys of `#[function_node(..)]`, each given at most once:
///
/// - `name = "muladd"`: the wrapper's name (default: the type's name in snake_case, `MulAdd` →
///   `mul_add`);
/// - `crate = "crate"`: the path of the kusari crate (default `::kusari`; `"crate"` inside it);
/// - `non_differentiable`: the op has no `backward`;
/// - `kernel(inputs = "..", outputs = "..", params = "..", body = "..", name = "..")`: the op
///   is this elementwise body, and has no `forward` (below);
/// - `formula = "x * c"`: the forward as one expression of the expression language over
///   forward's inputs and the op's scalar fields, for an op of one output, which
///   `kusari::fuse` inlines (`FunctionNode::formula`); checked at compile time. Without a
///   `backward`, the backward is derived from it (below).
///
/// # `formula = ".."` without a `backward`: a derived backward
///
/// An op with a `forward` of its own and a `formula` but no `backward` gets the backward
/// derived from the formula, as a `kernel(..)` op gets it from its body: one fused elementwise
/// op, differentiable again, reading what the forward keeps, which is derived too (a
/// `#[retain]` on `forward` is then a compile error). `Op::elementwise_op()` is the formula as
/// a `kusari::ElementwiseOp`. A formula whose backward cannot be derived is a compile error at
/// the string.
///
/// The typed `Op.apply((&x, ..))` shadows the trait's slice form `FunctionNode::apply(&[..])`;
/// the untyped form stays available as `kusari::apply(op, &[..])`. A node is applied once:
/// `apply` takes it by value. The wrapper always applies the op: a function that behaves
/// differently by mode (dropout in test mode) renames the generated wrapper with `name = ".."`
/// and wraps it in a hand-written function.
///
/// # `kernel(..)`: an op that is its body
///
/// `#[function_node(kernel(..))]` on an `impl` with no `forward` declares an op written once,
/// as an elementwise body in the expression language (`kusari_kernels::expr`):
///
/// ```ignore
/// pub struct Softplus { beta: f64 }
///
/// #[function_node(kernel(inputs = "T x", outputs = "T y", params = "T beta",
///                        body = "y = log1p(exp(beta * x)) / beta"))]
/// impl Softplus {
///     fn new(beta: f64) -> Self { Softplus { beta } }
/// }
///
/// let y = softplus(&x, 2.0)?;
/// ```
///
/// The keys are `#[forward_gpu(..)]`'s `inputs`, `outputs`, `params`, `body` and `name` (the
/// kernel's name, default the wrapper's); `preamble`, `loop_prep`, `after_loop` and `dtypes`
/// are refused. The inputs and outputs share one placeholder. At compile time the macro checks
/// the signature as for `#[forward_gpu(..)]`, that the body is in the expression language (a
/// loop, a branch, a pointer is an error at the body, naming the construct) and, without a
/// hand-written `backward`, that its backward derives. It generates
///
/// - `Op::elementwise_op() -> &'static ElementwiseOp`: the op as a `kusari::ElementwiseOp`,
///   whose kernel is the forward on CUDA, whose program is the forward on the host, and whose
///   `backward_op()` is the derived backward;
/// - `impl FunctionNode`: `forward` by the `ElementwiseOp` (keeping what the derived backward
///   reads), `backward` by the derived op (itself differentiable, to any order), `formula`;
/// - `KERNELS`, `apply` and the wrapper, as for any op.
///
/// A hand-written `backward` replaces the derived one; `#[retain(..)]` then goes on `backward`
/// (there is no `forward` to carry it). `non_differentiable` gives an op with no backward.
///
/// # `#[forward_gpu(..)]`: an elementwise kernel
///
/// CuPy's `ElementwiseKernel` (Chainer's `cuda.elementwise`), declared by its keys, each given
/// at most once:
///
/// - `inputs = ".."`, `outputs = ".."` and `body = ".."` (required): the array inputs and
///   outputs in CuPy's signature grammar, and the loop body in CUDA C++;
/// - `params = ".."`: scalar parameters, read from the op's fields of those names;
/// - `name = ".."`: the kernel's name (default `<wrapper>_fwd`, such as `mul_add_fwd`);
/// - `dtypes = "float"` or `dtypes = "numeric"`: what the inputs' dtypes may be;
/// - `preamble = ".."`, `loop_prep = ".."` and `after_loop = ".."`: CuPy's code around the body.
///
/// The op's kernels are listed in `Op::KERNELS` (`ElementwiseKernel`s, which
/// `ElementwiseKernel::new` also makes from the same strings).
///
/// **Signatures.** `inputs`, `outputs` and `params` are comma-separated lists of
/// `[raw] TYPE NAME`:
///
/// - `TYPE` is a one-letter type placeholder such as `T`, bound at launch to the dtype of the
///   first array input declared with it; every input using it must have that dtype, and a
///   placeholder must be bound by some array input (the op allocates its outputs, so they
///   cannot bind one, as a caller's outputs do for an `ElementwiseKernel`). Or it is a concrete type, `bool`, `int32`,
///   `int64`, `int8`, `int16`, `uint8`, `uint16`, `uint32`, `uint64`, `float16`, `bfloat16`,
///   `float32` or `float64`, which accepts only that dtype.
/// - `raw` marks an argument passed as a pointer that the body indexes itself, with `i` (the
///   loop index) and `n` (the element count); the body sees every other input and output
///   element by name.
/// - `inputs` are forward's parameters, with the same names in the same order, and `outputs`
///   has as many entries as forward has outputs.
/// - A `params` field may be a `bool`, `f32`, `f64`, `i32`, `i64`, `u32` or `usize`; at each
///   launch its value is converted to the parameter's declared type, and a value that does not
///   fit it (2.5 for an `int32`) is an `Error::KernelArguments` naming the kernel, the
///   parameter, its type and the value.
/// - `dtypes` restricts what a placeholder may be bound to, as the host `forward` does:
///   `"float"` (the float dtypes) or `"numeric"` (anything but `bool`). An integer input to a
///   kernel calling `exp` is then the host's `Error::UnsupportedDType` naming the op, before
///   anything is compiled (without it, NVRTC would refuse the kernel with "more than one
///   instance of overloaded function").
///
/// **Names.** A parameter's name is a C identifier that the generated CUDA C++ can declare. It
/// may not be a C or C++ keyword or alternative operator token (`int`, `return`, `and`,
/// `restrict`), a CUDA built-in or qualifier (`threadIdx`, `blockDim`, `warpSize`,
/// `__global__`), a type or keyword of the grammar (`float16`, `raw`), a placeholder of the same
/// signature (`T T`), a C library macro (`NULL`, `stdout`), a name of the generated code (`i`,
/// `n`, a leading `_`) or a name starting with `kusari_` or `KUSARI_`; names are unique within
/// a kernel. The kernel's name, given or by default, is a C identifier and not a keyword.
///
/// **Code.** `body` is pasted inside the elementwise loop; as in CuPy, its last statement's `;`
/// may be left out (one is added after its last token, on that line). `preamble` is code at file scope
/// before the kernel, after the placeholders' `typedef`s (so it may use `T`): `__device__`
/// helper functions, `constexpr` constants, structs. `loop_prep` runs once in each thread
/// before the loop, with the scalar parameters and `n` in scope, not `i`; `after_loop` runs
/// once in each thread after it, with what `loop_prep` declared in scope. Each of the four must
/// keep its braces, parentheses and brackets balanced (outside literals and comments), so that
/// it cannot close the kernel's function, and may not hold preprocessor directives other than
/// `#pragma`, line continuations or trigraphs, which could hide brackets: write `constexpr`
/// values and `__device__` functions instead of `#define`s (a macro from the preamble would
/// also apply to the kernel kusari generates after it). Each gets its own `#line` directive, so
/// a compile error names `<kernel>_preamble:<line>` (or `_loop_prep`, `_after_loop`).
///
/// `ElementwiseKernel` applies the same rules when first used, or at once with
/// `ElementwiseKernel::try_new`, and returns `Error::InvalidKernel`.
///
/// # What it checks at compile time
///
/// Every mistake is reported at once, each at the user's token, and a mistake gives one error
/// (the user's item, cleaned of the helper attributes, and stubs of what would have been
/// generated are emitted beside it, so there are no follow-on errors):
///
/// - the attribute on anything but an `impl` block; a missing forward, a forward with no input
///   or without output arrays; a `forward_gpu` method beside `forward` rather than
///   `forward_cpu`, or beside `#[forward_gpu(..)]`;
/// - a missing backward (unless `non_differentiable`), and a backward on a `non_differentiable`
///   op;
/// - backward's parameters: an input read that forward does not retain; parameters that are
///   not the retained values (in `#[retain]` order), the retained outputs and one gradient per
///   output; a parameter whose type the generated call cannot pass, reported at that type with
///   the op, the parameter and the accepted forms: a gradient that is not `&Variable` or
///   `Option<&Variable>` (Chainer's `grad_outputs: &[Option<Variable>]`, `gy: Variable` by
///   value, `gy: &Array`, `needs: &[usize]` anywhere but last), a retained input or output that
///   is not `&Variable`, a value retained by value taken as `&InputMeta`, a `meta(..)` input
///   taken as `&Variable` or as anything but `&InputMeta`. A type the macro cannot judge (an
///   alias, a generic) is left to the compiler, whose mismatch then points at that type too;
/// - a backward returning a number of gradients other than forward's number of inputs;
/// - `#[retain]` naming a non-input, an input or an output twice, an input both by value and as
///   `meta(..)`, an empty `meta()`, an output out of range, or anything but input names,
///   `meta(..)` and `output = N`;
/// - unknown attribute keys, and a key given twice in `#[function_node(..)]` or
///   `#[forward_gpu(..)]` (at the second: no value silently wins over another), or a helper
///   attribute (`#[retain(..)]`, `#[forward_gpu(..)]`) written twice;
/// - a `#[forward_gpu(..)]` without `inputs`, `outputs` or `body`, or with `dtypes` other than
///   `"float"` and `"numeric"`;
/// - kernel inputs that are not forward's parameters, or a kernel output count that is not
///   forward's; in signatures, placeholders bound by no array input, unknown types or keywords,
///   names the rules above refuse, and duplicate names (at most 20 signature mistakes per
///   kernel are listed, then their count);
/// - a kernel name that is not a C identifier, or is a keyword, and a body, preamble,
///   loop_prep or after_loop that breaks the rules above, each at its string;
/// - a wrapper name that is not a valid function name, and a default wrapper name that is a
///   keyword (`struct Where` gives `where`: name it with `name = ".."`).
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
