//! The check of an elementwise kernel's body before it is pasted into the generated kernel.
//!
//! The body goes inside the kernel's loop (see [`codegen`](crate::codegen)). A body whose braces
//! do not balance can close the loop and the function and go on at file scope, for instance to
//! define a second `extern "C" __global__` function, which NVRTC then compiles as if kusari had
//! written it. So [`check_body`] requires that braces, parentheses and brackets balance and nest,
//! as the compiler sees them:
//!
//! - string and character literals (with their prefixes, raw strings included) and `//` and
//!   `/* */` comments are skipped; numbers with digit separators (`1'000`) are numbers;
//! - the digraphs `<%`, `%>`, `<:`, `:>` count as the brackets they are, `%:` as `#`;
//! - what could make the compiler see other brackets than the check does is refused:
//!   preprocessor directives other than `#pragma` (a `#define X }` or an `#if 0` hides or adds
//!   braces; `#include` reads files), line continuations (a backslash at the end of a line,
//!   which continues a `//` comment onto the next line), trigraphs (`??<` is `{` in C++14 and
//!   earlier) and a carriage return not followed by a newline (a line break to some compilers
//!   and not to others).
//!
//! A balanced body cannot leave the loop it is pasted into, so it cannot define anything at file
//! scope; a `__global__` inside it is a compile error, not a second kernel.
//!
//! ```
//! use kusari_kernels::body::{check_body, BodyProblem};
//! assert!(check_body("w = x > 0 ? x : 0; // }").is_ok());
//! let e = check_body("w = x; } } extern \"C\" __global__ void k() { {").unwrap_err();
//! assert_eq!(e.problem, BodyProblem::Unopened { close: "}".into() });
//! assert_eq!((e.line, e.column), (1, 8));
//! ```

use std::fmt;
use std::ops::Range;

/// What is wrong with a body.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum BodyProblem {
    /// A closing bracket with nothing open.
    Unopened {
        /// The bracket as written (`}`, `)`, `]`, `%>`, `:>`).
        close: String,
    },
    /// A closing bracket of another kind than the innermost open one.
    Mismatched {
        /// The open bracket as written.
        open: String,
        /// Its 1-based line and column (in characters).
        open_at: (usize, usize),
        /// The closing bracket as written.
        close: String,
    },
    /// An opening bracket never closed.
    Unclosed {
        /// The bracket as written.
        open: String,
    },
    /// A string literal without its closing `"` on the same line.
    UnterminatedString,
    /// A character literal without its closing `'` on the same line.
    UnterminatedChar,
    /// A raw string literal without its closing `)delimiter"`, or with an invalid delimiter.
    BadRawString,
    /// A `/*` comment without its `*/`.
    UnterminatedComment,
    /// A preprocessor directive other than `#pragma`.
    Directive {
        /// The directive as written (`#define`, `%:if`).
        directive: String,
    },
    /// A backslash at the end of a line (possibly followed by spaces).
    LineContinuation,
    /// A trigraph such as `??<`.
    Trigraph {
        /// The trigraph.
        trigraph: String,
    },
    /// A carriage return not followed by a newline.
    LoneCarriageReturn,
}

impl BodyProblem {
    /// The message for this problem in `part` of a kernel's code (`body`, `preamble`,
    /// `loop_prep` or `after_loop`), naming the part.
    ///
    /// ```
    /// use kusari_kernels::body::BodyProblem;
    /// let p = BodyProblem::Unclosed { open: "(".into() };
    /// assert!(p.message("preamble").contains("the preamble's braces"));
    /// assert!(p.to_string().contains("a kernel body's braces"));
    /// ```
    pub fn message(&self, part: &str) -> String {
        let (whose, code, stays) = match part {
            "body" => (
                "a kernel body's".to_string(),
                "a kernel body".to_string(),
                "a body cannot close the kernel's function",
            ),
            "preamble" => (
                "the preamble's".to_string(),
                "a preamble".to_string(),
                "a preamble cannot close a scope it did not open",
            ),
            other => (
                format!("{other}'s"),
                other.to_string(),
                "kernel code cannot close the kernel's function",
            ),
        };
        let balance = format!("{whose} braces, parentheses and brackets must balance");
        match self {
            BodyProblem::Unopened { close } => {
                format!("`{close}` closes nothing: {balance} ({stays})")
            }
            BodyProblem::Mismatched {
                open,
                open_at: (line, column),
                close,
            } => format!(
                "`{close}` does not close the `{open}` at line {line}, column {column}: {balance}"
            ),
            BodyProblem::Unclosed { open } => format!("`{open}` is never closed: {balance}"),
            BodyProblem::UnterminatedString => {
                "string literal without its closing `\"` on the same line".to_string()
            }
            BodyProblem::UnterminatedChar => {
                "character literal without its closing `'` on the same line".to_string()
            }
            BodyProblem::BadRawString => {
                "raw string literal without a valid delimiter or its closing `)delimiter\"`"
                    .to_string()
            }
            BodyProblem::UnterminatedComment => "`/*` comment without its `*/`".to_string(),
            BodyProblem::Directive { directive } => format!(
                "`{directive}` in {code}: only `#pragma` directives are allowed (others can hide braces from the compiler or add some)"
            ),
            BodyProblem::LineContinuation => format!(
                "a backslash at the end of a line (a line continuation) is not allowed in {code}"
            ),
            BodyProblem::Trigraph { trigraph } => {
                format!("trigraph `{trigraph}` is not allowed in {code}")
            }
            BodyProblem::LoneCarriageReturn => {
                format!("a carriage return not followed by a newline is not allowed in {code}")
            }
        }
    }
}

