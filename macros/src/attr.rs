//! Parsing of the macro's attributes: `#[function_node(..)]`, `#[retain(..)]`, `#[forward_gpu(..)]`.
//! Mistakes go to the `Ctxt`; parsing carries on so that later mistakes are reported too.

use proc_macro2::{Span, TokenStream};
use quote::ToTokens;
use syn::meta::ParseNestedMeta;
use syn::{Attribute, Ident, LitInt, LitStr, Path};

use crate::ctxt::Ctxt;
use crate::kw;

/// `#[function_node(name = "...", crate = "...", non_differentiable, kernel(..), formula = "..")]`.
#[derive(Default)]
pub struct Options {
    pub name: Option<LitStr>,
    pub krate: Option<Path>,
    pub non_differentiable: Option<Span>,
    /// `kernel(inputs = .., outputs = .., body = ..)`: the op is its body (no `forward`).
    pub kernel: Option<KernelAttr>,
    /// `formula = "x + value"`: the forward as one elementwise expression, for `kusari::fuse`.
    pub formula: Option<LitStr>,
}

/// One key of an attribute, given at most once (serde's `Attr`): a second occurrence is an
/// error at that key, so that no value silently wins over another.
pub struct Once<T> {
    /// The attribute, for the message: `function_node`, `forward_gpu`, `kusari`.
    attr: &'static str,
    key: &'static str,
    /// Whether the key was given, even with a value already reported as invalid.
    given: bool,
    value: Option<T>,
}

impl<T> Once<T> {
    pub fn new(attr: &'static str, key: &'static str) -> Self {
        Once {
            attr,
            key,
            given: false,
            value: None,
        }
    }

    /// Records the key written at `at` with its value (`None`: a value already reported), or
    /// reports a duplicate at `at` when the key was given before.
    pub fn set<A: ToTokens>(&mut self, cx: &Ctxt, at: A, value: Option<T>) {
        if self.given {
            cx.error_spanned_by(at, duplicate_key_message(self.attr, self.key));
        } else {
            self.given = true;
            self.value = value;
        }
    }

    /// The value given first, if any.
    pub fn get(self) -> Option<T> {
        self.value
    }
}

/// The message for a key given twice in `#[attr(..)]`.
pub fn duplicate_key_message(attr: &str, key: &str) -> String {
    format!(
        "duplicate `{key}` in #[{attr}(..)]: each key is given once; remove this one or the first"
    )
}

