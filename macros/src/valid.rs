//! Every rule a user can break, each reported at the user's token. No code is generated here.

use kusari_kernels::names::check_kernel_name as check_kernel_name_rules;
use kusari_kernels::{ElementwiseSignature, SignatureList};
use quote::ToTokens;
use syn::{Ident, LitStr, ReturnType, Type};

use crate::ast::{Backward, Forward, Node};
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
    check_forward(cx, node, forward);
    check_retain(cx, node, forward);
    if let Some(kernel) = &forward.kernel {
        check_kernel(cx, node, forward, kernel);
    }
    check_backward(cx, node, forward);
}

fn check_forward(cx: &Ctxt, node: &Node<'_>, forward: &Forward<'_>) {
    if forward.inputs.is_empty() {
        cx.error_spanned_by(
            &forward.func.sig,
            "forward takes at least one input: `&self, x: &Array, ..`",
        );
    }
    if forward.outputs.count == 0 {
        cx.error_spanned_by(
            &forward.func.sig,
            "forward returns its output array(s): `Result<Array>` or `Result<(Array, Array)>`",
        );
    }
    if let Some(gpu) = node.forward_gpu {
        if let Some(k) = &forward.kernel {
            cx.error_spanned_by(
                &k.attr,
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

fn check_retain(cx: &Ctxt, node: &Node<'_>, forward: &Forward<'_>) {
    let names: Vec<String> = forward.inputs.iter().map(|i| i.to_string()).collect();
    let retained = &forward.retain.inputs;
    for (i, r) in retained.iter().enumerate() {
        let ident = &r.ident;
        let earlier = retained[..i].iter().find(|e| e.ident == *ident);
        if !forward.inputs.contains(&ident) {
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
    for lit in &forward.retain.outputs {
        match lit.base10_parse::<usize>() {
            Ok(i) if i < node.n_outputs() => {}
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
            &k.attr,
            format!("#[forward_gpu(..)] is missing {}", missing.join(", ")),
        );
    }
    if let Some(d) = &k.dtypes {
        if !kw::DTYPE_KINDS.contains(&d.value().as_str()) {
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
    }
    check_kernel_name(cx, node, k);
    if let Some(body) = &k.body {
        if let Err(e) = kusari_kernels::body::check_body(&body.value()) {
            cx.error_spanned_by(body, format!("kernel body: {}", e.render(&body.value())));
        }
    }
    let (Some(inputs), Some(outputs)) = (&k.inputs, &k.outputs) else {
        return;
    };
    let empty = LitStr::new("", k.attr.pound_token.span);
    let params = k.params.as_ref().unwrap_or(&empty);
    let lit = |list| match list {
        SignatureList::Inputs => inputs,
        SignatureList::Outputs => outputs,
        SignatureList::Params => params,
    };
    let sig = match ElementwiseSignature::new(&inputs.value(), &outputs.value(), &params.value()) {
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
            let derived = format!("{}_fwd", node.wrapper_name());
            if let Err(e) = check_kernel_name_rules(&derived) {
                let msg = format!(
                    "the kernel's default name: {e}; give it a name with #[forward_gpu(name = \"..\")]"
                );
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
            ReturnType::Type(_, ty) => ty.to_token_stream(),
            ReturnType::Default => backward.func.sig.ident.to_token_stream(),
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
    if let Some((last, rest)) = params.split_last() {
        if is_index_slice(last.1) {
            params = rest;
        }
    }
    let retained = &forward.retain.inputs;
    let mut unretained_read = false;
    for (name, _) in params {
        if forward.inputs.contains(name) && !retained.iter().any(|r| r.ident == **name) {
            unretained_read = true;
            cx.error_spanned_by(
                name,
                format!("backward reads input `{name}`, which forward does not retain: add `{name}` to #[retain(..)], or `meta({name})` for its shape and dtype alone"),
            );
        }
    }
    // A #[retain] naming a non-input or an input twice was reported there; backward cannot
    // match it.
    let misnamed = retained.iter().enumerate().any(|(i, r)| {
        !forward.inputs.contains(&&r.ident) || retained[..i].iter().any(|e| e.ident == r.ident)
    });
    if unretained_read || misnamed {
        return;
    }
    let list = retained
        .iter()
        .map(|r| r.describe())
        .collect::<Vec<_>>()
        .join(", ");
    for (i, want) in retained.iter().enumerate() {
        match params.get(i) {
            Some((name, ty)) if **name == want.ident => check_retained_type(cx, want, name, ty),
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
    if params.len() != k + m + g {
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

/// A retained input is taken as `&Variable`, a `meta(..)` one as `&InputMeta`. Only the other
/// type is reported here (any other type is left to the compiler): the generated call would
/// otherwise fail at the macro's span with a bare type mismatch.
fn check_retained_type(cx: &Ctxt, retained: &RetainedInput, name: &Ident, ty: &Type) {
    let Type::Reference(r) = ty else { return };
    let Type::Path(p) = &*r.elem else { return };
    let Some(last) = p.path.segments.last() else {
        return;
    };
    if retained.meta && last.ident == kw::VARIABLE {
        cx.error_spanned_by(
            ty,
            format!(
                "`{name}` is retained as `meta({name})`: backward takes it as `&InputMeta` (its shape, dtype and device); retain `{name}` itself for its value"
            ),
        );
    } else if !retained.meta && last.ident == kw::INPUT_META {
        cx.error_spanned_by(
            ty,
            format!(
                "`{name}` is retained by value: backward takes it as `&Variable`; for its shape and dtype alone, retain it as `meta({name})`"
            ),
        );
    }
}