impl fmt::Display for BodyProblem {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(&self.message("body"))
    }
}

/// A body refused by [`check_body`]: what is wrong, and where.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct BodyError {
    /// What is wrong.
    pub problem: BodyProblem,
    /// Byte range of the offending text in the body.
    pub span: Range<usize>,
    /// 1-based line of the span's start.
    pub line: usize,
    /// 1-based column (in characters) of the span's start.
    pub column: usize,
}

impl BodyError {
    fn new(body: &str, span: Range<usize>, problem: BodyProblem) -> Self {
        let (line, column) = line_column(body, span.start);
        BodyError {
            problem,
            span,
            line,
            column,
        }
    }

    /// The message followed by the line of the body with the offending text underlined.
    pub fn render(&self, body: &str) -> String {
        self.render_in("body", body)
    }

    /// The message for this problem in `part` of a kernel's code (`body`, `preamble`,
    /// `loop_prep` or `after_loop`, [`BodyProblem::message`]), with its line and column.
    ///
    /// ```
    /// use kusari_kernels::body::check_body;
    /// let e = check_body("int c = (0;").unwrap_err();
    /// assert_eq!(
    ///     e.message_in("loop_prep"),
    ///     "line 1, column 9: `(` is never closed: loop_prep's braces, parentheses and brackets must balance"
    /// );
    /// ```
    pub fn message_in(&self, part: &str) -> String {
        format!(
            "line {}, column {}: {}",
            self.line,
            self.column,
            self.problem.message(part)
        )
    }

    /// [`message_in`](Self::message_in) followed by the line of `code` with the offending text
    /// underlined.
    pub fn render_in(&self, part: &str, code: &str) -> String {
        format!(
            "{}\n{}",
            self.message_in(part),
            crate::signature::underline(code, self.span.clone())
        )
    }
}

impl fmt::Display for BodyError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(&self.message_in("body"))
    }
}

impl std::error::Error for BodyError {}

fn line_column(text: &str, at: usize) -> (usize, usize) {
    let before = &text[..at];
    let line_start = before.rfind('\n').map_or(0, |i| i + 1);
    (
        before.matches('\n').count() + 1,
        before[line_start..].chars().count() + 1,
    )
}

fn is_ident_byte(b: u8) -> bool {
    b.is_ascii_alphanumeric() || b == b'_' || b == b'$' || b >= 0x80
}

/// Refuses what could make the compiler see other characters than the bracket check: line
/// continuations, trigraphs and lone carriage returns (see the module docs).
fn check_characters(body: &str) -> Result<(), BodyError> {
    let b = body.as_bytes();
    let err = |span: Range<usize>, problem| Err(BodyError::new(body, span, problem));
    for (i, &c) in b.iter().enumerate() {
        match c {
            b'\r' if b.get(i + 1) != Some(&b'\n') => {
                return err(i..i + 1, BodyProblem::LoneCarriageReturn);
            }
            b'\\' => {
                let rest = &b[i + 1..];
                let blanks = rest
                    .iter()
                    .take_while(|&&c| matches!(c, b' ' | b'\t' | 0x0b | 0x0c))
                    .count();
                if matches!(rest.get(blanks), None | Some(b'\n' | b'\r')) {
                    return err(i..i + 1, BodyProblem::LineContinuation);
                }
            }
            b'?' if b.get(i + 1) == Some(&b'?')
                && b.get(i + 2).is_some_and(|c| b"=/'()!<>-".contains(c)) =>
            {
                return err(
                    i..i + 3,
                    BodyProblem::Trigraph {
                        trigraph: body[i..i + 3].to_string(),
                    },
                );
            }
            _ => {}
        }
    }
    Ok(())
}

