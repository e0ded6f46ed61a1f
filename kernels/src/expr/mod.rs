//! The expression language of elementwise bodies: the subset of C that elementwise ops are made
//! of, read into a tree ([`parse_body`]) so that one formula can be differentiated
//! ([`derive`](fn@derive)), evaluated on the host ([`Body::eval`]) and written back as CUDA
//! ([`Body::to_c`]).
//!
//! A body in the language is a list of assignments, `[type] name = expression;` (or `+=`, `-=`,
//! `*=`, `/=`; the last `;` may be left out, as CuPy allows), to the kernel's outputs and to
//! locals it declares. Expressions are made of numbers, the inputs, scalar parameters, outputs
//! already assigned and locals, `+ - * /`, unary `-` and `+`, comparisons, `&& || !`, `c ? a :
//! b`, casts (`(T)x`, `T(x)`, `(unsigned int)x`) and the math functions CUDA and Rust both have
//! ([`Func`]: `exp`, `log`, `sqrt`, `rsqrt`, `sin`, ..., `pow`, `fabs`, `fmax`, `fmin`,
//! `erf`, `floor`, `copysign`, ...; CUDA's `f`-suffixed names too). What a body may do beyond
//! it — loops, branches, indexing, pointers, atomics, barriers — still compiles as a kernel
//! body, but is not in the language: [`parse_body`] says which construct, at its text.
//!
//! One concept a file: `lex` (the tokens), `ast` (the tree, and its C), `parse` (tokens into
//! the tree, names resolved against the signature's [`Scope`]), `eval` (the tree in `f64`),
//! `graph` (the tree as a graph of shared values, with the algebra that keeps derivatives
//! small), `derive` (reverse-mode differentiation into a new body), `program` (the body as
//! straight-line instructions, for a host executor) and `op` (a signature and a body checked
//! together as an op, and its backward as a second op).

mod ast;
mod derive;
mod eval;
mod graph;
mod lex;
mod op;
mod parse;
mod program;

use std::fmt;
use std::ops::Range;

pub use ast::{BinaryOp, Body, CType, Expr, Func, Stmt, TypeKind, UnaryOp};
pub use derive::{Derivative, derive};
pub use eval::{call, erf};
pub use op::{ArgSource, OpBackward, OpBody, OpError};
pub use parse::{Scope, free_names, parse_body};
pub use program::{Instr, Program, binary};

/// A body outside the expression language, or a name it cannot resolve: what, and where.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct ExprError {
    /// What is wrong.
    pub message: String,
    /// Byte range of the offending text in the body.
    pub span: Range<usize>,
}

impl ExprError {
    pub(crate) fn new(span: Range<usize>, message: impl Into<String>) -> Self {
        ExprError {
            message: message.into(),
            span,
        }
    }

    /// The message followed by the line of `body` with the offending text underlined.
    ///
    /// ```
    /// use kusari_kernels::expr::{parse_body, Scope};
    /// let scope = Scope { inputs: vec!["x".into()], outputs: vec!["y".into()], ..Scope::default() };
    /// let e = parse_body("y = x[0] * 2;", &scope).unwrap_err();
    /// let shown = e.render("y = x[0] * 2;");
    /// assert!(shown.starts_with("indexing (`[`)"), "{shown}");
    /// assert!(shown.contains("y = x[0] * 2;\n") && shown.ends_with('^'), "{shown}");
    /// ```
    pub fn render(&self, body: &str) -> String {
        format!(
            "{}\n{}",
            self.message,
            crate::signature::underline(body, self.span.clone())
        )
    }
}

impl fmt::Display for ExprError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(&self.message)
    }
}

impl std::error::Error for ExprError {}
