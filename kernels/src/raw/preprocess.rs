//! The C preprocessor, as far as a kernel's declaration needs it: what the compiler sees of a
//! raw source once its lines are spliced, its comments removed, its directives obeyed and its
//! macros expanded, as tokens for the declaration parser ([`super::parse`]).
//!
//! It follows the C/C++ preprocessor: backslash-newline splicing; `#define` of object-like and
//! function-like macros (variadic ones with `__VA_ARGS__`, `#` stringizing and `##` pasting
//! included), `#undef`; `#if`, `#ifdef`, `#ifndef`, `#elif`, `#else`, `#endif` with integer
//! constant expressions (`defined`, every C operator, an undefined name as 0, C++'s `true` and
//! `false`); rescanning with each macro's own name hidden inside its expansion. Other
//! directives (`#include`, `#pragma`, `#error`, `#line`) produce nothing.
//!
//! What it cannot know, it says rather than guesses. NVRTC defines `__CUDA_ARCH__` per device
//! (and `__CUDACC_VER_*__` per version), a quoted `#include "file.h"` may define any name, and
//! a condition on those could go either way. Such a condition is *uncertain*: each of its
//! branches is read (a kernel found there is read too), and every token of them, and of any
//! macro defined there, carries the reason, so that the parser can report a declaration that
//! depends on it instead of trusting it. The names NVRTC defines the same way for every device
//! are defined as there: `__CUDACC__` and `__CUDACC_RTC__` are 1, `__cplusplus` is 201703
//! (NVRTC's C++17), `__NVCC__` is not defined. A system header (`#include <cuda_fp16.h>`)
//! defines no name of the user's; a quoted one may define any, so after it a condition on a
//! name kusari does not know is uncertain.

use std::collections::HashMap;
use std::rc::Rc;

/// A preprocessing token.
#[derive(Clone, Debug, PartialEq, Eq)]
pub(super) enum PpKind {
    /// An identifier or keyword.
    Ident(String),
    /// A number, as written (`0x1Fu`, `1.5f`).
    Number(String),
    /// A string literal's contents (escapes kept as written).
    Str(String),
    /// A character literal's contents.
    Char(String),
    /// A punctuator (`(`, `::`, `&&`, `##`, ...).
    Punct(&'static str),
}

/// A token with what decides whether the compiler sees it.
#[derive(Clone, Debug)]
pub(super) struct PpToken {
    /// The token.
    pub kind: PpKind,
    /// Why it may not be what the compiler sees (a condition kusari cannot decide), if so.
    pub uncertain: Option<Rc<str>>,
    /// Names of the macros whose expansion produced it (not expanded again within it).
    hidden: Rc<Vec<String>>,
    /// Whether whitespace preceded it (for `#` stringizing).
    space_before: bool,
}

impl PpToken {
    fn new(kind: PpKind, space_before: bool) -> Self {
        PpToken {
            kind,
            uncertain: None,
            hidden: Rc::default(),
            space_before,
        }
    }

    fn ident(&self) -> Option<&str> {
        match &self.kind {
            PpKind::Ident(s) => Some(s),
            _ => None,
        }
    }

    fn is(&self, p: &str) -> bool {
        matches!(self.kind, PpKind::Punct(q) if q == p)
    }

    fn spelling(&self) -> String {
        match &self.kind {
            PpKind::Ident(s) | PpKind::Number(s) => s.clone(),
            PpKind::Str(s) => format!("\"{s}\""),
            PpKind::Char(s) => format!("'{s}'"),
            PpKind::Punct(p) => (*p).to_string(),
        }
    }
}

/// C's punctuators, longest first.
const PUNCTS: &[&str] = &[
    "%:%:", "...", "<<=", ">>=", "->", "++", "--", "<<", ">>", "<=", ">=", "==", "!=", "&&", "||",
    "*=", "/=", "%=", "+=", "-=", "&=", "^=", "|=", "##", "::", "(", ")", "[", "]", "{", "}", ".",
    "&", "*", "+", "-", "~", "!", "/", "%", "<", ">", "^", "|", "?", ":", ";", "=", ",", "#", "@",
    "$", "\\", "`",
];

fn leak_punct(p: &str) -> &'static str {
    PUNCTS.iter().find(|&&q| q == p).copied().unwrap_or("?")
}

/// One logical line: a directive (the tokens after its `#`) or text.
struct Line {
    directive: bool,
    tokens: Vec<PpToken>,
}

