//! Elementwise math: exp, expm1, log, log1p, erf, sqrt, tanh, sigmoid, relu, sin, cos and
//! `a ** b` — each declared with `#[function_node]`,
//! its forward the array operation of the same name (on every device).

use crate::error::Result;
use crate::{Array, Variable, function_node};

use super::{add, add_scalar, div, mul, mul_scalar, needed, neg, rsub_scalar, sum_to};

/// `e ** x`.
pub struct Exp;

#[function_node(crate = "crate", formula = "exp(x)")]
impl Exp {
    #[retain(output = 0)]
    fn forward(&self, x: &Array) -> Result<Array> {
        x.exp()
    }

    fn backward(&self, y: &Variable, gy: &Variable) -> Result<Variable> {
        mul(gy, y)
    }
}

/// Natural logarithm.
pub struct Log;

#[function_node(crate = "crate", formula = "log(x)")]
impl Log {
    #[retain(x)]
    fn forward(&self, x: &Array) -> Result<Array> {
        x.log()
    }

    fn backward(&self, x: &Variable, gy: &Variable) -> Result<Variable> {
        div(gy, x)
    }
}

/// `e ** x - 1`, accurate near 0.
pub struct ExpM1;

#[function_node(crate = "crate", name = "expm1", formula = "expm1(x)")]
impl ExpM1 {
    #[retain(output = 0)]
    fn forward(&self, x: &Array) -> Result<Array> {
        x.expm1()
    }

    fn backward(&self, y: &Variable, gy: &Variable) -> Result<Variable> {
        // d(eˣ - 1)/dx = eˣ = y + 1
        add(&mul(gy, y)?, gy)
    }
}

/// `ln(1 + x)`, accurate near 0.
pub struct Log1p;

#[function_node(crate = "crate", name = "log1p", formula = "log1p(x)")]
impl Log1p {
    #[retain(x)]
    fn forward(&self, x: &Array) -> Result<Array> {
        x.log1p()
    }

    fn backward(&self, x: &Variable, gy: &Variable) -> Result<Variable> {
        div(gy, &add_scalar(x, 1.0)?)
    }
}

/// The error function.
pub struct Erf;

#[function_node(crate = "crate", formula = "erf(x)")]
impl Erf {
    #[retain(x)]
    fn forward(&self, x: &Array) -> Result<Array> {
        x.erf()
    }

    fn backward(&self, x: &Variable, gy: &Variable) -> Result<Variable> {
        // d erf(x)/dx = 2/√π e^(-x²)
        let e = exp(&mul_scalar(&mul(x, x)?, -1.0)?)?;
        mul(gy, &mul_scalar(&e, std::f64::consts::FRAC_2_SQRT_PI)?)
    }
}

/// Square root.
pub struct Sqrt;

#[function_node(crate = "crate", formula = "sqrt(x)")]
impl Sqrt {
    #[retain(output = 0)]
    fn forward(&self, x: &Array) -> Result<Array> {
        x.sqrt()
    }

    fn backward(&self, y: &Variable, gy: &Variable) -> Result<Variable> {
        div(gy, &mul_scalar(y, 2.0)?)
    }
}

/// Hyperbolic tangent.
pub struct Tanh;

#[function_node(crate = "crate", formula = "tanh(x)")]
impl Tanh {
    #[retain(output = 0)]
    fn forward(&self, x: &Array) -> Result<Array> {
        x.tanh()
    }

    fn backward(&self, y: &Variable, gy: &Variable) -> Result<Variable> {
        tanh_grad(y, gy)
    }
}

/// Tanh's backward, `gy * (1 - y²)` from the output `y`, in one pass; differentiable again
/// (as Chainer's `TanhGrad`).
struct TanhGrad;

#[function_node(crate = "crate", name = "tanh_grad", formula = "gy * (1 - y * y)")]
impl TanhGrad {
    #[retain(y, gy)]
    fn forward(&self, y: &Array, gy: &Array) -> Result<Array> {
        y.float_binary::<crate::op::TanhGrad>(gy)
    }

    fn backward(
        &self,
        y: &Variable,
        gy: &Variable,
        ggx: &Variable,
        needs: &[usize],
    ) -> Result<(Option<Variable>, Option<Variable>)> {
        // d/dy = -2 y gy ggx;  d/dgy = (1 - y²) ggx
        Ok((
            needed(needs, 0, || mul(&mul_scalar(&mul(y, gy)?, -2.0)?, ggx))?,
            needed(needs, 1, || tanh_grad(y, ggx))?,
        ))
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
    #[retain(output = 0)]
    fn forward(&self, x: &Array) -> Result<Array> {
        x.relu()
    }

    fn backward(&self, y: &Variable, gy: &Variable) -> Result<Variable> {
        relu_grad(y, gy)
    }
}

/// ReLU's backward, `gy` where `y > 0` and 0 elsewhere, in one pass (as Chainer's
/// `ReLUGrad2`). Differentiable in `gy` (the same mask); its gradient in `y` is 0 wherever it
/// is defined, so none is returned.
struct ReluGrad;

#[function_node(crate = "crate", name = "relu_grad", formula = "y > 0 ? gy : 0")]
impl ReluGrad {
    #[retain(y)]
    fn forward(&self, y: &Array, gy: &Array) -> Result<Array> {
        y.binary::<crate::op::ReluGrad>(gy)
    }

    fn backward(
        &self,
        y: &Variable,
        ggx: &Variable,
        needs: &[usize],
    ) -> Result<(Option<Variable>, Option<Variable>)> {
        Ok((None, needed(needs, 1, || relu_grad(y, ggx))?))
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
    #[retain(x)]
    fn forward(&self, x: &Array) -> Result<Array> {
        x.sin()
    }

    fn backward(&self, x: &Variable, gy: &Variable) -> Result<Variable> {
        mul(gy, &cos(x)?)
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
    #[retain(x)]
    fn forward(&self, x: &Array) -> Result<Array> {
        x.cos()
    }

    fn backward(&self, x: &Variable, gy: &Variable) -> Result<Variable> {
        mul(gy, &neg(&sin(x)?)?)
    }
}

/// `a ** b` elementwise, broadcasting (floating point).
pub struct Pow;

#[function_node(crate = "crate", formula = "pow(a, b)")]
impl Pow {
    #[retain(a, b, output = 0)]
    fn forward(&self, a: &Array, b: &Array) -> Result<Array> {
        a.pow(b)
    }

    fn backward(
        &self,
        a: &Variable,
        b: &Variable,
        y: &Variable,
        gy: &Variable,
        needs: &[usize],
    ) -> Result<(Option<Variable>, Option<Variable>)> {
        // d(a^b)/da = b a^(b-1) = b y / a;  d(a^b)/db = y ln a
        Ok((
            needed(needs, 0, || {
                sum_to(&mul(gy, &div(&mul(b, y)?, a)?)?, a.shape())
            })?,
            needed(needs, 1, || {
                sum_to(&mul(gy, &mul(y, &log(a)?)?)?, b.shape())
            })?,
        ))
    }
}
