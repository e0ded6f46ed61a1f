//! The tree a body parses into: statements assigning expressions to outputs and locals.

use std::fmt::{self, Write};
use std::ops::Range;

/// A body: its statements, in order.
#[derive(Clone, Debug, PartialEq)]
pub struct Body {
    /// The statements.
    pub stmts: Vec<Stmt>,
}

/// One assignment, `target = value;` (a compound `z += e;` reads as `z = z + e;`).
#[derive(Clone, Debug, PartialEq)]
pub struct Stmt {
    /// The output or local assigned.
    pub target: String,
    /// The type of a local declared here (`T t = ..;`), `None` for an assignment.
    pub local: Option<CType>,
    /// The value.
    pub value: Expr,
    /// Where the statement is in the source.
    pub span: Range<usize>,
}

/// An expression.
#[derive(Clone, Debug, PartialEq)]
pub enum Expr {
    /// A number.
    Lit(f64),
    /// An input, a parameter, an output assigned before, or a local.
    Var(String),
    /// `-e`, `!e`.
    Unary(UnaryOp, Box<Expr>),
    /// `a op b`.
    Binary(BinaryOp, Box<Expr>, Box<Expr>),
    /// `c ? a : b`.
    Select(Box<Expr>, Box<Expr>, Box<Expr>),
    /// A math function.
    Call(Func, Vec<Expr>),
    /// `(type)e` or `type(e)`.
    Cast(CType, Box<Expr>),
}

/// A unary operator.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub enum UnaryOp {
    /// `-`
    Neg,
    /// `!`
    Not,
}

/// A binary operator.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub enum BinaryOp {
    /// `+`
    Add,
    /// `-`
    Sub,
    /// `*`
    Mul,
    /// `/`
    Div,
    /// `<`
    Lt,
    /// `<=`
    Le,
    /// `>`
    Gt,
    /// `>=`
    Ge,
    /// `==`
    Eq,
    /// `!=`
    Ne,
    /// `&&`
    And,
    /// `||`
    Or,
}

impl BinaryOp {
    /// Its C spelling.
    pub fn symbol(self) -> &'static str {
        match self {
            BinaryOp::Add => "+",
            BinaryOp::Sub => "-",
            BinaryOp::Mul => "*",
            BinaryOp::Div => "/",
            BinaryOp::Lt => "<",
            BinaryOp::Le => "<=",
            BinaryOp::Gt => ">",
            BinaryOp::Ge => ">=",
            BinaryOp::Eq => "==",
            BinaryOp::Ne => "!=",
            BinaryOp::And => "&&",
            BinaryOp::Or => "||",
        }
    }

    /// Its C precedence (higher binds tighter).
    pub(crate) fn precedence(self) -> u8 {
        match self {
            BinaryOp::Or => 1,
            BinaryOp::And => 2,
            BinaryOp::Eq | BinaryOp::Ne => 3,
            BinaryOp::Lt | BinaryOp::Le | BinaryOp::Gt | BinaryOp::Ge => 4,
            BinaryOp::Add | BinaryOp::Sub => 5,
            BinaryOp::Mul | BinaryOp::Div => 6,
        }
    }

    /// Whether its value is a truth value (0 or 1).
    pub fn is_logical(self) -> bool {
        self.precedence() <= 4
    }
}

/// The type of a cast or a local: a placeholder of the signature (`T`), or a C scalar type.
#[derive(Clone, Debug, PartialEq, Eq, Hash)]
pub struct CType {
    /// As written (`T`, `float`, `unsigned int`).
    pub name: String,
    /// What it holds.
    pub kind: TypeKind,
}

/// What a type holds, for differentiation: a placeholder counts as a floating type.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub enum TypeKind {
    /// A floating type, or a placeholder: values pass gradients.
    Float,
    /// An integer type (or `bool`): gradients stop there.
    Integer,
}

macro_rules! funcs {
    ($($variant:ident $arity:literal [$($name:literal),+] $doc:literal,)*) => {
        /// A math function CUDA and Rust both have.
        #[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
        pub enum Func {
            $(#[doc = $doc] $variant,)*
        }

        impl Func {
            /// Every function.
            pub const ALL: &'static [Func] = &[$(Func::$variant,)*];

            /// The function a name (CUDA's, with or without its `f` suffix) calls.
            pub fn from_name(name: &str) -> Option<Func> {
                match name {
                    $($($name)|+ => Some(Func::$variant),)*
                    _ => None,
                }
            }

            /// Its CUDA name (the overloaded one, for `float` and `double` alike).
            pub fn name(self) -> &'static str {
                match self {
                    $(Func::$variant => [$($name),+][0],)*
                }
            }

            /// How many arguments it takes.
            pub fn arity(self) -> usize {
                match self {
                    $(Func::$variant => $arity,)*
                }
            }
        }
    };
}