/// The source's logical lines: backslash-newlines spliced, comments replaced by a space.
fn lines(source: &str) -> Vec<Line> {
    let spliced = source.replace("\\\r\n", "").replace("\\\n", "");
    let chars: Vec<char> = spliced.chars().collect();
    let mut out = Vec::new();
    let mut line = Line {
        directive: false,
        tokens: Vec::new(),
    };
    let mut at_start = true;
    let mut space = false;
    let mut i = 0;
    while i < chars.len() {
        let c = chars[i];
        if c == '\n' {
            out.push(std::mem::replace(
                &mut line,
                Line {
                    directive: false,
                    tokens: Vec::new(),
                },
            ));
            at_start = true;
            space = false;
            i += 1;
            continue;
        }
        if c.is_whitespace() {
            space = true;
            i += 1;
            continue;
        }
        if c == '/' && chars.get(i + 1) == Some(&'/') {
            while i < chars.len() && chars[i] != '\n' {
                i += 1;
            }
            continue;
        }
        if c == '/' && chars.get(i + 1) == Some(&'*') {
            i += 2;
            while i < chars.len() && !(chars[i] == '*' && chars.get(i + 1) == Some(&'/')) {
                i += 1;
            }
            i += 2;
            space = true;
            continue;
        }
        let start_of_line = std::mem::replace(&mut at_start, false);
        let space_before = std::mem::replace(&mut space, false);
        if c == '#' && start_of_line {
            line.directive = true;
            i += 1;
            continue;
        }
        let kind = if c == '"' || c == '\'' {
            let mut s = String::new();
            i += 1;
            while i < chars.len() && chars[i] != c && chars[i] != '\n' {
                if chars[i] == '\\' && i + 1 < chars.len() {
                    s.push('\\');
                    i += 1;
                }
                s.push(chars[i]);
                i += 1;
            }
            i += 1;
            if c == '"' {
                PpKind::Str(s)
            } else {
                PpKind::Char(s)
            }
        } else if c.is_ascii_digit()
            || (c == '.' && chars.get(i + 1).is_some_and(char::is_ascii_digit))
        {
            let start = i;
            while i < chars.len()
                && (chars[i].is_alphanumeric()
                    || chars[i] == '.'
                    || chars[i] == '_'
                    || chars[i] == '\''
                    || (matches!(chars[i], '+' | '-')
                        && matches!(chars[i - 1], 'e' | 'E' | 'p' | 'P')))
            {
                i += 1;
            }
            PpKind::Number(chars[start..i].iter().collect())
        } else if c.is_alphanumeric() || c == '_' {
            let start = i;
            while i < chars.len() && (chars[i].is_alphanumeric() || chars[i] == '_') {
                i += 1;
            }
            PpKind::Ident(chars[start..i].iter().collect())
        } else {
            let rest: String = chars[i..(i + 4).min(chars.len())].iter().collect();
            let p = PUNCTS
                .iter()
                .find(|p| rest.starts_with(**p))
                .copied()
                .unwrap_or("?");
            i += p.chars().count().max(1);
            PpKind::Punct(p)
        };
        line.tokens.push(PpToken::new(kind, space_before));
    }
    out.push(line);
    out
}

/// A macro's definition.
#[derive(Clone, Debug)]
struct Macro {
    /// `None` for an object-like macro; the parameter names of a function-like one.
    params: Option<Vec<String>>,
    /// Whether the last parameter is `...` (`__VA_ARGS__`).
    variadic: bool,
    body: Vec<PpToken>,
    /// Why the definition itself is uncertain (made under an uncertain condition).
    uncertain: Option<Rc<str>>,
}

/// A conditional group being read.
struct Group {
    /// Whether the group's enclosing text is read at all.
    outer_active: bool,
    /// Whether a branch was certainly taken (later ones are skipped).
    resolved: bool,
    /// Whether the current branch is read.
    active: bool,
    /// Why the current branch may not be what the compiler reads.
    uncertain: Option<Rc<str>>,
    /// Why an earlier branch was uncertain (so later branches are too).
    earlier: Option<Rc<str>>,
}

/// Names whose value depends on the device or the compiler version: conditions on them are
/// uncertain.
fn compiler_dependent(name: &str) -> bool {
    name == "__CUDA_ARCH__"
        || name.starts_with("__CUDA_ARCH_")
        || name.starts_with("__CUDACC_VER")
        || name.starts_with("__NVCC_VER")
        || name == "__CUDA_API_VERSION"
        || name.starts_with("CUDART_VERSION")
        || name.starts_with("__has_include")
}

