//! Every rule a user can break, each reported at the user's token. No code is generated here.

use kusari_kernels::expr::{OpBody, OpError};
use kusari_kernels::names::check_kernel_name as check_kernel_name_rules;
use kusari_kernels::{ElementwiseSignature, SignatureList};
use quote::ToTokens;
use syn::{Ident, LitStr, ReturnType, Type};

use crate::ast::{Backward, Forward, Node, generic_arg};
use crate::attr::RetainedInput;
use crate::ctxt::Ctxt;
use crate::kw;

/// How many signature mistakes are reported for one kernel (the rest are counted in one more
/// error): a signature of thousands of mistakes does not flood the compiler's output.
const MAX_REPORTED: usize = 20;

pub fn check(cx: &Ctxt, node: &Node<'_>) {
    match &node.options.name {
        Some(name) => {
            if syn::parse_str::<Ident>(&name.value()).is_err() {
                cx.error_spanned_by(
                    name,
                    format!("`{}` is not a valid function name", name.value()),
                );
            }
        }
        None => {
            let name = node.wrapper_name();
            if syn::parse_str::<Ident>(&name).is_err() {
                cx.error_spanned_by(
                    &node.item.self_ty,
                    format!(
                        "the wrapper's default name `{name}` is not a valid function name (a keyword?): give it one with #[function_node(name = \"..\")]"
                    ),
                );
            }
        }
    }
    let Some(forward) = &node.forward else {
        cx.error_spanned_by(
            &node.item.self_ty,
            format!(
                "#[function_node] needs a `forward` method on `{}` (or `forward_cpu`, optionally with `forward_gpu`)",
                node.ident
            ),
        );
        return;
    };
    match forward.func {
        Some(func) => check_forward(cx, node, forward, func),
        None => check_body_op(cx, node, forward),
    }
    check_retain(cx, node, forward);
    if let Some(formula) = &node.options.formula {
        check_formula(cx, node, forward, formula);
    }
    if let Some(kernel) = &forward.kernel {
        check_kernel(cx, node, forward, kernel);
    }
    check_backward(cx, node, forward);
}

fn check_forward(cx: &Ctxt, node: &Node<'_>, forward: &Forward<'_>, func: &syn::ImplItemFn) {
    if forward.inputs.is_empty() {
        cx.error_spanned_by(
            &func.sig,
            "forward takes at least one input: `&self, x: &Array, ..`",
        );
    }
    if forward.outputs.count == 0 {
        cx.error_spanned_by(
            &func.sig,
            "forward returns its output array(s): `Result<Array>` or `Result<(Array, Array)>`",
        );
    }
    if let Some(gpu) = node.forward_gpu {
        if let Some(k) = &forward.kernel {
            cx.error_spanned_by(
                &k.at,
                "`forward_gpu` is defined twice: as a method and as #[forward_gpu(..)]; keep one",
            );
        } else if !forward.is_cpu() {
            cx.error_spanned_by(
                &gpu.sig.ident,
                "a `forward_gpu` method goes with `forward_cpu`; `forward` already runs on every device",
            );
        }
    }
}

