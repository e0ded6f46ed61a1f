//! The signature grammar of elementwise kernels.
//!
//! A signature is a comma-separated list of parameters, each `[raw] TYPE NAME`:
//!
//! - `TYPE` is a one-letter type placeholder (`T`, `U`, ...), bound at launch from the dtypes of
//!   the array inputs that use it, or a concrete type: `bool`, `int32`, `int64`, `float16`,
//!   `bfloat16`, `float32`, `float64`.
//! - `raw` marks an array the kernel body indexes itself (with `i` and the loop size `n`)
//!   instead of reading the element at the current index.
//! - `NAME` is a C identifier; `i`, `n` and names starting with `_` are reserved.
//!
//! ```
//! use kusari_kernels::{ElementwiseSignature, ParamType};
//! let sig = ElementwiseSignature::new("T x, T y, raw float32 table", "T w", "T alpha").unwrap();
//! assert_eq!(sig.inputs[2].name, "table");
//! assert!(sig.inputs[2].raw);
//! assert_eq!(sig.outputs[0].ty, ParamType::Placeholder('T'));
//!
//! let err = ElementwiseSignature::new("T x, flaot y", "U w", "").unwrap_err();
//! assert_eq!(err.len(), 2); // every mistake at once: an unknown type, an unbound placeholder
//! ```

use std::fmt;
use std::ops::Range;

/// A concrete element type of a kernel parameter.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub enum ScalarType {
    /// `bool`
    Bool,
    /// `int32`
    Int32,
    /// `int64`
    Int64,
    /// `float16`
    Float16,
    /// `bfloat16`
    BFloat16,
    /// `float32`
    Float32,
    /// `float64`
    Float64,
}

impl ScalarType {
    /// Every concrete type, in the order messages list them.
    pub const ALL: [ScalarType; 7] = [
        ScalarType::Bool,
        ScalarType::Int32,
        ScalarType::Int64,
        ScalarType::Float16,
        ScalarType::BFloat16,
        ScalarType::Float32,
        ScalarType::Float64,
    ];

    /// The name used in signatures (NumPy's).
    pub fn name(self) -> &'static str {
        match self {
            ScalarType::Bool => "bool",
            ScalarType::Int32 => "int32",
            ScalarType::Int64 => "int64",
            ScalarType::Float16 => "float16",
            ScalarType::BFloat16 => "bfloat16",
            ScalarType::Float32 => "float32",
            ScalarType::Float64 => "float64",
        }
    }

    /// The type named `name` in a signature.
    pub fn from_name(name: &str) -> Option<ScalarType> {
        ScalarType::ALL.into_iter().find(|t| t.name() == name)
    }
}

impl fmt::Display for ScalarType {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(self.name())
    }
}

/// The type of a parameter: a placeholder bound at launch, or a concrete type.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub enum ParamType {
    /// A one-letter placeholder such as `T`.
    Placeholder(char),
    /// A concrete element type.
    Concrete(ScalarType),
}

impl fmt::Display for ParamType {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            ParamType::Placeholder(c) => write!(f, "{c}"),
            ParamType::Concrete(t) => write!(f, "{t}"),
        }
    }
}

/// One parameter of a signature, with where it sits in the source string.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Param {
    /// Whether the body indexes the array itself.
    pub raw: bool,
    /// The element type.
    pub ty: ParamType,
    /// The name used in the body.
    pub name: String,
    /// Byte range of the name in the source string.
    pub name_span: Range<usize>,
    /// Byte range of the type in the source string.
    pub type_span: Range<usize>,
}

/// Which list of an elementwise signature a parameter or an error belongs to.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub enum SignatureList {
    /// The array inputs.
    Inputs,
    /// The array outputs.
    Outputs,
    /// The scalar parameters.
    Params,
}

impl fmt::Display for SignatureList {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(match self {
            SignatureList::Inputs => "inputs",
            SignatureList::Outputs => "outputs",
            SignatureList::Params => "params",
        })
    }
}

/// A mistake in a signature: what is wrong and where (a byte range of the source string).
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct SignatureError {
    /// The list whose string holds the mistake.
    pub list: SignatureList,
    /// Byte range of the offending text.
    pub span: Range<usize>,
    /// What is wrong.
    pub message: String,
}