/// Object-like macros NVRTC predefines with the same value for every device.
const PREDEFINED: &[(&str, &str)] = &[
    ("__CUDACC__", "1"),
    ("__CUDACC_RTC__", "1"),
    ("__cplusplus", "201703L"),
];

/// Expansions of one source stop here: a guard against macros that grow without end.
const MAX_EXPANSIONS: usize = 100_000;

/// The preprocessor's state over one source.
struct Pp {
    macros: HashMap<String, Macro>,
    groups: Vec<Group>,
    /// Why an undefined name may be defined after all (a quoted `#include` was skipped).
    unknown_names: Option<Rc<str>>,
    expansions: usize,
    /// Why expansion stopped early, if it did.
    gave_up: Option<Rc<str>>,
}

/// The tokens the compiler sees of `source`, each with why it may not, if so.
pub(super) fn preprocess(source: &str) -> Vec<PpToken> {
    let mut pp = Pp {
        macros: HashMap::new(),
        groups: Vec::new(),
        unknown_names: None,
        expansions: 0,
        gave_up: None,
    };
    for (name, value) in PREDEFINED {
        let body = vec![PpToken::new(PpKind::Number((*value).to_string()), false)];
        pp.macros.insert(
            (*name).to_string(),
            Macro {
                params: None,
                variadic: false,
                body,
                uncertain: None,
            },
        );
    }
    let mut out = Vec::new();
    let mut text: Vec<PpToken> = Vec::new();
    for line in lines(source) {
        if line.directive {
            out.extend(pp.expand(std::mem::take(&mut text)));
            pp.directive(line.tokens);
        } else if pp.active() {
            let uncertain = pp.uncertain();
            text.extend(line.tokens.into_iter().map(|mut t| {
                t.uncertain = t.uncertain.or_else(|| uncertain.clone());
                t
            }));
        }
    }
    out.extend(pp.expand(text));
    if let Some(why) = &pp.gave_up {
        for t in &mut out {
            t.uncertain.get_or_insert_with(|| why.clone());
        }
    }
    out
}

impl Pp {
    fn active(&self) -> bool {
        self.groups.last().is_none_or(|g| g.active)
    }

    /// Why the text being read may not be what the compiler reads: the innermost reason.
    fn uncertain(&self) -> Option<Rc<str>> {
        self.groups.iter().rev().find_map(|g| g.uncertain.clone())
    }

    fn directive(&mut self, tokens: Vec<PpToken>) {
        let Some(name) = tokens.first().and_then(|t| t.ident().map(str::to_string)) else {
            return; // the null directive, or `# 12 "file"`
        };
        let rest = &tokens[1..];
        match name.as_str() {
            "if" | "ifdef" | "ifndef" => {
                let outer_active = self.active();
                let cond = match outer_active {
                    false => Cond::False,
                    true => self.condition(&name, rest),
                };
                let mut g = Group {
                    outer_active,
                    resolved: false,
                    active: false,
                    uncertain: None,
                    earlier: None,
                };
                g.enter(cond);
                self.groups.push(g);
            }
            "elif" | "elifdef" | "elifndef" => {
                let Some(g) = self.groups.last() else { return };
                let cond = match g.outer_active && !g.resolved {
                    false => Cond::False,
                    true => {
                        let kind = match name.as_str() {
                            "elif" => "if",
                            "elifdef" => "ifdef",
                            _ => "ifndef",
                        };
                        self.condition(kind, rest)
                    }
                };
                if let Some(g) = self.groups.last_mut() {
                    g.enter(cond);
                }
            }
            "else" => {
                if let Some(g) = self.groups.last_mut() {
                    let cond = match g.outer_active && !g.resolved {
                        true => Cond::True,
                        false => Cond::False,
                    };
                    g.enter(cond);
                }
            }
            "endif" => {
                self.groups.pop();
            }
            _ if !self.active() => {}
            "define" => self.define(rest),
            "undef" => {
                if let Some(n) = rest.first().and_then(PpToken::ident) {
                    match self.uncertain() {
                        // Whether it is still defined depends on the condition: keep it, marked.
                        Some(why) => {
                            if let Some(m) = self.macros.get_mut(n) {
                                m.uncertain = Some(why);
                            }
                        }
                        None => {
                            self.macros.remove(n);
                        }
                    }
                }
            }
            "include" => {
                if let Some(PpKind::Str(file)) = rest.first().map(|t| &t.kind) {
                    self.unknown_names.get_or_insert_with(|| {
                        Rc::from(format!(
                            "`#include \"{file}\"` is not read by kusari and may define it"
                        ))
                    });
                }
            }
            _ => {} // pragma, error, warning, line
        }
    }