/// An op declared by `kernel(..)`: its body is its forward on the host too, so it must be in
/// the expression language, with inputs and outputs of one placeholder; and without a
/// hand-written backward, its backward must derive. Each mistake is reported at its string.
fn check_body_op(cx: &Ctxt, node: &Node<'_>, forward: &Forward<'_>) {
    let Some(k) = &forward.kernel else { return };
    for (key, lit) in [
        (kw::DTYPES, &k.dtypes),
        (kw::PREAMBLE, &k.preamble),
        (kw::LOOP_PREP, &k.loop_prep),
        (kw::AFTER_LOOP, &k.after_loop),
    ] {
        if let Some(lit) = lit {
            cx.error_spanned_by(
                lit,
                format!(
                    "an op declared by #[function_node(kernel(..))] is all in its body, which runs on the host too: it takes no `{key}` (its inputs are always of a float dtype; write a preamble's helpers as expressions in the body, or declare a `forward` with #[forward_gpu(..)])"
                ),
            );
        }
    }
    let (Some(inputs), Some(outputs), Some(body)) = (&k.inputs, &k.outputs, &k.body) else {
        return;
    };
    let params = k.params.as_ref().map_or_else(String::new, LitStr::value);
    let code = body.value();
    let op = match OpBody::new(&inputs.value(), &outputs.value(), &params, &code) {
        Ok(op) => op,
        // Reported by check_kernel, at each list.
        Err(OpError::Signature(_)) => return,
        Err(OpError::Types { list, message }) => {
            let at = match list {
                SignatureList::Outputs => outputs,
                SignatureList::Params => k.params.as_ref().unwrap_or(inputs),
                SignatureList::Inputs => inputs,
            };
            cx.error_spanned_by(at, format!("kernel {list}: {message}"));
            return;
        }
        Err(OpError::Body(e)) => {
            cx.error_spanned_by(
                body,
                format!(
                    "kernel body: the body of an op declared by #[function_node(kernel(..))] is its forward on the host too, so it must be in the expression language: {}",
                    e.render(&code)
                ),
            );
            return;
        }
    };
    if op.sig.inputs.is_empty() {
        cx.error_spanned_by(inputs, "the kernel takes at least one input");
    }
    if node.backward.is_none()
        && node.options.non_differentiable.is_none()
        && let Err(e) = op.derive()
    {
        cx.error_spanned_by(body, format!("kernel body: {}", e.render(&code)));
    }
}

/// `formula = ".."`: an expression in the expression language over forward's inputs and the
/// op's fields, for an op of one output with a forward of its own.
fn check_formula(cx: &Ctxt, node: &Node<'_>, forward: &Forward<'_>, formula: &LitStr) {
    if forward.func.is_none() {
        cx.error_spanned_by(
            formula,
            "an op declared by #[function_node(kernel(..))] is its body already: it takes no `formula`",
        );
        return;
    }
    if node.n_outputs() != 1 {
        cx.error_spanned_by(
            formula,
            format!(
                "`formula` is one expression, for an op of one output; forward returns {}",
                node.n_outputs()
            ),
        );
        return;
    }
    let parts = crate::expand::FormulaParts::of(forward, &formula.value());
    let result = OpBody::new(&parts.inputs, &parts.output, &parts.params_sig, &parts.body);
    match result {
        Ok(op) if crate::expand::derives_from_formula(node, forward) => {
            if let Err(e) = op.derive() {
                cx.error_spanned_by(
                    formula,
                    format!(
                        "formula: without a `backward` the op's backward is derived from its formula, which cannot be: {}",
                        e.render(&parts.body)
                    ),
                );
            }
            let retain = &forward.retain;
            if let Some(at) = retain
                .inputs
                .first()
                .map(|r| r.ident.to_token_stream())
                .or_else(|| retain.outputs.first().map(ToTokens::to_token_stream))
            {
                cx.error_spanned_by(
                    at,
                    "#[retain] with a backward derived from the formula: what the op keeps is derived too (exactly what the derivative reads); remove #[retain], or write a `backward`",
                );
            }
        }
        Ok(_) => {}
        Err(OpError::Body(e)) => {
            // The error's span is in `out = <formula>;`: shift it back into the formula.
            let shift = parts.body.len() - formula.value().len() - 1;
            let mut e = e;
            e.span = e.span.start.saturating_sub(shift)..e.span.end.saturating_sub(shift);
            cx.error_spanned_by(formula, format!("formula: {}", e.render(&formula.value())));
        }
        Err(e) => cx.error_spanned_by(
            formula,
            format!(
                "formula: {} (its names are forward's inputs and the op's scalar fields)",
                e.render(&parts.body)
            ),
        ),
    }
}

