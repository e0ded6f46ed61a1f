//! Which names a kernel and its parameters may have: the one set of rules the `#[function_node]`
//! macro applies at compile time and `ElementwiseKernel` applies at run time.
//!
//! Every name is pasted into the generated CUDA C++ (see [`codegen`](crate::codegen)), which
//! NVRTC compiles and the emulated device compiles again with the host's C++ compiler. A name
//! that is not a plain identifier there fails inside the compiler with a message about the
//! generated code, or worse compiles into something else. So a name must be a C identifier and
//! must not be:
//!
//! - a C or C++ keyword, or an alternative operator token (`int`, `return`, `and`, `restrict`);
//! - a CUDA built-in variable (`threadIdx`, `blockIdx`, `blockDim`, `gridDim`, `warpSize`) or
//!   qualifier (`__global__`, `__device__`, `__shared__`, ...);
//! - a type or keyword of the signature grammar (`float16`, `int32`, `raw`, ...), which the
//!   generated code uses as type names;
//! - a macro of the C library headers the emulated device includes (`NULL`, `NAN`, `stdout`,
//!   ...);
//! - a name of kusari's generated code: `i`, `n`, anything starting with `_`, `kusari_` or
//!   `KUSARI_`;
//! - a type placeholder of the same signature (`T T`), checked by
//!   [`ElementwiseSignature::new`](crate::ElementwiseSignature::new).
//!
//! A kernel's name is only suffixed and pasted as the name of an `extern "C"` function, so it
//! must be a C identifier and not a keyword.
//!
//! ```
//! use kusari_kernels::names::{check_kernel_name, check_param_name, NameProblem};
//! assert!(check_param_name("alpha").is_ok());
//! let e = check_param_name("int").unwrap_err();
//! assert_eq!(e.problem, NameProblem::Keyword("C++"));
//! assert_eq!(e.to_string(), "`int` is a C++ keyword and cannot name a parameter");
//! assert!(check_kernel_name("mul_add").is_ok());
//! assert_eq!(check_kernel_name("mul-add").unwrap_err().problem, NameProblem::NotIdentifier);
//! ```

use std::fmt;

/// C++20's keywords and alternative operator tokens (NVRTC compiles C++17; the later ones are
/// refused too, so that a newer standard does not break a kernel).
const CXX_KEYWORDS: &[&str] = &[
    "alignas",
    "alignof",
    "and",
    "and_eq",
    "asm",
    "auto",
    "bitand",
    "bitor",
    "bool",
    "break",
    "case",
    "catch",
    "char",
    "char16_t",
    "char32_t",
    "char8_t",
    "class",
    "co_await",
    "co_return",
    "co_yield",
    "compl",
    "concept",
    "const",
    "const_cast",
    "consteval",
    "constexpr",
    "constinit",
    "continue",
    "decltype",
    "default",
    "delete",
    "do",
    "double",
    "dynamic_cast",
    "else",
    "enum",
    "explicit",
    "export",
    "extern",
    "false",
    "float",
    "for",
    "friend",
    "goto",
    "if",
    "inline",
    "int",
    "long",
    "mutable",
    "namespace",
    "new",
    "noexcept",
    "not",
    "not_eq",
    "nullptr",
    "operator",
    "or",
    "or_eq",
    "private",
    "protected",
    "public",
    "register",
    "reinterpret_cast",
    "requires",
    "return",
    "short",
    "signed",
    "sizeof",
    "static",
    "static_assert",
    "static_cast",
    "struct",
    "switch",
    "template",
    "this",
    "thread_local",
    "throw",
    "true",
    "try",
    "typedef",
    "typeid",
    "typename",
    "union",
    "unsigned",
    "using",
    "virtual",
    "void",
    "volatile",
    "wchar_t",
    "while",
    "xor",
    "xor_eq",
];

/// C's keywords that C++ lacks (C23's included; GCC's `typeof` too).
const C_KEYWORDS: &[&str] = &[
    "restrict",
    "typeof",
    "typeof_unqual",
    "_Alignas",
    "_Alignof",
    "_Atomic",
    "_BitInt",
    "_Bool",
    "_Complex",
    "_Decimal128",
    "_Decimal32",
    "_Decimal64",
    "_Generic",
    "_Imaginary",
    "_Noreturn",
    "_Static_assert",
    "_Thread_local",
];

/// The variables CUDA defines in every kernel.
const CUDA_BUILTINS: &[&str] = &["threadIdx", "blockIdx", "blockDim", "gridDim", "warpSize"];

/// CUDA's qualifiers and attributes.
const CUDA_QUALIFIERS: &[&str] = &[
    "__global__",
    "__device__",
    "__host__",
    "__shared__",
    "__constant__",
    "__managed__",
    "__grid_constant__",
    "__restrict__",
    "__noinline__",
    "__forceinline__",
    "__inline__",
    "__launch_bounds__",
    "__align__",
];

/// The signature grammar's words: its concrete types (also the names of kusari's half-precision
/// structs in the generated code) and its keyword.
const SIGNATURE_WORDS: &[&str] = &[
    "bool", "int8", "int16", "int32", "int64", "uint8", "uint16", "uint32", "uint64", "float16",
    "bfloat16", "float32", "float64", "raw",
];

