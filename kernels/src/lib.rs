//! kusari's elementwise kernels, CuPy's `ElementwiseKernel` in Rust.
//!
//! This crate holds the parts that need no GPU: the signature grammar ([`signature`]), which the
//! `#[function_node]` macro runs at compile time and the runtime runs again at launch, so the two
//! can never disagree about what a signature means.

pub mod signature;

pub use signature::{
    ElementwiseSignature, Param, ParamType, ScalarType, SignatureError, SignatureList,
};
