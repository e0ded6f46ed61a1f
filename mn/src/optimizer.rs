//! [`MultiNodeOptimizer`]: an optimizer whose update sees the gradients averaged over every
//! rank (ChainerMN's `create_multi_node_optimizer`).

use kusari::link::Link;
use kusari::link::optimizers::{Hook, Optimizer};

use crate::communicator::{Algorithm, Communicator};
use crate::error::Error;
use crate::error::Result;
use crate::overlap::{Finish, Overlap, OverlapStats};

/// Wraps `optimizer` so that each update first averages the gradients over `comm`'s ranks
/// (ChainerMN's `create_multi_node_optimizer`).
///
/// ```
/// use kusari::link::optimizers::{Optimizer, SGD};
/// use kusari::link::{Link, Parameter, initializers::Constant};
/// use kusari::{Array, DType};
/// use kusari_mn::{create_multi_node_optimizer, run_threads};
///
/// struct Model {
///     w: Parameter,
/// }
/// impl Link for Model {
///     fn visit_params<'a>(&'a self, prefix: &str, f: &mut dyn FnMut(String, &'a Parameter)) {
///         f(format!("{prefix}/w"), &self.w);
///     }
/// }
///
/// let results = run_threads(2, "flat", |comm| {
///     // Each rank starts from other values and gets another gradient...
///     let start = 1.0 + comm.rank() as f64;
///     let model = Model { w: Parameter::with_shape(Constant(start), &[1], DType::F64)? };
///     let g = Array::from_vec(vec![2.0 * comm.rank() as f64], &[1])?;
///     model.w.variable()?.set_grad_array(g)?;
///     let mut opt = create_multi_node_optimizer(SGD::new().lr(0.5), &comm);
///     opt.setup(&model)?; // rank 0's values everywhere
///     opt.update(&model)?;
///     Ok(model.w.array()?.to_vec::<f64>()?[0])
/// });
/// // ...but both take rank 0's values and the mean gradient (0 + 2) / 2: 1 - 0.5 * 1.
/// for w in results {
///     assert_eq!(w.unwrap(), 0.5);
/// }
/// ```
pub fn create_multi_node_optimizer<O: Optimizer>(
    optimizer: O,
    comm: &Communicator,
) -> MultiNodeOptimizer<O> {
    MultiNodeOptimizer {
        inner: optimizer,
        comm: comm.clone(),
        synced: None,
        overlap: None,
        double_buffering: false,
    }
}

/// An optimizer over several ranks: see [`create_multi_node_optimizer`].
///
/// An [`update`](Optimizer::update):
/// 1. at the first update, and whenever the link's parameters (paths, shapes, dtypes) differ
///    from those last synchronized, checks that every rank has the same ones and sets them all
///    to rank 0's values ([`Communicator::bcast_data`]). The gradients of that pass were
///    computed from each rank's own values, so that update stops there, as ChainerMN's does: no
///    step is taken and [`t`](Optimizer::t) stays. Call [`setup`](Self::setup) before the
///    first forward pass (once the parameters are initialised) to synchronize without losing
///    a step, as PyTorch's `DistributedDataParallel` does at construction;
/// 2. otherwise replaces each gradient by its mean over the ranks
///    ([`Communicator::multi_node_mean_grad`]) and runs the wrapped optimizer.
///
/// Gradient accumulation needs nothing special: run several backward passes, then one
/// update. An error of any rank's collective is returned on every rank that took part.
pub struct MultiNodeOptimizer<O> {
    inner: O,
    comm: Communicator,
    /// The parameter list of the last broadcast.
    synced: Option<Vec<ParamEntry>>,
    /// The exchange during backward, for the synchronized parameters.
    overlap: Option<Overlap>,
    double_buffering: bool,
}

impl<O> MultiNodeOptimizer<O> {
    /// The wrapped optimizer.
    pub fn inner(&self) -> &O {
        &self.inner
    }

    /// The wrapped optimizer, to change its hyperparameters.
    pub fn inner_mut(&mut self) -> &mut O {
        &mut self.inner
    }

    /// The communicator it averages over.
    pub fn communicator(&self) -> &Communicator {
        &self.comm
    }

    /// With `on`, each update steps with the previous update's mean gradients while this
    /// update's are still being exchanged (ChainerMN's `double_buffering`): the exchange then
    /// overlaps the next forward and backward passes too, and the step uses gradients one
    /// update old. The first update after [`setup`](Self::setup) takes no step. Needs the
    /// overlapped exchange ([`Options::overlap`](crate::Options::overlap) with `pure_nccl`, or
    /// with `flat` on a transport that allows it): `setup` is an error otherwise. Gradient accumulation must use
    /// [`no_sync`](Self::no_sync).
    pub fn double_buffering(mut self, on: bool) -> Self {
        self.double_buffering = on;
        self
    }

