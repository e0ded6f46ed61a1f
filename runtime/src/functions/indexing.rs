//! Indexing and the functions that join, split and pad: get_item, concat, stack, split_axis,
//! pad, embed_id.
//!
//! Their gradients are copies the other way: a basic index's is its elements written into
//! zeros (whose own gradient is the same index again), an integer-array index's (and
//! `embed_id`'s) adds the gradient's rows back at their positions, repeated ones summed in
//! order (whose gradient gathers them again), `concat`'s splits and `split_axis`'s
//! concatenates. So every one can be differentiated twice.

use std::sync::Arc;

use super::{apply1, needed, only, reshape, transpose};
use crate::array::{
    Basic, IndexPlan, concat_shape, pad_widths, plan_index, split_bounds, stack_check,
};
use crate::error::{Error, Result};
use crate::graph::{BackwardContext, ForwardContext, FunctionNode, apply};
use crate::{Array, IndicesOrSections, InputMeta, Ix, Variable, function_node};

type Grads = Result<Vec<Option<Variable>>>;

/// The view a basic index selects (the node of the basic part of [`get_item`]).
struct GetItemBasic {
    basic: Arc<Vec<Basic>>,
}

#[function_node(crate = "crate", name = "get_item_basic")]
impl GetItemBasic {
    fn new(basic: Arc<Vec<Basic>>) -> Self {
        GetItemBasic { basic }
    }

    #[retain(meta(x))]
    fn forward(&self, x: &Array) -> Result<Array> {
        Ok(x.basic_view(&self.basic))
    }

    fn backward(&self, x: &InputMeta, gy: &Variable) -> Result<Variable> {
        basic_scatter(gy, self.basic.clone(), x.shape().to_vec())
    }
}

/// Zeros with the gradient written where a basic index selects (the adjoint of
/// [`GetItemBasic`]).
struct BasicScatter {
    basic: Arc<Vec<Basic>>,
    shape: Vec<usize>,
}

#[function_node(crate = "crate")]
impl BasicScatter {
    fn new(basic: Arc<Vec<Basic>>, shape: Vec<usize>) -> Self {
        BasicScatter { basic, shape }
    }

    fn forward(&self, gy: &Array) -> Result<Array> {
        gy.basic_scatter(&self.basic, &self.shape)
    }

    fn backward(&self, ggx: &Variable) -> Result<Variable> {
        get_item_basic(ggx, self.basic.clone())
    }
}

/// Positions gathered along an axis (integer-array indexing, embeddings); a position of -1
/// gives zeros and takes no gradient.
struct Take {
    idx: Arc<Vec<i64>>,
    axis: usize,
}

#[function_node(crate = "crate", name = "take")]
impl Take {
    fn new(idx: Arc<Vec<i64>>, axis: usize) -> Self {
        Take { idx, axis }
    }

    #[retain(meta(x))]
    fn forward(&self, x: &Array) -> Result<Array> {
        x.take_rows(&self.idx, self.axis)
    }

    fn backward(&self, x: &InputMeta, gy: &Variable) -> Result<Variable> {
        scatter_add(gy, self.idx.clone(), self.axis, x.shape()[self.axis])
    }
}

/// The adjoint of [`Take`]: slices added into zeros at their positions, repeated ones summed.
struct ScatterAdd {
    idx: Arc<Vec<i64>>,
    axis: usize,
    n_out: usize,
}

#[function_node(crate = "crate")]
impl ScatterAdd {
    fn new(idx: Arc<Vec<i64>>, axis: usize, n_out: usize) -> Self {
        ScatterAdd { idx, axis, n_out }
    }

    fn forward(&self, gy: &Array) -> Result<Array> {
        gy.scatter_add_rows(&self.idx, self.axis, self.n_out)
    }

    fn backward(&self, ggx: &Variable) -> Result<Variable> {
        take(ggx, self.idx.clone(), self.axis)
    }
}

