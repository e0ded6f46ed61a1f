//! What `#[derive(Link)]` emits when the item has mistakes: the errors, plus an empty
//! `impl Link`, so that code using the type as a link gives no follow-on errors.

use proc_macro2::TokenStream;
use quote::quote;

use super::ast::Container;
use super::expand;

pub fn expand(container: &Container<'_>, errors: syn::Error) -> TokenStream {
    let errors = errors.to_compile_error();
    let stub = expand::impl_link(container, &container.input.generics, &[]);
    quote! {
        #errors
        #stub
    }
}
