//! Softmax over the last axis, `y = exp(x - max(x)) / sum(exp(x - max(x)))`, declared with
//! `#[function_node]`: a `forward_cpu` of array operations, a `forward_gpu` of CUDA kernels, and a
//! `backward` on variables. The GPU forward is the CuPy way: a [`ReductionKernel`] for each
//! row's max and sum (Chainer's `cuda.reduce`) and an [`ElementwiseKernel`] for the rest
//! (`cuda.elementwise`), four launches and no host round trip.
//!
//! `12_softmax.rs` (`cargo run --example softmax`) checks the GPU forward against the CPU forward
//! and the gradients with kusari's gradient check.

use kusari::prelude::*;
use kusari::{ElementwiseKernel, ReductionDef, ReductionKernel};

/// Each row's maximum, kept as a length-1 last axis (no identity: a row starts from its first
/// element).
pub static ROW_MAX: ReductionKernel = ReductionKernel::from_def(ReductionDef {
    name: "softmax_row_max",
    in_params: "T x",
    out_params: "T m",
    map_expr: "x",
    reduce_expr: "a > b ? a : b",
    post_map_expr: "m = a",
    identity: None,
    ..ReductionDef::DEFAULT
});

/// Each row's sum, kept as a length-1 last axis.
pub static ROW_SUM: ReductionKernel = ReductionKernel::from_def(ReductionDef {
    name: "softmax_row_sum",
    in_params: "T e",
    out_params: "T s",
    map_expr: "e",
    reduce_expr: "a + b",
    post_map_expr: "s = a",
    identity: Some("0"),
    ..ReductionDef::DEFAULT
});

/// `exp(x - m)`, `m` (the row's max) broadcast along the row: no exponential overflows.
pub static EXP_SHIFTED: ElementwiseKernel =
    ElementwiseKernel::new("softmax_exp", "T x, T m", "T e", "", "e = exp(x - m);");

/// `e / s`, `s` (the row's sum) broadcast along the row.
pub static NORMALIZE: ElementwiseKernel =
    ElementwiseKernel::new("softmax_normalize", "T e, T s", "T y", "", "y = e / s;");

/// Softmax over the last axis.
pub struct Softmax;

#[function_node]
impl Softmax {
    /// On the host, with array operations. Backward needs only the output.
    #[retain(output = 0)]
    fn forward_cpu(&self, x: &Array) -> Result<Array> {
        let e = (x - &x.max_axes(&[-1], true)?)?.exp()?;
        &e / &e.sum_axes(&[-1], true)?
    }

    /// On a CUDA device: reduction kernels for the row max and sum, elementwise kernels for the
    /// shifted exponential and the division.
    fn forward_gpu(&self, x: &Array) -> Result<Array> {
        let first = |mut v: Vec<Array>| v.remove(0);
        let m = first(ROW_MAX.launch(&[x], &[], Some(&[-1]), true)?);
        let e = first(EXP_SHIFTED.launch(&[x, &m], &[])?);
        let s = first(ROW_SUM.launch(&[&e], &[], Some(&[-1]), true)?);
        Ok(first(NORMALIZE.launch(&[&e, &s], &[])?))
    }

    /// `gx = y * (gy - sum(gy * y))` along the last axis, with differentiable operations.
    fn backward(&self, y: &Variable, gy: &Variable) -> Result<Variable> {
        let dot = (gy * y)?.sum_axes(&[-1], true)?;
        y * (gy - dot.broadcast_to(y.shape())?)?
    }
}