/// NumPy's indexing of a variable (Chainer's `F.get_item`, `x[index]`): integers, negative
/// indices, slices with steps, new axes, an ellipsis and one integer array, as [`Ix`]
/// describes. The gradient goes back to the indexed elements; repeated positions of an integer
/// array add their gradients.
///
/// ```
/// use kusari::prelude::*;
/// # fn main() -> Result<()> {
/// let x = Variable::new(Array::from_vec(vec![1.0f64, 2.0, 3.0, 4.0, 5.0, 6.0], &[2, 3])?);
/// let idx = Array::from_vec(vec![0i64, 2, 0], &[3])?;
/// let y = F::get_item(&x, &[Ix::Int(-1), Ix::Array(&idx)])?;
/// assert_eq!(y.array().to_vec::<f64>()?, vec![4.0, 6.0, 4.0]);
/// F::sum(&y)?.backward()?;
/// assert_eq!(x.grad().unwrap().array().to_vec::<f64>()?, vec![0.0, 0.0, 0.0, 2.0, 0.0, 1.0]);
/// # Ok(()) }
/// ```
pub fn get_item(x: &Variable, index: &[Ix<'_>]) -> Result<Variable> {
    let plan = plan_index(x.shape(), index)?;
    apply_plan(x, plan)
}

fn apply_plan(x: &Variable, plan: IndexPlan) -> Result<Variable> {
    let y = if plan.basic_is_identity(x.shape()) {
        x.clone()
    } else {
        get_item_basic(x, Arc::new(plan.basic.clone()))?
    };
    let Some(t) = &plan.take else {
        return Ok(y);
    };
    let taken = take(&y, Arc::new(t.idx.clone()), t.axis)?;
    let (shape, perm) = plan.gathered_shape(taken.shape());
    let y = reshape(&taken, &shape)?;
    match perm {
        Some(p) => transpose(&y, Some(&p)),
        None => Ok(y),
    }
}

/// Variables joined along an axis (the node of [`concat`]).
struct Concat {
    axis: usize,
    lens: Vec<usize>,
}

impl FunctionNode for Concat {
    fn label(&self) -> std::borrow::Cow<'static, str> {
        "Concat".into()
    }
    fn forward(&mut self, _: &mut ForwardContext, xs: &[Array]) -> Result<Vec<Array>> {
        let refs: Vec<&Array> = xs.iter().collect();
        Ok(vec![Array::concat(&refs, self.axis as isize)?])
    }
    fn backward(
        &self,
        _: &BackwardContext<'_>,
        needs: &[usize],
        gys: &[Option<Variable>],
    ) -> Grads {
        let mut at = Vec::with_capacity(self.lens.len());
        let mut end = 0;
        for &l in &self.lens[..self.lens.len() - 1] {
            end += l;
            at.push(end);
        }
        let parts = split_axis(only(gys), &at[..], self.axis as isize)?;
        parts
            .into_iter()
            .enumerate()
            .map(|(i, p)| needed(needs, i, || Ok(p)))
            .collect()
    }
}

/// The variables joined along `axis` (Chainer's `F.concat`, whose default axis is 1): every
/// other axis must match, and so must the dtypes. The gradient is split back.
///
/// ```
/// use kusari::prelude::*;
/// # fn main() -> Result<()> {
/// let a = Variable::new(Array::ones(&[2, 1], DType::F32)?);
/// let b = Variable::new(Array::zeros(&[2, 2], DType::F32)?);
/// let c = F::concat(&[&a, &b], 1)?;
/// assert_eq!(c.array().to_vec::<f32>()?, vec![1.0, 0.0, 0.0, 1.0, 0.0, 0.0]);
/// # Ok(()) }
/// ```
pub fn concat(xs: &[&Variable], axis: isize) -> Result<Variable> {
    let arrays: Vec<Array> = xs.iter().map(|x| x.array().clone()).collect();
    let refs: Vec<&Array> = arrays.iter().collect();
    concat_shape("concat", &refs, axis)?;
    let axis = crate::layout::normalize_axis("concat", axis, xs[0].shape())?;
    let lens = xs.iter().map(|x| x.shape()[axis]).collect();
    apply1(Concat { axis, lens }, xs)
}

