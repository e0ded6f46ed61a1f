//! [`Link`]: a model part that owns parameters and child links.

use super::Parameter;
use crate::Device;
use crate::error::Result;

/// A model part that owns [`Parameter`]s and child links (Chainer's `Link` and `Chain`).
///
/// Implementations only say how to reach their parameters ([`visit_params`](Self::visit_params));
/// `#[derive(Link)]` writes it from the struct's fields, so no parameter can be forgotten. The
/// rest follows from it.
pub trait Link {
    /// Calls `f` with every parameter and its path (`/W`, `/l1/W`), depth-first in field order,
    /// each path prefixed with `prefix`.
    fn visit_params<'a>(&'a self, prefix: &str, f: &mut dyn FnMut(String, &'a Parameter));

    /// Every learned parameter with its path, e.g. `("/l1/W", &w)` (persistent values, such as
    /// a `BatchNormalization`'s running averages, are left out: see [`named_state`](Self::named_state)).
    fn named_params(&self) -> Vec<(String, &Parameter)> {
        let mut out = Vec::new();
        self.visit_params("", &mut |name, p| {
            if !p.is_persistent() {
                out.push((name, p))
            }
        });
        out
    }

    /// Every persistent value with its path ([`Parameter::persistent`]), e.g.
    /// `("/bn/avg_mean", &m)`.
    fn named_persistents(&self) -> Vec<(String, &Parameter)> {
        let mut out = Vec::new();
        self.visit_params("", &mut |name, p| {
            if p.is_persistent() {
                out.push((name, p))
            }
        });
        out
    }

    /// Everything a checkpoint holds: every parameter and persistent value with its path, in
    /// field order.
    fn named_state(&self) -> Vec<(String, &Parameter)> {
        let mut out = Vec::new();
        self.visit_params("", &mut |name, p| out.push((name, p)));
        out
    }

    /// Every parameter.
    fn params(&self) -> Vec<&Parameter> {
        self.named_params().into_iter().map(|(_, p)| p).collect()
    }

    /// Clears every parameter's gradient.
    fn cleargrads(&self) {
        for p in self.params() {
            p.cleargrad();
        }
    }

    /// Moves every parameter and persistent value to `device` (and initialises later ones
    /// there). A device that does not exist is an error before any parameter is changed.
    fn to_device(&self, device: Device) -> Result<()> {
        crate::cuda::check_device(device, &format!("Link::to_device({device})"))?;
        self.named_state()
            .into_iter()
            .try_for_each(|(_, p)| p.to_device(device))
    }

    /// The number of parameter elements (uninitialised parameters count 0).
    fn count_params(&self) -> usize {
        self.params().into_iter().map(Parameter::size).sum()
    }
}