fn check_retain(cx: &Ctxt, node: &Node<'_>, forward: &Forward<'_>) {
    let names: Vec<String> = forward.inputs.iter().map(|i| i.to_string()).collect();
    let retained = &forward.retain.inputs;
    for (i, r) in retained.iter().enumerate() {
        let ident = &r.ident;
        let earlier = retained[..i].iter().find(|e| e.ident == *ident);
        if !forward.inputs.contains(ident) {
            cx.error_spanned_by(
                ident,
                format!(
                    "#[retain] names `{ident}`, which is not an input of forward (its inputs: {})",
                    names.join(", ")
                ),
            );
        } else if let Some(earlier) = earlier {
            if earlier.meta == r.meta {
                cx.error_spanned_by(ident, format!("`{}` is retained twice", r.describe()));
            } else {
                cx.error_spanned_by(
                    ident,
                    format!(
                        "`{ident}` is retained both by value and as `meta({ident})`: a retained value has its shape and dtype too (`{ident}.shape()`, `{ident}.dtype()`); keep one"
                    ),
                );
            }
        }
    }
    let outputs = &forward.retain.outputs;
    for (j, lit) in outputs.iter().enumerate() {
        match lit.base10_parse::<usize>() {
            Ok(i) if i < node.n_outputs() => {
                if outputs[..j]
                    .iter()
                    .any(|e| e.base10_parse::<usize>().ok() == Some(i))
                {
                    cx.error_spanned_by(lit, format!("`output = {i}` is retained twice"));
                }
            }
            _ => cx.error_spanned_by(
                lit,
                format!(
                    "#[retain(output = {lit})]: forward has {} output(s)",
                    node.n_outputs()
                ),
            ),
        }
    }
}

fn check_kernel(cx: &Ctxt, node: &Node<'_>, forward: &Forward<'_>, k: &crate::attr::KernelAttr) {
    let missing: Vec<&str> = [
        (kw::INPUTS, &k.inputs),
        (kw::OUTPUTS, &k.outputs),
        (kw::BODY, &k.body),
    ]
    .into_iter()
    .filter(|(_, v)| v.is_none())
    .map(|(name, _)| name)
    .collect();
    // A misspelt key (`input = ..`) was reported as unknown; reporting the key it meant as
    // missing would be a second error for one mistake.
    if !missing.is_empty() && !k.has_unknown_key {
        cx.error_spanned_by(
            &k.at,
            format!("{} is missing {}", describe(k), missing.join(", ")),
        );
    }
    if let Some(d) = &k.dtypes
        && !kw::DTYPE_KINDS.contains(&d.value().as_str())
    {
        cx.error_spanned_by(
            d,
            format!(
                "unknown dtypes {:?}: expected one of {}",
                d.value(),
                kw::DTYPE_KINDS
                    .iter()
                    .map(|k| format!("\"{k}\""))
                    .collect::<Vec<_>>()
                    .join(", ")
            ),
        );
    }
    check_kernel_name(cx, node, k);
    let code = [
        ("body", &k.body),
        (kw::PREAMBLE, &k.preamble),
        (kw::LOOP_PREP, &k.loop_prep),
        (kw::AFTER_LOOP, &k.after_loop),
    ];
    for (part, lit) in code {
        if let Some(lit) = lit
            && let Err(e) = kusari_kernels::body::check_body(&lit.value())
        {
            let code = lit.value();
            cx.error_spanned_by(lit, format!("kernel {part}: {}", e.render_in(part, &code)));
        }
    }
    let (Some(inputs), Some(outputs)) = (&k.inputs, &k.outputs) else {
        return;
    };
    let empty = LitStr::new("", k.span());
    let params = k.params.as_ref().unwrap_or(&empty);
    let lit = |list| match list {
        SignatureList::Inputs => inputs,
        SignatureList::Outputs => outputs,
        SignatureList::Params => params,
    };
    // An op allocates its outputs: only its inputs can bind a placeholder.
    let sig = ElementwiseSignature::new(&inputs.value(), &outputs.value(), &params.value())
        .and_then(
            |sig| match sig.unbound_by_inputs("an op allocates its outputs") {
                errors if errors.is_empty() => Ok(sig),
                errors => Err(errors),
            },
        );
    let sig = match sig {
        Ok(sig) => sig,
        Err(errors) => {
            for e in errors.iter().take(MAX_REPORTED) {
                let l = lit(e.list);
                cx.error_spanned_by(l, format!("kernel {}: {}", e.list, e.render(&l.value())));
            }
            if errors.len() > MAX_REPORTED {
                let l = lit(errors[MAX_REPORTED].list);
                cx.error_spanned_by(
                    l,
                    format!(
                        "... and {} more mistakes in the kernel's signature",
                        errors.len() - MAX_REPORTED
                    ),
                );
            }
            return;
        }
    };
    let kernel_inputs: Vec<&str> = sig.inputs.iter().map(|p| p.name.as_str()).collect();
    let forward_inputs: Vec<String> = forward.inputs.iter().map(|i| i.to_string()).collect();
    if kernel_inputs != forward_inputs {
        cx.error_spanned_by(
            inputs,
            format!(
                "kernel inputs ({}) must be forward's parameters, in order ({})",
                kernel_inputs.join(", "),
                forward_inputs.join(", ")
            ),
        );
    }
    if sig.outputs.len() != node.n_outputs() {
        cx.error_spanned_by(
            outputs,
            format!(
                "kernel has {} output(s), but forward returns {}",
                sig.outputs.len(),
                node.n_outputs()
            ),
        );
    }
}