/// Checks that a kernel body cannot reach outside the loop it is pasted into (see the module
/// docs). Returns the first problem found.
pub fn check_body(body: &str) -> Result<(), BodyError> {
    check_characters(body)?;
    Lexer::new(body).run().map(|_| ())
}

/// The body as the kernel's loop gets it: with a `;` after its last token when that token is
/// not one, as CuPy's `ElementwiseKernel` writes `${operation};` (so that `"z = x - y"`
/// compiles). The `;` goes right after the token, before any comment that ends the body and on
/// the same line, so that the lines the compiler reports stay the user's; a body that ends
/// with `;` (or has no token: blank, comments, `#pragma` lines) is returned unchanged. A `;`
/// after a closing brace is an empty statement, so that `if (a) { w = 1; }` is still one
/// statement. A body that fails [`check_body`] is returned unchanged too (the check reports it).
///
/// ```
/// use kusari_kernels::body::terminated;
/// assert_eq!(terminated("z = (x - y) * (x - y)"), "z = (x - y) * (x - y);");
/// assert_eq!(terminated("z = x; // done"), "z = x; // done");
/// assert_eq!(terminated("z = x // the difference\n"), "z = x; // the difference\n");
/// assert_eq!(terminated("if (x > 0) { z = x; }"), "if (x > 0) { z = x; };");
/// ```
pub fn terminated(body: &str) -> std::borrow::Cow<'_, str> {
    use std::borrow::Cow;
    if check_characters(body).is_err() {
        return Cow::Borrowed(body);
    }
    match Lexer::new(body).run() {
        Ok(Some(last)) if &body[last.clone()] != ";" => {
            Cow::Owned(format!("{};{}", &body[..last.end], &body[last.end..]))
        }
        _ => Cow::Borrowed(body),
    }
}

struct Lexer<'a> {
    body: &'a str,
    b: &'a [u8],
    i: usize,
    /// The open brackets: their kind (`{`, `(` or `[`) and span.
    open: Vec<(u8, Range<usize>)>,
}

impl<'a> Lexer<'a> {
    fn new(body: &'a str) -> Self {
        Lexer {
            body,
            b: body.as_bytes(),
            i: 0,
            open: Vec::new(),
        }
    }

    fn at(&self, k: usize) -> Option<u8> {
        self.b.get(self.i + k).copied()
    }

    fn error(&self, span: Range<usize>, problem: BodyProblem) -> BodyError {
        BodyError::new(self.body, span, problem)
    }

    /// Lexes the whole body: the span of its last token outside directives and comments.
    fn run(mut self) -> Result<Option<Range<usize>>, BodyError> {
        let mut last = None;
        // Only blanks and comments so far on this line: a `#` starts a directive.
        let mut line_start = true;
        // Inside a `#pragma` line: brackets there are not code.
        let mut in_pragma = false;
        while let Some(c) = self.at(0) {
            let start = self.i;
            match c {
                b'\n' => {
                    line_start = true;
                    in_pragma = false;
                    self.i += 1;
                    continue;
                }
                b' ' | b'\t' | b'\r' | 0x0b | 0x0c => {
                    self.i += 1;
                    continue;
                }
                b'/' if self.at(1) == Some(b'/') => {
                    while self.at(0).is_some_and(|c| c != b'\n') {
                        self.i += 1;
                    }
                    continue;
                }
                b'/' if self.at(1) == Some(b'*') => {
                    self.block_comment()?;
                    continue;
                }
                _ => {}
            }
            let hash = match (c, self.at(1)) {
                (b'#', Some(b'#')) | (b'%', Some(b':')) if self.is_double_hash() => None,
                (b'#', _) => Some(1),
                (b'%', Some(b':')) => Some(2),
                _ => None,
            };
            if let (Some(len), true) = (hash, line_start) {
                self.i += len;
                in_pragma = self.directive(start)?;
                line_start = false;
                continue;
            }
            line_start = false;
            match c {
                b'"' | b'\'' => self.quoted(c)?,
                b'0'..=b'9' => self.number(),
                b'.' if self.at(1).is_some_and(|c| c.is_ascii_digit()) => self.number(),
                c if is_ident_byte(c) => self.identifier()?,
                _ => {
                    let (bracket, len) = self.bracket();
                    self.i += len;
                    if let (Some((kind, opens)), false) = (bracket, in_pragma) {
                        self.bracket_token(kind, opens, start..self.i)?;
                    }
                }
            }
            if !in_pragma {
                last = Some(start..self.i);
            }
        }
        match self.open.pop() {
            Some((_, span)) => Err(self.error(
                span.clone(),
                BodyProblem::Unclosed {
                    open: self.body[span].to_string(),
                },
            )),
            None => Ok(last),
        }
    }