/// The variables (all of one shape) joined along a new axis `axis` (Chainer's `F.stack`,
/// default axis 0). The gradient is split back.
///
/// ```
/// use kusari::prelude::*;
/// # fn main() -> Result<()> {
/// let a = Variable::new(Array::from_vec(vec![1.0f32, 2.0], &[2])?);
/// let b = Variable::new(Array::from_vec(vec![3.0f32, 4.0], &[2])?);
/// assert_eq!(F::stack(&[&a, &b], 0)?.shape(), &[2, 2]);
/// assert_eq!(F::stack(&[&a, &b], -1)?.array().to_vec::<f32>()?, vec![1.0, 3.0, 2.0, 4.0]);
/// # Ok(()) }
/// ```
pub fn stack(xs: &[&Variable], axis: isize) -> Result<Variable> {
    let arrays: Vec<Array> = xs.iter().map(|x| x.array().clone()).collect();
    let refs: Vec<&Array> = arrays.iter().collect();
    stack_check("stack", &refs)?;
    // Checks the axis against the stacked rank, with `stack` in the message.
    let ndim = xs[0].ndim() as isize + 1;
    if !(-ndim..ndim).contains(&axis) {
        let mut shape = xs[0].shape().to_vec();
        shape.insert(0, xs.len());
        return Err(Error::Axis {
            op: "stack",
            axis,
            shape,
        });
    }
    let expanded = xs
        .iter()
        .map(|x| super::expand_dims(x, axis))
        .collect::<Result<Vec<Variable>>>()?;
    let refs: Vec<&Variable> = expanded.iter().collect();
    concat(&refs, axis)
}

/// Views of the pieces of an axis (the node of [`split_axis`]).
struct SplitAxis {
    axis: usize,
    bounds: Vec<(usize, usize)>,
}

impl FunctionNode for SplitAxis {
    fn label(&self) -> std::borrow::Cow<'static, str> {
        "SplitAxis".into()
    }
    fn forward(&mut self, _: &mut ForwardContext, x: &[Array]) -> Result<Vec<Array>> {
        let at: Vec<usize> = self.bounds[1..].iter().map(|b| b.0).collect();
        x[0].split_axis(&at[..], self.axis as isize)
    }
    fn backward(&self, ctx: &BackwardContext<'_>, _: &[usize], gys: &[Option<Variable>]) -> Grads {
        // Outputs without a gradient contribute zeros.
        let parts = gys
            .iter()
            .enumerate()
            .map(|(i, g)| match g {
                Some(g) => Ok(g.clone()),
                None => ctx.zeros_for_output(i),
            })
            .collect::<Result<Vec<Variable>>>()?;
        let refs: Vec<&Variable> = parts.iter().collect();
        Ok(vec![Some(concat(&refs, self.axis as isize)?)])
    }
}

/// The pieces of `axis` (Chainer's `F.split_axis`): `indices_or_sections` is a number of equal
/// sections (which must divide the axis) or the positions to split at
/// ([`IndicesOrSections`]). Each piece is its own output; gradients of pieces that are not
/// used are zeros.
///
/// ```
/// use kusari::prelude::*;
/// # fn main() -> Result<()> {
/// let x = Variable::new(Array::arange(0.0, 6.0, 1.0, DType::F64)?.reshape(&[2, 3])?);
/// let parts = F::split_axis(&x, &[1], 1)?;
/// assert_eq!((parts[0].shape(), parts[1].shape()), (&[2, 1][..], &[2, 2][..]));
/// F::sum(&parts[1])?.backward()?;
/// assert_eq!(x.grad().unwrap().array().to_vec::<f64>()?, vec![0.0, 1.0, 1.0, 0.0, 1.0, 1.0]);
/// # Ok(()) }
/// ```
pub fn split_axis<'a>(
    x: &Variable,
    indices_or_sections: impl Into<IndicesOrSections<'a>>,
    axis: isize,
) -> Result<Vec<Variable>> {
    let a = crate::layout::normalize_axis("split_axis", axis, x.shape())?;
    let bounds = split_bounds(x.shape(), a, indices_or_sections.into())?;
    apply(SplitAxis { axis: a, bounds }, &[x])
}

/// A border of a constant (the node of [`pad`]).
struct Pad {
    widths: Vec<(isize, isize)>,
    value: f64,
    /// The input's elements in the output, for the gradient.
    inner: Arc<Vec<Basic>>,
}

#[function_node(crate = "crate", name = "pad_node")]
impl Pad {
    fn new(widths: Vec<(isize, isize)>, value: f64, inner: Arc<Vec<Basic>>) -> Self {
        Pad {
            widths,
            value,
            inner,
        }
    }

    fn forward(&self, x: &Array) -> Result<Array> {
        x.pad(&self.widths, "constant", self.value)
    }

    fn backward(&self, gy: &Variable) -> Result<Variable> {
        get_item_basic(gy, self.inner.clone())
    }
}

