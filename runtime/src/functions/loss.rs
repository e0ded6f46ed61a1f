//! Softmax, log-softmax and softmax cross entropy.

use super::{exp, mul, mul_scalar, sub, sum_axes};
use crate::error::{Error, Result};
use crate::op::SoftmaxForm;
use crate::{Array, InputMeta, Variable, function_node};

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
        x.log_softmax(self.axis)
    }

    fn backward(&self, y: &Variable, gy: &Variable) -> Result<Variable> {
        if let Some(gx) = fused_grad(y, gy, self.axis, SoftmaxForm::LogSoftmax)? {
            return Ok(gx);
        }
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

/// The gradient of softmax or log-softmax from its output `y`, in one pass per row, where that
/// applies: this backward not itself recorded (no double backprop), the axis the last, and the
/// storage's device fusing it (the host, float32 and float64). `None` where the caller composes
/// it of differentiable functions.
fn fused_grad(
    y: &Variable,
    gy: &Variable,
    axis: isize,
    form: SoftmaxForm,
) -> Result<Option<Variable>> {
    if crate::config::enable_backprop() {
        return Ok(None);
    }
    let (ya, ga) = (y.array(), gy.array());
    let last = crate::layout::normalize_axis(form.name(), axis, ya.shape())? + 1 == ya.ndim();
    if !last || ga.shape() != ya.shape() || ga.dtype() != ya.dtype() {
        return Ok(None);
    }
    Ok(ya
        .storage()
        .softmax_grad_last(ya.layout(), ga.storage(), ga.layout(), form)?
        .map(|g| {
            let layout = crate::layout::Layout::contiguous(ya.shape());
            Variable::constant(Array::from_storage(g, layout))
        }))
}

/// Softmax along an axis.
struct Softmax {
    axis: isize,
}

#[function_node(crate = "crate", name = "softmax_along")]
impl Softmax {
    fn new(axis: isize) -> Self {
        Softmax { axis }
    }

    #[retain(output = 0)]
    fn forward(&self, x: &Array) -> Result<Array> {
        x.softmax(self.axis)
    }

    fn backward(&self, y: &Variable, gy: &Variable) -> Result<Variable> {
        if let Some(gx) = fused_grad(y, gy, self.axis, SoftmaxForm::Softmax)? {
            return Ok(gx);
        }
        // d softmax: gx = y (gy - Σ gy y)
        let gy_y = mul(gy, y)?;
        mul(y, &sub(gy, &sum_axes(&gy_y, &[self.axis], true)?)?)
    }
}

/// Softmax along `axis`, computed stably.
pub fn softmax(x: &Variable, axis: isize) -> Result<Variable> {
    super::array_ops::expect_float("softmax", x)?;
    crate::layout::normalize_axis("softmax", axis, x.shape())?;
    softmax_along(x, axis)
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
            expected: "integer labels",
        });
    }
    let labels: Vec<i64> = crate::array::integer_values(t)?;
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
    super::array_ops::expect_float("softmax_cross_entropy", x)?;
    softmax_cross_entropy_node(x, labels, count)
}

/// The mean of each labelled row's `ln Σ exp(x) - x[t]`: one fused pass per row where the
/// device has it, `-mean(log_softmax(x)[t])` composed of array operations elsewhere.
struct SoftmaxCrossEntropy {
    labels: Vec<i64>,
    count: usize,
}

#[function_node(crate = "crate", name = "softmax_cross_entropy_node")]
impl SoftmaxCrossEntropy {
    fn new(labels: Vec<i64>, count: usize) -> Self {
        SoftmaxCrossEntropy { labels, count }
    }

    #[retain(x)]
    fn forward(&self, x: &Array) -> Result<Array> {
        let total = match x.storage().cross_entropy_rows(x.layout(), &self.labels)? {
            Some(rows) => {
                Array::from_storage(rows, crate::layout::Layout::contiguous(&[x.shape()[0]]))
                    .sum()?
            }
            None => {
                let log_p = x.log_softmax(1)?;
                let c = x.shape()[1];
                let idx: Vec<i64> = (0..self.labels.len())
                    .map(|i| i as i64 * c as i64 + self.labels[i])
                    .collect();
                let flat = log_p.to_f64_vec()?;
                let picked: f64 = idx
                    .iter()
                    .zip(&self.labels)
                    .filter(|&(_, &t)| t >= 0)
                    .map(|(&j, _)| flat[j as usize])
                    .sum();
                Array::from_cpu_vec(vec![-picked], &[])
                    .astype(x.dtype())?
                    .to_device(x.device())?
            }
        };
        total.mul_scalar(1.0 / self.count as f64)
    }

    fn backward(&self, x: &Variable, gy: &Variable) -> Result<Variable> {
        // gx = (softmax(x) - onehot(t)) gy / count, rows labelled -1 left at 0: in one pass
        // per row on the host when this backward is not itself recorded (no double backprop).
        if !crate::config::enable_backprop() && gy.array().device() == crate::Device::Cpu {
            let scale = gy.array().to_f64_vec()?[0] / self.count as f64;
            let xa = x.array();
            if let Some(g) =
                xa.storage()
                    .cross_entropy_grad_rows(xa.layout(), &self.labels, scale)?
            {
                let layout = crate::layout::Layout::contiguous(xa.shape());
                return Ok(Variable::constant(Array::from_storage(g, layout)));
            }
        }
        let (n, c) = (x.shape()[0], x.shape()[1]);
        let mut target = vec![0.0; n * c];
        let mut keep = vec![0.0; n];
        for (i, &t) in self.labels.iter().enumerate() {
            if t >= 0 {
                target[i * c + t as usize] = 1.0;
                keep[i] = 1.0;
            }
        }
        let constant = |v: Vec<f64>, shape: &[usize]| -> Result<Variable> {
            Ok(Variable::constant(
                Array::from_cpu_vec(v, shape)
                    .astype(x.dtype())?
                    .to_device(x.device())?,
            ))
        };
        let diff = sub(&softmax(x, 1)?, &constant(target, &[n, c])?)?;
        let masked = mul(&diff, &constant(keep, &[n, 1])?)?;
        mul(&masked, &mul_scalar(gy, 1.0 / self.count as f64)?)
    }
}
