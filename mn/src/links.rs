//! Links whose forward pass communicates: [`MultiNodeBatchNormalization`].

use kusari::config;
use kusari::link::{BatchNormalization, Link, Parameter};
use kusari::prelude::*;

use crate::communicator::Communicator;
use crate::functions::allreduce;

/// Batch normalization whose statistics are those of the global batch: every rank's examples
/// together (ChainerMN's `MultiNodeBatchNormalization`). With a batch split over N ranks it
/// computes what [`kusari::link::BatchNormalization`] computes on the whole batch in one
/// process: the same outputs, the same running averages, and, through the differentiable
/// [`allreduce`], the gradient of the sum of the ranks' losses (each rank's `x` gets its rows
/// of the whole batch's gradient; `gamma` and `beta` get their local parts, which the
/// multi-node optimizer's mean makes the whole batch's).
///
/// In test mode (`config::train()` false) it normalizes with the running averages, without
/// communicating. Every rank must call `forward` (and backward) the same number of times.
pub struct MultiNodeBatchNormalization {
    /// Its parameters and running averages, and its test-mode forward.
    bn: BatchNormalization,
    comm: Communicator,
    decay: f64,
    eps: f64,
}

impl Link for MultiNodeBatchNormalization {
    /// `/gamma`, `/beta`, `/avg_mean`, `/avg_var`, as [`BatchNormalization`]'s.
    fn visit_params<'a>(&'a self, prefix: &str, f: &mut dyn FnMut(String, &'a Parameter)) {
        self.bn.visit_params(prefix, f);
    }
}

impl MultiNodeBatchNormalization {
    /// A layer for inputs whose axes after the batch axis start with `size`, with Chainer's
    /// `decay` (0.9) and `eps` (2e-5) given (checked as [`BatchNormalization::new`] checks
    /// them), normalizing over `comm`'s ranks.
    pub fn new(
        size: &[usize],
        comm: &Communicator,
        decay: f64,
        eps: f64,
        dtype: DType,
    ) -> Result<Self> {
        Ok(MultiNodeBatchNormalization {
            bn: BatchNormalization::new(size, decay, eps, dtype)?,
            comm: comm.clone(),
            decay,
            eps,
        })
    }

    /// The scale, shaped `size`.
    pub fn gamma(&self) -> &Parameter {
        &self.bn.gamma
    }

    /// The shift, shaped `size`.
    pub fn beta(&self) -> &Parameter {
        &self.bn.beta
    }

    /// The running mean over the global batches (persistent).
    pub fn avg_mean(&self) -> &Parameter {
        &self.bn.avg_mean
    }

    /// The running variance over the global batches (persistent).
    pub fn avg_var(&self) -> &Parameter {
        &self.bn.avg_var
    }

    /// Normalizes `x` `(N, size.., rest..)`: with the global batch's statistics, updating the
    /// running averages, while training; with the running averages otherwise.
    pub fn forward(&self, x: &Variable) -> Result<Variable> {
        if !config::train() {
            return self.bn.forward(x);
        }
        let (gamma, beta) = (self.bn.gamma.variable()?, self.bn.beta.variable()?);
        let k = gamma.ndim();
        if x.ndim() < k + 1 || x.shape()[1..=k] != *gamma.shape() {
            return Err(Error::Shape {
                op: "MultiNodeBatchNormalization",
                msg: format!(
                    "gamma {:?} must match x {:?} on the axes after the batch axis",
                    gamma.shape(),
                    x.shape()
                ),
            });
        }
        // The axes reduced: the batch axis and those after `size`.
        let axes: Vec<isize> = std::iter::once(0)
            .chain((k + 1..x.ndim()).map(|a| a as isize))
            .collect();
        let mut bshape = vec![1; x.ndim()];
        bshape[1..=k].copy_from_slice(gamma.shape());
        let spread = |v: &Variable| v.reshape(&bshape)?.broadcast_to(x.shape());
        let local = (x.size() / gamma.size().max(1)) as f64;
        let count = self
            .comm
            .allreduce(&Array::from_vec(vec![local], &[1])?)?
            .to_vec::<f64>()?[0];
        let mean = allreduce(&self.comm, &x.sum_axes(&axes, false)?)?.mul_scalar(1.0 / count)?;
        let d = (x - &spread(&mean)?)?;
        let var =
            allreduce(&self.comm, &(&d * &d)?.sum_axes(&axes, false)?)?.mul_scalar(1.0 / count)?;
        let scale = (&gamma * &var.add_scalar(self.eps)?.pow_scalar(-0.5)?)?;
        let y = (&(&d * &spread(&scale)?)? + &spread(&beta)?)?;
        let adjust = count / (count - 1.0).max(1.0);
        let blend = |avg: &Parameter, batch: &Array, scale: f64| -> Result<()> {
            let moved = avg
                .array()?
                .mul_scalar(self.decay)?
                .add(&batch.mul_scalar((1.0 - self.decay) * scale)?)?;
            avg.set_array(moved)
        };
        blend(&self.bn.avg_mean, mean.array(), 1.0)?;
        blend(&self.bn.avg_var, var.array(), adjust)?;
        Ok(y)
    }
}
