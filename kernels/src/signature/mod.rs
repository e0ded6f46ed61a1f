//! The signature grammar of elementwise kernels.
//!
//! A signature is a comma-separated list of parameters, each `[raw] TYPE NAME`:
//!
//! - `TYPE` is a one-letter type placeholder (`T`, `U`, ...), bound at launch from the dtypes of
//!   the array inputs that use it, or of the outputs the caller gives (CuPy's
//!   `'X x, Y y' -> 'Z z'` with `z` passed in), or a concrete type: `bool`, `int8`, `int16`,
//!   `int32`, `int64`, `uint8`, `uint16`, `uint32`, `uint64`, `float16`, `bfloat16`, `float32`,
//!   `float64` (NumPy's and CuPy's names).
//! - `raw` marks an array the kernel body indexes itself (with `i` and the loop size `n`)
//!   instead of reading the element at the current index.
//! - `NAME` is a C identifier that the generated CUDA C++ can use as a variable: not a keyword,
//!   a CUDA built-in, a type of the grammar, a placeholder of the same signature or a name of
//!   kusari's generated code (`i`, `n`, names starting with `_`); see [`names`](crate::names)
//!   for the full list.
//!
//! Parsing is linear in the length of the signature, and every mistake is reported at its own
//! byte range.
//!
//! ```
//! use kusari_kernels::{ElementwiseSignature, ParamType};
//! let sig = ElementwiseSignature::new("T x, T y, raw float32 table", "T w", "T alpha").unwrap();
//! assert_eq!(sig.inputs[2].name, "table");
//! assert!(sig.inputs[2].raw);
//! assert_eq!(sig.outputs[0].ty, ParamType::Placeholder('T'));
//!
//! let err = ElementwiseSignature::new("T x, flaot y", "T w", "U alpha").unwrap_err();
//! assert_eq!(err.len(), 2); // every mistake at once: an unknown type, an unbound placeholder
//! ```

use std::collections::hash_map::{Entry, HashMap};
use std::fmt;
use std::ops::Range;

use crate::names::{NameError, NameProblem, NameRole};

mod error;
mod parse;

pub(crate) use error::underline;
pub use error::{RENDER_CONTEXT, SignatureError};
pub use parse::parse_list;
use parse::parse_list_partial;