funcs! {
    Exp 1 ["exp", "expf"] "`exp(x)`",
    Exp2 1 ["exp2", "exp2f"] "`exp2(x)`",
    Expm1 1 ["expm1", "expm1f"] "`expm1(x)`, `exp(x) - 1` without cancellation",
    Log 1 ["log", "logf"] "`log(x)`",
    Log2 1 ["log2", "log2f"] "`log2(x)`",
    Log10 1 ["log10", "log10f"] "`log10(x)`",
    Log1p 1 ["log1p", "log1pf"] "`log1p(x)`, `log(1 + x)` without cancellation",
    Sqrt 1 ["sqrt", "sqrtf"] "`sqrt(x)`",
    Rsqrt 1 ["rsqrt", "rsqrtf"] "`rsqrt(x)`, `1 / sqrt(x)`",
    Cbrt 1 ["cbrt", "cbrtf"] "`cbrt(x)`",
    Sin 1 ["sin", "sinf"] "`sin(x)`",
    Cos 1 ["cos", "cosf"] "`cos(x)`",
    Tan 1 ["tan", "tanf"] "`tan(x)`",
    Asin 1 ["asin", "asinf"] "`asin(x)`",
    Acos 1 ["acos", "acosf"] "`acos(x)`",
    Atan 1 ["atan", "atanf"] "`atan(x)`",
    Atan2 2 ["atan2", "atan2f"] "`atan2(y, x)`",
    Sinh 1 ["sinh", "sinhf"] "`sinh(x)`",
    Cosh 1 ["cosh", "coshf"] "`cosh(x)`",
    Tanh 1 ["tanh", "tanhf"] "`tanh(x)`",
    Asinh 1 ["asinh", "asinhf"] "`asinh(x)`",
    Acosh 1 ["acosh", "acoshf"] "`acosh(x)`",
    Atanh 1 ["atanh", "atanhf"] "`atanh(x)`",
    Pow 2 ["pow", "powf"] "`pow(x, y)`",
    Hypot 2 ["hypot", "hypotf"] "`hypot(x, y)`",
    Fabs 1 ["fabs", "fabsf", "abs"] "`fabs(x)`",
    Fmax 2 ["fmax", "fmaxf", "max"] "`fmax(x, y)`",
    Fmin 2 ["fmin", "fminf", "min"] "`fmin(x, y)`",
    Copysign 2 ["copysign", "copysignf"] "`copysign(x, y)`: `x`'s magnitude with `y`'s sign",
    Erf 1 ["erf", "erff"] "`erf(x)`",
    Erfc 1 ["erfc", "erfcf"] "`erfc(x)`, `1 - erf(x)` without cancellation",
    Floor 1 ["floor", "floorf"] "`floor(x)`",
    Ceil 1 ["ceil", "ceilf"] "`ceil(x)`",
    Round 1 ["round", "roundf"] "`round(x)`, halves away from zero",
    Trunc 1 ["trunc", "truncf"] "`trunc(x)`",
}

impl fmt::Display for Expr {
    /// The expression as C, with the parentheses its precedence needs.
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(&self.to_c(None))
    }
}

impl Expr {
    /// The expression with every name replaced by what `f` gives for it (an input by the
    /// expression that computes it, a parameter by its value).
    ///
    /// ```
    /// use kusari_kernels::expr::Expr;
    /// let e = Expr::Call(kusari_kernels::expr::Func::Exp, vec![Expr::Var("x".into())]);
    /// let e = e.map_vars(&mut |n| Expr::Var(format!("a_{n}")));
    /// assert_eq!(e.to_c(None), "exp(a_x)");
    /// ```
    pub fn map_vars(&self, f: &mut impl FnMut(&str) -> Expr) -> Expr {
        self.rewrite(f, &|t| t.clone())
    }

    /// [`map_vars`](Self::map_vars), with the type of every cast replaced by what `ty` gives.
    pub fn rewrite(&self, f: &mut dyn FnMut(&str) -> Expr, ty: &dyn Fn(&CType) -> CType) -> Expr {
        let mut b = |e: &Expr| Box::new(e.rewrite(&mut *f, ty));
        match self {
            Expr::Lit(v) => Expr::Lit(*v),
            Expr::Var(n) => f(n),
            Expr::Unary(op, e) => Expr::Unary(*op, b(e)),
            Expr::Binary(op, x, y) => {
                let x = b(x);
                Expr::Binary(*op, x, b(y))
            }
            Expr::Select(c, x, y) => {
                let (c, x) = (b(c), b(x));
                Expr::Select(c, x, b(y))
            }
            Expr::Call(func, args) => Expr::Call(*func, args.iter().map(|a| *b(a)).collect()),
            Expr::Cast(t, e) => Expr::Cast(ty(t), b(e)),
        }
    }

