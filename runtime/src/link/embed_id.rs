//! The embedding layer [`EmbedID`]: a table of `n_vocab` vectors of `n_units`, looked up by id.

use super::Parameter;
use super::initializers::Normal;
use crate::error::Result;
use crate::functions::embed_id;
use crate::{Array, DType, Link, Variable};

/// A table of word vectors looked up by integer id (Chainer's `links.EmbedID`): `W` is
/// `(in_size, out_size)` (`n_vocab × n_units`), drawn from `N(0, 1)` (Chainer's `Normal(1.0)`),
/// and [`forward`](Self::forward) is [`embed_id`](crate::functions::embed_id) with the layer's
/// `ignore_label`.
///
/// ```
/// use kusari::link::EmbedID;
/// use kusari::prelude::*;
/// # fn main() -> Result<()> {
/// let embed = EmbedID::new(10, 4, Some(-1), DType::F32)?;
/// let ids = Array::from_vec(vec![3i32, -1, 9], &[3])?;
/// let y = embed.forward(&ids)?;
/// assert_eq!(y.shape(), &[3, 4]);
/// assert_eq!(y.array().to_vec::<f32>()?[4..8], [0.0; 4]); // the ignored id
/// # Ok(()) }
/// ```
#[derive(Link)]
#[kusari(crate = "crate")]
#[allow(non_snake_case)] // Chainer's name: the parameter's path is `/W`.
pub struct EmbedID {
    /// The table, `(in_size, out_size)`.
    pub W: Parameter,
    /// Ids equal to it give zero vectors and no gradient.
    #[kusari(skip)]
    pub ignore_label: Option<i64>,
}

impl EmbedID {
    /// A table of `in_size` ids (the vocabulary) by `out_size` units in `dtype`.
    pub fn new(
        in_size: usize,
        out_size: usize,
        ignore_label: Option<i64>,
        dtype: DType,
    ) -> Result<Self> {
        let w = Parameter::with_shape(Normal { scale: 1.0 }, &[in_size, out_size], dtype)?;
        Ok(EmbedID { W: w, ignore_label })
    }

    /// The vectors of the ids `x` (any integer dtype, any shape): `x.shape + (out_size,)`.
    pub fn forward(&self, x: &Array) -> Result<Variable> {
        embed_id(x, &self.W.variable()?, self.ignore_label)
    }
}
