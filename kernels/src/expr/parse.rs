//! The parser: a body's tokens into a [`Body`], every name resolved against the kernel's
//! signature ([`Scope`]) and every construct outside the language refused at its text.

use std::ops::Range;

use super::ExprError;
use super::ast::{BinaryOp, Body, CType, Expr, Func, Stmt, TypeKind, UnaryOp};
use super::lex::{Tok, Token, lex};
use crate::signature::{ElementwiseSignature, ParamType};

/// The names a body may use: the signature's element inputs, scalar parameters and outputs,
/// and its type placeholders.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct Scope {
    /// Element inputs (read).
    pub inputs: Vec<String>,
    /// Scalar parameters (read).
    pub params: Vec<String>,
    /// Outputs (assigned, then read).
    pub outputs: Vec<String>,
    /// Raw inputs and outputs, which a body indexes and so cannot use here.
    pub raw: Vec<String>,
    /// Type placeholders (`T`).
    pub placeholders: Vec<char>,
}

impl Scope {
    /// The scope of a kernel with signature `sig`.
    pub fn of(sig: &ElementwiseSignature) -> Scope {
        let mut scope = Scope::default();
        for p in &sig.inputs {
            if p.raw {
                scope.raw.push(p.name.clone());
            } else {
                scope.inputs.push(p.name.clone());
            }
        }
        for p in &sig.outputs {
            if p.raw {
                scope.raw.push(p.name.clone());
            } else {
                scope.outputs.push(p.name.clone());
            }
        }
        for p in &sig.params {
            scope.params.push(p.name.clone());
        }
        for p in sig.inputs.iter().chain(&sig.outputs).chain(&sig.params) {
            if let ParamType::Placeholder(c) = p.ty
                && !scope.placeholders.contains(&c)
            {
                scope.placeholders.push(c);
            }
        }
        scope
    }

    fn is_signature_name(&self, name: &str) -> bool {
        self.inputs
            .iter()
            .chain(&self.params)
            .chain(&self.outputs)
            .chain(&self.raw)
            .any(|n| n == name)
    }
}

/// The words of C's scalar types.
const TYPE_WORDS: &[&str] = &[
    "float", "double", "half", "int", "unsigned", "signed", "long", "short", "char", "bool",
    "size_t", "int8_t", "int16_t", "int32_t", "int64_t", "uint8_t", "uint16_t", "uint32_t",
    "uint64_t",
];

/// Statements and constructs that are C but not the expression language, with why.
const REFUSED_WORDS: &[(&str, &str)] = &[
    ("if", "a branch (`if`): write `c ? a : b`"),
    ("else", "a branch (`else`): write `c ? a : b`"),
    ("for", "a loop (`for`) cannot be differentiated"),
    ("while", "a loop (`while`) cannot be differentiated"),
    ("do", "a loop (`do`) cannot be differentiated"),
    ("switch", "a branch (`switch`): write `c ? a : b`"),
    ("return", "`return`: assign the outputs instead"),
    ("goto", "`goto`"),
    ("break", "`break`"),
    ("continue", "`continue`"),
    ("static_cast", "`static_cast`: write `(T)x` or `T(x)`"),
    ("sizeof", "`sizeof`"),
    ("__syncthreads", "a barrier"),
    ("atomicAdd", "an atomic operation"),
];

struct Parser<'a> {
    src: &'a str,
    toks: Vec<Token>,
    at: usize,
    scope: &'a Scope,
    /// Outputs assigned so far, and locals declared so far (name, type).
    assigned: Vec<String>,
    locals: Vec<(String, CType)>,
}

/// Parses `src`, an elementwise body, with the names of `scope`: a list of assignments
/// `[type] name = expression;` (or `+=`, `-=`, `*=`, `/=`; the last `;` may be left out) to
/// the outputs and to locals, of expressions made of numbers, the inputs, parameters, outputs
/// assigned before and locals, `+ - * /`, unary `-`, comparisons, `&& || !`, `?:`, casts to
/// the signature's placeholders or to C scalar types, and the math functions of [`Func`]. A
/// construct outside it is an [`ExprError`] at its text saying what it is; so are a name that
/// is none of those, an output never assigned, and a local declared twice.
///
/// ```
/// use kusari_kernels::expr::{parse_body, Scope};
/// let scope = Scope {
///     inputs: vec!["x".into()],
///     outputs: vec!["y".into()],
///     placeholders: vec!['T'],
///     ..Scope::default()
/// };
/// let body = parse_body("T e = exp(-x); y = x / (1 + e)", &scope).unwrap();
/// assert_eq!(body.to_c(None), "T e = exp(-x);\ny = x / (1 + e);\n");
/// let e = parse_body("for (int k = 0; k < 3; k++) y = x;", &scope).unwrap_err();
/// assert_eq!(e.message, "a loop (`for`) cannot be differentiated, and so is not in the expression language");
/// assert_eq!(e.span, 0..3);
/// ```
pub fn parse_body(src: &str, scope: &Scope) -> Result<Body, ExprError> {
    let mut p = Parser {
        src,
        toks: lex(src)?,
        at: 0,
        scope,
        assigned: Vec::new(),
        locals: Vec::new(),
    };
    let mut stmts = Vec::new();
    while p.at < p.toks.len() {
        if p.eat(";") {
            continue;
        }
        stmts.push(p.stmt()?);
    }
    if let Some(missing) = scope.outputs.iter().find(|o| !p.assigned.contains(o)) {
        return Err(ExprError::new(
            src.len()..src.len(),
            format!("the output `{missing}` is never assigned"),
        ));
    }
    Ok(Body { stmts })
}

