//! Differentiable communication (ChainerMN's `chainermn.functions`): collectives and
//! point-to-point transfers as functions of [`Variable`]s, whose backward passes exchange the
//! gradients the other way. Every rank must run the same backward passes in the same order,
//! as it ran the forward ones: each backward is itself a collective or a transfer.
//!
//! - [`allreduce`]: the sum over ranks; its gradient is the sum of the ranks' gradients.
//!   [`MultiNodeBatchNormalization`](crate::MultiNodeBatchNormalization) computes its
//!   statistics with it.
//! - [`send`] and [`recv`]: one rank's activations to another, for model parallelism. The
//!   backward of a `recv` sends the gradient back, the backward of the `send` receives it.

use kusari::prelude::*;
use kusari::{BackwardContext, ForwardContext, FunctionNode};

use crate::communicator::Communicator;

/// The elementwise sum of every rank's `x`, on every rank (a differentiable
/// [`Communicator::allreduce`]). Its gradient on each rank is the sum of every rank's gradient
/// of the output, an `allreduce` again, so it differentiates to any order.
///
/// ```
/// use kusari::prelude::*;
/// use kusari_mn::{functions, run_threads};
///
/// let grads = run_threads(2, "flat", |comm| {
///     let x = Variable::new(Array::from_vec(vec![1.0f64 + comm.rank() as f64], &[1])?);
///     let s = functions::allreduce(&comm, &x)?; // 1 + 2 on both ranks
///     // Rank r's loss is (r + 1) s: the gradient of the sum of the losses is 1 + 2.
///     let loss = F::sum(&s.mul_scalar(1.0 + comm.rank() as f64)?)?;
///     loss.backward()?;
///     Ok((s.array().to_vec::<f64>()?, x.grad_array().unwrap().to_vec::<f64>()?))
/// });
/// for g in grads {
///     assert_eq!(g.unwrap(), (vec![3.0], vec![3.0]));
/// }
/// ```
pub fn allreduce(comm: &Communicator, x: &Variable) -> Result<Variable> {
    Ok(Allreduce { comm: comm.clone() }.apply(&[x])?.remove(0))
}

struct Allreduce {
    comm: Communicator,
}

impl FunctionNode for Allreduce {
    fn forward(&mut self, _ctx: &mut ForwardContext, inputs: &[Array]) -> Result<Vec<Array>> {
        Ok(vec![self.comm.allreduce(&inputs[0])?])
    }

    fn backward(
        &self,
        _ctx: &BackwardContext<'_>,
        _targets: &[usize],
        gys: &[Option<Variable>],
    ) -> Result<Vec<Option<Variable>>> {
        // Every rank takes part, a gradient or not: a rank with none gives zeros.
        let gy = gys[0]
            .clone()
            .expect("the graph passes a gradient to a reached output");
        Ok(vec![Some(allreduce(&self.comm, &gy)?)])
    }
}

/// Sends `x` to rank `dest` under `tag` and returns a delegate: a scalar zero whose backward
/// receives `x`'s gradient from `dest` (sent there by the backward of the matching [`recv`])
/// and passes it on into `x`'s graph. Call `backward` on the delegate, or add it to this rank's
/// own loss, so that backward reaches it.
///
/// The received gradient is a constant: gradients of gradients do not cross ranks.
///
/// ```
/// use kusari::prelude::*;
/// use kusari_mn::{functions, run_threads};
///
/// // Rank 0 computes h = 2 x and sends it; rank 1 computes the loss sum(h * h).
/// let got = run_threads(2, "flat", |comm| {
///     if comm.rank() == 0 {
///         let x = Variable::new(Array::from_vec(vec![1.0f64, 3.0], &[2])?);
///         let delegate = functions::send(&comm, &x.mul_scalar(2.0)?, 1, 0)?;
///         delegate.backward()?; // waits for rank 1's gradient of h
///         Ok(x.grad_array().unwrap().to_vec::<f64>()?)
///     } else {
///         let h = functions::recv(&comm, 0, 0, None)?;
///         F::sum(&(&h * &h)?)?.backward()?; // sends 2 h back
///         Ok(h.array().to_vec::<f64>()?)
///     }
/// });
/// let got: Vec<Vec<f64>> = got.into_iter().map(Result::unwrap).collect();
/// assert_eq!(got[1], vec![2.0, 6.0]); // h
/// assert_eq!(got[0], vec![8.0, 24.0]); // d sum(4 x²) / dx = 8 x
/// ```
pub fn send(comm: &Communicator, x: &Variable, dest: usize, tag: u16) -> Result<Variable> {
    let node = Send {
        comm: comm.clone(),
        dest,
        tag,
        device: x.device(),
    };
    Ok(node.apply(&[x])?.remove(0))
}