    /// Checks that every rank has the same parameters and sets them to rank 0's values
    /// ([`Communicator::bcast_data`]); the next update then takes its step. With `flat` or
    /// `pure_nccl` and [`Options::overlap`](crate::Options::overlap), it also hooks the
    /// parameters so that each bucket of gradients is averaged during backward, as soon as it
    /// is complete (`flat`: on a communication thread; `pure_nccl`: on NCCL's own stream, beside
    /// backward's kernels). Collective.
    pub fn setup(&mut self, link: &dyn Link) -> Result<()> {
        self.overlap = None;
        self.comm.bcast_data(link)?;
        // `flat`'s communication thread uses the transport beside the training loop; NCCL's
        // stream needs no thread.
        let engine = match self.comm.algorithm() {
            Algorithm::Flat => self.comm.concurrent(),
            Algorithm::PureNccl => true,
            Algorithm::Naive => false,
        };
        let overlaps = engine && self.comm.options().overlap && self.comm.size() > 1;
        if overlaps {
            self.overlap = Some(Overlap::start(&self.comm, link)?);
        } else if self.double_buffering && self.comm.size() > 1 {
            return Err(Error::InvalidArgument {
                op: "MultiNodeOptimizer::setup".into(),
                rank: self.comm.rank(),
                msg: format!(
                    "double buffering needs the exchange overlapped with backward: Options::overlap \
                     with `pure_nccl`, or with `flat` on a transport that allows it (this one \
                     is `{}` over {})",
                    self.comm.name(),
                    self.comm.transport_name()
                ),
            });
        }
        self.synced = Some(param_list(link));
        Ok(())
    }

    /// Suspends the exchange during backward until the returned guard is dropped (PyTorch
    /// DDP's `no_sync`), for gradient accumulation: the backward passes run under it only
    /// accumulate, and the first backward after it exchanges the accumulated gradients
    /// bucket by bucket. (Without it, two backward passes before an update are still right:
    /// the update then exchanges the whole gradients again after backward.)
    pub fn no_sync(&self) -> NoSync<'_> {
        if let Some(o) = &self.overlap {
            o.set_enabled(false);
        }
        NoSync {
            overlap: self.overlap.as_ref(),
        }
    }

    /// How much of the gradients' exchange backward has hidden so far; `None` when the
    /// exchange is not overlapped.
    pub fn overlap_stats(&self) -> Option<OverlapStats> {
        self.overlap.as_ref().map(Overlap::stats)
    }

    /// Whether `link`'s parameters are those last synchronized.
    fn is_synced(&self, link: &dyn Link) -> bool {
        self.synced.as_ref() == Some(&param_list(link))
    }
}

/// A parameter's path, shape (`None` before it is initialised), dtype and device (a move to
/// another device replaces its variable, which the overlap's hooks are on).
type ParamEntry = (String, Option<Vec<usize>>, kusari::DType, kusari::Device);

fn param_list(link: &dyn Link) -> Vec<ParamEntry> {
    link.named_state()
        .into_iter()
        .map(|(path, p)| (path, p.shape(), p.dtype(), p.device()))
        .collect()
}

impl<O: Optimizer> Optimizer for MultiNodeOptimizer<O> {
    fn update(&mut self, link: &dyn Link) -> kusari::Result<()> {
        if !self.is_synced(link) {
            return Ok(self.setup(link)?);
        }
        let next = match &self.overlap {
            Some(o) => o.finish(link, self.double_buffering)?,
            None => Finish::Exchange,
        };
        match next {
            Finish::Skip => return Ok(()),
            Finish::Exchange => self.comm.multi_node_mean_grad(link)?,
            Finish::Step => {}
        }
        self.inner.update(link)
    }

    fn add_hook(&mut self, hook: Box<dyn Hook>) {
        self.inner.add_hook(hook);
    }

    fn t(&self) -> u64 {
        self.inner.t()
    }
}

/// While it lives, backward passes only accumulate gradients:
/// see [`MultiNodeOptimizer::no_sync`].
#[must_use = "the exchange resumes when this is dropped"]
pub struct NoSync<'a> {
    overlap: Option<&'a Overlap>,
}

impl Drop for NoSync<'_> {
    fn drop(&mut self) {
        if let Some(o) = self.overlap {
            o.set_enabled(true);
        }
    }
}