/// The attribute as messages name it: `#[forward_gpu(..)]` or `#[function_node(kernel(..))]`.
fn describe(k: &crate::attr::KernelAttr) -> String {
    match k.attr_name {
        kw::KERNEL => format!("#[{}({}(..))]", kw::FUNCTION_NODE, kw::KERNEL),
        name => format!("#[{name}(..)]"),
    }
}

/// The kernel's name, given (`name = ".."`) or derived from the op's (`<op>_fwd`), must be a C
/// identifier and not a keyword: it names the generated `extern "C"` function.
fn check_kernel_name(cx: &Ctxt, node: &Node<'_>, k: &crate::attr::KernelAttr) {
    match &k.name {
        Some(name) => {
            if let Err(e) = check_kernel_name_rules(&name.value()) {
                cx.error_spanned_by(name, format!("kernel name: {e}"));
            }
        }
        None => {
            let derived = node.kernel_name(k);
            if let Err(e) = check_kernel_name_rules(&derived) {
                let with_name = match k.attr_name {
                    kw::KERNEL => {
                        format!("#[{}({}(name = \"..\"))]", kw::FUNCTION_NODE, kw::KERNEL)
                    }
                    name => format!("#[{name}(name = \"..\")]"),
                };
                let msg =
                    format!("the kernel's default name: {e}; give it a name with {with_name}");
                match &node.options.name {
                    Some(op_name) => cx.error_spanned_by(op_name, msg),
                    None => cx.error_spanned_by(&node.item.self_ty, msg),
                }
            }
        }
    }
}

/// Whether a type is `&[usize]` (backward's optional needs-grad parameter).
pub fn is_index_slice(ty: &Type) -> bool {
    let Type::Reference(r) = ty else { return false };
    let Type::Slice(s) = &*r.elem else {
        return false;
    };
    matches!(&*s.elem, Type::Path(p) if p.path.is_ident("usize"))
}

