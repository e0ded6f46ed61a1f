//! Every rule of `#[derive(Link)]` a user can break, each reported at the user's token. No code
//! is generated here. (A field that holds no parameters and is not marked `#[kusari(skip)]` is
//! left to the type checker: `kusari::link::LinkField` explains it at the field's type.)

use super::ast::{Body, Container};
use crate::ctxt::Ctxt;

pub fn check(cx: &Ctxt, container: &Container<'_>) {
    let name = &container.input.ident;
    match &container.body {
        Body::Named(_) | Body::Unit => {}
        Body::Tuple(fields) => cx.error_spanned_by(
            fields,
            format!(
                "#[derive(Link)] needs named fields: a parameter's path is its field's name (`/l1/W`); write `struct {name} {{ .. }}`"
            ),
        ),
        Body::Enum(token) => cx.error_spanned_by(
            token,
            "#[derive(Link)] does not support enums: a link is a struct whose named fields hold its parameters and child links",
        ),
        Body::Union(token) => cx.error_spanned_by(
            token,
            "#[derive(Link)] does not support unions: a link is a struct whose named fields hold its parameters and child links",
        ),
    }
}
