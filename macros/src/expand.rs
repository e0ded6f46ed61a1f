//! Code generation: only `quote!` here; every rule was checked in `valid.rs`.
//!
//! For an op `MulAdd` this emits: the user's `impl` without the helper attributes, an
//! `impl FunctionNode for MulAdd` that unpacks inputs, records the retained values and calls the
//! user's methods, a typed `MulAdd::apply((&x, &y, &z)) -> Result<(Variable,)>`, and the wrapper
//! `mul_add(&x, &y, &z) -> Result<Variable>`.

use proc_macro2::{Span, TokenStream};
use quote::{ToTokens, format_ident, quote, quote_spanned};
use syn::{FnArg, Ident, ImplItem, ItemImpl, Path};

use crate::ast::{Forward, Node, Returns, generic_arg};
use crate::attr;
use crate::kw;
use crate::valid::is_index_slice;

pub fn krate(node: &Node<'_>) -> Path {
    node.options
        .krate
        .clone()
        .unwrap_or_else(|| syn::parse_quote!(::kusari))
}

/// The user's impl with the macro's helper attributes removed from its methods.
pub fn strip_helpers(item: &ItemImpl) -> ItemImpl {
    let mut item = item.clone();
    for i in &mut item.items {
        if let ImplItem::Fn(f) = i {
            f.attrs.retain(|a| !attr::is_helper(a));
        }
    }
    item
}

/// Whether the op's backward is derived from `formula = ".."`: a forward of its own, a formula,
/// and no hand-written `backward`.
pub fn derives_from_formula(node: &Node<'_>, forward: &Forward<'_>) -> bool {
    forward.func.is_some()
        && node.options.formula.is_some()
        && node.backward.is_none()
        && node.options.non_differentiable.is_none()
}

pub fn expand(node: &Node<'_>) -> TokenStream {
    let Some(forward) = &node.forward else {
        return TokenStream::new();
    };
    let user_impl = strip_helpers(node.item);
    let function_node = function_node_impl(node, forward);
    let apply = typed_apply(node, forward, false);
    let wrapper = wrapper(node, forward, false);
    quote! {
        #user_impl
        #function_node
        #apply
        #wrapper
    }
}