/// Reports an unknown key at its token, listing the keys `attr` accepts, and skips its value.
pub fn unknown_key(
    cx: &Ctxt,
    meta: &ParseNestedMeta<'_>,
    attr: &str,
    keys: &[&str],
) -> syn::Result<()> {
    let path = &meta.path;
    let key = path.get_ident().map_or_else(
        || quote::quote!(#path).to_string().replace(' ', ""),
        Ident::to_string,
    );
    cx.error_spanned_by(
        &meta.path,
        format!(
            "unknown key `{key}` in #[{attr}(..)]; expected one of: {}",
            keys.join(", ")
        ),
    );
    // Skip the value so the keys after it are still read.
    if meta.input.peek(syn::Token![=]) {
        meta.value()?.parse::<syn::Expr>()?;
    }
    Ok(())
}

/// The value of `crate = "..."`: the path of the kusari crate (`"crate"` inside it).
pub fn crate_path(cx: &Ctxt, meta: &ParseNestedMeta<'_>) -> syn::Result<Option<Path>> {
    let lit: LitStr = meta.value()?.parse()?;
    match lit.parse::<Path>() {
        Ok(p) => Ok(Some(p)),
        Err(_) => {
            cx.error_spanned_by(
                &lit,
                "`crate` must be a path, e.g. \"crate\" or \"::kusari\"",
            );
            Ok(None)
        }
    }
}

pub fn parse_options(cx: &Ctxt, args: TokenStream) -> Options {
    let attr = kw::FUNCTION_NODE;
    let mut name = Once::new(attr, kw::NAME);
    let mut krate = Once::new(attr, kw::CRATE);
    let mut non_differentiable = Once::new(attr, kw::NON_DIFFERENTIABLE);
    let mut kernel = Once::new(attr, kw::KERNEL);
    let mut formula = Once::new(attr, kw::FORMULA);
    let parser = syn::meta::parser(|meta| {
        if meta.path.is_ident(kw::NAME) {
            name.set(cx, &meta.path, Some(meta.value()?.parse()?));
        } else if meta.path.is_ident(kw::CRATE) {
            krate.set(cx, &meta.path, crate_path(cx, &meta)?);
        } else if meta.path.is_ident(kw::NON_DIFFERENTIABLE) {
            let span = meta.path.segments[0].ident.span();
            non_differentiable.set(cx, &meta.path, Some(span));
        } else if meta.path.is_ident(kw::KERNEL) {
            let at = meta.path.to_token_stream();
            let mut keys = KernelKeys::new(kw::KERNEL);
            let result = meta.parse_nested_meta(|inner| keys.read(cx, &inner));
            if let Err(e) = result {
                cx.syn_error(e);
            }
            kernel.set(cx, &meta.path, Some(keys.finish(at)));
        } else if meta.path.is_ident(kw::FORMULA) {
            formula.set(cx, &meta.path, Some(meta.value()?.parse()?));
        } else {
            unknown_key(cx, &meta, attr, kw::FUNCTION_NODE_KEYS)?;
        }
        Ok(())
    });
    if let Err(e) = syn::parse::Parser::parse2(parser, args) {
        cx.syn_error(e);
    }
    Options {
        name: name.get(),
        krate: krate.get(),
        non_differentiable: non_differentiable.get(),
        kernel: kernel.get(),
        formula: formula.get(),
    }
}

/// `#[retain(x, meta(y), output = 0)]`: inputs by name, by value or as `meta(..)` (shape,
/// dtype and device only), and outputs by index.
#[derive(Default)]
pub struct Retain {
    /// The inputs backward receives, in the order written.
    pub inputs: Vec<RetainedInput>,
    pub outputs: Vec<LitInt>,
}

/// One input named in `#[retain(..)]`.
pub struct RetainedInput {
    pub ident: Ident,
    /// Whether it is named inside `meta(..)`: backward gets its `InputMeta`, not its value.
    pub meta: bool,
}

impl RetainedInput {
    /// As written in `#[retain(..)]`: `x` or `meta(x)`.
    pub fn describe(&self) -> String {
        match self.meta {
            true => format!("{}({})", kw::META, self.ident),
            false => self.ident.to_string(),
        }
    }
}

pub fn parse_retain(cx: &Ctxt, attrs: &[Attribute]) -> Retain {
    let mut retain = Retain::default();
    let mut seen: Option<&Attribute> = None;
    for attr in attrs.iter().filter(|a| a.path().is_ident(kw::RETAIN)) {
        if seen.is_some() {
            cx.error_spanned_by(attr, "duplicate #[retain(..)]: list everything in one");
            continue;
        }
        seen = Some(attr);
        let result = attr.parse_nested_meta(|meta| {
            let group = meta.input.peek(syn::token::Paren);
            if meta.path.is_ident(kw::OUTPUT) && meta.input.peek(syn::Token![=]) {
                retain.outputs.push(meta.value()?.parse()?);
            } else if meta.path.is_ident(kw::META) && group {
                parse_meta_group(cx, &meta, &mut retain.inputs)?;
            } else if let (Some(ident), false) = (meta.path.get_ident(), group) {
                retain.inputs.push(RetainedInput {
                    ident: ident.clone(),
                    meta: false,
                });
            } else {
                let path = &meta.path;
                let written = quote::quote!(#path).to_string().replace(' ', "");
                cx.error_spanned_by(
                    &meta.path,
                    format!(
                        "unknown `{written}` in #[retain(..)]: expected an input name, `meta(x)` (an input's shape, dtype and device) or `output = N`"
                    ),
                );
                skip_value(&meta)?;
            }
            Ok(())
        });
        if let Err(e) = result {
            cx.syn_error(e);
        }
    }
    retain
}

/// The names inside `meta(..)`, which must be plain input names, at least one.
fn parse_meta_group(
    cx: &Ctxt,
    meta: &ParseNestedMeta<'_>,
    inputs: &mut Vec<RetainedInput>,
) -> syn::Result<()> {
    let group: proc_macro2::Group = meta.input.fork().parse()?;
    if group.stream().is_empty() {
        cx.error_spanned_by(&meta.path, "meta(..) names no input: `meta(x)`");
        return skip_value(meta);
    }
    meta.parse_nested_meta(|inner| {
        match (
            inner.path.get_ident(),
            inner.input.is_empty() || inner.input.peek(syn::Token![,]),
        ) {
            (Some(ident), true) => inputs.push(RetainedInput {
                ident: ident.clone(),
                meta: true,
            }),
            _ => {
                cx.error_spanned_by(
                    &inner.path,
                    "meta(..) lists input names: `meta(x, y)` (outputs have no meta form)",
                );
                skip_value(&inner)?;
            }
        }
        Ok(())
    })
}

/// Skips what follows a key that was reported (`= value` or `(..)`), so the keys after it are
/// still read.
fn skip_value(meta: &ParseNestedMeta<'_>) -> syn::Result<()> {
    if meta.input.peek(syn::Token![=]) {
        meta.value()?.parse::<syn::Expr>()?;
    } else if meta.input.peek(syn::token::Paren) {
        let _group: proc_macro2::Group = meta.input.parse()?;
    }
    Ok(())
}

/// `#[forward_gpu(inputs = "..", outputs = "..", body = "..", params = "..", name = "..",
/// dtypes = "..", preamble = "..", loop_prep = "..", after_loop = "..")]`, or the same keys in
/// `#[function_node(kernel(..))]`.
pub struct KernelAttr {
    /// The attribute (or the `kernel` key), where messages about the whole kernel point.
    pub at: TokenStream,
    /// `forward_gpu` or `kernel`, as messages name it.
    pub attr_name: &'static str,
    pub inputs: Option<LitStr>,
    pub outputs: Option<LitStr>,
    pub body: Option<LitStr>,
    pub params: Option<LitStr>,
    pub name: Option<LitStr>,
    /// The dtype kind every input must have (`"float"`, `"numeric"`), checked before launching.
    pub dtypes: Option<LitStr>,
    /// Device code before the kernel (CuPy's `preamble`).
    pub preamble: Option<LitStr>,
    /// Code before the loop (CuPy's `loop_prep`).
    pub loop_prep: Option<LitStr>,
    /// Code after the loop (CuPy's `after_loop`).
    pub after_loop: Option<LitStr>,
    /// Whether a key was unknown (already reported; likely a misspelt required key).
    pub has_unknown_key: bool,
}

impl KernelAttr {
    /// The values of `inputs`, `outputs`, `params` and `body` (empty where not given).
    pub fn parts(&self) -> [String; 4] {
        [&self.inputs, &self.outputs, &self.params, &self.body]
            .map(|l| l.as_ref().map_or_else(String::new, LitStr::value))
    }

    /// Where the attribute starts (for a literal made up by the macro).
    pub fn span(&self) -> Span {
        self.at
            .clone()
            .into_iter()
            .next()
            .map_or_else(Span::call_site, |t| t.span())
    }
}

/// The keys of a kernel, read one at a time.
struct KernelKeys {
    attr: &'static str,
    inputs: Once<LitStr>,
    outputs: Once<LitStr>,
    body: Once<LitStr>,
    params: Once<LitStr>,
    name: Once<LitStr>,
    dtypes: Once<LitStr>,
    preamble: Once<LitStr>,
    loop_prep: Once<LitStr>,
    after_loop: Once<LitStr>,
    has_unknown_key: bool,
}

impl KernelKeys {
    fn new(attr: &'static str) -> Self {
        let once = |key| Once::new(attr, key);
        KernelKeys {
            attr,
            inputs: once(kw::INPUTS),
            outputs: once(kw::OUTPUTS),
            body: once(kw::BODY),
            params: once(kw::PARAMS),
            name: once(kw::NAME),
            dtypes: once(kw::DTYPES),
            preamble: once(kw::PREAMBLE),
            loop_prep: once(kw::LOOP_PREP),
            after_loop: once(kw::AFTER_LOOP),
            has_unknown_key: false,
        }
    }

    fn read(&mut self, cx: &Ctxt, meta: &ParseNestedMeta<'_>) -> syn::Result<()> {
        let slot = if meta.path.is_ident(kw::INPUTS) {
            &mut self.inputs
        } else if meta.path.is_ident(kw::OUTPUTS) {
            &mut self.outputs
        } else if meta.path.is_ident(kw::BODY) {
            &mut self.body
        } else if meta.path.is_ident(kw::PARAMS) {
            &mut self.params
        } else if meta.path.is_ident(kw::NAME) {
            &mut self.name
        } else if meta.path.is_ident(kw::DTYPES) {
            &mut self.dtypes
        } else if meta.path.is_ident(kw::PREAMBLE) {
            &mut self.preamble
        } else if meta.path.is_ident(kw::LOOP_PREP) {
            &mut self.loop_prep
        } else if meta.path.is_ident(kw::AFTER_LOOP) {
            &mut self.after_loop
        } else {
            self.has_unknown_key = true;
            return unknown_key(cx, meta, self.attr, kw::KERNEL_KEYS);
        };
        slot.set(cx, &meta.path, Some(meta.value()?.parse()?));
        Ok(())
    }

    fn finish(self, at: TokenStream) -> KernelAttr {
        KernelAttr {
            at,
            attr_name: self.attr,
            inputs: self.inputs.get(),
            outputs: self.outputs.get(),
            body: self.body.get(),
            params: self.params.get(),
            name: self.name.get(),
            dtypes: self.dtypes.get(),
            preamble: self.preamble.get(),
            loop_prep: self.loop_prep.get(),
            after_loop: self.after_loop.get(),
            has_unknown_key: self.has_unknown_key,
        }
    }
}

pub fn parse_kernel(cx: &Ctxt, attrs: &[Attribute]) -> Option<KernelAttr> {
    let mut found: Option<KernelAttr> = None;
    for attr in attrs.iter().filter(|a| a.path().is_ident(kw::KERNEL_ATTR)) {
        if found.is_some() {
            cx.error_spanned_by(
                attr,
                "duplicate #[forward_gpu(..)]: a forward has one kernel",
            );
            continue;
        }
        let mut keys = KernelKeys::new(kw::KERNEL_ATTR);
        let result = attr.parse_nested_meta(|meta| keys.read(cx, &meta));
        if let Err(e) = result {
            cx.syn_error(e);
        }
        found = Some(keys.finish(attr.to_token_stream()));
    }
    found
}

/// Whether an attribute is one of the macro's helpers (removed from the emitted methods).
pub fn is_helper(attr: &Attribute) -> bool {
    attr.path().is_ident(kw::RETAIN) || attr.path().is_ident(kw::KERNEL_ATTR)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn once_keeps_the_first_value_and_reports_the_second_key() {
        let cx = Ctxt::new();
        let mut name = Once::new(kw::FUNCTION_NODE, kw::NAME);
        name.set(&cx, quote::quote!(name), Some("a"));
        name.set(&cx, quote::quote!(name), Some("b"));
        assert_eq!(name.get(), Some("a"));
        let errors = cx.check().expect_err("a duplicate");
        assert_eq!(
            errors.to_string(),
            "duplicate `name` in #[function_node(..)]: each key is given once; remove this one or the first"
        );
    }

    #[test]
    fn once_counts_a_key_whose_value_was_invalid() {
        let cx = Ctxt::new();
        let mut krate: Once<Path> = Once::new(kw::FUNCTION_NODE, kw::CRATE);
        krate.set(&cx, quote::quote!(crate), None);
        krate.set(&cx, quote::quote!(crate), Some(syn::parse_quote!(::kusari)));
        assert!(krate.get().is_none());
        assert_eq!(cx.check().expect_err("a duplicate").into_iter().count(), 1);
    }

    #[test]
    fn once_given_once_is_no_error() {
        let cx = Ctxt::new();
        let mut skip = Once::new(kw::KUSARI, kw::SKIP);
        assert_eq!(Once::<()>::new(kw::KUSARI, kw::SKIP).get(), None);
        skip.set(&cx, quote::quote!(skip), Some(()));
        assert_eq!(skip.get(), Some(()));
        assert!(cx.check().is_ok());
    }
}