    fn define(&mut self, rest: &[PpToken]) {
        let Some(name) = rest.first().and_then(PpToken::ident) else {
            return;
        };
        let uncertain = self.uncertain();
        let (params, variadic, body_at) = match rest.get(1) {
            Some(t) if t.is("(") && !t.space_before => {
                let mut params = Vec::new();
                let mut variadic = false;
                let mut j = 2;
                while let Some(t) = rest.get(j) {
                    j += 1;
                    match &t.kind {
                        PpKind::Punct(")") => break,
                        PpKind::Punct(",") => {}
                        PpKind::Punct("...") => {
                            variadic = true;
                            params.push("__VA_ARGS__".to_string());
                        }
                        PpKind::Ident(p) => params.push(p.clone()),
                        _ => {}
                    }
                }
                (Some(params), variadic, j)
            }
            _ => (None, false, 1),
        };
        let body = rest[body_at.min(rest.len())..].to_vec();
        self.macros.insert(
            name.to_string(),
            Macro {
                params,
                variadic,
                body,
                uncertain,
            },
        );
    }

    /// The value of an `#if`/`#ifdef`/`#ifndef` condition.
    fn condition(&mut self, kind: &str, rest: &[PpToken]) -> Cond {
        if kind != "if" {
            let Some(n) = rest.first().and_then(PpToken::ident) else {
                return Cond::False;
            };
            let d = self.defined(n);
            return if kind == "ifdef" { d } else { d.not() };
        }
        // `defined X` and `defined(X)` are read before expansion.
        let mut replaced: Vec<PpToken> = Vec::new();
        let mut why: Option<Rc<str>> = None;
        let mut j = 0;
        while j < rest.len() {
            if rest[j].ident() == Some("defined") {
                let (n, next) = match rest.get(j + 1) {
                    Some(t) if t.is("(") => (rest.get(j + 2).and_then(PpToken::ident), j + 4),
                    Some(t) => (t.ident(), j + 2),
                    None => (None, j + 1),
                };
                let v = match n.map(|n| self.defined(n)) {
                    Some(Cond::True) => "1",
                    Some(Cond::Uncertain(w)) => {
                        why.get_or_insert(w);
                        "1"
                    }
                    _ => "0",
                };
                replaced.push(PpToken::new(PpKind::Number(v.into()), true));
                j = next;
            } else {
                replaced.push(rest[j].clone());
                j += 1;
            }
        }
        let expanded = self.expand(replaced);
        let mut values = Vec::with_capacity(expanded.len());
        for t in &expanded {
            if let Some(w) = &t.uncertain {
                why.get_or_insert_with(|| w.clone());
            }
            match &t.kind {
                PpKind::Ident(n) if n == "true" => values.push(Ev::Num(1)),
                PpKind::Ident(n) if n == "false" => values.push(Ev::Num(0)),
                PpKind::Ident(n) => {
                    if compiler_dependent(n) {
                        why.get_or_insert_with(|| depends_on(n));
                    } else if let Some(w) = &self.unknown_names {
                        why.get_or_insert_with(|| Rc::from(format!("`{n}`: {w}")));
                    }
                    values.push(Ev::Num(0));
                }
                PpKind::Number(s) => match int_value(s) {
                    Some(v) => values.push(Ev::Num(v)),
                    None => return Cond::Uncertain(cannot_evaluate(rest)),
                },
                PpKind::Char(s) => values.push(Ev::Num(char_value(s))),
                PpKind::Punct(p) => values.push(Ev::Op(p)),
                PpKind::Str(_) => return Cond::Uncertain(cannot_evaluate(rest)),
            }
        }
        let mut parser = Expr {
            toks: &values,
            at: 0,
        };
        let value = match parser.ternary() {
            Some(v) if parser.at == values.len() => v,
            _ => return Cond::Uncertain(cannot_evaluate(rest)),
        };
        match (why, value != 0) {
            (Some(w), _) => Cond::Uncertain(w),
            (None, true) => Cond::True,
            (None, false) => Cond::False,
        }
    }

