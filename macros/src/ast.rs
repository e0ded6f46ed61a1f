//! The parsed op: its methods and what their signatures say. Types borrow from the user's
//! `impl` and keep its tokens, so every message can point at what the user wrote.

use syn::{FnArg, Ident, ImplItem, ImplItemFn, ItemImpl, Pat, ReturnType, Type};

use crate::attr::{self, KernelAttr, Options, Retain};
use crate::ctxt::Ctxt;
use crate::kw;

pub struct Node<'a> {
    pub item: &'a ItemImpl,
    pub ident: Ident,
    pub options: Options,
    pub forward: Option<Forward<'a>>,
    pub forward_gpu: Option<&'a ImplItemFn>,
    pub backward: Option<Backward<'a>>,
    pub constructor: Option<&'a ImplItemFn>,
}

/// `forward` (any device) or `forward_cpu`; or, for an op declared by
/// `#[function_node(kernel(..))]`, the forward its body is.
pub struct Forward<'a> {
    /// The method; `None` when the kernel's body is the forward.
    pub func: Option<&'a ImplItemFn>,
    pub inputs: Vec<Ident>,
    pub outputs: Returns<'a>,
    pub retain: Retain,
    pub kernel: Option<KernelAttr>,
}

impl Forward<'_> {
    /// Whether the method is `forward_cpu` (not the device-agnostic `forward`).
    pub fn is_cpu(&self) -> bool {
        self.func.is_some_and(|f| f.sig.ident == kw::FORWARD_CPU)
    }
}

pub struct Backward<'a> {
    pub func: &'a ImplItemFn,
    pub params: Vec<(&'a Ident, &'a Type)>,
    pub returns: Returns<'a>,
}

/// What a method returns: `T` or `Result<T>`, where `T` is one value or a tuple of `count`.
pub struct Returns<'a> {
    /// As written (`None` for the outputs of a kernel's body).
    pub ty: Option<&'a ReturnType>,
    pub is_result: bool,
    /// Whether the values come as a tuple (even of one).
    pub is_tuple: bool,
    pub count: usize,
}

/// What a method's return type says (see [`Returns`]).
pub fn returns_of(ty: &ReturnType) -> Returns<'_> {
    let inner = match ty {
        ReturnType::Default => None,
        ReturnType::Type(_, t) => Some(&**t),
    };
    let (inner, is_result) = match inner.and_then(|t| generic_arg(t, kw::RESULT)) {
        Some(t) => (Some(t), true),
        None => (inner, false),
    };
    let (count, is_tuple) = match inner {
        None => (0, false),
        Some(Type::Tuple(t)) => (t.elems.len(), true),
        Some(_) => (1, false),
    };
    Returns {
        ty: Some(ty),
        is_result,
        is_tuple,
        count,
    }
}

/// `X` of a type written `Name<X, ..>` (the last path segment named `name`).
pub fn generic_arg<'a>(ty: &'a Type, name: &str) -> Option<&'a Type> {
    let Type::Path(p) = ty else { return None };
    let seg = p.path.segments.last()?;
    if seg.ident != name {
        return None;
    }
    match &seg.arguments {
        syn::PathArguments::AngleBracketed(args) => args.args.iter().find_map(|a| match a {
            syn::GenericArgument::Type(t) => Some(t),
            _ => None,
        }),
        _ => None,
    }
}

/// The named parameters after the receiver; unnamed or patterned ones are reported.
fn named_params<'a>(cx: &Ctxt, func: &'a ImplItemFn) -> Vec<(&'a Ident, &'a Type)> {
    let mut out = Vec::new();
    let mut has_receiver = false;
    for arg in &func.sig.inputs {
        match arg {
            FnArg::Receiver(_) => has_receiver = true,
            FnArg::Typed(t) => match &*t.pat {
                Pat::Ident(p) => out.push((&p.ident, &*t.ty)),
                other => cx.error_spanned_by(other, "expected a plain parameter name"),
            },
        }
    }
    if !has_receiver {
        cx.error_spanned_by(
            &func.sig.ident,
            format!("`{}` must take `&self`", func.sig.ident),
        );
    }
    out
}