fn check_backward(cx: &Ctxt, node: &Node<'_>, forward: &Forward<'_>) {
    let backward = match (&node.backward, node.options.non_differentiable) {
        (Some(b), Some(_)) => {
            cx.error_spanned_by(
                &b.func.sig.ident,
                "a #[function_node(non_differentiable)] op has no `backward`; remove one of the two",
            );
            return;
        }
        // The backward of an op declared by `kernel(..)` is derived from its body, that of an
        // op with a `formula` from the formula.
        (None, None) if forward.func.is_none() || node.options.formula.is_some() => return,
        (None, None) => {
            cx.error_spanned_by(
                &node.item.self_ty,
                format!(
                    "`{}` has no `backward`: write one, or mark the op #[function_node(non_differentiable)]",
                    node.ident
                ),
            );
            return;
        }
        (None, Some(_)) => return,
        (Some(b), None) => b,
    };
    check_backward_params(cx, node, forward, backward);
    let n = forward.inputs.len();
    if backward.returns.count != n {
        let at = match backward.returns.ty {
            Some(ReturnType::Type(_, ty)) => ty.to_token_stream(),
            _ => backward.func.sig.ident.to_token_stream(),
        };
        cx.error_spanned_by(
            at,
            format!(
                "backward returns {} gradient(s), but forward takes {n} input(s): return one `Variable` (or `Option<Variable>`) per input",
                backward.returns.count
            ),
        );
    }
}

fn check_backward_params(
    cx: &Ctxt,
    node: &Node<'_>,
    forward: &Forward<'_>,
    backward: &Backward<'_>,
) {
    let mut params = backward.params.as_slice();
    if let Some((last, rest)) = params.split_last()
        && is_index_slice(last.1)
    {
        params = rest;
    }
    let retained = &forward.retain.inputs;
    let mut unretained_read = false;
    for (name, _) in params {
        if forward.inputs.contains(*name) && !retained.iter().any(|r| r.ident == **name) {
            unretained_read = true;
            cx.error_spanned_by(
                name,
                format!("backward reads input `{name}`, which forward does not retain: add `{name}` to #[retain(..)], or `meta({name})` for its shape and dtype alone"),
            );
        }
    }
    // A #[retain] naming a non-input, an input or an output twice, or an output out of range
    // was reported there; backward cannot match it.
    let misnamed = retained.iter().enumerate().any(|(i, r)| {
        !forward.inputs.contains(&r.ident) || retained[..i].iter().any(|e| e.ident == r.ident)
    });
    let outputs: Vec<Option<usize>> = forward
        .retain
        .outputs
        .iter()
        .map(|l| l.base10_parse().ok())
        .collect();
    let bad_output = outputs.iter().enumerate().any(|(j, o)| match o {
        Some(i) => *i >= node.n_outputs() || outputs[..j].contains(o),
        None => true,
    });
    if unretained_read || misnamed || bad_output {
        return;
    }
    let list = retained
        .iter()
        .map(|r| r.describe())
        .collect::<Vec<_>>()
        .join(", ");
    let op = &node.ident;
    for (i, want) in retained.iter().enumerate() {
        match params.get(i) {
            Some((name, ty)) if **name == want.ident => {
                check_retained_type(cx, op, want, name, ty);
            }
            other => {
                let at = other.map_or(&backward.func.sig.ident, |(name, _)| *name);
                cx.error_spanned_by(
                    at,
                    format!(
                        "backward's first parameters are the retained inputs, in #[retain] order: {list}"
                    ),
                );
                return;
            }
        }
    }
    let (k, m, g) = (
        retained.len(),
        forward.retain.outputs.len(),
        node.n_outputs(),
    );
    let output_params = params.iter().skip(k).take(m);
    for ((name, ty), index) in output_params.zip(&forward.retain.outputs) {
        if fits(ty, Passed::Ref(kw::VARIABLE)) == Fit::No {
            cx.error_spanned_by(
                ty,
                format!(
                    "{op}::backward: retained output `{name}` (#[retain(output = {index})]) has type `{}`; backward takes a retained output as `&Variable`",
                    type_string(ty)
                ),
            );
        }
    }
    // A list of the gradients (Chainer's `grad_outputs`), or `needs: &[usize]` out of place, is
    // reported as such, not also as a wrong parameter count.
    let mut gradient_list = false;
    for (name, ty) in params.iter().skip(k + m).take(g) {
        let passed = match generic_arg(ty, kw::OPTION) {
            Some(_) => Passed::OptionRef,
            None => Passed::Ref(kw::VARIABLE),
        };
        if fits(ty, passed) != Fit::No {
            continue;
        }
        gradient_list |= is_list(ty);
        let needs_hint = match is_index_slice(ty) {
            true => "; the optional `needs: &[usize]` comes last",
            false => "",
        };
        cx.error_spanned_by(
            ty,
            format!(
                "{op}::backward: gradient parameter `{name}` has type `{}`; each output's gradient is its own parameter, of type `&Variable` or `Option<&Variable>` (one per output, after the retained values){needs_hint}",
                type_string(ty)
            ),
        );
    }
    if params.len() != k + m + g && !gradient_list {
        cx.error_spanned_by(
            &backward.func.sig.ident,
            format!(
                "backward takes {k} retained input(s), {m} retained output(s) and one gradient per output ({g}): {} parameter(s), found {}",
                k + m + g,
                params.len()
            ),
        );
    }
}

