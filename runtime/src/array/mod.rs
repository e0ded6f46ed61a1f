//! [`Array`]: an n-dimensional array with a runtime dtype and device, cheap to clone.

mod elementwise;
mod handle;
mod index;
mod linalg;
mod ops;
mod reduce;
mod shape;
mod window;

pub(crate) use elementwise::{require_float, require_numeric};
pub use handle::{Array, WeakArray};
pub(crate) use index::{
    Basic, IndexPlan, concat_shape, integer_values, pad_widths, plan_index, split_bounds,
    stack_check,
};
pub use index::{IndicesOrSections, Ix};
