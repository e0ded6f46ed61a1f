//! What is emitted when the op has mistakes: the errors, plus the user's `impl` cleaned of the
//! helper attributes and stubs of the generated items (thiserror's `fallback.rs`), so that one
//! mistake gives one error and not a wall of follow-on "cannot find function" errors.

use proc_macro2::TokenStream;
use quote::quote;

use crate::ast::Node;
use crate::expand;

pub fn expand(node: Option<&Node<'_>>, item: &syn::ItemImpl, errors: syn::Error) -> TokenStream {
    let errors = errors.to_compile_error();
    let user_impl = expand::strip_helpers(item);
    let stubs = match node.and_then(|n| n.forward.as_ref().map(|f| (n, f))) {
        Some((node, forward)) if forward.outputs.count > 0 => {
            let apply = expand::typed_apply(node, forward, true);
            let wrapper = expand::wrapper(node, forward, true);
            quote!(#apply #wrapper)
        }
        _ => TokenStream::new(),
    };
    quote! {
        #errors
        #user_impl
        #stubs
    }
}