    /// The expression as C; `literal_type`, when given, wraps every literal that is not a whole
    /// number, and every literal argument of a function, in a functional cast (`T(0.5)`), so
    /// that a `float` computation stays in `float` and overloads resolve.
    pub fn to_c(&self, literal_type: Option<&str>) -> String {
        let mut out = String::new();
        self.write_c(&mut out, 0, literal_type);
        out
    }

    fn write_c(&self, out: &mut String, outer: u8, lit: Option<&str>) {
        // Precedences: ?: 0, binary 1-6, unary and casts 7, primary 8.
        match self {
            Expr::Lit(v) => {
                let text = literal(*v);
                let whole = v.fract() == 0.0 && v.abs() < 1e15;
                match lit {
                    Some(t) if !whole => {
                        let _ = write!(out, "{t}({text})");
                    }
                    _ if *v < 0.0 && outer >= 7 => {
                        let _ = write!(out, "({text})");
                    }
                    _ => out.push_str(&text),
                }
            }
            Expr::Var(name) => out.push_str(name),
            Expr::Unary(op, e) => {
                let paren = outer > 7;
                if paren {
                    out.push('(');
                }
                out.push(match op {
                    UnaryOp::Neg => '-',
                    UnaryOp::Not => '!',
                });
                // `- -x` must not read as `--x`.
                if matches!(**e, Expr::Unary(UnaryOp::Neg, _))
                    || matches!(**e, Expr::Lit(v) if v < 0.0)
                {
                    out.push('(');
                    e.write_c(out, 0, lit);
                    out.push(')');
                } else {
                    e.write_c(out, 7, lit);
                }
                if paren {
                    out.push(')');
                }
            }
            Expr::Binary(op, a, b) => {
                let p = op.precedence();
                let paren = outer > p;
                if paren {
                    out.push('(');
                }
                a.write_c(out, p, lit);
                let _ = write!(out, " {} ", op.symbol());
                // Left-associative: the right operand of the same precedence needs parentheses.
                b.write_c(out, p + 1, lit);
                if paren {
                    out.push(')');
                }
            }
            Expr::Select(c, a, b) => {
                let paren = outer > 0;
                if paren {
                    out.push('(');
                }
                c.write_c(out, 1, lit);
                out.push_str(" ? ");
                a.write_c(out, 0, lit);
                out.push_str(" : ");
                b.write_c(out, 0, lit);
                if paren {
                    out.push(')');
                }
            }
            Expr::Call(func, args) => {
                out.push_str(func.name());
                out.push('(');
                for (i, a) in args.iter().enumerate() {
                    if i > 0 {
                        out.push_str(", ");
                    }
                    // A whole number too: `copysign(1, x)` has no overload for an `int`.
                    match (a, lit) {
                        (Expr::Lit(v), Some(t)) => {
                            let _ = write!(out, "{t}({})", literal(*v));
                        }
                        _ => a.write_c(out, 0, lit),
                    }
                }
                out.push(')');
            }
            Expr::Cast(t, e) => {
                if t.name.contains(' ') {
                    // A functional cast takes one word: write a C cast.
                    let _ = write!(out, "(({})(", t.name);
                    e.write_c(out, 0, lit);
                    out.push_str("))");
                } else {
                    let _ = write!(out, "{}(", t.name);
                    e.write_c(out, 0, lit);
                    out.push(')');
                }
            }
        }
    }
}

/// A number as C reads it back exactly: integers without a point, others in Rust's shortest
/// round-trip form (`0.1`, `1e-300`), infinities as `INFINITY`.
pub(crate) fn literal(v: f64) -> String {
    if v.is_infinite() {
        return if v > 0.0 { "INFINITY" } else { "-INFINITY" }.to_string();
    }
    if v.is_nan() {
        return "NAN".to_string();
    }
    if v.fract() == 0.0 && v.abs() < 1e15 {
        return format!("{}", v as i64);
    }
    let s = format!("{v:?}");
    if s.contains(['.', 'e']) {
        s
    } else {
        format!("{s}.0")
    }
}

impl Body {
    /// The body as C statements, one a line, each ending in `;` (see [`Expr::to_c`] for
    /// `literal_type`).
    pub fn to_c(&self, literal_type: Option<&str>) -> String {
        let mut out = String::new();
        for s in &self.stmts {
            if let Some(t) = &s.local {
                let _ = write!(out, "{} ", t.name);
            }
            let _ = writeln!(out, "{} = {};", s.target, s.value.to_c(literal_type));
        }
        out
    }
}