/// Object-like macros of the C library headers that the emulated device's shim includes (a
/// parameter of that name would be replaced by the macro's value).
const LIBRARY_MACROS: &[&str] = &[
    "NULL",
    "NAN",
    "INFINITY",
    "HUGE_VAL",
    "HUGE_VALF",
    "HUGE_VALL",
    "EOF",
    "BUFSIZ",
    "FILENAME_MAX",
    "RAND_MAX",
    "M_E",
    "M_PI",
    "stdin",
    "stdout",
    "stderr",
];

/// The prefixes of the names kusari's generated code and the emulated device's shim define.
const GENERATED_PREFIXES: [&str; 2] = ["kusari_", "KUSARI_"];

/// What a name names.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub enum NameRole {
    /// A kernel (the `name` of an elementwise kernel).
    Kernel,
    /// A parameter of a kernel's signature. (Not `Parameter`: a second item of that name in
    /// kusari's dependencies makes rustc print `kusari::link::Parameter` in full in messages.)
    Param,
}

impl fmt::Display for NameRole {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(match self {
            NameRole::Kernel => "kernel",
            NameRole::Param => "parameter",
        })
    }
}

/// Why a name is refused.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub enum NameProblem {
    /// Not a C identifier (an ASCII letter or `_`, then ASCII letters, digits and `_`).
    NotIdentifier,
    /// A keyword of the language named (`"C++"` or `"C"`).
    Keyword(&'static str),
    /// A CUDA built-in variable such as `threadIdx`.
    CudaBuiltin,
    /// A CUDA qualifier such as `__global__`.
    CudaQualifier,
    /// A concrete type or the keyword of the signature grammar.
    SignatureWord,
    /// A macro of the C library.
    LibraryMacro,
    /// A name starting with `kusari_` or `KUSARI_`, kept for kusari's generated code.
    Generated,
    /// `i`, `n` or a name starting with `_`, which the generated kernel defines.
    Reserved,
    /// A type placeholder of the same signature.
    Placeholder,
}

/// A refused name: which, what it would have named, and why.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct NameError {
    /// The name as written.
    pub name: String,
    /// What it would have named.
    pub role: NameRole,
    /// Why it is refused.
    pub problem: NameProblem,
}

impl fmt::Display for NameError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        let (name, role) = (&self.name, self.role);
        let cannot = format!("and cannot name a {role}");
        match self.problem {
            NameProblem::NotIdentifier if name.is_empty() => write!(
                f,
                "the {role} name is empty: expected a C identifier (an ASCII letter or `_`, then letters, digits and `_`)"
            ),
            NameProblem::NotIdentifier => write!(
                f,
                "`{name}` is not a valid {role} name: expected a C identifier (an ASCII letter or `_`, then letters, digits and `_`)"
            ),
            NameProblem::Keyword(language) => {
                write!(f, "`{name}` is a {language} keyword {cannot}")
            }
            NameProblem::CudaBuiltin => write!(f, "`{name}` is a CUDA built-in variable {cannot}"),
            NameProblem::CudaQualifier => write!(f, "`{name}` is a CUDA qualifier {cannot}"),
            NameProblem::SignatureWord if name == "raw" => {
                write!(f, "`raw` is the signature's keyword {cannot}")
            }
            NameProblem::SignatureWord => {
                write!(f, "`{name}` is a type of the signature grammar {cannot}")
            }
            NameProblem::LibraryMacro => write!(f, "`{name}` is a macro of the C library {cannot}"),
            NameProblem::Generated => write!(
                f,
                "`{name}` is reserved: names starting with `kusari_` or `KUSARI_` belong to kusari's generated code"
            ),
            NameProblem::Reserved => write!(
                f,
                "`{name}` is reserved (the kernel defines `i` and `n`, and names starting with `_`)"
            ),
            NameProblem::Placeholder => {
                write!(
                    f,
                    "`{name}` is a type placeholder of this signature {cannot}"
                )
            }
        }
    }
}

impl std::error::Error for NameError {}

/// Whether `name` is a C identifier: an ASCII letter or `_`, then ASCII letters, digits and `_`.
pub fn is_c_identifier(name: &str) -> bool {
    let mut bytes = name.bytes();
    bytes
        .next()
        .is_some_and(|b| b.is_ascii_alphabetic() || b == b'_')
        && bytes.all(|b| b.is_ascii_alphanumeric() || b == b'_')
}

/// The keyword `name` is, with its language.
fn keyword(name: &str) -> Option<&'static str> {
    if CXX_KEYWORDS.contains(&name) {
        Some("C++")
    } else if C_KEYWORDS.contains(&name) {
        Some("C")
    } else {
        None
    }
}

/// Checks a kernel's name: a C identifier that is not a keyword.
pub fn check_kernel_name(name: &str) -> Result<(), NameError> {
    let problem = if !is_c_identifier(name) {
        NameProblem::NotIdentifier
    } else if let Some(language) = keyword(name) {
        NameProblem::Keyword(language)
    } else {
        return Ok(());
    };
    Err(NameError {
        name: name.to_string(),
        role: NameRole::Kernel,
        problem,
    })
}

