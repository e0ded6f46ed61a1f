//! The two chains of six elementwise functions that `benches/fuse.rs` (host) and
//! `benches/cuda.rs` (`cuda_fuse`) time fused and unfused; `fuse_peers.py` and `cuda_peers.py`
//! write the same chains in PyTorch.

use kusari::prelude::*;

/// `relu(x·a + 0.5)·a − 0.25·x`: mul, add_scalar, relu, mul, mul_scalar, sub.
pub fn arith(v: &[Variable]) -> Result<Variable> {
    let (x, a) = (&v[0], &v[1]);
    let r = F::relu(&F::add_scalar(&(x * a)?, 0.5)?)?;
    (&r * a)? - F::mul_scalar(x, 0.25)?
}

/// `tanh(x·a + 0.5)·σ(x) + a`: mul, add_scalar, tanh, sigmoid, mul, add.
pub fn tanh(v: &[Variable]) -> Result<Variable> {
    let (x, a) = (&v[0], &v[1]);
    let t = F::tanh(&F::add_scalar(&(x * a)?, 0.5)?)?;
    (&t * &F::sigmoid(x)?)? + a
}