impl<'a> Node<'a> {
    pub fn from_impl(cx: &Ctxt, item: &'a ItemImpl, options: Options) -> Option<Node<'a>> {
        if let Some((_, path, _)) = &item.trait_ {
            cx.error_spanned_by(
                path,
                "#[function_node] goes on an inherent `impl Op { .. }`, not a trait impl",
            );
            return None;
        }
        if !item.generics.params.is_empty() {
            cx.error_spanned_by(
                &item.generics,
                "#[function_node] does not support generic ops yet",
            );
            return None;
        }
        let ident = match &*item.self_ty {
            Type::Path(p) if p.qself.is_none() => p.path.segments.last().map(|s| s.ident.clone()),
            _ => None,
        };
        let Some(ident) = ident else {
            cx.error_spanned_by(
                &item.self_ty,
                "#[function_node] needs a named struct: `impl MyOp { .. }`",
            );
            return None;
        };
        let mut node = Node {
            item,
            ident,
            options,
            forward: None,
            forward_gpu: None,
            backward: None,
            constructor: None,
        };
        let mut cpu_or_unified: Vec<&ImplItemFn> = Vec::new();
        for f in item.items.iter().filter_map(|i| match i {
            ImplItem::Fn(f) => Some(f),
            _ => None,
        }) {
            let name = f.sig.ident.to_string();
            match name.as_str() {
                kw::FORWARD | kw::FORWARD_CPU => cpu_or_unified.push(f),
                kw::FORWARD_GPU => node.forward_gpu = Some(f),
                kw::BACKWARD => {
                    if node.options.kernel.is_none() {
                        for a in f.attrs.iter().filter(|a| attr::is_helper(a)) {
                            cx.error_spanned_by(
                                a,
                                "this attribute belongs on `forward` or `forward_cpu`, not on `backward` (only an op declared by #[function_node(kernel(..))], which has no forward, takes #[retain] on its backward)",
                            );
                        }
                    }
                    node.backward = Some(Backward {
                        func: f,
                        params: named_params(cx, f),
                        returns: returns_of(&f.sig.output),
                    })
                }
                kw::NEW => node.constructor = Some(f),
                _ => {
                    for a in f.attrs.iter().filter(|a| attr::is_helper(a)) {
                        cx.error_spanned_by(a, format!("this attribute belongs on `forward` or `forward_cpu`, not on `{name}`"));
                    }
                }
            }
        }
        if let [first, second, ..] = cpu_or_unified.as_slice() {
            cx.error_spanned_by(
                &second.sig.ident,
                format!(
                    "`{}` and `{}` both define the forward: keep `forward` (any device) or `forward_cpu` (with `forward_gpu`)",
                    first.sig.ident, second.sig.ident
                ),
            );
        }
        if let Some(kernel) = node.options.kernel.take() {
            for f in cpu_or_unified.iter().chain(&node.forward_gpu) {
                cx.error_spanned_by(
                    &f.sig.ident,
                    format!(
                        "an op declared by #[function_node(kernel(..))] has no `{}`: the kernel's body is its forward on every device",
                        f.sig.ident
                    ),
                );
            }
            node.forward_gpu = None;
            node.forward = Some(body_forward(cx, &node, kernel));
            return Some(node);
        }
        if let Some(f) = cpu_or_unified.first() {
            node.forward = Some(Forward {
                func: Some(f),
                inputs: named_params(cx, f)
                    .into_iter()
                    .map(|(i, _)| i.clone())
                    .collect(),
                outputs: returns_of(&f.sig.output),
                retain: attr::parse_retain(cx, &f.attrs),
                kernel: attr::parse_kernel(cx, &f.attrs),
            });
        }
        Some(node)
    }

    /// The kernel's name: `name = ".."` in it, else `<wrapper>_fwd` for `#[forward_gpu(..)]`
    /// and the wrapper's name for an op that is its kernel's body.
    pub fn kernel_name(&self, k: &attr::KernelAttr) -> String {
        match (&k.name, k.attr_name) {
            (Some(name), _) => name.value(),
            (None, kw::KERNEL) => self.wrapper_name(),
            (None, _) => format!("{}_fwd", self.wrapper_name()),
        }
    }

    /// The wrapper function's name: `name = ".."`, else the type's name in snake_case.
    pub fn wrapper_name(&self) -> String {
        match &self.options.name {
            Some(n) => n.value(),
            None => snake_case(&self.ident.to_string()),
        }
    }

    pub fn n_outputs(&self) -> usize {
        self.forward.as_ref().map_or(0, |f| f.outputs.count)
    }
}

/// The forward of an op declared by `kernel(..)`: its inputs are the kernel's (named at the
/// `inputs` string), its outputs the kernel's, and what it retains is `#[retain]` on a
/// hand-written `backward` (or, without one, what the derived backward reads, known at run
/// time).
fn body_forward<'a>(cx: &Ctxt, node: &Node<'a>, kernel: attr::KernelAttr) -> Forward<'a> {
    let list = |lit: &Option<syn::LitStr>, which| {
        lit.as_ref().map_or_else(Vec::new, |l| {
            kusari_kernels::signature::parse_list(&l.value(), which)
                .unwrap_or_default()
                .iter()
                .filter_map(|p| syn::parse_str::<Ident>(&p.name).ok())
                .map(|i| Ident::new(&i.to_string(), l.span()))
                .collect()
        })
    };
    let inputs = list(&kernel.inputs, kusari_kernels::SignatureList::Inputs);
    let count = list(&kernel.outputs, kusari_kernels::SignatureList::Outputs).len();
    let retain = match &node.backward {
        Some(b) => attr::parse_retain(cx, &b.func.attrs),
        None => attr::Retain::default(),
    };
    Forward {
        func: None,
        inputs,
        outputs: Returns {
            ty: None,
            is_result: true,
            is_tuple: count != 1,
            count,
        },
        retain,
        kernel: Some(kernel),
    }
}

/// `MulAdd` → `mul_add`, `LinearFunction` → `linear_function`, `ReLU` → `re_lu`.
pub fn snake_case(name: &str) -> String {
    let chars: Vec<char> = name.chars().collect();
    let mut out = String::new();
    for (i, &c) in chars.iter().enumerate() {
        if c.is_uppercase() {
            let prev_lower =
                i > 0 && (chars[i - 1].is_lowercase() || chars[i - 1].is_ascii_digit());
            let next_lower = chars.get(i + 1).is_some_and(|n| n.is_lowercase());
            if i > 0 && (prev_lower || (next_lower && chars[i - 1].is_uppercase())) {
                out.push('_');
            }
            out.extend(c.to_lowercase());
        } else {
            out.push(c);
        }
    }
    out
}