    /// `##` or `%:%:` (or a mix) at the cursor: the token pasting operator, not a directive.
    fn is_double_hash(&self) -> bool {
        let first = if self.at(0) == Some(b'#') { 1 } else { 2 };
        matches!(
            (self.at(first), self.at(first + 1)),
            (Some(b'#'), _) | (Some(b'%'), Some(b':'))
        )
    }

    /// The bracket at the cursor (its kind, whether it opens) and its length in bytes; `None`
    /// and 1 for any other punctuation.
    fn bracket(&self) -> (Option<(u8, bool)>, usize) {
        match (self.at(0), self.at(1)) {
            (Some(b'<'), Some(b'%')) => (Some((b'{', true)), 2),
            (Some(b'%'), Some(b'>')) => (Some((b'{', false)), 2),
            (Some(b':'), Some(b'>')) => (Some((b'[', false)), 2),
            // `<::` followed by neither `:` nor `>` is `<` then `::` (C++11 [lex.pptoken]).
            (Some(b'<'), Some(b':'))
                if self.at(2) != Some(b':') || matches!(self.at(3), Some(b':' | b'>')) =>
            {
                (Some((b'[', true)), 2)
            }
            (Some(b'{'), _) => (Some((b'{', true)), 1),
            (Some(b'}'), _) => (Some((b'{', false)), 1),
            (Some(b'('), _) => (Some((b'(', true)), 1),
            (Some(b')'), _) => (Some((b'(', false)), 1),
            (Some(b'['), _) => (Some((b'[', true)), 1),
            (Some(b']'), _) => (Some((b'[', false)), 1),
            _ => (None, 1),
        }
    }

    fn bracket_token(
        &mut self,
        kind: u8,
        opens: bool,
        span: Range<usize>,
    ) -> Result<(), BodyError> {
        if opens {
            self.open.push((kind, span));
            return Ok(());
        }
        let close = self.body[span.clone()].to_string();
        match self.open.pop() {
            None => Err(self.error(span, BodyProblem::Unopened { close })),
            Some((open_kind, open_span)) if open_kind != kind => {
                let open_at = line_column(self.body, open_span.start);
                Err(self.error(
                    span,
                    BodyProblem::Mismatched {
                        open: self.body[open_span].to_string(),
                        open_at,
                        close,
                    },
                ))
            }
            Some(_) => Ok(()),
        }
    }

    fn block_comment(&mut self) -> Result<(), BodyError> {
        let start = self.i;
        match self.body[start + 2..].find("*/") {
            Some(end) => {
                self.i = start + 2 + end + 2;
                Ok(())
            }
            None => Err(self.error(start..start + 2, BodyProblem::UnterminatedComment)),
        }
    }

    /// After the `#` (or `%:`) that starts a line: `Ok(true)` for `#pragma`, `Ok(false)` for
    /// the null directive (`#` alone), an error for any other directive.
    fn directive(&mut self, hash: usize) -> Result<bool, BodyError> {
        // Blanks and comments between `#` and the name are whitespace.
        loop {
            match (self.at(0), self.at(1)) {
                (Some(b' ' | b'\t' | 0x0b | 0x0c | b'\r'), _) => self.i += 1,
                (Some(b'/'), Some(b'*')) => self.block_comment()?,
                _ => break,
            }
        }
        let name_start = self.i;
        while self.at(0).is_some_and(is_ident_byte) {
            self.i += 1;
        }
        let name = &self.body[name_start..self.i];
        match (name, self.at(0)) {
            ("pragma", _) => Ok(true),
            ("", None | Some(b'\n')) => Ok(false),
            ("", Some(b'/')) if self.at(1) == Some(b'/') => Ok(false),
            _ => {
                // The directive as written: `#` and the name, or `#` and the character after it.
                let end = if name.is_empty() {
                    self.body[self.i..]
                        .chars()
                        .next()
                        .map_or(self.i, |c| self.i + c.len_utf8())
                } else {
                    self.i
                };
                let directive = format!(
                    "{}{}",
                    &self.body[hash..hash + if self.b[hash] == b'#' { 1 } else { 2 }],
                    &self.body[name_start..end]
                );
                Err(self.error(hash..end, BodyProblem::Directive { directive }))
            }
        }
    }

