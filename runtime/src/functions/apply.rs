//! How the functions apply their nodes: [`apply1`] for a single-output node, and [`only`] for
//! its one output gradient in `backward`; [`needed`] for a gradient computed only when asked for.

use crate::Variable;
use crate::error::Result;
use crate::graph::{FunctionNode, apply};

/// Applies a single-output function and returns its output.
pub(crate) fn apply1(f: impl FunctionNode, inputs: &[&Variable]) -> Result<Variable> {
    Ok(apply(f, inputs)?.swap_remove(0))
}

/// The gradient of the only output of a single-output function (backward only runs when at
/// least one output gradient is present).
pub(crate) fn only(gys: &[Option<Variable>]) -> &Variable {
    gys[0]
        .as_ref()
        .expect("backward runs only with a gradient present")
}

/// The gradient for input `i` if it is needed (`target_input_indexes`), else `None`.
pub(crate) fn needed(
    needs: &[usize],
    i: usize,
    grad: impl FnOnce() -> Result<Variable>,
) -> Result<Option<Variable>> {
    if needs.contains(&i) {
        grad().map(Some)
    } else {
        Ok(None)
    }
}