/// A retained input is taken as `&Variable`, a `meta(..)` one as `&InputMeta`: the other one of
/// the two gets its own message; any other type the generated call cannot pass is reported
/// too (else the call would fail at the macro's span with a bare type mismatch).
fn check_retained_type(cx: &Ctxt, op: &Ident, retained: &RetainedInput, name: &Ident, ty: &Type) {
    let named = match strip_parens(ty) {
        Type::Reference(r) if r.mutability.is_none() => type_name(&r.elem),
        _ => None,
    };
    let written = type_string(ty);
    if retained.meta {
        if named.as_deref() == Some(kw::VARIABLE) {
            cx.error_spanned_by(
                ty,
                format!(
                    "`{name}` is retained as `meta({name})`: backward takes it as `&InputMeta` (its shape, dtype and device); retain `{name}` itself for its value"
                ),
            );
        } else if fits(ty, Passed::Ref(kw::INPUT_META)) == Fit::No {
            cx.error_spanned_by(
                ty,
                format!(
                    "{op}::backward: `{name}` is retained as `meta({name})` and has type `{written}`; backward takes it as `&InputMeta` (its shape, dtype and device)"
                ),
            );
        }
    } else if named.as_deref() == Some(kw::INPUT_META) {
        cx.error_spanned_by(
            ty,
            format!(
                "`{name}` is retained by value: backward takes it as `&Variable`; for its shape and dtype alone, retain it as `meta({name})`"
            ),
        );
    } else if fits(ty, Passed::Ref(kw::VARIABLE)) == Fit::No {
        cx.error_spanned_by(
            ty,
            format!(
                "{op}::backward: retained input `{name}` has type `{written}`; backward takes a retained input as `&Variable` (or, retained as `meta({name})`, as `&InputMeta`)"
            ),
        );
    }
}

