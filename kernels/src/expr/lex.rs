//! The tokens of a body: identifiers, numbers and the punctuators of the expression language,
//! each with its byte span; comments and blanks are skipped. What the language has no use for
//! (strings, brackets, directives, `%`, `&`, `|`, ...) is an error at its text.

use std::ops::Range;

use super::ExprError;

/// One token.
#[derive(Clone, Debug, PartialEq)]
pub(crate) enum Tok {
    /// An identifier or keyword.
    Ident(String),
    /// A number literal's value (suffixes such as `f` dropped) and whether it was written as an
    /// integer.
    Num(f64, bool),
    /// A punctuator: `+ - * / < > ! = ? : , ; ( )` or a two-character one.
    Punct(&'static str),
}

/// A token and where it stands.
#[derive(Clone, Debug, PartialEq)]
pub(crate) struct Token {
    pub tok: Tok,
    pub span: Range<usize>,
}

const TWO: [&str; 10] = ["+=", "-=", "*=", "/=", "==", "!=", "<=", ">=", "&&", "||"];
const ONE: [&str; 15] = [
    "+", "-", "*", "/", "<", ">", "!", "=", "?", ":", ",", ";", "(", ")", "~",
];

/// `src`'s tokens.
pub(crate) fn lex(src: &str) -> Result<Vec<Token>, ExprError> {
    let b = src.as_bytes();
    let mut out = Vec::new();
    let mut i = 0;
    while i < b.len() {
        let c = b[i];
        let start = i;
        if c.is_ascii_whitespace() {
            i += 1;
            continue;
        }
        if src[i..].starts_with("//") {
            i = src[i..].find('\n').map_or(b.len(), |n| i + n);
            continue;
        }
        if src[i..].starts_with("/*") {
            match src[i + 2..].find("*/") {
                Some(n) => i += n + 4,
                None => {
                    return Err(ExprError::new(i..i + 2, "a `/*` comment is never closed"));
                }
            }
            continue;
        }
        if c.is_ascii_alphabetic() || c == b'_' {
            while i < b.len() && (b[i].is_ascii_alphanumeric() || b[i] == b'_') {
                i += 1;
            }
            out.push(Token {
                tok: Tok::Ident(src[start..i].to_string()),
                span: start..i,
            });
            continue;
        }
        if c.is_ascii_digit() || (c == b'.' && b.get(i + 1).is_some_and(u8::is_ascii_digit)) {
            let (value, integer, end) = number(src, i)?;
            out.push(Token {
                tok: Tok::Num(value, integer),
                span: start..end,
            });
            i = end;
            continue;
        }
        if let Some(p) = TWO.iter().find(|p| src[i..].starts_with(**p)) {
            out.push(Token {
                tok: Tok::Punct(p),
                span: i..i + 2,
            });
            i += 2;
            continue;
        }
        if let Some(p) = ONE.iter().find(|p| src[i..].starts_with(**p)) {
            if *p == "~" {
                return Err(ExprError::new(
                    i..i + 1,
                    "the bitwise `~` is not in the expression language",
                ));
            }
            out.push(Token {
                tok: Tok::Punct(p),
                span: i..i + 1,
            });
            i += 1;
            continue;
        }
        let ch = src[i..].chars().next().expect("a character");
        let span = i..i + ch.len_utf8();
        let what = match ch {
            '"' | '\'' => "a string or character literal",
            '[' | ']' => "indexing (`[`) of a pointer or an array",
            '{' | '}' => "a block (`{`): write the body as a list of assignments",
            '#' => "a preprocessor directive",
            '%' => "the remainder `%` (use `fmod`, which is not differentiable either)",
            '&' => "`&` (an address, or a bitwise and)",
            '|' | '^' => "a bitwise operator",
            '.' => "a member access (`.`)",
            _ => "this character",
        };
        return Err(ExprError::new(
            span,
            format!("{what} is not in the expression language"),
        ));
    }
    Ok(out)
}

/// The number starting at byte `at`: its value, whether it is an integer, and its end.
fn number(src: &str, at: usize) -> Result<(f64, bool, usize), ExprError> {
    let b = src.as_bytes();
    let mut i = at;
    if src[i..].starts_with("0x") || src[i..].starts_with("0X") {
        i += 2;
        while i < b.len() && b[i].is_ascii_hexdigit() {
            i += 1;
        }
        let v = u64::from_str_radix(&src[at + 2..i], 16)
            .map_err(|_| ExprError::new(at..i, "a hexadecimal literal out of range"))?;
        while i < b.len() && matches!(b[i], b'u' | b'U' | b'l' | b'L') {
            i += 1;
        }
        return Ok((v as f64, true, i));
    }
    let mut integer = true;
    while i < b.len() && b[i].is_ascii_digit() {
        i += 1;
    }
    if i < b.len() && b[i] == b'.' {
        integer = false;
        i += 1;
        while i < b.len() && b[i].is_ascii_digit() {
            i += 1;
        }
    }
    if i < b.len() && matches!(b[i], b'e' | b'E') {
        let mut j = i + 1;
        if j < b.len() && matches!(b[j], b'+' | b'-') {
            j += 1;
        }
        if j < b.len() && b[j].is_ascii_digit() {
            integer = false;
            while j < b.len() && b[j].is_ascii_digit() {
                j += 1;
            }
            i = j;
        }
    }
    let digits_end = i;
    while i < b.len() && matches!(b[i], b'f' | b'F' | b'u' | b'U' | b'l' | b'L') {
        if matches!(b[i], b'f' | b'F') {
            integer = false;
        }
        i += 1;
    }
    if i < b.len() && (b[i].is_ascii_alphanumeric() || b[i] == b'_' || b[i] == b'.') {
        let mut end = i;
        while end < b.len() && (b[end].is_ascii_alphanumeric() || b[end] == b'_' || b[end] == b'.')
        {
            end += 1;
        }
        return Err(ExprError::new(
            at..end,
            "a number this language does not read",
        ));
    }
    let value: f64 = src[at..digits_end]
        .parse()
        .map_err(|_| ExprError::new(at..i, "a number this language does not read"))?;
    Ok((value, integer, i))
}
