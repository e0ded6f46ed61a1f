//! Parsing of `#[kusari(..)]`: `crate = ".."` on the struct, `skip` on a field. Unknown keys and
//! keys given twice (in one `#[kusari(..)]` or across several) are reported at their token and
//! parsing carries on.

use syn::{Attribute, Path};

use crate::attr::{Once, crate_path, unknown_key};
use crate::ctxt::Ctxt;
use crate::kw;

/// `#[kusari(crate = "...")]` on the struct.
#[derive(Default)]
pub struct ContainerOptions {
    pub krate: Option<Path>,
}

/// `#[kusari(skip)]` on a field.
#[derive(Default)]
pub struct FieldOptions {
    /// The field holds no parameters: the derive leaves it out.
    pub skip: bool,
}

fn link_attrs(attrs: &[Attribute]) -> impl Iterator<Item = &Attribute> {
    attrs.iter().filter(|a| a.path().is_ident(kw::KUSARI))
}

pub fn parse_container(cx: &Ctxt, attrs: &[Attribute]) -> ContainerOptions {
    let mut krate = Once::new(kw::KUSARI, kw::CRATE);
    for attr in link_attrs(attrs) {
        let result = attr.parse_nested_meta(|meta| {
            if meta.path.is_ident(kw::CRATE) {
                krate.set(cx, &meta.path, crate_path(cx, &meta)?);
            } else if meta.path.is_ident(kw::SKIP) {
                cx.error_spanned_by(
                    &meta.path,
                    "#[kusari(skip)] goes on a field, not on the struct",
                );
            } else {
                unknown_key(cx, &meta, kw::KUSARI, kw::LINK_CONTAINER_KEYS)?;
            }
            Ok(())
        });
        if let Err(e) = result {
            cx.syn_error(e);
        }
    }
    ContainerOptions { krate: krate.get() }
}

pub fn parse_field(cx: &Ctxt, attrs: &[Attribute]) -> FieldOptions {
    let mut skip = Once::new(kw::KUSARI, kw::SKIP);
    for attr in link_attrs(attrs) {
        let result = attr.parse_nested_meta(|meta| {
            if meta.path.is_ident(kw::SKIP) {
                skip.set(cx, &meta.path, Some(()));
            } else if meta.path.is_ident(kw::CRATE) {
                cx.error_spanned_by(
                    &meta.path,
                    "#[kusari(crate = \"..\")] goes on the struct, not on a field",
                );
                if meta.input.peek(syn::Token![=]) {
                    meta.value()?.parse::<syn::Expr>()?;
                }
            } else {
                unknown_key(cx, &meta, kw::KUSARI, kw::LINK_FIELD_KEYS)?;
            }
            Ok(())
        });
        if let Err(e) = result {
            cx.syn_error(e);
        }
    }
    FieldOptions {
        skip: skip.get().is_some(),
    }
}