/// `Ok(vec![..])` from a call returning `Returns` (a value or a tuple, maybe in a `Result`).
fn outputs_vec(call: TokenStream, returns: &Returns<'_>) -> TokenStream {
    let call = if returns.is_result {
        quote!(#call?)
    } else {
        call
    };
    if returns.is_tuple {
        let outs: Vec<Ident> = (0..returns.count)
            .map(|i| format_ident!("__out{}", i))
            .collect();
        quote! {
            let (#(#outs,)*) = #call;
            ::std::result::Result::Ok(::std::vec![#(#outs),*])
        }
    } else {
        quote!(::std::result::Result::Ok(::std::vec![#call]))
    }
}

fn function_node_impl(node: &Node<'_>, forward: &Forward<'_>) -> TokenStream {
    let krate = krate(node);
    let ty = &node.item.self_ty;
    let label = node.ident.to_string();
    let n = forward.inputs.len();
    let args: Vec<TokenStream> = (0..n).map(|i| quote!(__inputs[#i])).collect();
    // A `meta(..)` input is not retained: its node keeps its shape, dtype and device anyway.
    let retain_inputs: Vec<usize> = forward
        .retain
        .inputs
        .iter()
        .filter(|r| !r.meta)
        .filter_map(|r| forward.inputs.iter().position(|i| *i == r.ident))
        .collect();
    let retain_outputs: Vec<usize> = forward
        .retain
        .outputs
        .iter()
        .filter_map(|l| l.base10_parse().ok())
        .collect();
    let mut prologue = quote! {
        let __inputs = #krate::macro_support::inputs::<#n>(#label, inputs)?;
    };
    if !retain_inputs.is_empty() {
        prologue.extend(quote!(ctx.retain_inputs(&[#(#retain_inputs),*]);));
    }
    if !retain_outputs.is_empty() {
        prologue.extend(quote!(ctx.retain_outputs(&[#(#retain_outputs),*]);));
    }
    if derives_from_formula(node, forward) {
        // What the derived backward reads.
        prologue.extend(quote! {
            #krate::macro_support::formula_retain(<#ty>::elementwise_op(), ctx)?;
        });
    }
    let signature = |name: &str| {
        let name = format_ident!("{}", name);
        quote! {
            fn #name(
                &mut self,
                ctx: &mut #krate::ForwardContext,
                inputs: &[#krate::Array],
            ) -> #krate::Result<::std::vec::Vec<#krate::Array>>
        }
    };
    let mut methods = formula_method(node, forward);
    let Some(func) = forward.func else {
        // The op is its kernel's body: one forward for every device.
        let sig = signature(kw::FORWARD);
        let params = param_values(node, forward);
        // A derived backward reads what the op keeps; a hand-written one, or none, does not.
        let derived_retain = node.backward.is_none() && node.options.non_differentiable.is_none();
        methods.extend(quote! {
            #sig {
                #prologue
                let params = #params;
                #krate::macro_support::body_forward(
                    <#ty>::elementwise_op(), ctx, inputs, &params, #derived_retain,
                )
            }
        });
        let backward = backward_method(node, forward);
        return quote! {
            impl #krate::FunctionNode for #ty {
                fn label(&self) -> ::std::borrow::Cow<'static, str> {
                    ::std::borrow::Cow::Borrowed(#label)
                }
                #methods
                #backward
            }
        };
    };
    let user_method = &func.sig.ident;
    let run_user = outputs_vec(
        quote!(<#ty>::#user_method(self, #(#args),*)),
        &forward.outputs,
    );
    let gpu_body = if let Some(k) = &forward.kernel {
        Some(kernel_launch(node, k, &args))
    } else {
        node.forward_gpu.map(|gpu| {
            let gpu_returns = crate::ast::returns_of(&gpu.sig.output);
            outputs_vec(quote!(<#ty>::forward_gpu(self, #(#args),*)), &gpu_returns)
        })
    };
    if !forward.is_cpu() && gpu_body.is_none() {
        let sig = signature(kw::FORWARD);
        methods.extend(quote! { #sig { #prologue #run_user } });
    } else {
        let sig = signature(kw::FORWARD_CPU);
        methods.extend(quote! { #sig { #prologue #run_user } });
        if let Some(body) = gpu_body {
            let sig = signature(kw::FORWARD_GPU);
            methods.extend(quote! { #sig { #prologue #body } });
        }
    }
    let backward = backward_method(node, forward);
    quote! {
        impl #krate::FunctionNode for #ty {
            fn label(&self) -> ::std::borrow::Cow<'static, str> {
                ::std::borrow::Cow::Borrowed(#label)
            }
            #methods
            #backward
        }
    }
}

/// The kernel's scalar parameters, read from the op's fields of their names:
/// `[KernelScalar::to_kernel_scalar(&self.beta), ..]`.
fn param_values(node: &Node<'_>, forward: &Forward<'_>) -> TokenStream {
    kernel_params(node, forward.kernel.as_ref())
}

/// [`param_values`] of a kernel.
fn kernel_params(node: &Node<'_>, k: Option<&attr::KernelAttr>) -> TokenStream {
    let krate = krate(node);
    let params = k
        .and_then(|k| k.params.as_ref())
        .map_or_else(String::new, syn::LitStr::value);
    let fields: Vec<Ident> =
        kusari_kernels::signature::parse_list(&params, kusari_kernels::SignatureList::Params)
            .unwrap_or_default()
            .iter()
            .map(|p| format_ident!("{}", p.name))
            .collect();
    quote!([#(#krate::macro_support::KernelScalar::to_kernel_scalar(&self.#fields)),*])
}

/// `fn formula(&self)` for `kusari::fuse`: the kernel of an op that is its body, or the
/// expression of `formula = ".."`; nothing otherwise (the trait's `None`).
fn formula_method(node: &Node<'_>, forward: &Forward<'_>) -> TokenStream {
    let krate = krate(node);
    let ty = &node.item.self_ty;
    let signature = quote!(fn formula(&self) -> ::std::option::Option<#krate::Formula>);
    if forward.func.is_none() {
        let params = param_values(node, forward);
        return quote! {
            #signature {
                ::std::option::Option::Some(#krate::Formula {
                    kernel: *<#ty>::elementwise_op().kernel(),
                    params: ::std::vec::Vec::from(#params),
                })
            }
        };
    }
    let Some(formula) = &node.options.formula else {
        return TokenStream::new();
    };
    let parts = FormulaParts::of(forward, &formula.value());
    let (label, inputs, output, params, body) = (
        node.ident.to_string(),
        parts.inputs,
        parts.output,
        parts.params_sig,
        parts.body,
    );
    let values = formula_params(node, forward);
    quote! {
        #signature {
            ::std::option::Option::Some(#krate::Formula {
                kernel: #krate::ElementwiseKernel::new(#label, #inputs, #output, #params, #body),
                params: ::std::vec::Vec::from(#values),
            })
        }
    }
}

/// The formula's scalar parameters, read from the op's fields of their names:
/// `[KernelScalar::to_kernel_scalar(&self.c), ..]`.
fn formula_params(node: &Node<'_>, forward: &Forward<'_>) -> TokenStream {
    let krate = krate(node);
    let formula = node
        .options
        .formula
        .as_ref()
        .map_or_else(String::new, syn::LitStr::value);
    let parts = FormulaParts::of(forward, &formula);
    let fields = parts.fields.iter().map(|f| format_ident!("{}", f));
    quote!([#(#krate::macro_support::KernelScalar::to_kernel_scalar(&self.#fields)),*])
}

/// `formula = ".."` as a kernel: its inputs are forward's (`T x, T y`), its one output is
/// named apart from them, its parameters are the other names it reads (the op's fields).
pub struct FormulaParts {
    pub inputs: String,
    pub output: String,
    pub params_sig: String,
    pub body: String,
    pub fields: Vec<String>,
}

impl FormulaParts {
    pub fn of(forward: &Forward<'_>, formula: &str) -> FormulaParts {
        let inputs: Vec<String> = forward.inputs.iter().map(Ident::to_string).collect();
        let fields: Vec<String> = kusari_kernels::expr::free_names(formula)
            .unwrap_or_default()
            .into_iter()
            .filter(|n| !inputs.contains(n))
            .collect();
        let mut out = "out".to_string();
        while inputs.contains(&out) || fields.contains(&out) {
            out.push('_');
        }
        let typed = |names: &[String]| {
            names
                .iter()
                .map(|n| format!("T {n}"))
                .collect::<Vec<_>>()
                .join(", ")
        };
        FormulaParts {
            inputs: typed(&inputs),
            output: format!("T {out}"),
            params_sig: typed(&fields),
            body: format!("{out} = {formula};"),
            fields,
        }
    }
}

fn kernel_launch(node: &Node<'_>, k: &attr::KernelAttr, args: &[TokenStream]) -> TokenStream {
    let krate = krate(node);
    let ty = &node.item.self_ty;
    let params = kernel_params(node, Some(k));
    // The dtype restriction is checked before anything is compiled, with the error the host
    // forward gives (UnsupportedDType naming the op).
    let dtype_check = k.dtypes.as_ref().map(|d| {
        let op = node.wrapper_name();
        quote!(#krate::macro_support::require_dtypes(#op, &[#(#args),*], #d)?;)
    });
    quote! {
        #dtype_check
        let params = #params;
        <#ty>::KERNELS[0].launch(&[#(#args),*], &params)
    }
}

/// The op's kernels as `ElementwiseKernel` values (empty without `#[forward_gpu(..)]`).
fn kernel_values(node: &Node<'_>) -> Vec<TokenStream> {
    let krate = krate(node);
    let Some(k) = node.forward.as_ref().and_then(|f| f.kernel.as_ref()) else {
        return Vec::new();
    };
    let value = |l: &Option<syn::LitStr>| l.as_ref().map_or_else(String::new, syn::LitStr::value);
    let [inputs, outputs, params, body] = k.parts();
    let name = node.kernel_name(k);
    let (preamble, loop_prep, after_loop) = (
        value(&k.preamble),
        value(&k.loop_prep),
        value(&k.after_loop),
    );
    vec![quote!(
        #krate::ElementwiseKernel::new(#name, #inputs, #outputs, #params, #body)
            .with_preamble(#preamble)
            .with_loop_prep(#loop_prep)
            .with_after_loop(#after_loop)
    )]
}

fn backward_method(node: &Node<'_>, forward: &Forward<'_>) -> TokenStream {
    let krate = krate(node);
    let ty = &node.item.self_ty;
    let signature = quote! {
        fn backward(
            &self,
            ctx: &#krate::BackwardContext<'_>,
            target_input_indexes: &[usize],
            grad_outputs: &[::std::option::Option<#krate::Variable>],
        ) -> #krate::Result<::std::vec::Vec<::std::option::Option<#krate::Variable>>>
    };
    let from_body = node.backward.is_none()
        && forward.func.is_none()
        && node.options.non_differentiable.is_none();
    if from_body || derives_from_formula(node, forward) {
        // Derived from the body, or from the formula.
        let params = match from_body {
            true => param_values(node, forward),
            false => formula_params(node, forward),
        };
        return quote! {
            #signature {
                let params = #params;
                #krate::macro_support::body_backward(
                    <#ty>::elementwise_op(), ctx, target_input_indexes, grad_outputs, &params,
                )
            }
        };
    }
    let Some(backward) = &node.backward else {
        let label = node.ident.to_string();
        return quote! {
            #signature {
                let _ = (ctx, target_input_indexes, grad_outputs);
                ::std::result::Result::Err(#krate::Error::NotDifferentiable {
                    function: ::std::string::String::from(#label),
                })
            }
        };
    };
    // What each parameter gets, and whether it is passed by reference.
    let mut values: Vec<(TokenStream, bool)> = Vec::new();
    for r in &forward.retain.inputs {
        let i = forward
            .inputs
            .iter()
            .position(|x| *x == r.ident)
            .unwrap_or(0);
        values.push(match r.meta {
            true => (quote!(ctx.input_meta(#i)?), true),
            false => (quote!(ctx.retained_input(#i)?), true),
        });
    }
    for l in &forward.retain.outputs {
        let i: usize = l.base10_parse().unwrap_or(0);
        values.push((quote!(ctx.retained_output(#i)?), true));
    }
    let first_grad = values.len();
    for (j, (_, ty)) in backward.params.iter().enumerate().skip(first_grad) {
        let out = j - first_grad;
        values.push(if is_index_slice(ty) {
            (quote!(target_input_indexes), false)
        } else if generic_arg(ty, kw::OPTION).is_some() {
            (
                quote!(#krate::macro_support::grad_opt(grad_outputs, #out)),
                false,
            )
        } else {
            (
                quote!(#krate::macro_support::grad_or_zeros(ctx, grad_outputs, #out)?),
                true,
            )
        });
    }
    // Each value is bound first and passed by a name spanned at its parameter's type: a type
    // the macro could not judge (valid.rs reports the ones it can) then fails at that type,
    // not at the macro's line.
    let mut lets = TokenStream::new();
    let mut args: Vec<TokenStream> = Vec::new();
    for (j, (value, by_ref)) in values.into_iter().enumerate() {
        let (first, last) = backward
            .params
            .get(j)
            .map_or((Span::call_site(), Span::call_site()), |(_, ty)| {
                first_last_spans(ty)
            });
        lets.extend({
            let name = format_ident!("__arg{}", j);
            quote!(let #name = #value;)
        });
        // `&` at the type's first token and the name at its last: the compiler underlines the
        // whole type.
        args.push(match by_ref {
            true => {
                let name = format_ident!("__arg{}", j, span = last);
                quote_spanned!(first=> &#name)
            }
            false => format_ident!("__arg{}", j, span = first).into_token_stream(),
        });
    }
    let call = quote!(<#ty>::backward(self, #(#args),*));
    let call = if backward.returns.is_result {
        quote!(#call?)
    } else {
        call
    };
    let grads: Vec<Ident> = (0..backward.returns.count)
        .map(|i| format_ident!("__grad{}", i))
        .collect();
    let bind = if backward.returns.is_tuple {
        quote!(let (#(#grads,)*) = #call;)
    } else {
        quote!(let #(#grads)* = #call;)
    };
    quote! {
        #signature {
            let _ = target_input_indexes;
            #lets
            #bind
            ::std::result::Result::Ok(::std::vec![
                #(#krate::macro_support::IntoGrad::into_grad(#grads)),*
            ])
        }
    }
}

/// The spans of the first and the last token of `tokens` (both the call site when empty).
fn first_last_spans(tokens: impl ToTokens) -> (Span, Span) {
    let mut spans = tokens.into_token_stream().into_iter().map(|t| t.span());
    let first = spans.next().unwrap_or_else(Span::call_site);
    (first, spans.last().unwrap_or(first))
}

/// `impl Op { pub fn apply(self, (&x, ..)) -> Result<(Variable, ..)> }`. With `stub`, the body is
/// `unimplemented!()` (emitted next to compile errors so that callers do not error too).
pub fn typed_apply(node: &Node<'_>, forward: &Forward<'_>, stub: bool) -> TokenStream {
    let krate = krate(node);
    let ty = &node.item.self_ty;
    let label = node.ident.to_string();
    let n_out = forward.outputs.count;
    let input_types = forward.inputs.iter().map(|_| quote!(&#krate::Variable));
    let output_types: Vec<TokenStream> = (0..n_out).map(|_| quote!(#krate::Variable)).collect();
    let index = (0..forward.inputs.len()).map(syn::Index::from);
    let next =
        (0..n_out).map(|_| quote!(#krate::macro_support::next_output(&mut outputs, #label)?));
    let body = if stub {
        quote!(::std::unimplemented!())
    } else {
        quote! {
            let mut outputs = #krate::apply(self, &[#(inputs.#index),*])?.into_iter();
            ::std::result::Result::Ok((#(#next,)*))
        }
    };
    let doc = format!(
        "Applies this `{label}` to `inputs` and records it in the graph; the node is consumed (a \
         node is applied once). Generated by `#[function_node]`."
    );
    let kernels = kernel_values(node);
    let kernels_doc = format!(
        "The CUDA kernels of `{label}` (from `#[forward_gpu(..)]`; empty without one), listed so \
         that tests can compile every kernel. Generated by `#[function_node]`."
    );
    // An op that is its body (no forward method) always has its kernel.
    let body_kernel = forward.kernel.as_ref().filter(|_| forward.func.is_none());
    let elementwise_op = body_kernel.map(|k| {
        let [inputs, outputs, params, body] = k.parts();
        let name = node.kernel_name(k);
        let doc = format!(
            "`{label}` as an `ElementwiseOp`: its kernel is the forward, its `backward_op()` the \
             backward derived from the body. Generated by `#[function_node(kernel(..))]`."
        );
        quote! {
            #[doc = #doc]
            #[allow(dead_code)]
            pub fn elementwise_op() -> &'static #krate::ElementwiseOp {
                static OP: #krate::ElementwiseOp =
                    #krate::ElementwiseOp::new(#name, #inputs, #outputs, #params, #body);
                &OP
            }
        }
    });
    let elementwise_op = elementwise_op.or_else(|| {
        let formula = node.options.formula.as_ref()?;
        if !derives_from_formula(node, forward) {
            return None;
        }
        let parts = FormulaParts::of(forward, &formula.value());
        let (inputs, output, params, body) =
            (parts.inputs, parts.output, parts.params_sig, parts.body);
        let doc = format!(
            "`{label}`'s formula as an `ElementwiseOp`: its `backward_op()` is `{label}`'s \
             backward, derived from the formula. Generated by `#[function_node(formula = ..)]`."
        );
        Some(quote! {
            #[doc = #doc]
            #[allow(dead_code)]
            pub fn elementwise_op() -> &'static #krate::ElementwiseOp {
                static OP: #krate::ElementwiseOp =
                    #krate::ElementwiseOp::new(#label, #inputs, #output, #params, #body);
                &OP
            }
        })
    });
    quote! {
        impl #ty {
            #elementwise_op

            #[doc = #kernels_doc]
            #[allow(dead_code)]
            pub const KERNELS: &'static [#krate::ElementwiseKernel] = &[#(#kernels),*];

            #[doc = #doc]
            #[allow(dead_code)]
            pub fn apply(
                self,
                inputs: (#(#input_types,)*),
            ) -> #krate::Result<(#(#output_types,)*)> {
                #body
            }
        }
    }
}

/// The thin wrapper `op_name(&x, .., new's parameters) -> Result<Variable or tuple>`.
pub fn wrapper(node: &Node<'_>, forward: &Forward<'_>, stub: bool) -> TokenStream {
    let krate = krate(node);
    let ty = &node.item.self_ty;
    let Ok(name) = syn::parse_str::<Ident>(&node.wrapper_name()) else {
        return TokenStream::new();
    };
    let name = Ident::new(
        &name.to_string(),
        node.options
            .name
            .as_ref()
            .map_or(Span::call_site(), |n| n.span()),
    );
    let inputs = &forward.inputs;
    let n_out = forward.outputs.count;
    let (ctor_params, construct) = match node.constructor {
        Some(ctor) => {
            let params: Vec<&FnArg> = ctor.sig.inputs.iter().collect();
            let args = params.iter().filter_map(|a| match a {
                FnArg::Typed(t) => Some(&t.pat),
                FnArg::Receiver(_) => None,
            });
            let call = quote!(<#ty>::new(#(#args),*));
            let fallible = match &ctor.sig.output {
                syn::ReturnType::Type(_, t) => generic_arg(t, kw::RESULT).is_some(),
                syn::ReturnType::Default => false,
            };
            (params, if fallible { quote!(#call?) } else { call })
        }
        None => (Vec::new(), quote!(#ty)),
    };
    let outs: Vec<Ident> = (0..n_out).map(|i| format_ident!("__out{}", i)).collect();
    let (ret_ty, ret) = if n_out == 1 {
        (quote!(#krate::Variable), quote!(#(#outs)*))
    } else {
        let tys = outs.iter().map(|_| quote!(#krate::Variable));
        (quote!((#(#tys,)*)), quote!((#(#outs,)*)))
    };
    // The stub's parameters carry the user's spans; unused, they would warn at the forward.
    let (allow, body) = if stub {
        (
            quote!(#[allow(dead_code, unused_variables)]),
            quote!(::std::unimplemented!()),
        )
    } else {
        (
            quote!(#[allow(dead_code)]),
            quote! {
                let (#(#outs,)*) = #construct.apply((#(#inputs,)*))?;
                ::std::result::Result::Ok(#ret)
            },
        )
    };
    let doc = format!(
        "Applies a new [`{}`] to the inputs: the wrapper function generated by `#[function_node]`.",
        node.ident
    );
    quote! {
        #[doc = #doc]
        #allow
        pub fn #name(#(#inputs: &#krate::Variable,)* #(#ctor_params),*) -> #krate::Result<#ret_ty> {
            #body
        }
    }
}
