//! [`Array`]: an n-dimensional array with a runtime dtype and device, cheap to clone.

mod elementwise;
mod handle;
mod linalg;
mod ops;
mod reduce;
mod shape;
mod window;

pub(crate) use elementwise::{require_float, require_numeric};
pub use handle::{Array, WeakArray};
