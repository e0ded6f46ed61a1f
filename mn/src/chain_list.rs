//! [`MultiNodeChainList`]: a model whose links are placed on several ranks (model
//! parallelism, ChainerMN's `MultiNodeChainList`).

use kusari::link::{Link, Parameter};
use kusari::prelude::*;

use crate::communicator::Communicator;
use crate::functions::{pseudo_connect, recv, send};

/// The tag of the chain's transfers: each pair of ranks exchanges them in program order, kept
/// apart from a program's own `send`/`recv` with other tags.
pub const CHAIN_TAG: u16 = u16::MAX;

/// One link of the chain with its forward pass.
trait Stage {
    fn link(&self) -> &dyn Link;
    fn forward(&self, x: &Variable) -> Result<Variable>;
}

struct Typed<L, F> {
    link: L,
    forward: F,
}

impl<L: Link, F: Fn(&L, &Variable) -> Result<Variable>> Stage for Typed<L, F> {
    fn link(&self) -> &dyn Link {
        &self.link
    }

    fn forward(&self, x: &Variable) -> Result<Variable> {
        (self.forward)(&self.link, x)
    }
}

struct Placed {
    stage: Box<dyn Stage>,
    rank_in: Option<usize>,
    rank_out: Option<usize>,
}

/// The part of a model this rank holds, and where its inputs come from and its outputs go
/// (ChainerMN's `MultiNodeChainList`). Each rank adds its own links, in the order they run,
/// each with:
/// - `rank_in`: `None` when it takes the chain's input, or the rank whose output it receives;
/// - `rank_out`: `None` when its output is the chain's output, or the rank it sends it to.
///
/// [`forward`](Self::forward) runs this rank's links in order and returns the chain's output
/// on the rank that computes it. A rank whose last link sends gets a delegate (a scalar zero)
/// instead: calling `backward` on it receives the gradient and carries it through this rank's
/// links. Outputs sent earlier are joined to the returned variable
/// ([`pseudo_connect`]), so one `backward` per rank does everything. Every transfer uses the
/// tag [`CHAIN_TAG`]; between two ranks they pair up in program order.
///
/// Its [`Link`] implementation visits this rank's links under `/0`, `/1`, ... in the order
/// added: an optimizer on each rank updates that rank's part.
///
/// ```
/// use kusari::link::{Link, Linear};
/// use kusari::prelude::*;
/// use kusari_mn::{MultiNodeChainList, run_threads};
///
/// // Rank 0: x -> l1 -> rank 1 -> l2 -> rank 0 -> l3 -> the output, on rank 0.
/// let losses = run_threads(2, "flat", |comm| {
///     let linear = |i, o| Linear::new(Some(i), o, false, DType::F64);
///     let mut chain = MultiNodeChainList::new(&comm);
///     if comm.rank() == 0 {
///         chain.add_link(linear(3, 4)?, |l, x| l.forward(x)?.tanh(), None, Some(1));
///         chain.add_link(linear(4, 1)?, Linear::forward, Some(1), None);
///     } else {
///         chain.add_link(linear(4, 4)?, |l, x| l.forward(x)?.tanh(), Some(0), Some(0));
///     }
///     let x = Variable::constant(Array::from_vec(vec![0.5f64; 6], &[2, 3])?);
///     let y = chain.forward(&x)?;
///     let loss = if comm.rank() == 0 { F::sum(&(&y * &y)?)? } else { y };
///     loss.backward()?; // rank 1's backward: the delegate of its send
///     // Every rank's links have their gradients.
///     assert!(chain.params().iter().all(|p| p.grad().is_some()));
///     Ok(chain.count_params())
/// });
/// let counts: Vec<usize> = losses.into_iter().map(Result::unwrap).collect();
/// assert_eq!(counts, vec![3 * 4 + 4 + 4 + 1, 4 * 4 + 4]);
/// ```
pub struct MultiNodeChainList {
    comm: Communicator,
    stages: Vec<Placed>,
}

impl MultiNodeChainList {
    /// An empty chain on `comm`'s ranks.
    pub fn new(comm: &Communicator) -> MultiNodeChainList {
        MultiNodeChainList {
            comm: comm.clone(),
            stages: Vec::new(),
        }
    }

    /// Adds `link`, run by `forward`, taking its input from `rank_in` (or the chain's input)
    /// and sending its output to `rank_out` (or returning it as the chain's output).
    pub fn add_link<L: Link + 'static>(
        &mut self,
        link: L,
        forward: impl Fn(&L, &Variable) -> Result<Variable> + 'static,
        rank_in: Option<usize>,
        rank_out: Option<usize>,
    ) {
        self.stages.push(Placed {
            stage: Box::new(Typed { link, forward }),
            rank_in,
            rank_out,
        });
    }

    /// Runs this rank's links in order (see the type's documentation): the chain's output, or
    /// the delegate of this rank's last send.
    pub fn forward(&self, x: &Variable) -> Result<Variable> {
        let mut delegate: Option<Variable> = None;
        let mut output: Option<Variable> = None;
        for placed in &self.stages {
            let input = match placed.rank_in {
                None => x.clone(),
                Some(source) => recv(&self.comm, source, CHAIN_TAG, delegate.as_ref())?,
            };
            // A receive took the delegate into its graph; the next send starts a new one.
            if placed.rank_in.is_some() {
                delegate = None;
            }
            let y = placed.stage.forward(&input)?;
            match placed.rank_out {
                None => output = Some(y),
                Some(dest) => {
                    let d = send(&self.comm, &y, dest, CHAIN_TAG)?;
                    delegate = Some(match delegate {
                        Some(earlier) => pseudo_connect(&earlier, &d)?,
                        None => d,
                    });
                }
            }
        }
        match (output, delegate) {
            (Some(y), Some(d)) => pseudo_connect(&d, &y),
            (Some(y), None) => Ok(y),
            (None, Some(d)) => Ok(d),
            (None, None) => Err(Error::InvalidArgument {
                op: "MultiNodeChainList::forward".into(),
                msg: format!("rank {} holds no links", self.comm.rank()),
            }),
        }
    }
}

impl Link for MultiNodeChainList {
    fn visit_params<'a>(&'a self, prefix: &str, f: &mut dyn FnMut(String, &'a Parameter)) {
        for (i, placed) in self.stages.iter().enumerate() {
            placed
                .stage
                .link()
                .visit_params(&format!("{prefix}/{i}"), f);
        }
    }
}