/// What the generated call passes to a parameter of the user's backward.
#[derive(Clone, Copy)]
enum Passed {
    /// A reference to the named type: `&Variable` or `&InputMeta`.
    Ref(&'static str),
    /// `Option<&Variable>`: a gradient parameter written `Option<..>`.
    OptionRef,
}

/// Whether a parameter's type takes what the generated call passes. `No` only where the tokens
/// make it certain: a type the macro does not know (an alias, a generic, `dyn Trait`) may still
/// take it, and is left to the compiler.
#[derive(Clone, Copy, Debug, PartialEq)]
enum Fit {
    Yes,
    No,
    Unknown,
}

/// The last path segment's name of a plain path type (`kusari::Variable` → `Variable`).
fn type_name(ty: &Type) -> Option<String> {
    match strip_parens(ty) {
        Type::Path(p) if p.qself.is_none() => p.path.segments.last().map(|s| s.ident.to_string()),
        _ => None,
    }
}

fn strip_parens(ty: &Type) -> &Type {
    match ty {
        Type::Paren(p) => strip_parens(&p.elem),
        Type::Group(g) => strip_parens(&g.elem),
        other => other,
    }
}

/// Whether a type is built from others in a way no alias can be: a slice, an array, a tuple, a
/// reference, a function pointer or `!`.
fn is_structural(ty: &Type) -> bool {
    matches!(
        strip_parens(ty),
        Type::Slice(_)
            | Type::Array(_)
            | Type::Tuple(_)
            | Type::Reference(_)
            | Type::BareFn(_)
            | Type::Never(_)
    )
}

/// Whether a type named `name` (the last segment of a path) is known to be another than `want`.
fn is_other_known(name: &str, want: &str) -> bool {
    name != want && kw::KNOWN_TYPES.contains(&name)
}

/// Whether `ty` takes a `&want`: a `&want` itself; not a `&mut`, a value, a slice or a
/// reference to another known type; anything else may (a coercion to `&dyn Trait`, a generic).
fn fits_ref(ty: &Type, want: &str) -> Fit {
    match strip_parens(ty) {
        Type::Reference(r) if r.mutability.is_some() => Fit::No,
        Type::Reference(r) => match type_name(&r.elem) {
            Some(name) if name == want => Fit::Yes,
            Some(name) if is_other_known(&name, want) => Fit::No,
            None if is_structural(&r.elem) => Fit::No,
            _ => Fit::Unknown,
        },
        Type::Path(_) => match type_name(ty) {
            Some(name) if kw::KNOWN_TYPES.contains(&name.as_str()) => Fit::No,
            _ => Fit::Unknown,
        },
        other if is_structural(other) => Fit::No,
        _ => Fit::Unknown,
    }
}

/// Whether `ty` (written `Option<X>`) takes an `Option<&Variable>`: nothing coerces inside an
/// `Option`, so `X` must be `&Variable` itself (or an alias or generic the macro cannot see).
fn fits_option_ref(ty: &Type) -> Fit {
    let Some(inner) = generic_arg(ty, kw::OPTION) else {
        return Fit::No;
    };
    match strip_parens(inner) {
        Type::Reference(r) if r.mutability.is_some() => Fit::No,
        Type::Reference(r) => match type_name(&r.elem) {
            Some(name) if name == kw::VARIABLE => Fit::Yes,
            Some(name) if kw::KNOWN_TYPES.contains(&name.as_str()) => Fit::No,
            None if is_structural(&r.elem) || matches!(&*r.elem, Type::TraitObject(_)) => Fit::No,
            _ => Fit::Unknown,
        },
        other => match type_name(other) {
            Some(name) if kw::KNOWN_TYPES.contains(&name.as_str()) => Fit::No,
            None if is_structural(other) => Fit::No,
            _ => Fit::Unknown,
        },
    }
}

fn fits(ty: &Type, passed: Passed) -> Fit {
    match passed {
        Passed::Ref(want) => fits_ref(ty, want),
        Passed::OptionRef => fits_option_ref(ty),
    }
}

/// Whether a type holds several values (a slice, array, tuple or `Vec`, by value or behind a
/// reference): a gradient parameter of that type is a list of the gradients.
fn is_list(ty: &Type) -> bool {
    let ty = match strip_parens(ty) {
        Type::Reference(r) => strip_parens(&r.elem),
        other => other,
    };
    matches!(ty, Type::Slice(_) | Type::Array(_) | Type::Tuple(_))
        || type_name(ty).as_deref() == Some("Vec")
}

/// A type as the user would write it: `&[Option<Variable>]`, not the token stream's
/// `& [Option < Variable >]`.
pub fn type_string(ty: &Type) -> String {
    let raw = ty.to_token_stream().to_string();
    let word = |c: Option<char>| c.is_some_and(|c| c.is_alphanumeric() || c == '_');
    let chars: Vec<char> = raw.chars().collect();
    let mut out = String::new();
    for (i, &c) in chars.iter().enumerate() {
        if c != ' ' {
            out.push(c);
            continue;
        }
        // A space stays between two words (`&mut Variable`, `dyn Trait`, `&'a Variable`) and
        // after a separator (`(Variable, Variable)`, `[f32; 3]`).
        let prev = out.chars().last();
        if (word(prev) && word(chars.get(i + 1).copied())) || matches!(prev, Some(',' | ';')) {
            out.push(' ');
        }
    }
    out
}

#[cfg(test)]
mod tests {
    use super::*;

