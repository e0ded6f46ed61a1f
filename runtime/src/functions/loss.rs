//! Softmax, log-softmax and softmax cross entropy.

use super::{exp, mul, mul_scalar, neg, sub, sum, sum_axes};
use crate::error::{Error, Result};
use crate::{Array, DType, InputMeta, Variable, function_node};

/// `log(softmax(x))` along an axis.
struct LogSoftmax {
    axis: isize,
}

#[function_node(crate = "crate", name = "log_softmax_along")]
impl LogSoftmax {
    fn new(axis: isize) -> Self {
        LogSoftmax { axis }
    }

    #[retain(output = 0)]
    fn forward(&self, x: &Array) -> Result<Array> {
        let axis = [self.axis];
        let m = x.max_axes(&axis, true)?;
        let shifted = x.sub(&m)?;
        let lse = shifted.exp()?.sum_axes(&axis, true)?.log()?;
        shifted.sub(&lse)
    }

    fn backward(&self, y: &Variable, gy: &Variable) -> Result<Variable> {
        // d log_softmax: gx = gy - softmax * Σ gy
        let total = sum_axes(gy, &[self.axis], true)?;
        sub(gy, &mul(&exp(y)?, &total)?)
    }
}

/// `log(softmax(x))` along `axis`, computed stably.
pub fn log_softmax(x: &Variable, axis: isize) -> Result<Variable> {
    super::array_ops::expect_float("log_softmax", x)?;
    crate::layout::normalize_axis("log_softmax", axis, x.shape())?;
    log_softmax_along(x, axis)
}

/// Softmax along `axis`.
pub fn softmax(x: &Variable, axis: isize) -> Result<Variable> {
    exp(&log_softmax(x, axis)?)
}

/// Picks `x[i, t[i]]` for each row; rows whose label is negative give 0.
struct SelectItem {
    labels: Vec<i64>,
}

#[function_node(crate = "crate", name = "select_item_node")]
impl SelectItem {
    fn new(labels: Vec<i64>) -> Self {
        SelectItem { labels }
    }

    #[retain(meta(x))]
    fn forward(&self, x: &Array) -> Result<Array> {
        let c = x.shape()[1];
        let idx: Vec<i64> = self
            .labels
            .iter()
            .enumerate()
            .map(|(i, &t)| if t < 0 { -1 } else { (i * c) as i64 + t })
            .collect();
        let flat = x.reshape(&[x.size()])?.to_f64_vec()?;
        let picked: Vec<f64> = idx
            .iter()
            .map(|&j| if j < 0 { 0.0 } else { flat[j as usize] })
            .collect();
        // Gathered on the host (labels live there) and moved back to the input's device.
        Array::from_cpu_vec(picked, &[self.labels.len()])
            .astype(x.dtype())?
            .to_device(x.device())
    }

    fn backward(&self, x: &InputMeta, gy: &Variable) -> Result<Variable> {
        scatter_item(gy, self.labels.clone(), x.shape()[1])
    }
}

/// The adjoint of `SelectItem`: puts `g[i]` at `[i, t[i]]` of a zero `(N, C)` array.
struct ScatterItem {
    labels: Vec<i64>,
    classes: usize,
}

#[function_node(crate = "crate")]
impl ScatterItem {
    fn new(labels: Vec<i64>, classes: usize) -> Self {
        ScatterItem { labels, classes }
    }

    fn forward(&self, g: &Array) -> Result<Array> {
        let values = g.to_f64_vec()?;
        let mut out = vec![0.0; self.labels.len() * self.classes];
        for (i, (&t, &gi)) in self.labels.iter().zip(&values).enumerate() {
            if t >= 0 {
                out[i * self.classes + t as usize] = gi;
            }
        }
        Array::from_cpu_vec(out, &[self.labels.len(), self.classes])
            .astype(g.dtype())?
            .to_device(g.device())
    }

    fn backward(&self, gy: &Variable) -> Result<Variable> {
        select_item_node(gy, self.labels.clone())
    }
}

/// `x[i, t[i]]` for each row `i` of a `(N, C)` variable; rows labelled `-1` give 0 and no gradient.
pub fn select_item(x: &Variable, t: &Array) -> Result<Variable> {
    let labels = check_labels("select_item", x, t)?;
    select_item_node(x, labels)
}

fn check_labels(op: &'static str, x: &Variable, t: &Array) -> Result<Vec<i64>> {
    if x.ndim() != 2 || t.ndim() != 1 || t.shape()[0] != x.shape()[0] {
        return Err(Error::Shape {
            op,
            msg: format!(
                "expected x (N, C) and labels (N,), got {:?} and {:?}",
                x.shape(),
                t.shape()
            ),
        });
    }
    if !t.dtype().is_int() {
        return Err(Error::UnsupportedDType {
            op,
            dtype: t.dtype(),
            shape: t.shape().to_vec(),
            expected: "int32 or int64 labels",
        });
    }
    let labels: Vec<i64> = t.astype(DType::I64)?.to_vec()?;
    let classes = x.shape()[1] as i64;
    if let Some((i, &bad)) = labels
        .iter()
        .enumerate()
        .find(|&(_, &l)| l < -1 || l >= classes)
    {
        return Err(Error::InvalidArgument {
            op: op.to_string(),
            msg: format!(
                "label {bad} at index {i} is outside 0..{classes} (use -1 to ignore a sample)"
            ),
        });
    }
    Ok(labels)
}

/// Mean over samples of `-log softmax(x)[t]` for logits `x: (N, C)` and integer labels
/// `t: (N,)`. Samples labelled `-1` are ignored (and not counted in the mean).
pub fn softmax_cross_entropy(x: &Variable, t: &Array) -> Result<Variable> {
    let labels = check_labels("softmax_cross_entropy", x, t)?;
    let count = labels.iter().filter(|&&l| l >= 0).count().max(1);
    let log_p = log_softmax(x, 1)?;
    let picked = select_item_node(&log_p, labels)?;
    mul_scalar(&neg(&sum(&picked)?)?, 1.0 / count as f64)
}
