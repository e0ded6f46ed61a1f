//! The parsed link: the struct and its fields with their `#[kusari(..)]` options. Types borrow
//! from the user's item and keep its tokens, so every message can point at what the user wrote.

use syn::{Data, DeriveInput, Fields, Ident, Type};

use super::attr::{self, ContainerOptions, FieldOptions};
use crate::ctxt::Ctxt;

pub struct Container<'a> {
    pub input: &'a DeriveInput,
    pub options: ContainerOptions,
    pub body: Body<'a>,
}

/// What the item is. Only a struct with named fields (or none) makes a link; the other shapes
/// are kept so that `valid.rs` can point at them.
pub enum Body<'a> {
    Named(Vec<Field<'a>>),
    Unit,
    Tuple(&'a syn::FieldsUnnamed),
    Enum(&'a syn::token::Enum),
    Union(&'a syn::token::Union),
}

pub struct Field<'a> {
    pub ident: &'a Ident,
    pub ty: &'a Type,
    pub options: FieldOptions,
}

impl<'a> Container<'a> {
    pub fn from_ast(cx: &Ctxt, input: &'a DeriveInput) -> Container<'a> {
        let body = match &input.data {
            Data::Struct(s) => match &s.fields {
                Fields::Named(fields) => Body::Named(
                    fields
                        .named
                        .iter()
                        .filter_map(|f| {
                            Some(Field {
                                ident: f.ident.as_ref()?,
                                ty: &f.ty,
                                options: attr::parse_field(cx, &f.attrs),
                            })
                        })
                        .collect(),
                ),
                Fields::Unnamed(fields) => Body::Tuple(fields),
                Fields::Unit => Body::Unit,
            },
            Data::Enum(e) => Body::Enum(&e.enum_token),
            Data::Union(u) => Body::Union(&u.union_token),
        };
        Container {
            input,
            options: attr::parse_container(cx, &input.attrs),
            body,
        }
    }

    /// The fields that hold parameters or child links (not skipped), in declaration order.
    pub fn link_fields(&self) -> impl Iterator<Item = &Field<'a>> {
        let fields = match &self.body {
            Body::Named(fields) => fields.as_slice(),
            _ => &[],
        };
        fields.iter().filter(|f| !f.options.skip)
    }
}
