//! A body evaluated in `f64` on the host: the reference that tests hold derivatives against, and
//! the folding of constants in [`super::graph`].

use std::collections::HashMap;

use super::ast::{Body, Expr, Func, TypeKind, UnaryOp};

/// `f` at `args` in `f64` (as CUDA's functions of the same name; `fmax`/`fmin` return the other
/// argument for a NaN, `round` rounds halves away from zero).
pub fn call(f: Func, args: &[f64]) -> f64 {
    let x = args[0];
    let y = args.get(1).copied().unwrap_or(0.0);
    match f {
        Func::Exp => x.exp(),
        Func::Exp2 => x.exp2(),
        Func::Expm1 => x.exp_m1(),
        Func::Log => x.ln(),
        Func::Log2 => x.log2(),
        Func::Log10 => x.log10(),
        Func::Log1p => x.ln_1p(),
        Func::Sqrt => x.sqrt(),
        Func::Rsqrt => 1.0 / x.sqrt(),
        Func::Cbrt => x.cbrt(),
        Func::Sin => x.sin(),
        Func::Cos => x.cos(),
        Func::Tan => x.tan(),
        Func::Asin => x.asin(),
        Func::Acos => x.acos(),
        Func::Atan => x.atan(),
        Func::Atan2 => x.atan2(y),
        Func::Sinh => x.sinh(),
        Func::Cosh => x.cosh(),
        Func::Tanh => x.tanh(),
        Func::Asinh => x.asinh(),
        Func::Acosh => x.acosh(),
        Func::Atanh => x.atanh(),
        Func::Pow => x.powf(y),
        Func::Hypot => x.hypot(y),
        Func::Fabs => x.abs(),
        Func::Fmax => x.max(y),
        Func::Fmin => x.min(y),
        Func::Copysign => x.copysign(y),
        Func::Erf => erf(x),
        Func::Erfc => 1.0 - erf(x),
        Func::Floor => x.floor(),
        Func::Ceil => x.ceil(),
        Func::Round => x.round(),
        Func::Trunc => x.trunc(),
    }
}

/// The error function: its Maclaurin series below 3 in magnitude (terms summed until they no
/// longer change the sum; a relative error of a few ulps times the largest term, under
/// `1e-13` there), and `1 - erfc` by its continued fraction beyond (under `1e-15`).
pub fn erf(x: f64) -> f64 {
    if x.is_nan() {
        return x;
    }
    let a = x.abs();
    if a < 3.0 {
        // erf(x) = 2/sqrt(pi) * sum (-1)^n x^(2n+1) / (n! (2n+1)).
        let (mut term, mut sum, x2) = (a, a, a * a);
        for n in 1..200 {
            term *= -x2 / n as f64;
            let add = term / (2 * n + 1) as f64;
            if sum + add == sum {
                break;
            }
            sum += add;
        }
        return (2.0 / std::f64::consts::PI.sqrt() * sum).copysign(x);
    }
    // erfc(a) = exp(-a^2)/sqrt(pi) * 1/(a + 1/2/(a + 1/(a + 3/2/(a + ...)))), by Lentz.
    let tiny = 1e-300;
    let mut f = a;
    let (mut c, mut d) = (a, 0.0);
    for k in 1..300 {
        let coef = k as f64 / 2.0;
        d = a + coef * d;
        d = if d == 0.0 { tiny } else { 1.0 / d };
        c = a + coef / c;
        if c == 0.0 {
            c = tiny;
        }
        let delta = c * d;
        f *= delta;
        if (delta - 1.0).abs() < 1e-16 {
            break;
        }
    }
    let erfc = (-a * a).exp() / std::f64::consts::PI.sqrt() / f;
    (1.0 - erfc).copysign(x)
}

impl Expr {
    /// The value of the expression with `vars` giving each name's.
    pub fn eval(&self, vars: &HashMap<String, f64>) -> Result<f64, String> {
        Ok(match self {
            Expr::Lit(v) => *v,
            Expr::Var(n) => *vars.get(n).ok_or_else(|| format!("`{n}` has no value"))?,
            Expr::Unary(UnaryOp::Neg, a) => -a.eval(vars)?,
            Expr::Unary(UnaryOp::Not, a) => f64::from(a.eval(vars)? == 0.0),
            Expr::Binary(op, a, b) => super::program::binary(*op, a.eval(vars)?, b.eval(vars)?),
            Expr::Select(c, a, b) => {
                if c.eval(vars)? != 0.0 {
                    a.eval(vars)?
                } else {
                    b.eval(vars)?
                }
            }
            Expr::Call(f, args) => {
                let v: Vec<f64> = args
                    .iter()
                    .map(|a| a.eval(vars))
                    .collect::<Result<_, _>>()?;
                call(*f, &v)
            }
            Expr::Cast(t, a) => match t.kind {
                TypeKind::Float => a.eval(vars)?,
                TypeKind::Integer => a.eval(vars)?.trunc(),
            },
        })
    }
}

impl Body {
    /// Runs the body in `f64` with `args` (the inputs' and parameters' values): every name it
    /// assigns, with its last value. Integer casts and locals truncate toward zero as C's do;
    /// everything else is `f64` arithmetic, whatever types the kernel is launched with.
    ///
    /// ```
    /// use kusari_kernels::expr::{parse_body, Scope};
    /// let scope = Scope { inputs: vec!["x".into()], outputs: vec!["y".into()], ..Scope::default() };
    /// let body = parse_body("y = x * x; y += 1", &scope).unwrap();
    /// assert_eq!(body.eval(&[("x", 3.0)]).unwrap()["y"], 10.0);
    /// ```
    pub fn eval(&self, args: &[(&str, f64)]) -> Result<HashMap<String, f64>, String> {
        let mut vars: HashMap<String, f64> =
            args.iter().map(|(n, v)| (n.to_string(), *v)).collect();
        for s in &self.stmts {
            let mut v = s.value.eval(&vars)?;
            if let Some(t) = &s.local
                && t.kind == TypeKind::Integer
            {
                v = v.trunc();
            }
            vars.insert(s.target.clone(), v);
        }
        Ok(vars)
    }
}
