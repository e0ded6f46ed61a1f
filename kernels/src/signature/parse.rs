//! The parser of a signature list: linear in the length of the list, every mistake reported at
//! its own byte range.

use std::ops::Range;

use super::{Param, ParamType, ScalarType, SignatureError, SignatureList};
use crate::names::check_param_name;

/// Splits `src` into words with their byte ranges, and commas as separators.
fn tokens(src: &str) -> Vec<(Range<usize>, &str)> {
    let mut out = Vec::new();
    let mut start = None;
    for (i, c) in src.char_indices() {
        let boundary = c.is_whitespace() || c == ',';
        match (boundary, start) {
            (true, Some(s)) => {
                out.push((s..i, &src[s..i]));
                start = None;
            }
            (false, None) => start = Some(i),
            _ => {}
        }
        if c == ',' {
            out.push((i..i + 1, ","));
        }
    }
    if let Some(s) = start {
        out.push((s..src.len(), &src[s..]));
    }
    out
}

const TYPE_HELP: &str = "expected a one-letter placeholder such as `T`, or one of bool, int8, int16, int32, int64, uint8, uint16, uint32, uint64, float16, bfloat16, float32, float64";

/// Parses one list (`"T x, raw float32 y"`). An empty or blank string is an empty list.
/// Returns every mistake found, not only the first.
pub fn parse_list(src: &str, list: SignatureList) -> Result<Vec<Param>, Vec<SignatureError>> {
    let (params, errors) = parse_list_partial(src, list);
    if errors.is_empty() {
        Ok(params)
    } else {
        Err(errors)
    }
}

/// The parameters that parse, and the mistakes in the others (so that later checks see the good
/// parameters and one mistake does not cascade into more).
pub(super) fn parse_list_partial(
    src: &str,
    list: SignatureList,
) -> (Vec<Param>, Vec<SignatureError>) {
    let err = |span: Range<usize>, message: String| SignatureError {
        list,
        span,
        message,
    };
    let unknown_keyword = |span: &Range<usize>, word: &str| {
        err(
            span.clone(),
            format!("unknown keyword `{word}` (the only keyword is `raw`)"),
        )
    };
    let mut params = Vec::new();
    let mut errors = Vec::new();
    let toks = tokens(src);
    if toks.is_empty() {
        return (params, errors);
    }
    // One pass over the tokens: each group of words ends at a comma or at the end.
    let mut group_start = 0;
    let mut previous_empty = false;
    for k in 0..=toks.len() {
        if k < toks.len() && toks[k].1 != "," {
            continue;
        }
        let group = &toks[group_start..k];
        group_start = k + 1;
        let Some(first) = group.first() else {
            // `a,,b` or a leading comma: the error is at the comma that ends the gap. A trailing
            // comma (`a,`): at that comma, unless it already ended an empty parameter.
            let at = match toks.get(k) {
                Some((comma, _)) => Some(comma.clone()),
                None if !previous_empty => toks.get(k.wrapping_sub(1)).map(|(r, _)| r.clone()),
                None => None,
            };
            if let Some(at) = at {
                errors.push(err(
                    at,
                    "empty parameter: expected `[raw] TYPE NAME`".to_string(),
                ));
            }
            previous_empty = true;
            continue;
        };
        previous_empty = false;
        let (raw, rest) = match first.1 {
            "raw" => (true, &group[1..]),
            _ => (false, group),
        };
        // `const T x`: the keyword is reported and the parameter after it still read, so that
        // its placeholder counts as bound and one mistake gives one error.
        let rest = match rest {
            [(span, word), tail @ ..] if !raw && tail.len() == 2 => {
                errors.push(unknown_keyword(span, word));
                tail
            }
            _ => rest,
        };
        match rest {
            [(ty_span, ty), (name_span, name)] => {
                let ty = if let Some(t) = ScalarType::from_name(ty) {
                    Some(ParamType::Concrete(t))
                } else if ty.len() == 1 && ty.chars().all(|c| c.is_ascii_uppercase()) {
                    ty.chars().next().map(ParamType::Placeholder)
                } else {
                    errors.push(err(
                        ty_span.clone(),
                        format!("unknown type `{ty}` ({TYPE_HELP})"),
                    ));
                    None
                };
                if let Err(e) = check_param_name(name) {
                    errors.push(err(name_span.clone(), e.to_string()));
                }
                if let Some(ty) = ty {
                    params.push(Param {
                        raw,
                        ty,
                        name: name.to_string(),
                        name_span: name_span.clone(),
                        type_span: ty_span.clone(),
                    });
                }
            }
            [(span, word), _, _, ..] if !raw => errors.push(unknown_keyword(span, word)),
            _ => {
                let span = first.0.start..group.last().map_or(first.0.end, |(r, _)| r.end);
                let text = &src[span.clone()];
                errors.push(err(
                    span,
                    format!("`{text}` is not a parameter: expected `[raw] TYPE NAME`"),
                ));
            }
        }
    }
    (params, errors)
}