    /// A string or character literal whose opening quote is at the cursor.
    fn quoted(&mut self, quote: u8) -> Result<(), BodyError> {
        let start = self.i;
        self.i += 1;
        loop {
            match self.at(0) {
                Some(b'\\') => self.i += 2,
                Some(c) if c == quote => {
                    self.i += 1;
                    return Ok(());
                }
                None | Some(b'\n') => {
                    let problem = if quote == b'"' {
                        BodyProblem::UnterminatedString
                    } else {
                        BodyProblem::UnterminatedChar
                    };
                    let end = self.i.min(self.b.len());
                    return Err(self.error(start..end, problem));
                }
                Some(_) => self.i += 1,
            }
        }
    }

    /// A raw string literal, the cursor at its `"`.
    fn raw_string(&mut self, prefix_start: usize) -> Result<(), BodyError> {
        let bad = |this: &Self| {
            let end = this.body[prefix_start..]
                .find('\n')
                .map_or(this.b.len(), |e| prefix_start + e);
            Err(this.error(prefix_start..end, BodyProblem::BadRawString))
        };
        let delim_start = self.i + 1;
        let Some(open) = self.body[delim_start..].find('(') else {
            return bad(self);
        };
        let delim = &self.body[delim_start..delim_start + open];
        if delim.len() > 16
            || delim.bytes().any(|c| {
                matches!(
                    c,
                    b' ' | b'(' | b')' | b'\\' | b'\t' | 0x0b | 0x0c | b'\n' | b'\r'
                )
            })
        {
            return bad(self);
        }
        let content = delim_start + open + 1;
        let end = format!("){delim}\"");
        match self.body[content..].find(&end) {
            Some(at) => {
                self.i = content + at + end.len();
                Ok(())
            }
            None => bad(self),
        }
    }

    /// An identifier, or the encoding prefix of a literal that follows it.
    fn identifier(&mut self) -> Result<(), BodyError> {
        let start = self.i;
        while self.at(0).is_some_and(is_ident_byte) {
            self.i += 1;
        }
        let word = &self.body[start..self.i];
        match (word, self.at(0)) {
            ("R" | "u8R" | "uR" | "UR" | "LR", Some(b'"')) => self.raw_string(start),
            ("u8" | "u" | "U" | "L", Some(q @ (b'"' | b'\''))) => self.quoted(q),
            _ => Ok(()),
        }
    }

