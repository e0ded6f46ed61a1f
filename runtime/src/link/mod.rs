//! Models' learnable state (Chainer's links): [`Parameter`]s with [`initializers`], owned by
//! [`Link`]s, whose `visit_params` `#[derive(Link)]` writes from the struct's fields; and the
//! tutorial's library links, [`EltwiseParamProduct`] and [`Linear`], and
//! [`LayerNormalization`].

mod conv;
mod eltwise_param_product;
mod embed_id;
mod field;
pub mod initializers;
mod layer_normalization;
mod linear;
#[allow(clippy::module_inception)]
mod link;
mod normalization;
pub mod optimizers;
mod parameter;
mod serialize;

pub use conv::{Convolution2D, ConvolutionND, Deconvolution2D};
pub use eltwise_param_product::EltwiseParamProduct;
pub use embed_id::EmbedID;
pub use field::LinkField;
pub use layer_normalization::LayerNormalization;
pub use linear::{Linear, LinearFunction, linear_function};
pub use link::Link;
pub use normalization::BatchNormalization;
pub use parameter::Parameter;
pub use serialize::{
    LoadOptions, load, load_from_bytes, load_from_bytes_with, load_with, save, save_to_bytes,
};