/// Checks a parameter's name against every rule that does not depend on the rest of the
/// signature (see the module docs; the placeholders are checked with the whole signature).
pub fn check_param_name(name: &str) -> Result<(), NameError> {
    let problem = if !is_c_identifier(name) {
        NameProblem::NotIdentifier
    } else if let Some(language) = keyword(name) {
        NameProblem::Keyword(language)
    } else if CUDA_BUILTINS.contains(&name) {
        NameProblem::CudaBuiltin
    } else if CUDA_QUALIFIERS.contains(&name) {
        NameProblem::CudaQualifier
    } else if SIGNATURE_WORDS.contains(&name) {
        NameProblem::SignatureWord
    } else if LIBRARY_MACROS.contains(&name) {
        NameProblem::LibraryMacro
    } else if GENERATED_PREFIXES.iter().any(|p| name.starts_with(p)) {
        NameProblem::Generated
    } else if name == "i" || name == "n" || name.starts_with('_') {
        NameProblem::Reserved
    } else {
        return Ok(());
    };
    Err(NameError {
        name: name.to_string(),
        role: NameRole::Param,
        problem,
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    /// Every name tried, and the problem it must get (`None`: accepted).
    #[test]
    fn parameter_names() {
        let table: &[(&str, Option<NameProblem>)] = &[
            ("x", None),
            ("alpha_2", None),
            ("Tx", None),
            ("U", None), // a placeholder only when the signature uses it
            ("max", None),
            ("", Some(NameProblem::NotIdentifier)),
            ("1x", Some(NameProblem::NotIdentifier)),
            ("mul-add", Some(NameProblem::NotIdentifier)),
            ("naïve", Some(NameProblem::NotIdentifier)),
            ("x\"y", Some(NameProblem::NotIdentifier)),
            ("int", Some(NameProblem::Keyword("C++"))),
            ("return", Some(NameProblem::Keyword("C++"))),
            ("and", Some(NameProblem::Keyword("C++"))),
            ("char8_t", Some(NameProblem::Keyword("C++"))),
            ("restrict", Some(NameProblem::Keyword("C"))),
            ("_Bool", Some(NameProblem::Keyword("C"))),
            ("threadIdx", Some(NameProblem::CudaBuiltin)),
            ("blockDim", Some(NameProblem::CudaBuiltin)),
            ("warpSize", Some(NameProblem::CudaBuiltin)),
            ("__global__", Some(NameProblem::CudaQualifier)),
            ("__shared__", Some(NameProblem::CudaQualifier)),
            ("float16", Some(NameProblem::SignatureWord)),
            ("int32", Some(NameProblem::SignatureWord)),
            ("raw", Some(NameProblem::SignatureWord)),
            ("NULL", Some(NameProblem::LibraryMacro)),
            ("stdout", Some(NameProblem::LibraryMacro)),
            ("kusari_f32_to_f16", Some(NameProblem::Generated)),
            ("KUSARI_FLOAT16_DEFINED", Some(NameProblem::Generated)),
            ("i", Some(NameProblem::Reserved)),
            ("n", Some(NameProblem::Reserved)),
            ("_off", Some(NameProblem::Reserved)),
            ("_in_x", Some(NameProblem::Reserved)),
        ];
        for &(name, want) in table {
            assert_eq!(
                check_param_name(name).err().map(|e| e.problem),
                want,
                "{name:?}"
            );
        }
    }

    #[test]
    fn kernel_names() {
        let table: &[(&str, Option<NameProblem>)] = &[
            ("mul_add", None),
            ("_private", None),
            ("threadIdx", None), // suffixed in the entry point: no clash
            ("", Some(NameProblem::NotIdentifier)),
            ("mul-add", Some(NameProblem::NotIdentifier)),
            ("k\"); void f(", Some(NameProblem::NotIdentifier)),
            ("2x", Some(NameProblem::NotIdentifier)),
            ("return", Some(NameProblem::Keyword("C++"))),
            ("restrict", Some(NameProblem::Keyword("C"))),
        ];
        for &(name, want) in table {
            assert_eq!(
                check_kernel_name(name).err().map(|e| e.problem),
                want,
                "{name:?}"
            );
        }
    }

    #[test]
    fn messages_say_why() {
        let msg = |name| check_param_name(name).unwrap_err().to_string();
        assert_eq!(
            msg("return"),
            "`return` is a C++ keyword and cannot name a parameter"
        );
        assert_eq!(
            msg("threadIdx"),
            "`threadIdx` is a CUDA built-in variable and cannot name a parameter"
        );
        assert_eq!(
            msg("float16"),
            "`float16` is a type of the signature grammar and cannot name a parameter"
        );
        assert!(msg("mul-add").starts_with("`mul-add` is not a valid parameter name"));
        assert_eq!(
            check_kernel_name("").unwrap_err().to_string(),
            "the kernel name is empty: expected a C identifier (an ASCII letter or `_`, then letters, digits and `_`)"
        );
    }
}