    /// A preprocessing number (`1`, `0x1f`, `1.5e+3f`, `1'000'000`).
    fn number(&mut self) {
        self.i += 1;
        while let Some(c) = self.at(0) {
            match (c, self.at(1)) {
                (b'e' | b'E' | b'p' | b'P', Some(b'+' | b'-')) => self.i += 2,
                (b'\'', Some(d)) if is_ident_byte(d) => self.i += 2,
                (c, _) if is_ident_byte(c) || c == b'.' => self.i += 1,
                _ => break,
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_missing_last_semicolon_is_added_after_the_last_token() {
        let cases = [
            ("z = x - y", "z = x - y;"),
            ("z = x - y;", "z = x - y;"),
            ("z = x - y;  \n", "z = x - y;  \n"),
            (
                "a = 1;\nz = a // c; not code\n",
                "a = 1;\nz = a; // c; not code\n",
            ),
            ("z = x /* ; */", "z = x; /* ; */"),
            ("z = s[\";\"]", "z = s[\";\"];"),
            ("z = c == ';'", "z = c == ';';"),
            ("if (x) { z = 1; }", "if (x) { z = 1; };"),
            ("z = x\n#pragma unroll\n", "z = x;\n#pragma unroll\n"),
            ("done:", "done:;"),
            ("", ""),
            ("  // only a comment\n", "  // only a comment\n"),
            ("#pragma unroll", "#pragma unroll"),
            // Refused bodies are left for the check to report.
            ("z = (x", "z = (x"),
            ("z = x \\\n + y", "z = x \\\n + y"),
        ];
        for (body, want) in cases {
            assert_eq!(terminated(body), want, "{body:?}");
            // Lines stay where they were.
            assert_eq!(
                terminated(body).lines().count(),
                body.lines().count(),
                "{body:?}"
            );
        }
    }

    /// Bodies that must pass: what real kernels write, and brackets hidden where the compiler
    /// does not see them either.
    #[test]
    fn accepts_balanced_bodies() {
        let ok = [
            "w = x * y + z;",
            "if (x > 0) { w = x; } else { w = -x; }",
            "w = table[i % 4] * (x + y);",
            "w = x; // } closes nothing: a comment",
            "w = x; /* { */",
            "w = x; /* multi\nline } */ w += 1;",
            "const char* s = \"}\\\"\"; w = x;",
            "w = '}' == '\\'' ? x : y;",
            "w = u8\"{\" [0] ? x : y;",
            "w = L'{' ? x : y;",
            "w = R\"x(})\")x\" [0] ? x : y;",
            "w = 1'000'000 * x;",
            "w = 0x1'f'ff + 1.5e+3f + .5;",
            "#pragma unroll\nfor (int k = 0; k < 4; ++k) { w += x; }",
            "  #pragma unroll (\nw = x;",
            "#\nw = x;",
            "w = x <% %> ;",
            "w = table<:0:> * x;",
            "w = x<::y>::z;",
            "w = x; // a comment ending in a question mark?",
            "w = x;\r\nw += 1;\r\n",
        ];
        for body in ok {
            assert_eq!(check_body(body), Ok(()), "{body:?}");
        }
    }

    /// Every body tried that must be refused, where, and why.
    #[test]
    fn rejects_bodies_that_could_leave_the_loop() {
        let unopened = |c: &str| BodyProblem::Unopened { close: c.into() };
        let unclosed = |c: &str| BodyProblem::Unclosed { open: c.into() };
        let directive = |d: &str| BodyProblem::Directive {
            directive: d.into(),
        };
        let table: Vec<(&str, &str, BodyProblem)> = vec![
            (
                "w = x; } } extern \"C\" __global__ void evil(float* p) { {",
                "}",
                unopened("}"),
            ),
            ("w = x; }", "}", unopened("}")),
            ("w = (x;", "(", unclosed("(")),
            ("w = x; %> %> void f() <% <%", "%>", unopened("%>")),
            ("w = x :> ;", ":>", unopened(":>")),
            (
                "w = (x];",
                "]",
                BodyProblem::Mismatched {
                    open: "(".into(),
                    open_at: (1, 5),
                    close: "]".into(),
                },
            ),
            ("w = x; /* }", "/*", BodyProblem::UnterminatedComment),
            ("w = \"}", "\"}", BodyProblem::UnterminatedString),
            ("w = '}\n;", "'}", BodyProblem::UnterminatedChar),
            ("w = R\"x(}\";", "R\"x(}\";", BodyProblem::BadRawString),
            ("#define CLOSE }}\nCLOSE", "#define", directive("#define")),
            ("  # if 0\n{\n#endif", "# if", directive("#if")),
            (
                "%:include \"/etc/passwd\"",
                "%:include",
                directive("%:include"),
            ),
            ("/* */ #undef n", "#undef", directive("#undef")),
            ("# 1 \"x\"", "# 1", directive("#1")),
            (
                "// \\\n} } void f() { {",
                "\\",
                BodyProblem::LineContinuation,
            ),
            ("// \\  \n}", "\\", BodyProblem::LineContinuation),
            ("w = x; // \\", "\\", BodyProblem::LineContinuation),
            (
                "w = x; ??> ??> void f() ??< ??<",
                "??>",
                BodyProblem::Trigraph {
                    trigraph: "??>".into(),
                },
            ),
            (
                "// \r} } void f() { {",
                "\r",
                BodyProblem::LoneCarriageReturn,
            ),
        ];
        for (body, at, want) in table {
            let e = check_body(body).expect_err(body);
            assert_eq!(e.problem, want, "{body:?}");
            assert_eq!(&body[e.span.clone()], at, "{body:?}: {e:?}");
        }
    }

    #[test]
    fn errors_say_where() {
        let body = "if (x) {\n  w = x;\n}}";
        let e = check_body(body).unwrap_err();
        assert_eq!((e.line, e.column), (3, 2));
        assert_eq!(
            e.render(body),
            "line 3, column 2: `}` closes nothing: a kernel body's braces, parentheses and \
             brackets must balance (a body cannot close the kernel's function)\n  }}\n   ^"
        );
        let e = check_body("w = (x];").unwrap_err();
        assert!(
            e.to_string()
                .contains("`]` does not close the `(` at line 1, column 5"),
            "{e}"
        );
    }
}