/// A concrete element type of a kernel parameter.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub enum ScalarType {
    /// `bool`
    Bool,
    /// `int8`
    Int8,
    /// `int16`
    Int16,
    /// `int32`
    Int32,
    /// `int64`
    Int64,
    /// `uint8`
    UInt8,
    /// `uint16`
    UInt16,
    /// `uint32`
    UInt32,
    /// `uint64`
    UInt64,
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
    pub const ALL: [ScalarType; 13] = [
        ScalarType::Bool,
        ScalarType::Int8,
        ScalarType::Int16,
        ScalarType::Int32,
        ScalarType::Int64,
        ScalarType::UInt8,
        ScalarType::UInt16,
        ScalarType::UInt32,
        ScalarType::UInt64,
        ScalarType::Float16,
        ScalarType::BFloat16,
        ScalarType::Float32,
        ScalarType::Float64,
    ];

    /// The name used in signatures (NumPy's).
    pub fn name(self) -> &'static str {
        match self {
            ScalarType::Bool => "bool",
            ScalarType::Int8 => "int8",
            ScalarType::Int16 => "int16",
            ScalarType::Int32 => "int32",
            ScalarType::Int64 => "int64",
            ScalarType::UInt8 => "uint8",
            ScalarType::UInt16 => "uint16",
            ScalarType::UInt32 => "uint32",
            ScalarType::UInt64 => "uint64",
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
    /// output, and that every placeholder can be bound: used by an input or an output (a
    /// placeholder of the scalar params alone has nothing to take its type from). A placeholder
    /// that only outputs use is bound by the outputs a caller gives; where the outputs are
    /// always allocated (an op, a reduction) [`unbound_by_inputs`](Self::unbound_by_inputs)
    /// names it. Every mistake is returned.
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
        // Placeholders are ASCII capitals: one flag per letter.
        let letter = |c: char| (c as usize).wrapping_sub('A' as usize);
        let mut used = [false; 26];
        let mut bound = [false; 26];
        for (list, p) in sig.lists() {
            if let ParamType::Placeholder(c) = p.ty {
                used[letter(c)] = true;
                bound[letter(c)] |= list != SignatureList::Params;
            }
        }
        let mut seen: HashMap<&str, SignatureList> = HashMap::with_capacity(sig.len());
        for (list, p) in sig.lists() {
            let mut name = p.name.chars();
            if let (Some(c @ 'A'..='Z'), None) = (name.next(), name.next())
                && used[letter(c)]
            {
                let e = NameError {
                    name: p.name.clone(),
                    role: NameRole::Param,
                    problem: NameProblem::Placeholder,
                };
                errors.push(SignatureError {
                    list,
                    span: p.name_span.clone(),
                    message: e.to_string(),
                });
            }
            match seen.entry(&p.name) {
                Entry::Occupied(first) => errors.push(SignatureError {
                    list,
                    span: p.name_span.clone(),
                    message: format!(
                        "duplicate parameter name `{}` (already in {})",
                        p.name,
                        first.get()
                    ),
                }),
                Entry::Vacant(slot) => {
                    slot.insert(list);
                }
            }
        }
        for (list, p) in sig.lists() {
            if let ParamType::Placeholder(c) = p.ty
                && !bound[letter(c)]
            {
                errors.push(SignatureError {
                        list,
                        span: p.type_span.clone(),
                        message: format!(
                            "type placeholder `{c}` is bound by no array: use it for an input or an output, or give a concrete type"
                        ),
                    });
            }
        }
        if errors.is_empty() {
            Ok(sig)
        } else {
            Err(errors)
        }
    }

    /// One error per placeholder that no input uses, at its first use: the mistakes of a
    /// signature whose outputs are always allocated, so that only the inputs can bind its
    /// placeholders (an op's `forward_gpu` kernel, a reduction kernel). `why` ends the message
    /// (what allocates the outputs).
    ///
    /// ```
    /// use kusari_kernels::ElementwiseSignature;
    /// let sig = ElementwiseSignature::new("X x, Y y", "Z z", "").unwrap(); // z given binds Z
    /// let e = sig.unbound_by_inputs("an op allocates its outputs");
    /// assert_eq!(e.len(), 1);
    /// assert_eq!(&"Z z"[e[0].span.clone()], "Z");
    /// ```
    pub fn unbound_by_inputs(&self, why: &str) -> Vec<SignatureError> {
        let mut reported: Vec<char> = Vec::new();
        let mut errors = Vec::new();
        for (list, p) in self.lists() {
            let ParamType::Placeholder(c) = p.ty else {
                continue;
            };
            if reported.contains(&c) || self.inputs.iter().any(|q| q.ty == p.ty) {
                continue;
            }
            reported.push(c);
            errors.push(SignatureError {
                list,
                span: p.type_span.clone(),
                message: format!(
                    "type placeholder `{c}` is bound by no array input ({why}): use it for an \
                     input, or give a concrete type"
                ),
            });
        }
        errors
    }

    /// The number of parameters in all three lists.
    pub fn len(&self) -> usize {
        self.inputs.len() + self.outputs.len() + self.params.len()
    }

    /// Whether the three lists are empty (never true of a parsed signature, which has an
    /// output).
    pub fn is_empty(&self) -> bool {
        self.len() == 0
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
    fn placeholders_must_be_bound_by_an_input_or_an_output() {
        let e = errors("float32 x", "float32 w", "V alpha, V beta");
        assert_eq!(e.len(), 2, "{e:?}");
        assert!(e[0].contains("`V` is bound by no array"), "{e:?}");
        // An output binds it when the caller gives that output, as in CuPy.
        let sig = ElementwiseSignature::new("X x, Y y", "Z z", "Z alpha").unwrap();
        let e = sig.unbound_by_inputs("outputs are allocated");
        assert_eq!(
            e.len(),
            1,
            "one error per placeholder, at its first use: {e:?}"
        );
        assert_eq!(e[0].list, SignatureList::Outputs);
        assert!(
            e[0].message
                .contains("`Z` is bound by no array input (outputs are allocated)")
        );
        let sig = ElementwiseSignature::new("T x", "T w, float32 v", "T alpha").unwrap();
        assert!(sig.unbound_by_inputs("").is_empty());
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
        assert!(
            errors("T x", "T x", "")[0]
                .contains("duplicate parameter name `x` (already in inputs)")
        );
    }

    /// Every name the generated C++ cannot use as a variable, in whichever list: one error, at
    /// the name, saying why. Columns: inputs, outputs, params, the offending text, the reason.
    #[test]
    fn rejects_names_the_generated_code_cannot_use() {
        let table: &[(&str, &str, &str, &str, &str)] = &[
            ("T int, T y", "T w", "", "int", "is a C++ keyword"),
            ("T x", "T return", "", "return", "is a C++ keyword"),
            ("T x", "T w", "float32 and", "and", "is a C++ keyword"),
            ("T x", "T w", "int32 restrict", "restrict", "is a C keyword"),
            (
                "T threadIdx",
                "T w",
                "",
                "threadIdx",
                "is a CUDA built-in variable",
            ),
            (
                "T x",
                "T blockDim",
                "",
                "blockDim",
                "is a CUDA built-in variable",
            ),
            (
                "T x",
                "T w",
                "T warpSize",
                "warpSize",
                "is a CUDA built-in variable",
            ),
            (
                "T __global__",
                "T w",
                "",
                "__global__",
                "is a CUDA qualifier",
            ),
            (
                "T x",
                "T w",
                "float32 __shared__",
                "__shared__",
                "is a CUDA qualifier",
            ),
            (
                "T float16",
                "T w",
                "",
                "float16",
                "is a type of the signature grammar",
            ),
            (
                "T x",
                "int32 int64",
                "",
                "int64",
                "is a type of the signature grammar",
            ),
            ("T x, T raw", "T w", "", "raw", "is the signature's keyword"),
            (
                "T x, T T",
                "T w",
                "",
                "T",
                "is a type placeholder of this signature",
            ),
            (
                "T x",
                "T w",
                "float32 T",
                "T",
                "is a type placeholder of this signature",
            ),
            (
                "T x, U y",
                "T U",
                "",
                "U",
                "is a type placeholder of this signature",
            ),
            (
                "T x",
                "T w",
                "float32 NULL",
                "NULL",
                "is a macro of the C library",
            ),
            (
                "T kusari_f32_to_f16",
                "T w",
                "",
                "kusari_f32_to_f16",
                "kusari's generated code",
            ),
            (
                "T x",
                "T KUSARI_FLOAT16_DEFINED",
                "",
                "KUSARI_FLOAT16_DEFINED",
                "generated code",
            ),
            ("T _in_x", "T w", "", "_in_x", "is reserved"),
            (
                "T mul-add",
                "T w",
                "",
                "mul-add",
                "is not a valid parameter name",
            ),
        ];
        for &(inputs, outputs, params, bad, why) in table {
            let errs = ElementwiseSignature::new(inputs, outputs, params).unwrap_err();
            assert_eq!(
                errs.len(),
                1,
                "{inputs:?} / {outputs:?} / {params:?}: {errs:?}"
            );
            let e = &errs[0];
            let src = match e.list {
                SignatureList::Inputs => inputs,
                SignatureList::Outputs => outputs,
                SignatureList::Params => params,
            };
            assert_eq!(&src[e.span.clone()], bad, "{e:?}");
            assert!(e.message.starts_with(&format!("`{bad}`")), "{e:?}");
            assert!(e.message.contains(why), "{bad}: {e:?}");
        }
        // A capital letter that is no placeholder of the signature is an ordinary name.
        assert!(ElementwiseSignature::new("T x, float32 U", "T w", "").is_ok());
    }

    /// Each empty parameter is reported at its own comma.
    #[test]
    fn empty_parameters_are_reported_at_their_commas() {
        let spans = |src: &str| -> Vec<(usize, usize)> {
            parse_list(src, SignatureList::Inputs)
                .unwrap_err()
                .into_iter()
                .inspect(|e| assert!(e.message.contains("empty parameter"), "{e:?}"))
                .map(|e| (e.span.start, e.span.end))
                .collect()
        };
        assert_eq!(spans("T x,, T y"), [(4, 5)]);
        assert_eq!(spans("T x, , T y, , T z"), [(5, 6), (12, 13)]);
        assert_eq!(spans(",T x"), [(0, 1)]);
        assert_eq!(spans("T x,"), [(3, 4)]);
        assert_eq!(spans("T x,,"), [(4, 5)], "one error per comma");
        assert_eq!(spans(","), [(0, 1)]);
    }

    /// The parser is linear: 10^5 parameters parse (this took 12 s when the duplicate check
    /// compared every pair of names). Not timed; the figures are in the commit message.
    #[test]
    fn a_hundred_thousand_parameters_parse() {
        let src: Vec<String> = (0..100_000).map(|k| format!("T x{k}")).collect();
        let src = src.join(", ");
        let sig = ElementwiseSignature::new(&src, "T w", "").unwrap();
        assert_eq!(sig.inputs.len(), 100_000);
        assert_eq!(&src[sig.inputs[99_999].name_span.clone()], "x99999");
        let errs = ElementwiseSignature::new(&src, "T x99999", "").unwrap_err();
        assert_eq!(errs.len(), 1);
        assert!(
            errs[0]
                .message
                .contains("duplicate parameter name `x99999`")
        );
    }

    /// 5·10^4 empty parameters: one error each, each at its own comma (they all pointed at the
    /// first one), and rendering them all is linear too.
    #[test]
    fn fifty_thousand_empty_parameters_each_get_their_own_span() {
        let src = format!("{}T x", ", ".repeat(50_000));
        let errs = ElementwiseSignature::new(&src, "T w", "").unwrap_err();
        assert_eq!(errs.len(), 50_000);
        for (k, e) in errs.iter().enumerate() {
            assert_eq!(e.span, 2 * k..2 * k + 1, "error {k}");
        }
        let rendered: usize = errs.iter().map(|e| e.render(&src).len()).sum();
        assert!(rendered < 50_000 * 200, "{rendered} bytes of messages");
    }
}