/// The names an expression reads that are not math functions, C type words or the
/// placeholder `T`, in order of first use: what a formula reads from its op (the inputs and the
/// scalar fields).
///
/// ```
/// use kusari_kernels::expr::free_names;
/// assert_eq!(free_names("fmax(x, 0) * slope + (T)x").unwrap(), ["x", "slope"]);
/// ```
pub fn free_names(src: &str) -> Result<Vec<String>, ExprError> {
    let toks = lex(src)?;
    let mut out: Vec<String> = Vec::new();
    for (k, t) in toks.iter().enumerate() {
        let Tok::Ident(w) = &t.tok else { continue };
        let called = matches!(
            toks.get(k + 1),
            Some(Token {
                tok: Tok::Punct("("),
                ..
            })
        );
        if called && Func::from_name(w).is_some() || TYPE_WORDS.contains(&w.as_str()) || w == "T" {
            continue;
        }
        if !out.contains(w) {
            out.push(w.clone());
        }
    }
    Ok(out)
}

impl Parser<'_> {
    fn peek(&self) -> Option<&Tok> {
        self.toks.get(self.at).map(|t| &t.tok)
    }

    fn peek_at(&self, k: usize) -> Option<&Tok> {
        self.toks.get(self.at + k).map(|t| &t.tok)
    }

    fn span(&self) -> Range<usize> {
        match self.toks.get(self.at) {
            Some(t) => t.span.clone(),
            None => self.src.len()..self.src.len(),
        }
    }

    fn is(&self, punct: &str) -> bool {
        matches!(self.peek(), Some(Tok::Punct(p)) if *p == punct)
    }

    fn eat(&mut self, punct: &str) -> bool {
        let yes = self.is(punct);
        if yes {
            self.at += 1;
        }
        yes
    }

    fn expect(&mut self, punct: &str, what: &str) -> Result<(), ExprError> {
        if self.eat(punct) {
            return Ok(());
        }
        let found = match self.peek() {
            None => "the end of the body".to_string(),
            Some(_) => format!("`{}`", &self.src[self.span()]),
        };
        Err(ExprError::new(
            self.span(),
            format!("expected `{punct}` {what}, found {found}"),
        ))
    }

    fn ident(&self) -> Option<&str> {
        match self.peek() {
            Some(Tok::Ident(w)) => Some(w),
            _ => None,
        }
    }

    /// A refused word at the cursor, as an error.
    fn refuse_word(&self, w: &str) -> Option<ExprError> {
        REFUSED_WORDS.iter().find(|(k, _)| *k == w).map(|(_, why)| {
            let why = if why.contains("cannot be differentiated") {
                format!("{why}, and so is not in the expression language")
            } else {
                format!("{why} is not in the expression language")
            };
            ExprError::new(self.span(), why)
        })
    }

    fn is_type_word(&self, w: &str) -> bool {
        TYPE_WORDS.contains(&w)
            || (w.len() == 1
                && self
                    .scope
                    .placeholders
                    .contains(&w.chars().next().expect("one char")))
    }

    /// The type words at the cursor (`unsigned int`, `T`), as a type, if there are any.
    fn type_words(&mut self) -> Option<CType> {
        let start = self.at;
        let mut words = Vec::new();
        while let Some(w) = self.ident() {
            if !self.is_type_word(w) {
                break;
            }
            words.push(w.to_string());
            self.at += 1;
        }
        if words.is_empty() {
            self.at = start;
            return None;
        }
        let integer = !words
            .iter()
            .any(|w| matches!(w.as_str(), "float" | "double" | "half") || w.len() == 1);
        Some(CType {
            name: words.join(" "),
            kind: if integer {
                TypeKind::Integer
            } else {
                TypeKind::Float
            },
        })
    }

    fn stmt(&mut self) -> Result<Stmt, ExprError> {
        let start = self.span().start;
        if let Some(w) = self.ident()
            && let Some(e) = self.refuse_word(w)
        {
            return Err(e);
        }
        let is_const = self.ident() == Some("const");
        if is_const {
            self.at += 1;
        }
        // A declaration's type: words followed by the name (`T t`, `unsigned int k`).
        let decl = match self.peek_at(1) {
            Some(Tok::Ident(_)) => self.type_words(),
            _ if is_const => self.type_words(),
            _ => None,
        };
        if is_const && decl.is_none() {
            return Err(ExprError::new(self.span(), "`const` without a type"));
        }
        let target_span = self.span();
        let Some(target) = self.ident().map(str::to_string) else {
            return Err(ExprError::new(
                self.span(),
                "a statement is an assignment: `name = expression;`",
            ));
        };
        self.at += 1;
        let op = match self.peek() {
            Some(Tok::Punct(p @ ("=" | "+=" | "-=" | "*=" | "/="))) => *p,
            _ => {
                let what = if matches!(self.peek(), Some(Tok::Punct("("))) {
                    "a call on its own does nothing: a statement is an assignment, \
                     `name = expression;`"
                } else {
                    "a statement is an assignment: `name = expression;`"
                };
                return Err(ExprError::new(target_span, what));
            }
        };
        let op_span = self.span();
        self.at += 1;
        let known_local = self.locals.iter().any(|(n, _)| *n == target);
        match &decl {
            Some(_) if self.scope.is_signature_name(&target) => {
                return Err(ExprError::new(
                    target_span,
                    format!("the local `{target}` has the name of an argument of the kernel"),
                ));
            }
            Some(_) if known_local => {
                return Err(ExprError::new(
                    target_span,
                    format!("the local `{target}` is declared twice"),
                ));
            }
            Some(_) if op != "=" => {
                return Err(ExprError::new(
                    op_span,
                    format!("a declaration assigns with `=`, not `{op}`"),
                ));
            }
            Some(_) => {}
            None if self.scope.outputs.contains(&target) || known_local => {}
            None if self.scope.inputs.contains(&target) || self.scope.params.contains(&target) => {
                return Err(ExprError::new(
                    target_span,
                    format!(
                        "`{target}` is an input of the kernel, which a body reads but does not assign"
                    ),
                ));
            }
            None => return Err(self.unknown(&target, target_span)),
        }
        let value = self.expr()?;
        let value = match op {
            "=" => value,
            compound => {
                if decl.is_none() && !self.readable(&target) {
                    return Err(ExprError::new(
                        target_span,
                        format!("`{target}` is read by `{compound}` before it is assigned"),
                    ));
                }
                let bin = match compound {
                    "+=" => BinaryOp::Add,
                    "-=" => BinaryOp::Sub,
                    "*=" => BinaryOp::Mul,
                    _ => BinaryOp::Div,
                };
                Expr::Binary(bin, Box::new(Expr::Var(target.clone())), Box::new(value))
            }
        };
        if !self.eat(";") && self.at < self.toks.len() {
            self.expect(";", "after the statement")?;
        }
        let end = self.toks[self.at - 1].span.end;
        if let Some(t) = &decl {
            self.locals.push((target.clone(), t.clone()));
        } else if !self.assigned.contains(&target) && self.scope.outputs.contains(&target) {
            self.assigned.push(target.clone());
        }
        Ok(Stmt {
            target,
            local: decl,
            value,
            span: start..end,
        })
    }

    /// Whether `name` can be read here.
    fn readable(&self, name: &str) -> bool {
        self.scope.inputs.iter().any(|n| n == name)
            || self.scope.params.iter().any(|n| n == name)
            || self.assigned.iter().any(|n| n == name)
            || self.locals.iter().any(|(n, _)| n == name)
    }

    fn unknown(&self, name: &str, span: Range<usize>) -> ExprError {
        let msg = if self.scope.raw.iter().any(|n| n == name) {
            format!(
                "`{name}` is a raw array, which a body indexes; indexing cannot be differentiated"
            )
        } else if self.scope.outputs.iter().any(|n| n == name) {
            format!("the output `{name}` is read before it is assigned")
        } else if name == "i" || name == "_ind" {
            format!("`{name}`, the element's index, cannot be differentiated")
        } else {
            format!(
                "`{name}` is not an input, a parameter, an output assigned before or a local of \
                 the body"
            )
        };
        ExprError::new(span, msg)
    }

    fn expr(&mut self) -> Result<Expr, ExprError> {
        let cond = self.binary(1)?;
        if !self.eat("?") {
            return Ok(cond);
        }
        let a = self.expr()?;
        self.expect(":", "in `c ? a : b`")?;
        let b = self.expr()?;
        Ok(Expr::Select(Box::new(cond), Box::new(a), Box::new(b)))
    }

    fn binary_op(&self) -> Option<BinaryOp> {
        let Some(Tok::Punct(p)) = self.peek() else {
            return None;
        };
        Some(match *p {
            "+" => BinaryOp::Add,
            "-" => BinaryOp::Sub,
            "*" => BinaryOp::Mul,
            "/" => BinaryOp::Div,
            "<" => BinaryOp::Lt,
            "<=" => BinaryOp::Le,
            ">" => BinaryOp::Gt,
            ">=" => BinaryOp::Ge,
            "==" => BinaryOp::Eq,
            "!=" => BinaryOp::Ne,
            "&&" => BinaryOp::And,
            "||" => BinaryOp::Or,
            _ => return None,
        })
    }

    /// Operators of precedence `min` and above, left-associative.
    fn binary(&mut self, min: u8) -> Result<Expr, ExprError> {
        let mut lhs = self.unary()?;
        while let Some(op) = self.binary_op().filter(|op| op.precedence() >= min) {
            self.at += 1;
            let rhs = self.binary(op.precedence() + 1)?;
            lhs = Expr::Binary(op, Box::new(lhs), Box::new(rhs));
        }
        Ok(lhs)
    }

    fn unary(&mut self) -> Result<Expr, ExprError> {
        if self.eat("-") {
            return Ok(match self.unary()? {
                Expr::Lit(v) => Expr::Lit(-v),
                e => Expr::Unary(UnaryOp::Neg, Box::new(e)),
            });
        }
        if self.eat("+") {
            return self.unary();
        }
        if self.eat("!") {
            return Ok(Expr::Unary(UnaryOp::Not, Box::new(self.unary()?)));
        }
        // A C cast: `(` type `)`.
        if self.is("(") {
            let save = self.at;
            self.at += 1;
            if let Some(t) = self.type_words()
                && self.eat(")")
            {
                return Ok(Expr::Cast(t, Box::new(self.unary()?)));
            }
            self.at = save;
        }
        self.primary()
    }

    fn primary(&mut self) -> Result<Expr, ExprError> {
        let span = self.span();
        match self.peek().cloned() {
            Some(Tok::Num(v, _)) => {
                self.at += 1;
                Ok(Expr::Lit(v))
            }
            Some(Tok::Punct("(")) => {
                self.at += 1;
                let e = self.expr()?;
                self.expect(")", "closing `(`")?;
                Ok(e)
            }
            Some(Tok::Ident(w)) => {
                if let Some(e) = self.refuse_word(&w) {
                    return Err(e);
                }
                match w.as_str() {
                    "true" => {
                        self.at += 1;
                        return Ok(Expr::Lit(1.0));
                    }
                    "false" => {
                        self.at += 1;
                        return Ok(Expr::Lit(0.0));
                    }
                    _ => {}
                }
                // A functional cast: `T(x)`, `float(x)`.
                if self.is_type_word(&w) && matches!(self.peek_at(1), Some(Tok::Punct("("))) {
                    let t = self.type_words().expect("a type word");
                    self.expect("(", "after the type")?;
                    let e = self.expr()?;
                    self.expect(")", "closing the cast")?;
                    return Ok(Expr::Cast(t, Box::new(e)));
                }
                self.at += 1;
                if self.is("(") {
                    return self.call(&w, span);
                }
                if !self.readable(&w) {
                    return Err(self.unknown(&w, span));
                }
                Ok(Expr::Var(w))
            }
            Some(Tok::Punct(p)) => Err(ExprError::new(
                span,
                format!("expected an expression, found `{p}`"),
            )),
            None => Err(ExprError::new(
                span,
                "expected an expression, found the end of the body",
            )),
        }
    }

    fn call(&mut self, name: &str, span: Range<usize>) -> Result<Expr, ExprError> {
        let Some(func) = Func::from_name(name) else {
            let names: Vec<&str> = Func::ALL.iter().map(|f| f.name()).collect();
            return Err(ExprError::new(
                span,
                format!(
                    "`{name}` is not a function of the expression language; its functions: {}",
                    names.join(", ")
                ),
            ));
        };
        self.expect("(", "after the function")?;
        let mut args = Vec::new();
        if !self.eat(")") {
            loop {
                args.push(self.expr()?);
                if self.eat(")") {
                    break;
                }
                self.expect(",", "between arguments")?;
            }
        }
        if args.len() != func.arity() {
            return Err(ExprError::new(
                span,
                format!(
                    "`{name}` takes {} argument(s), not {}",
                    func.arity(),
                    args.len()
                ),
            ));
        }
        Ok(Expr::Call(func, args))
    }
}