/// `x` inside a border of `constant_values` (Chainer's `F.pad`; only `mode = "constant"`, the
/// others are an error). `pad_width` is one `(before, after)` pair per axis, or one pair for
/// all of them; negative widths are an error. The gradient is the inner part of the output's.
///
/// ```
/// use kusari::prelude::*;
/// # fn main() -> Result<()> {
/// let x = Variable::new(Array::ones(&[1, 2], DType::F32)?);
/// let y = F::pad(&x, &[(0, 0), (1, 1)], "constant", 0.0)?;
/// assert_eq!(y.array().to_vec::<f32>()?, vec![0.0, 1.0, 1.0, 0.0]);
/// assert!(F::pad(&x, &[(0, 0), (1, 1)], "reflect", 0.0).is_err());
/// # Ok(()) }
/// ```
pub fn pad(
    x: &Variable,
    pad_width: &[(isize, isize)],
    mode: &str,
    constant_values: f64,
) -> Result<Variable> {
    let widths = pad_widths(x.shape(), pad_width, mode)?;
    let inner = widths
        .iter()
        .zip(x.shape())
        .map(|(&(b, _), &d)| Basic::Slice(b, d, 1))
        .collect();
    let widths = widths
        .iter()
        .map(|&(b, a)| (b as isize, a as isize))
        .collect();
    pad_node(x, widths, constant_values, Arc::new(inner))
}

/// Rows of `W` picked by integer ids (Chainer's `F.embed_id`): for `x` of ids of any integer dtype
/// of any shape and `W` of shape `(n_vocab, n_units)`, `y[..., :] = W[x[...], :]`, of shape
/// `x.shape + (n_units,)`. Ids equal to `ignore_label` give zero rows and no gradient; other
/// ids outside `0..n_vocab` are an error. The gradient into `W` adds the rows of repeated ids.
///
/// ```
/// use kusari::prelude::*;
/// # fn main() -> Result<()> {
/// let w = Variable::new(Array::from_vec(vec![0.0f32, 1.0, 2.0, 3.0, 4.0, 5.0], &[3, 2])?);
/// let x = Array::from_vec(vec![2i32, -1, 2], &[3])?;
/// let y = F::embed_id(&x, &w, Some(-1))?;
/// assert_eq!(y.array().to_vec::<f32>()?, vec![4.0, 5.0, 0.0, 0.0, 4.0, 5.0]);
/// F::sum(&y)?.backward()?;
/// assert_eq!(w.grad().unwrap().array().to_vec::<f32>()?, vec![0.0, 0.0, 0.0, 0.0, 2.0, 2.0]);
/// assert!(F::embed_id(&Array::from_vec(vec![3i32], &[1])?, &w, None).is_err());
/// # Ok(()) }
/// ```
#[allow(non_snake_case)] // Chainer's name for the weight.
pub fn embed_id(x: &Array, W: &Variable, ignore_label: Option<i64>) -> Result<Variable> {
    const OP: &str = "embed_id";
    if W.ndim() != 2 {
        return Err(Error::Shape {
            op: OP,
            msg: format!(
                "W must be (n_vocab, n_units), got shape {:?} (x has shape {:?})",
                W.shape(),
                x.shape()
            ),
        });
    }
    if !x.dtype().is_int() {
        return Err(Error::UnsupportedDType {
            op: OP,
            dtype: x.dtype(),
            shape: x.shape().to_vec(),
            expected: "integer ids",
        });
    }
    let n_vocab = W.shape()[0];
    let ids = crate::array::integer_values(x)?;
    let idx = ids
        .iter()
        .enumerate()
        .map(|(i, &id)| {
            if Some(id) == ignore_label {
                Ok(-1)
            } else if id < 0 || id >= n_vocab as i64 {
                let ignore = match ignore_label {
                    Some(l) => format!(", ignore_label {l}"),
                    None => String::new(),
                };
                Err(Error::InvalidArgument {
                    op: OP.to_string(),
                    msg: format!(
                        "id {id} at index {i} of x (shape {:?}) is outside 0..{n_vocab} \
                         (n_vocab {n_vocab}, W shape {:?}{ignore})",
                        x.shape(),
                        W.shape()
                    ),
                })
            } else {
                Ok(id)
            }
        })
        .collect::<Result<Vec<i64>>>()?;
    let rows = take(W, Arc::new(idx), 0)?;
    let mut shape = x.shape().to_vec();
    shape.push(W.shape()[1]);
    reshape(&rows, &shape)
}