struct Send {
    comm: Communicator,
    dest: usize,
    tag: u16,
    device: Device,
}

impl FunctionNode for Send {
    fn forward(&mut self, _ctx: &mut ForwardContext, inputs: &[Array]) -> Result<Vec<Array>> {
        self.comm.send(&inputs[0], self.dest, self.tag)?;
        Ok(vec![Array::zeros_on(&[], inputs[0].dtype(), self.device)?])
    }

    fn backward(
        &self,
        _ctx: &BackwardContext<'_>,
        _targets: &[usize],
        _gys: &[Option<Variable>],
    ) -> Result<Vec<Option<Variable>>> {
        let g = self
            .comm
            .recv(self.dest, self.tag)?
            .to_device(self.device)?;
        Ok(vec![Some(Variable::constant(g))])
    }
}

/// The array rank `source` sent under `tag` with [`send`], as a variable whose backward sends
/// its gradient back to `source`. `delegate` orders this receive after another function's
/// output in the graph (ChainerMN's `delegate_variable`); with `None`, a fresh scalar stands
/// in. The array arrives on this rank's default device.
pub fn recv(
    comm: &Communicator,
    source: usize,
    tag: u16,
    delegate: Option<&Variable>,
) -> Result<Variable> {
    let dummy;
    let input = match delegate {
        Some(d) => d,
        None => {
            dummy = Variable::new(Array::zeros(&[], DType::F32)?);
            &dummy
        }
    };
    let node = Recv {
        comm: comm.clone(),
        source,
        tag,
    };
    Ok(node.apply(&[input])?.remove(0))
}

struct Recv {
    comm: Communicator,
    source: usize,
    tag: u16,
}

impl FunctionNode for Recv {
    fn forward(&mut self, _ctx: &mut ForwardContext, _inputs: &[Array]) -> Result<Vec<Array>> {
        Ok(vec![self.comm.recv(self.source, self.tag)?])
    }

    fn backward(
        &self,
        ctx: &BackwardContext<'_>,
        _targets: &[usize],
        gys: &[Option<Variable>],
    ) -> Result<Vec<Option<Variable>>> {
        let g = grad_or_zeros(ctx, gys, 0)?;
        self.comm.send(g.array(), self.source, self.tag)?;
        Ok(vec![Some(zero_gradient(ctx, 0)?)])
    }
}

/// `y`, with `delegate` (what [`send`] returned) joined to its graph (ChainerMN's
/// `pseudo_connect`): a backward through the result runs the delegate's backward too, which
/// receives the sent array's gradient. A rank that both sends activations on and computes a
/// loss connects the delegate to the loss this way, so that one `backward` does both.
pub fn pseudo_connect(delegate: &Variable, y: &Variable) -> Result<Variable> {
    Ok(PseudoConnect.apply(&[delegate, y])?.remove(1))
}

struct PseudoConnect;

impl FunctionNode for PseudoConnect {
    fn forward(&mut self, _ctx: &mut ForwardContext, inputs: &[Array]) -> Result<Vec<Array>> {
        // Two outputs: the delegate's stand-in (never used) and y.
        Ok(vec![inputs[0].clone(), inputs[1].clone()])
    }

    fn backward(
        &self,
        ctx: &BackwardContext<'_>,
        _targets: &[usize],
        gys: &[Option<Variable>],
    ) -> Result<Vec<Option<Variable>>> {
        // The delegate gets a zero gradient: enough for its `send` to run its backward.
        let gy = grad_or_zeros(ctx, gys, 1)?;
        Ok(vec![Some(zero_gradient(ctx, 0)?), Some(gy)])
    }
}

/// Output `i`'s gradient, or zeros shaped like it when none reached it.
fn grad_or_zeros(
    ctx: &BackwardContext<'_>,
    gys: &[Option<Variable>],
    i: usize,
) -> Result<Variable> {
    match &gys[i] {
        Some(g) => Ok(g.clone()),
        None => ctx.zeros_for_output(i),
    }
}

/// Zeros shaped like input `i`: the gradient given to a delegate, which only orders the graph.
fn zero_gradient(ctx: &BackwardContext<'_>, i: usize) -> Result<Variable> {
    let meta = ctx.input_meta(i)?;
    let zero = Array::zeros_on(meta.shape(), meta.dtype(), meta.device())?;
    Ok(Variable::constant(zero))
}