    fn defined(&self, name: &str) -> Cond {
        if compiler_dependent(name) {
            return Cond::Uncertain(depends_on(name));
        }
        match self.macros.get(name) {
            Some(m) => match &m.uncertain {
                Some(w) => Cond::Uncertain(w.clone()),
                None => Cond::True,
            },
            None if name == "__NVCC__" => Cond::False,
            None => match &self.unknown_names {
                Some(w) => Cond::Uncertain(Rc::from(format!("`{name}`: {w}"))),
                None => Cond::False,
            },
        }
    }

    /// `tokens` with every macro expanded, rescanned until nothing more expands.
    fn expand(&mut self, mut tokens: Vec<PpToken>) -> Vec<PpToken> {
        let mut out = Vec::with_capacity(tokens.len());
        tokens.reverse(); // a stack: the next token is the last
        while let Some(t) = tokens.pop() {
            let Some(name) = t.ident() else {
                out.push(t);
                continue;
            };
            let Some(m) = self.macros.get(name) else {
                out.push(t);
                continue;
            };
            if t.hidden.iter().any(|h| h == name) || self.gave_up.is_some() {
                out.push(t);
                continue;
            }
            self.expansions += 1;
            if self.expansions > MAX_EXPANSIONS {
                self.gave_up = Some(Rc::from(format!(
                    "its macros expand more than {MAX_EXPANSIONS} times"
                )));
                out.push(t);
                continue;
            }
            let m = m.clone();
            let mut hidden = (*t.hidden).clone();
            hidden.push(name.to_string());
            let hidden = Rc::new(hidden);
            let uncertain = t.uncertain.clone().or_else(|| m.uncertain.clone());
            let replacement = match &m.params {
                None => paste(m.body.clone()),
                Some(params) => {
                    // A function-like macro's name not followed by `(` is just a name.
                    if !tokens.last().is_some_and(|n| n.is("(")) {
                        out.push(t);
                        continue;
                    }
                    tokens.pop();
                    let Some(args) = take_args(&mut tokens) else {
                        out.push(t);
                        continue;
                    };
                    let args = fit_args(args, params.len(), m.variadic);
                    self.substitute(&m.body, params, &args)
                }
            };
            for mut r in replacement.into_iter().rev() {
                r.hidden = hidden.clone();
                r.uncertain = r.uncertain.or_else(|| uncertain.clone());
                tokens.push(r);
            }
        }
        out
    }

    /// A function-like macro's body with its arguments put in: `#p` stringized, `p` next to
    /// `##` as written, any other `p` expanded first.
    fn substitute(
        &mut self,
        body: &[PpToken],
        params: &[String],
        args: &[Vec<PpToken>],
    ) -> Vec<PpToken> {
        let index = |t: &PpToken| t.ident().and_then(|n| params.iter().position(|p| p == n));
        let mut out: Vec<PpToken> = Vec::new();
        let mut j = 0;
        while j < body.len() {
            let t = &body[j];
            if t.is("#")
                && let Some(k) = body.get(j + 1).and_then(index)
            {
                let text: String = args[k]
                    .iter()
                    .enumerate()
                    .map(|(n, a)| match n > 0 && a.space_before {
                        true => format!(" {}", a.spelling()),
                        false => a.spelling(),
                    })
                    .collect();
                let escaped = text.replace('\\', "\\\\").replace('"', "\\\"");
                out.push(PpToken::new(PpKind::Str(escaped), t.space_before));
                j += 2;
                continue;
            }
            match index(t) {
                Some(k) => {
                    let pasted = (j > 0 && body[j - 1].is("##"))
                        || body.get(j + 1).is_some_and(|n| n.is("##"));
                    let arg = match pasted {
                        true => args[k].clone(),
                        false => self.expand(args[k].clone()),
                    };
                    out.extend(arg);
                }
                None => out.push(t.clone()),
            }
            j += 1;
        }
        paste(out)
    }
}

/// `a ## b` joined into one token (an identifier or number as spelled together).
fn paste(tokens: Vec<PpToken>) -> Vec<PpToken> {
    let mut out: Vec<PpToken> = Vec::with_capacity(tokens.len());
    let mut glue = false;
    for t in tokens {
        if t.is("##") {
            glue = true;
            continue;
        }
        match (glue, out.last_mut()) {
            (true, Some(prev)) => {
                let joined = prev.spelling() + &t.spelling();
                let first = joined.chars().next().unwrap_or(' ');
                prev.kind = if first.is_ascii_digit() {
                    PpKind::Number(joined)
                } else if first.is_alphanumeric() || first == '_' {
                    PpKind::Ident(joined)
                } else {
                    PpKind::Punct(leak_punct(&joined))
                };
            }
            _ => out.push(t),
        }
        glue = false;
    }
    out
}