    fn ty(s: &str) -> Type {
        syn::parse_str(s).expect("a type")
    }

    #[test]
    fn type_string_is_written_form() {
        for s in [
            "&[Option<Variable>]",
            "&'a mut Variable",
            "Option<&kusari::Variable>",
            "(Variable, Variable)",
            "[f32; 3]",
            "&dyn std::fmt::Debug",
        ] {
            assert_eq!(type_string(&ty(s)), s);
        }
    }

    #[test]
    fn a_reference_gradient_takes_exactly_variable() {
        let fit = |s| fits(&ty(s), Passed::Ref(kw::VARIABLE));
        assert_eq!(fit("&Variable"), Fit::Yes);
        assert_eq!(fit("&'a kusari::Variable"), Fit::Yes);
        assert_eq!(fit("&(Variable)"), Fit::Yes);
        for wrong in [
            "&[Option<Variable>]",
            "&[Variable]",
            "Variable",
            "&Array",
            "&InputMeta",
            "&mut Variable",
            "&Option<Variable>",
            "&&Variable",
            "&(Variable, Variable)",
            "Vec<Variable>",
            "(Variable,)",
            "[Variable; 2]",
            "f64",
        ] {
            assert_eq!(fit(wrong), Fit::No, "{wrong}");
        }
        // What an alias, a generic or a coercion may still make right is left to the compiler.
        for unknown in ["&Grad", "&dyn std::fmt::Debug", "G", "impl AsRef<Variable>"] {
            assert_eq!(fit(unknown), Fit::Unknown, "{unknown}");
        }
    }

    #[test]
    fn an_optional_gradient_takes_exactly_option_of_a_variable_reference() {
        let fit = |s| fits(&ty(s), Passed::OptionRef);
        assert_eq!(fit("Option<&Variable>"), Fit::Yes);
        assert_eq!(fit("std::option::Option<&'a kusari::Variable>"), Fit::Yes);
        for wrong in [
            "Option<Variable>",
            "Option<&Array>",
            "Option<&mut Variable>",
            "Option<&[Variable]>",
            "Option<&dyn std::fmt::Debug>",
            "Option<(Variable, Variable)>",
        ] {
            assert_eq!(fit(wrong), Fit::No, "{wrong}");
        }
        for unknown in ["Option<&Grad>", "Option<G>"] {
            assert_eq!(fit(unknown), Fit::Unknown, "{unknown}");
        }
    }

    #[test]
    fn a_meta_takes_input_meta() {
        let fit = |s| fits(&ty(s), Passed::Ref(kw::INPUT_META));
        assert_eq!(fit("&InputMeta"), Fit::Yes);
        assert_eq!(fit("&kusari::InputMeta"), Fit::Yes);
        assert_eq!(fit("&Variable"), Fit::No);
        assert_eq!(fit("InputMeta"), Fit::No);
        assert_eq!(fit("&[usize]"), Fit::No);
    }

    #[test]
    fn lists_of_gradients() {
        for list in [
            "&[Option<Variable>]",
            "Vec<Variable>",
            "&(Variable, Variable)",
            "[Variable; 2]",
        ] {
            assert!(is_list(&ty(list)), "{list}");
        }
        for one in ["&Variable", "Option<&Variable>", "Variable"] {
            assert!(!is_list(&ty(one)), "{one}");
        }
    }
}
