//! Matrix products: `matmul` and the tutorial's `LinearFunction` (`y = x Wᵀ + b`).

use super::{apply1, matmul as matmul_fn, only, reshape, sum_axes, sum_to, transpose};
use crate::error::{Error, Result};
use crate::graph::{BackwardContext, ForwardContext, FunctionNode};
use crate::{Array, Variable, function_node};

type Grads = Result<Vec<Option<Variable>>>;

/// Swaps the last two axes.
fn mt(x: &Variable) -> Result<Variable> {
    let n = x.ndim();
    let mut axes: Vec<usize> = (0..n).collect();
    axes.swap(n - 2, n - 1);
    transpose(x, Some(&axes))
}

/// Matrix product of operands with at least two axes (batch axes broadcast).
struct MatMul;

#[function_node(crate = "crate", name = "matmul_nd")]
impl MatMul {
    #[retain(a, b)]
    fn forward(&self, a: &Array, b: &Array) -> Result<Array> {
        a.matmul(b)
    }

    fn backward(
        &self,
        a: &Variable,
        b: &Variable,
        gy: &Variable,
        needs: &[usize],
    ) -> Result<(Option<Variable>, Option<Variable>)> {
        let ga = match needs.contains(&0) {
            true => Some(sum_to(&matmul_fn(gy, &mt(b)?)?, a.shape())?),
            false => None,
        };
        let gb = match needs.contains(&1) {
            true => Some(sum_to(&matmul_fn(&mt(a)?, gy)?, b.shape())?),
            false => None,
        };
        Ok((ga, gb))
    }
}

/// Matrix product with NumPy's `matmul` rules (1-D operands promoted, batch axes broadcast).
pub fn matmul(a: &Variable, b: &Variable) -> Result<Variable> {
    if a.ndim() == 0 || b.ndim() == 0 {
        // Let the array op produce its message.
        a.array().matmul(b.array())?;
    }
    let a2 = if a.ndim() == 1 {
        reshape(a, &[1, a.shape()[0]])?
    } else {
        a.clone()
    };
    let b2 = if b.ndim() == 1 {
        reshape(b, &[b.shape()[0], 1])?
    } else {
        b.clone()
    };
    let y = matmul_nd(&a2, &b2)?;
    if a.ndim() > 1 && b.ndim() > 1 {
        return Ok(y);
    }
    let mut shape = y.shape().to_vec();
    if b.ndim() == 1 {
        shape.pop();
    }
    if a.ndim() == 1 {
        shape.remove(shape.len() - 1 - (b.ndim() != 1) as usize);
    }
    reshape(&y, &shape)
}

/// `y = x Wᵀ + b` for `x: (N, in)`, `W: (out, in)`, `b: (out,)` (the tutorial's LinearFunction).
///
/// Written against the trait: the bias is optional, so the node takes two or three inputs, and a
/// `#[function_node]` op has a fixed number of inputs (examples/ declares the three-input form
/// with the macro).
struct LinearFunction;
impl FunctionNode for LinearFunction {
    fn forward(&mut self, ctx: &mut ForwardContext, x: &[Array]) -> Result<Vec<Array>> {
        ctx.retain_inputs(&[0, 1]);
        let y = x[0].matmul(&x[1].t())?;
        Ok(vec![match x.get(2) {
            Some(b) => y.add(b)?,
            None => y,
        }])
    }
    fn backward(
        &self,
        ctx: &BackwardContext<'_>,
        targets: &[usize],
        gys: &[Option<Variable>],
    ) -> Grads {
        let gy = only(gys);
        let (x, w) = (ctx.retained_input(0)?, ctx.retained_input(1)?);
        let mut g = vec![
            if targets.contains(&0) {
                Some(matmul_fn(gy, &w)?)
            } else {
                None
            },
            if targets.contains(&1) {
                Some(matmul_fn(&mt(gy)?, &x)?)
            } else {
                None
            },
        ];
        if ctx.n_inputs() == 3 {
            g.push(if targets.contains(&2) {
                Some(sum_axes(gy, &[0], false)?)
            } else {
                None
            });
        }
        Ok(g)
    }
}

/// A fully connected layer: `x Wᵀ + b`. `x` of shape `(N, ...)` is flattened to `(N, in)`.
pub fn linear(x: &Variable, w: &Variable, b: Option<&Variable>) -> Result<Variable> {
    let shape_error = |msg: String| Error::Shape { op: "linear", msg };
    if w.ndim() != 2 {
        return Err(shape_error(format!(
            "W must be (out, in), got {:?}",
            w.shape()
        )));
    }
    if x.ndim() == 0 {
        return Err(shape_error(format!(
            "x must be (N, ...), got {:?}",
            x.shape()
        )));
    }
    let n = x.shape()[0];
    let x2 = if x.ndim() == 2 {
        x.clone()
    } else {
        reshape(x, &[n, x.size() / n.max(1)])?
    };
    if x2.shape()[1] != w.shape()[1] {
        return Err(shape_error(format!(
            "x {:?} has {} features but W {:?} expects {}",
            x.shape(),
            x2.shape()[1],
            w.shape(),
            w.shape()[1]
        )));
    }
    match b {
        Some(b) => {
            if b.shape() != [w.shape()[0]] {
                return Err(shape_error(format!(
                    "b must be ({},), got {:?}",
                    w.shape()[0],
                    b.shape()
                )));
            }
            apply1(LinearFunction, &[&x2, w, b])
        }
        None => apply1(LinearFunction, &[&x2, w]),
    }
}