/// The arguments of a macro call whose `(` was taken from the stack `tokens` (next last), up
/// to the matching `)`, split at top-level commas; `None` (nothing taken) without a `)`.
fn take_args(tokens: &mut Vec<PpToken>) -> Option<Vec<Vec<PpToken>>> {
    let mut depth = 0usize;
    let mut j = tokens.len();
    while j > 0 {
        j -= 1;
        if tokens[j].is("(") {
            depth += 1;
        } else if tokens[j].is(")") {
            if depth == 0 {
                // The stack holds `)` at `j`, then the arguments' tokens last to first.
                let mut inner: Vec<PpToken> = tokens.drain(j + 1..).collect();
                tokens.pop();
                inner.reverse();
                let mut args = vec![Vec::new()];
                let mut d = 0usize;
                for t in inner {
                    match &t.kind {
                        PpKind::Punct("(") => d += 1,
                        PpKind::Punct(")") => d = d.saturating_sub(1),
                        PpKind::Punct(",") if d == 0 => {
                            args.push(Vec::new());
                            continue;
                        }
                        _ => {}
                    }
                    args.last_mut().expect("one argument at least").push(t);
                }
                return Some(args);
            }
            depth -= 1;
        }
    }
    None
}

/// The arguments given to a macro of `n` parameters: the extra ones of a variadic macro joined
/// with their commas into `__VA_ARGS__`, missing ones empty.
fn fit_args(mut args: Vec<Vec<PpToken>>, n: usize, variadic: bool) -> Vec<Vec<PpToken>> {
    if n == 0 && args.len() == 1 && args[0].is_empty() {
        return Vec::new();
    }
    if variadic && args.len() > n {
        let rest = args.split_off(n - 1);
        let mut joined = Vec::new();
        for (k, a) in rest.into_iter().enumerate() {
            if k > 0 {
                joined.push(PpToken::new(PpKind::Punct(","), false));
            }
            joined.extend(a);
        }
        args.push(joined);
    }
    args.resize(n.max(args.len()), Vec::new());
    args
}

fn depends_on(name: &str) -> Rc<str> {
    Rc::from(format!(
        "`{name}` depends on the device or the compiler version, which kusari does not know when \
         it reads the source"
    ))
}

fn cannot_evaluate(rest: &[PpToken]) -> Rc<str> {
    let text: Vec<String> = rest.iter().map(PpToken::spelling).collect();
    Rc::from(format!(
        "kusari cannot evaluate the condition `#if {}`",
        text.join(" ")
    ))
}

/// The truth of a condition.
#[derive(Clone, Debug)]
enum Cond {
    True,
    False,
    /// Either, for this reason.
    Uncertain(Rc<str>),
}

impl Cond {
    fn not(self) -> Cond {
        match self {
            Cond::True => Cond::False,
            Cond::False => Cond::True,
            u => u,
        }
    }
}

impl Group {
    /// Starts the next branch, whose condition is `cond` (`False` when the group is resolved).
    fn enter(&mut self, cond: Cond) {
        if !self.outer_active || self.resolved {
            self.active = false;
            return;
        }
        match cond {
            Cond::True => {
                self.active = true;
                self.resolved = self.earlier.is_none();
                self.uncertain = self.earlier.clone();
            }
            Cond::False => self.active = false,
            Cond::Uncertain(why) => {
                self.active = true;
                self.uncertain = Some(why.clone());
                self.earlier.get_or_insert(why);
            }
        }
    }
}

/// An integer literal's value (suffixes `u`, `l`, `ll` in any case; `'` separators).
fn int_value(s: &str) -> Option<i64> {
    let s: String = s.chars().filter(|&c| c != '\'').collect();
    let digits = s.trim_end_matches(['u', 'U', 'l', 'L']);
    let (radix, body) = if let Some(h) = digits.strip_prefix("0x").or(digits.strip_prefix("0X")) {
        (16, h)
    } else if let Some(b) = digits.strip_prefix("0b").or(digits.strip_prefix("0B")) {
        (2, b)
    } else if digits.len() > 1 && digits.starts_with('0') {
        (8, &digits[1..])
    } else {
        (10, digits)
    };
    u64::from_str_radix(body, radix).ok().map(|v| v as i64)
}