impl SignatureError {
    /// The message followed by the source line with the offending text underlined:
    ///
    /// ```text
    /// unknown type `Q` (expected a one-letter placeholder such as `T`, or one of bool, ...)
    ///   T x, Q y
    ///        ^
    /// ```
    pub fn render(&self, source: &str) -> String {
        let start = source[..self.span.start].chars().count();
        let width = source[self.span.clone()].chars().count().max(1);
        format!(
            "{}\n  {source}\n  {}{}",
            self.message,
            " ".repeat(start),
            "^".repeat(width)
        )
    }
}

impl fmt::Display for SignatureError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "{}: {}", self.list, self.message)
    }
}

impl std::error::Error for SignatureError {}

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

fn is_identifier(name: &str) -> bool {
    let mut chars = name.chars();
    chars
        .next()
        .is_some_and(|c| c.is_ascii_alphabetic() || c == '_')
        && chars.all(|c| c.is_ascii_alphanumeric() || c == '_')
}

const TYPE_HELP: &str = "expected a one-letter placeholder such as `T`, or one of bool, int32, int64, float16, bfloat16, float32, float64";

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
fn parse_list_partial(src: &str, list: SignatureList) -> (Vec<Param>, Vec<SignatureError>) {
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
    for group in toks.split(|(_, t)| *t == ",") {
        let Some(first) = group.first() else {
            // `a,,b` or a trailing comma: point at the comma after the gap.
            let at = toks
                .iter()
                .zip(toks.iter().skip(1))
                .find(|((_, a), (_, b))| *a == "," && *b == ",")
                .map(|(_, (r, _))| r.clone())
                .or_else(|| toks.last().map(|(r, _)| r.clone()))
                .unwrap_or(0..0);
            errors.push(err(
                at,
                "empty parameter: expected `[raw] TYPE NAME`".to_string(),
            ));
            continue;
        };
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
                if !is_identifier(name) {
                    errors.push(err(
                        name_span.clone(),
                        format!("`{name}` is not a valid parameter name"),
                    ));
                } else if *name == "i" || *name == "n" || name.starts_with('_') {
                    errors.push(err(
                        name_span.clone(),
                        format!("`{name}` is reserved (the kernel defines `i` and `n`, and names starting with `_`)"),
                    ));
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
                let span = group.first().map(|(r, _)| r.start).unwrap_or(0)
                    ..group.last().map(|(r, _)| r.end).unwrap_or(0);
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

/// The three lists of an elementwise kernel, checked together.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct ElementwiseSignature {
    /// Array inputs.
    pub inputs: Vec<Param>,
    /// Array outputs.
    pub outputs: Vec<Param>,
    /// Scalar parameters.
    pub params: Vec<Param>,
}

impl ElementwiseSignature {
    /// Parses and checks a kernel's inputs, outputs and scalar params. Besides each list's own
    /// grammar it checks that names are unique across the lists, that there is at least one
    /// output, and that every placeholder is bound by an array input. Every mistake is returned.
    pub fn new(inputs: &str, outputs: &str, params: &str) -> Result<Self, Vec<SignatureError>> {
        let mut errors = Vec::new();
        let mut parse = |src: &str, list| {
            let (params, e) = parse_list_partial(src, list);
            errors.extend(e);
            params
        };
        let sig = ElementwiseSignature {
            inputs: parse(inputs, SignatureList::Inputs),
            outputs: parse(outputs, SignatureList::Outputs),
            params: parse(params, SignatureList::Params),
        };
        if sig.outputs.is_empty() && !errors.iter().any(|e| e.list == SignatureList::Outputs) {
            errors.push(SignatureError {
                list: SignatureList::Outputs,
                span: 0..outputs.len(),
                message: "a kernel needs at least one output".to_string(),
            });
        }
        let mut seen: Vec<(&str, SignatureList)> = Vec::new();
        for (list, p) in sig.lists() {
            if let Some((_, first)) = seen.iter().find(|(name, _)| *name == p.name) {
                errors.push(SignatureError {
                    list,
                    span: p.name_span.clone(),
                    message: format!("duplicate parameter name `{}` (already in {first})", p.name),
                });
            }
            seen.push((&p.name, list));
        }
        let bound: Vec<char> = sig
            .inputs
            .iter()
            .filter_map(|p| match p.ty {
                ParamType::Placeholder(c) => Some(c),
                ParamType::Concrete(_) => None,
            })
            .collect();
        for (list, p) in sig.lists() {
            if let ParamType::Placeholder(c) = p.ty {
                if !bound.contains(&c) {
                    errors.push(SignatureError {
                        list,
                        span: p.type_span.clone(),
                        message: format!(
                            "type placeholder `{c}` is bound by no array input: use it for an input, or give a concrete type"
                        ),
                    });
                }
            }
        }
        if errors.is_empty() {
            Ok(sig)
        } else {
            Err(errors)
        }
    }

    /// Every parameter with its list: inputs, then outputs, then params.
    pub fn lists(&self) -> impl Iterator<Item = (SignatureList, &Param)> {
        let inputs = self.inputs.iter().map(|p| (SignatureList::Inputs, p));
        let outputs = self.outputs.iter().map(|p| (SignatureList::Outputs, p));
        let params = self.params.iter().map(|p| (SignatureList::Params, p));
        inputs.chain(outputs).chain(params)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn errors(inputs: &str, outputs: &str, params: &str) -> Vec<String> {
        ElementwiseSignature::new(inputs, outputs, params)
            .unwrap_err()
            .into_iter()
            .map(|e| e.message)
            .collect()
    }

    #[test]
    fn parses_placeholders_concrete_types_and_raw() {
        let sig = ElementwiseSignature::new(" T x ,T y,  raw float64 w", "T z, int32 k", "T alpha")
            .unwrap();
        let names: Vec<&str> = sig.lists().map(|(_, p)| p.name.as_str()).collect();
        assert_eq!(names, ["x", "y", "w", "z", "k", "alpha"]);
        assert_eq!(sig.inputs[2].ty, ParamType::Concrete(ScalarType::Float64));
        assert!(sig.inputs[2].raw && !sig.inputs[0].raw);
        assert_eq!(
            &" T x ,T y,  raw float64 w"[sig.inputs[2].name_span.clone()],
            "w"
        );
    }

    #[test]
    fn reports_every_mistake_with_its_span() {
        let src = "T x, Q1 y, T i, T x";
        // `i` is kept (its only mistake is being reserved) so it is not reported twice.
        let errs = ElementwiseSignature::new(src, "T w", "").unwrap_err();
        let spans: Vec<&str> = errs.iter().map(|e| &src[e.span.clone()]).collect();
        assert_eq!(spans, ["Q1", "i", "x"], "{errs:?}");
        assert_eq!(errs.len(), 3, "one error per mistake, no cascade: {errs:?}");
        assert!(errs[0].message.contains("unknown type `Q1`"));
        assert!(errs[1].message.contains("reserved"));
        assert!(errs[2].message.contains("duplicate parameter name `x`"));
    }

    #[test]
    fn placeholders_must_be_bound_by_an_array_input() {
        let e = errors("float32 x", "U w", "V alpha");
        assert_eq!(e.len(), 2);
        assert!(e[0].contains("`U` is bound by no array input"));
        assert!(e[1].contains("`V` is bound by no array input"));
    }

    #[test]
    fn a_bad_input_does_not_also_report_its_placeholder_unbound() {
        assert_eq!(errors("const T x", "T w", "").len(), 1);
    }

    #[test]
    fn rejects_keywords_reserved_names_and_bad_shapes() {
        assert!(errors("mut T x", "T w", "")[0].contains("unknown keyword `mut`"));
        assert!(errors("T _tmp", "T w", "")[0].contains("reserved"));
        assert!(errors("T n", "T w", "")[0].contains("reserved"));
        assert!(errors("T", "T w", "")[0].contains("not a parameter"));
        assert!(errors("T x,, T y", "T w", "")[0].contains("empty parameter"));
        assert!(errors("T x", "", "")[0].contains("at least one output"));
        assert!(errors("T 1x", "T w", "")[0].contains("not a valid parameter name"));
        assert!(errors("T x", "T x", "")[0]
            .contains("duplicate parameter name `x` (already in inputs)"));
    }

    #[test]
    fn render_underlines_the_offending_text() {
        let src = "T x, flaot y";
        let e = &ElementwiseSignature::new(src, "T w", "").unwrap_err()[0];
        assert_eq!(e.render(src).lines().nth(2), Some("       ^^^^^"));
    }
}
