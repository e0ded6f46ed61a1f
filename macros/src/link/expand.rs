//! Code generation for `#[derive(Link)]`: only `quote!` here; every rule was checked in
//! `valid.rs`.
//!
//! For `struct Mlp<L> { l1: Linear, layers: Vec<L>, #[kusari(skip)] ratio: f64 }` this emits
//! (paths shortened):
//!
//! ```ignore
//! impl<L> Link for Mlp<L> where Vec<L>: LinkField {
//!     fn visit_params<'__link>(&'__link self, prefix: &str,
//!                              f: &mut dyn FnMut(String, &'__link Parameter)) {
//!         LinkField::visit_field(&self.l1, &format!("{}/{}", prefix, "l1"), f);
//!         LinkField::visit_field(&self.layers, &format!("{}/{}", prefix, "layers"), f);
//!     }
//! }
//! ```
//!
//! Each call carries its field type's span, so a field that is no link is reported there.

use proc_macro2::{TokenStream, TokenTree};
use quote::{quote, quote_spanned};
use syn::ext::IdentExt;
use syn::spanned::Spanned;
use syn::{Generics, Ident, Path, Type};

use super::ast::Container;

pub fn krate(container: &Container<'_>) -> Path {
    container
        .options
        .krate
        .clone()
        .unwrap_or_else(|| syn::parse_quote!(::kusari))
}

pub fn expand(container: &Container<'_>) -> TokenStream {
    let krate = krate(container);
    let visits: Vec<TokenStream> = container
        .link_fields()
        .map(|field| {
            let (ident, ty) = (field.ident, field.ty);
            let name = ident.unraw().to_string();
            quote_spanned! {ty.span()=>
                #krate::link::LinkField::visit_field(
                    &self.#ident,
                    &::std::format!("{}/{}", prefix, #name),
                    f,
                );
            }
        })
        .collect();
    impl_link(container, &bounded_generics(container, &krate), &visits)
}

/// `impl Link for ..` whose `visit_params` runs `visits` (none: a link without parameters, or
/// the fallback's stub).
pub fn impl_link(
    container: &Container<'_>,
    generics: &Generics,
    visits: &[TokenStream],
) -> TokenStream {
    let krate = krate(container);
    let ident = &container.input.ident;
    let (impl_generics, ty_generics, where_clause) = generics.split_for_impl();
    let body = if visits.is_empty() {
        quote!(let _ = (prefix, f);)
    } else {
        quote!(#(#visits)*)
    };
    quote! {
        #[automatically_derived]
        impl #impl_generics #krate::link::Link for #ident #ty_generics #where_clause {
            fn visit_params<'__link>(
                &'__link self,
                prefix: &str,
                f: &mut dyn ::std::ops::FnMut(
                    ::std::string::String,
                    &'__link #krate::link::Parameter,
                ),
            ) {
                #body
            }
        }
    }
}

/// The struct's generics plus `FieldType: LinkField` for each field whose type names a type
/// parameter (`Vec<L>: LinkField`); the other fields are checked where they are visited.
fn bounded_generics(container: &Container<'_>, krate: &Path) -> Generics {
    let mut generics = container.input.generics.clone();
    let params: Vec<Ident> = generics.type_params().map(|p| p.ident.clone()).collect();
    let bounded: Vec<&Type> = container
        .link_fields()
        .map(|f| f.ty)
        .filter(|ty| mentions_any(quote!(#ty), &params))
        .collect();
    let where_clause = generics.make_where_clause();
    for ty in bounded {
        where_clause
            .predicates
            .push(syn::parse_quote!(#ty: #krate::link::LinkField));
    }
    generics
}

/// Whether `tokens` contain one of `idents` anywhere.
fn mentions_any(tokens: TokenStream, idents: &[Ident]) -> bool {
    tokens.into_iter().any(|t| match t {
        TokenTree::Ident(i) => idents.contains(&i),
        TokenTree::Group(g) => mentions_any(g.stream(), idents),
        _ => false,
    })
}