fn char_value(s: &str) -> i64 {
    let mut chars = s.chars();
    match (chars.next(), chars.next()) {
        (Some('\\'), Some('n')) => 10,
        (Some('\\'), Some('t')) => 9,
        (Some('\\'), Some('0')) => 0,
        (Some('\\'), Some(c)) => c as i64,
        (Some(c), _) => c as i64,
        (None, _) => 0,
    }
}

/// A token of an `#if` expression once names are values.
#[derive(Clone, Copy, Debug)]
enum Ev {
    Num(i64),
    Op(&'static str),
}

/// A recursive-descent evaluator of C's integer constant expressions (wrapping arithmetic;
/// division by zero is no value).
struct Expr<'a> {
    toks: &'a [Ev],
    at: usize,
}

impl Expr<'_> {
    fn peek(&self) -> Option<&'static str> {
        match self.toks.get(self.at) {
            Some(Ev::Op(p)) => Some(p),
            _ => None,
        }
    }

    fn eat(&mut self, op: &str) -> bool {
        let hit = self.peek() == Some(op);
        if hit {
            self.at += 1;
        }
        hit
    }

    fn ternary(&mut self) -> Option<i64> {
        let c = self.binary(0)?;
        if self.eat("?") {
            let a = self.ternary()?;
            if !self.eat(":") {
                return None;
            }
            let b = self.ternary()?;
            return Some(if c != 0 { a } else { b });
        }
        Some(c)
    }

    /// Binary operators by precedence level, loosest first.
    const LEVELS: &'static [&'static [&'static str]] = &[
        &["||"],
        &["&&"],
        &["|"],
        &["^"],
        &["&"],
        &["==", "!="],
        &["<", ">", "<=", ">="],
        &["<<", ">>"],
        &["+", "-"],
        &["*", "/", "%"],
    ];

    fn binary(&mut self, level: usize) -> Option<i64> {
        if level == Self::LEVELS.len() {
            return self.unary();
        }
        let mut a = self.binary(level + 1)?;
        while let Some(op) = self.peek().filter(|p| Self::LEVELS[level].contains(p)) {
            self.at += 1;
            let b = self.binary(level + 1)?;
            a = match op {
                "||" => i64::from(a != 0 || b != 0),
                "&&" => i64::from(a != 0 && b != 0),
                "|" => a | b,
                "^" => a ^ b,
                "&" => a & b,
                "==" => i64::from(a == b),
                "!=" => i64::from(a != b),
                "<" => i64::from(a < b),
                ">" => i64::from(a > b),
                "<=" => i64::from(a <= b),
                ">=" => i64::from(a >= b),
                "<<" => a.wrapping_shl(b as u32),
                ">>" => a.wrapping_shr(b as u32),
                "+" => a.wrapping_add(b),
                "-" => a.wrapping_sub(b),
                "*" => a.wrapping_mul(b),
                "/" => a.checked_div(b)?,
                _ => a.checked_rem(b)?,
            };
        }
        Some(a)
    }

    fn unary(&mut self) -> Option<i64> {
        match self.toks.get(self.at)? {
            Ev::Num(v) => {
                self.at += 1;
                Some(*v)
            }
            Ev::Op("(") => {
                self.at += 1;
                let v = self.ternary()?;
                self.eat(")").then_some(v)
            }
            Ev::Op(op @ ("-" | "+" | "!" | "~")) => {
                self.at += 1;
                let v = self.unary()?;
                Some(match *op {
                    "-" => v.wrapping_neg(),
                    "+" => v,
                    "!" => i64::from(v == 0),
                    _ => !v,
                })
            }
            Ev::Op(_) => None,
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// The text the compiler sees, one space between tokens, and the reason of the first
    /// uncertain token.
    fn seen(src: &str) -> (String, Option<String>) {
        let toks = preprocess(src);
        let text: Vec<String> = toks.iter().map(PpToken::spelling).collect();
        let why = toks
            .iter()
            .find_map(|t| t.uncertain.as_deref().map(str::to_string));
        (text.join(" "), why)
    }

    fn text(src: &str) -> String {
        let (t, why) = seen(src);
        assert_eq!(why, None, "{src}");
        t
    }

    #[test]
    fn splices_lines_and_drops_comments() {
        assert_eq!(
            text("void k(float* x, \\\n int n) // c\n/* a\n b */ {}"),
            "void k ( float * x , int n ) { }"
        );
        assert_eq!(text("#define A \\\n 1\nA"), "1");
    }

    #[test]
    fn expands_object_and_function_like_macros_with_rescanning() {
        assert_eq!(
            text("#define T float\n#define P T*\nvoid k(P x, T y);"),
            "void k ( float * x , float y ) ;"
        );
        assert_eq!(
            text(
                "#define DECL(name, T) extern \"C\" __global__ void name(T* x)\nDECL(fill, double) {}"
            ),
            "extern \"C\" __global__ void fill ( double * x ) { }"
        );
        // A macro's own name is not expanded again inside its expansion.
        assert_eq!(text("#define x x + 1\nx"), "x + 1");
        assert_eq!(text("#define f(a) a * f(a)\nf(2)"), "2 * f ( 2 )");
        // A function-like name without `(` stays a name.
        assert_eq!(text("#define f(a) a\nint f;"), "int f ;");
        // Arguments are expanded before substitution; nested parentheses keep their commas.
        assert_eq!(
            text("#define N 4\n#define SQ(a) ((a)*(a))\nSQ(N + g(1, 2))"),
            "( ( 4 + g ( 1 , 2 ) ) * ( 4 + g ( 1 , 2 ) ) )"
        );
    }

    #[test]
    fn stringizes_pastes_and_takes_variadic_arguments() {
        assert_eq!(text("#define S(a) #a\nS(x  +  \"q\")"), "\"x + \\\"q\\\"\"");
        assert_eq!(
            text("#define CAT(a, b) a ## b\nCAT(uint, 32_t) CAT(1, 0)"),
            "uint32_t 10"
        );
        assert_eq!(
            text("#define V(f, ...) f(__VA_ARGS__)\nV(g, 1, 2, 3)"),
            "g ( 1 , 2 , 3 )"
        );
    }

    #[test]
    fn conditions_choose_as_the_compiler_does() {
        let src = "#define PRECISION 2\n#if PRECISION == 2\ndouble\n#elif PRECISION == 1\nfloat\n#else\nhalf\n#endif";
        assert_eq!(text(src), "double");
        assert_eq!(
            text("#if defined(A) || !defined B\nyes\n#else\nno\n#endif"),
            "yes"
        );
        assert_eq!(
            text("#define A\n#ifdef A\na\n#endif\n#ifndef A\nb\n#endif"),
            "a"
        );
        assert_eq!(
            text("#if (3 << 2) % 5 == 2 && 0x10 > 010 ? 1 : 0\nt\n#endif"),
            "t"
        );
        assert_eq!(text("#if UNDEFINED_NAME\nt\n#else\nf\n#endif"), "f");
        assert_eq!(
            text("#if __cplusplus >= 201703L && __CUDACC__\nt\n#endif"),
            "t"
        );
        assert_eq!(
            text("#if 0\n#if 1\nx\n#else\ny\n#endif\n#define Q 1\n#endif\nQ"),
            "Q"
        );
        assert_eq!(text("#define A 1\n#undef A\n#ifdef A\nx\n#endif"), "");
        assert_eq!(text("#if true\nt\n#endif"), "t");
    }

    #[test]
    fn what_depends_on_the_device_is_read_and_marked() {
        let (t, why) = seen("#if __CUDA_ARCH__ >= 800\nhalf\n#else\nfloat\n#endif\nint");
        assert_eq!(t, "half float int");
        assert!(
            why.unwrap()
                .contains("`__CUDA_ARCH__` depends on the device")
        );
        let toks = preprocess("#ifdef __CUDA_ARCH__\n#define R half\n#endif\nR int");
        assert!(
            toks[0].uncertain.is_some(),
            "a macro defined there carries it: {toks:?}"
        );
        assert!(
            toks[1].uncertain.is_none(),
            "text after the group is certain: {toks:?}"
        );
        let (_, why) = seen("#include \"mine.h\"\n#ifdef MY_TYPE\nx\n#endif");
        assert!(why.unwrap().contains("`#include \"mine.h\"`"));
        // A system header does not define a user's option names.
        assert_eq!(
            text("#include <cuda_fp16.h>\n#ifdef MY_TYPE\nx\n#endif"),
            ""
        );
        let (_, why) = seen("#if 1 / 0\nx\n#endif");
        assert!(why.unwrap().contains("cannot evaluate"));
    }

    #[test]
    fn a_macro_that_grows_without_end_stops() {
        let src = "#define A B B\n#define B A A\nA";
        let toks = preprocess(src);
        assert!(!toks.is_empty());
        let _ = toks; // terminates (hidden names stop the recursion)
        let (_, why) = seen("#define F(x) F(x) F(x)\nF(1)");
        assert_eq!(why, None);
    }
}
