//! `#[derive(Link)]`, with the same pipeline as `#[function_node]`: `attr.rs` parses
//! `#[kusari(..)]`, `ast.rs` reads the struct, `valid.rs` holds the rules, `expand.rs` only
//! generates code and `fallback.rs` is what is emitted when there are mistakes. The error
//! collector (`ctxt.rs`) and the keywords (`kw.rs`) are shared with `#[function_node]`.

mod ast;
mod attr;
mod expand;
mod fallback;
mod valid;

use proc_macro2::TokenStream;
use syn::DeriveInput;

use crate::ctxt::Ctxt;

pub fn derive(input: &DeriveInput) -> TokenStream {
    let cx = Ctxt::new();
    let container = ast::Container::from_ast(&cx, input);
    valid::check(&cx, &container);
    match cx.check() {
        Ok(()) => expand::expand(&container),
        Err(errors) => fallback::expand(&container, errors),
    }
}
