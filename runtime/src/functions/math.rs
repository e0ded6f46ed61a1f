//! Elementwise math: exp, expm1, log, log1p, erf, sqrt, tanh, sigmoid, relu, sin, cos and
//! `a ** b` — each declared with `#[function_node]`, its forward the array operation of the
//! same name (on every device, in every dtype it takes), its backward derived from its
//! `formula` (one fused kernel, differentiable again to any order) — except the sigmoid's, which
//! reads the output where the derivative of its formula would compute `tanh` again.

use crate::error::Result;
use crate::{Array, Variable, function_node};

use super::{mul, mul_scalar, needed, rsub_scalar};

/// `e ** x`.
pub struct Exp;

#[function_node(crate = "crate", formula = "exp(x)")]
impl Exp {
    fn forward(&self, x: &Array) -> Result<Array> {
        x.exp()
    }
}

/// Natural logarithm.
pub struct Log;

#[function_node(crate = "crate", formula = "log(x)")]
impl Log {
    fn forward(&self, x: &Array) -> Result<Array> {
        x.log()
    }
}

/// `e ** x - 1`, accurate near 0.
pub struct ExpM1;

#[function_node(crate = "crate", name = "expm1", formula = "expm1(x)")]
impl ExpM1 {
    fn forward(&self, x: &Array) -> Result<Array> {
        x.expm1()
    }
}

/// `ln(1 + x)`, accurate near 0.
pub struct Log1p;

#[function_node(crate = "crate", name = "log1p", formula = "log1p(x)")]
impl Log1p {
    fn forward(&self, x: &Array) -> Result<Array> {
        x.log1p()
    }
}

/// The error function.
pub struct Erf;

#[function_node(crate = "crate", formula = "erf(x)")]
impl Erf {
    fn forward(&self, x: &Array) -> Result<Array> {
        x.erf()
    }
}

/// Square root.
pub struct Sqrt;

#[function_node(crate = "crate", formula = "sqrt(x)")]
impl Sqrt {
    fn forward(&self, x: &Array) -> Result<Array> {
        x.sqrt()
    }
}

/// Hyperbolic tangent.
pub struct Tanh;

#[function_node(crate = "crate", formula = "tanh(x)")]
impl Tanh {
    fn forward(&self, x: &Array) -> Result<Array> {
        x.tanh()
    }
}

/// Logistic sigmoid.
pub struct Sigmoid;

#[function_node(crate = "crate", formula = "0.5 * tanh(0.5 * x) + 0.5")]
impl Sigmoid {
    #[retain(output = 0)]
    fn forward(&self, x: &Array) -> Result<Array> {
        x.sigmoid()
    }

    fn backward(&self, y: &Variable, gy: &Variable) -> Result<Variable> {
        sigmoid_grad(y, gy)
    }
}

/// The sigmoid's backward, `gy * y * (1 - y)` from the output `y`, in one pass; differentiable
/// again (as Chainer's `SigmoidGrad`).
struct SigmoidGrad;

#[function_node(crate = "crate", name = "sigmoid_grad", formula = "gy * y * (1 - y)")]
impl SigmoidGrad {
    #[retain(y, gy)]
    fn forward(&self, y: &Array, gy: &Array) -> Result<Array> {
        y.float_binary::<crate::op::SigmoidGrad>(gy)
    }

    fn backward(
        &self,
        y: &Variable,
        gy: &Variable,
        ggx: &Variable,
        needs: &[usize],
    ) -> Result<(Option<Variable>, Option<Variable>)> {
        // d/dy = gy (1 - 2y) ggx;  d/dgy = y (1 - y) ggx
        Ok((
            needed(needs, 0, || {
                mul(&mul(gy, &rsub_scalar(&mul_scalar(y, 2.0)?, 1.0)?)?, ggx)
            })?,
            needed(needs, 1, || sigmoid_grad(y, ggx))?,
        ))
    }
}

/// `max(x, 0)`.
pub struct Relu;

#[function_node(crate = "crate", formula = "fmax(x, 0)")]
impl Relu {
    fn forward(&self, x: &Array) -> Result<Array> {
        x.relu()
    }
}

/// Sine, in radians (Chainer's `F.sin`); its gradient is `cos(x)`.
///
/// ```
/// use kusari::prelude::*;
/// # fn main() -> Result<()> {
/// let x = Variable::new(Array::from_vec(vec![0.0f64, std::f64::consts::FRAC_PI_2], &[2])?);
/// let y = F::sin(&x)?;
/// assert_eq!(y.array().to_vec::<f64>()?, vec![0.0, 1.0]);
/// # Ok(()) }
/// ```
pub struct Sin;

#[function_node(crate = "crate", formula = "sin(x)")]
impl Sin {
    fn forward(&self, x: &Array) -> Result<Array> {
        x.sin()
    }
}

/// Cosine, in radians (Chainer's `F.cos`); its gradient is `-sin(x)`.
///
/// ```
/// use kusari::prelude::*;
/// # fn main() -> Result<()> {
/// let x = Variable::new(Array::from_vec(vec![0.0f64, std::f64::consts::PI], &[2])?);
/// let y = F::cos(&x)?;
/// assert_eq!(y.array().to_vec::<f64>()?, vec![1.0, -1.0]);
/// # Ok(()) }
/// ```
pub struct Cos;

#[function_node(crate = "crate", formula = "cos(x)")]
impl Cos {
    fn forward(&self, x: &Array) -> Result<Array> {
        x.cos()
    }
}

/// `a ** b` elementwise, broadcasting (floating point).
pub struct Pow;

#[function_node(crate = "crate", formula = "pow(a, b)")]
impl Pow {
    fn forward(&self, a: &Array, b: &Array) -> Result<Array> {
        a.pow(b)
    }
}
