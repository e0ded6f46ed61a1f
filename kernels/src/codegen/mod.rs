//! CUDA source for an elementwise kernel: a pure function of the signature, the body, the types
//! bound to its placeholders and the indexing the launch needs. No GPU, no compiler.
//!
//! The generated kernel runs a grid-stride loop over `n` elements. Each non-`raw` input is read
//! into a `const` local named as in the signature, each non-`raw` output is a reference to its
//! element, and `raw` arrays are passed as pointers for the body to index with `i` (the loop
//! index) and `n` (the element count). A `#line` directive before the body makes NVRTC report
//! errors as lines of the user's body. As in CuPy (`${operation};`), the body may leave out the
//! `;` after its last statement: one is added after its last token
//! ([`terminated`](crate::body::terminated)), on the same line.
//!
//! [`generate_code`] takes the rest of CuPy's kernel code too ([`KernelCode`]): a `preamble` at
//! file scope after the placeholders' `typedef`s, `loop_prep` before the loop and `after_loop`
//! after it, each with its own `#line` directive.
//!
//! - [`Indexing::Contiguous`]: every array is C-contiguous with the loop's shape, so element `i`
//!   is at offset `i`.
//! - [`Indexing::Strided`]: shapes and strides (in elements, possibly zero for broadcast axes or
//!   negative for flipped ones) are passed by value and each offset is computed from `i`; no array
//!   is copied.
//!
//! [`IndexWidth::I32`] is used while `n` fits in 31 bits; above that, 64-bit indexing.
//!
//! `float16` and `bfloat16` are kusari's own 2-byte structs, defined by a prelude
//! ([`HALF_PRELUDE`]) at the top of any kernel that uses them: no CUDA header is included, so the
//! source compiles with NVRTC alone. In a body they behave like `float` (each value converts to
//! `float` for arithmetic and rounds back on assignment).
//!
//! ```
//! use kusari_kernels::codegen::{generate, Indexing, IndexWidth};
//! use kusari_kernels::{ElementwiseSignature, ScalarType};
//! let sig = ElementwiseSignature::new("T x, T y", "T w", "").unwrap();
//! let src = generate("add", &sig, "w = x + y;", &[('T', ScalarType::Float32)],
//!                    Indexing::Contiguous, IndexWidth::I32).unwrap();
//! assert!(src.source.contains("typedef float T;"));
//! assert_eq!(src.entry, "add__contiguous_i32");
//! ```

use std::fmt::Write;

use crate::body::check_body;
use crate::names::check_kernel_name;
use crate::signature::{ElementwiseSignature, Param, ParamType, ScalarType};

mod half;

pub use half::{BFLOAT16_PRELUDE, FLOAT16_PRELUDE, HALF_PRELUDE, half_prelude};

/// How element offsets are found.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub enum Indexing {
    /// All arrays C-contiguous with the loop's shape: offset = `i`.
    Contiguous,
    /// Shapes and strides passed in; `ndim` is baked into the kernel.
    Strided {
        /// Number of dimensions of the loop's shape.
        ndim: usize,
    },
}

/// The integer type of `i` and `n`.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub enum IndexWidth {
    /// `unsigned int`, for fewer than 2^31 elements.
    I32,
    /// `long long`, above that.
    I64,
}

impl IndexWidth {
    /// The width needed for `n` elements.
    pub fn for_len(n: usize) -> IndexWidth {
        if n < (1 << 31) {
            IndexWidth::I32
        } else {
            IndexWidth::I64
        }
    }
}

/// Generated CUDA source and where the user's body starts in it.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct KernelSource {
    /// The `extern "C"` entry point: the kernel's name and its variant.
    pub entry: String,
    /// The whole translation unit.
    pub source: String,
}

impl KernelSource {
    /// The source with line numbers, for error messages.
    pub fn numbered(&self) -> String {
        self.source
            .lines()
            .enumerate()
            .map(|(i, l)| format!("{:4} | {l}\n", i + 1))
            .collect()
    }
}

/// The code of an elementwise kernel, as CuPy's `ElementwiseKernel` takes it: the loop `body`
/// and the optional `preamble` (file scope, after the `typedef`s), `loop_prep` (in the kernel,
/// before the loop) and `after_loop` (after it). Empty parts generate nothing.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct KernelCode<'a> {
    /// Helper functions, constants and types before the kernel.
    pub preamble: &'a str,
    /// Code run by each thread before the loop.
    pub loop_prep: &'a str,
    /// The loop body.
    pub body: &'a str,
    /// Code run by each thread after the loop.
    pub after_loop: &'a str,
}

impl<'a> KernelCode<'a> {
    /// Just a loop body.
    pub fn body(body: &'a str) -> Self {
        KernelCode {
            body,
            ..KernelCode::default()
        }
    }

    /// Each part with its name (`preamble`, `loop_prep`, `body`, `after_loop`), in the order
    /// they appear in the generated source.
    pub fn parts(&self) -> [(&'static str, &'a str); 4] {
        [
            ("preamble", self.preamble),
            ("loop_prep", self.loop_prep),
            ("body", self.body),
            ("after_loop", self.after_loop),
        ]
    }
}

/// The CUDA C type of a concrete element type. The half types are kusari's own `float16` and
/// `bfloat16` structs from [`HALF_PRELUDE`], not CUDA's `__half` / `__nv_bfloat16`.
pub fn c_type(t: ScalarType) -> &'static str {
    match t {
        ScalarType::Bool => "bool",
        ScalarType::Int8 => "signed char",
        ScalarType::Int16 => "short",
        ScalarType::Int32 => "int",
        ScalarType::Int64 => "long long",
        ScalarType::UInt8 => "unsigned char",
        ScalarType::UInt16 => "unsigned short",
        ScalarType::UInt32 => "unsigned int",
        ScalarType::UInt64 => "unsigned long long",
        ScalarType::Float16 => "float16",
        ScalarType::BFloat16 => "bfloat16",
        ScalarType::Float32 => "float",
        ScalarType::Float64 => "double",
    }
}

fn type_name(p: &Param) -> String {
    match p.ty {
        ParamType::Placeholder(c) => c.to_string(),
        ParamType::Concrete(t) => c_type(t).to_string(),
    }
}

/// Why CUDA source could not be generated: what a caller can match on (the runtime wraps it in
/// its own error with the kernel's name).
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum CodegenError {
    /// The kernel's name is not a name the generated code can use.
    Name(crate::names::NameError),
    /// The body could leave the kernel's loop (unbalanced brackets, directives, ...).
    Body {
        /// The kernel's name.
        kernel: String,
        /// What is wrong, and where.
        error: crate::body::BodyError,
    },
    /// The preamble, `loop_prep` or `after_loop` fails the body's check
    /// ([`check_body`]): unbalanced brackets, directives, ...
    Code {
        /// The kernel's name.
        kernel: String,
        /// Which part: `preamble`, `loop_prep` or `after_loop`.
        part: &'static str,
        /// What is wrong, and where.
        error: Box<crate::body::BodyError>,
    },
    /// A type placeholder that no type was bound to.
    UnboundPlaceholder {
        /// The kernel's name.
        kernel: String,
        /// The placeholder letter.
        placeholder: char,
    },
    /// An element type the generated code does not support here.
    UnsupportedType {
        /// What was being generated, e.g. `reduction sum`.
        what: String,
        /// The element type.
        ty: ScalarType,
        /// What to do instead.
        hint: &'static str,
    },
    /// A reduction kernel's `reduce_type` that the generated code cannot name.
    ReduceType {
        /// The kernel's name.
        kernel: String,
        /// What is wrong.
        message: String,
    },
}

impl std::fmt::Display for CodegenError {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match self {
            CodegenError::Name(e) => write!(f, "{e}"),
            CodegenError::Body { kernel, error } => write!(f, "kernel {kernel}: body: {error}"),
            CodegenError::Code {
                kernel,
                part,
                error,
            } => write!(f, "kernel {kernel}: {part}: {}", error.message_in(part)),
            CodegenError::UnboundPlaceholder {
                kernel,
                placeholder,
            } => write!(
                f,
                "kernel {kernel}: type placeholder `{placeholder}` is not bound"
            ),
            CodegenError::UnsupportedType { what, ty, hint } => {
                write!(f, "{what}: {ty} is not supported ({hint})")
            }
            CodegenError::ReduceType { kernel, message } => write!(f, "kernel {kernel}: {message}"),
        }
    }
}

impl std::error::Error for CodegenError {
    fn source(&self) -> Option<&(dyn std::error::Error + 'static)> {
        match self {
            CodegenError::Name(e) => Some(e),
            CodegenError::Body { error, .. } => Some(error),
            CodegenError::Code { error, .. } => Some(error.as_ref()),
            _ => None,
        }
    }
}

/// The kernel's CUDA source. `types` binds every placeholder the signature uses (see
/// `ElementwiseKernel::bind` in the runtime); a placeholder left unbound is an error, and so are
/// a name that is no C identifier or a keyword ([`check_kernel_name`]) and a body that does not
/// balance its brackets ([`check_body`]), which could close the kernel's function.
///
/// ```
/// use kusari_kernels::codegen::{generate, Indexing, IndexWidth};
/// use kusari_kernels::ElementwiseSignature;
/// let sig = ElementwiseSignature::new("float32 x", "float32 w", "").unwrap();
/// let generated = |name, body| generate(name, &sig, body, &[], Indexing::Contiguous, IndexWidth::I32);
/// assert!(generated("mul-add", "w = x;").unwrap_err().to_string().contains("`mul-add` is not a valid kernel name"));
/// assert!(generated("k", "w = x; } }").unwrap_err().to_string().contains("`}` closes nothing"));
/// ```
pub fn generate(
    name: &str,
    sig: &ElementwiseSignature,
    body: &str,
    types: &[(char, ScalarType)],
    indexing: Indexing,
    width: IndexWidth,
) -> Result<KernelSource, CodegenError> {
    generate_code(name, sig, KernelCode::body(body), types, indexing, width)
}

/// [`generate`] with a preamble, `loop_prep` and `after_loop` ([`KernelCode`]), each checked as
/// the body is ([`check_body`]).
///
/// ```
/// use kusari_kernels::codegen::{generate_code, IndexWidth, Indexing, KernelCode};
/// use kusari_kernels::{ElementwiseSignature, ScalarType};
/// let sig = ElementwiseSignature::new("T x", "T w", "").unwrap();
/// let code = KernelCode {
///     preamble: "__device__ T twice(T v) { return v + v; }",
///     body: "w = twice(x);",
///     ..KernelCode::default()
/// };
/// let src = generate_code("k", &sig, code, &[('T', ScalarType::Float32)],
///                         Indexing::Contiguous, IndexWidth::I32).unwrap();
/// let (typedef, preamble) = (src.source.find("typedef float T;"), src.source.find("twice(T v)"));
/// assert!(typedef < preamble && preamble < src.source.find("__global__"));
/// let bad = KernelCode { loop_prep: "{", ..code };
/// let e = generate_code("k", &sig, bad, &[('T', ScalarType::Float32)],
///                       Indexing::Contiguous, IndexWidth::I32).unwrap_err();
/// assert!(e.to_string().starts_with("kernel k: loop_prep: "), "{e}");
/// ```
pub fn generate_code(
    name: &str,
    sig: &ElementwiseSignature,
    code: KernelCode<'_>,
    types: &[(char, ScalarType)],
    indexing: Indexing,
    width: IndexWidth,
) -> Result<KernelSource, CodegenError> {
    generate_code_aliasing(name, sig, code, types, indexing, width, Aliasing::Distinct)
}

/// Whether a launch's non-`raw` inputs may be its outputs, which decides whether their pointers
/// can be `__restrict__` (letting the compiler batch loads ahead of stores and use the
/// read-only data path).
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, Hash)]
pub enum Aliasing {
    /// Every array argument is its own memory (outputs the launch allocates): every pointer is
    /// `__restrict__`.
    #[default]
    Distinct,
    /// The caller gives the outputs, and an input may be the very output it is read into (an
    /// in-place launch reads element `i` before writing it): only `raw` pointers, which never
    /// alias another argument, are `__restrict__`.
    InPlace,
}

/// [`generate_code`] for a launch whose outputs may alias its inputs as `aliasing` says.
///
/// ```
/// use kusari_kernels::codegen::{generate_code_aliasing, Aliasing, IndexWidth, Indexing, KernelCode};
/// use kusari_kernels::{ElementwiseSignature, ScalarType};
/// let sig = ElementwiseSignature::new("T x", "T w", "").unwrap();
/// let types = [('T', ScalarType::Float32)];
/// let generated = |a| {
///     generate_code_aliasing("scale", &sig, KernelCode::body("w = 2 * x;"), &types,
///                            Indexing::Contiguous, IndexWidth::I32, a).unwrap().source
/// };
/// assert!(generated(Aliasing::Distinct).contains("const T* __restrict__ _in_x"));
/// assert!(generated(Aliasing::InPlace).contains("const T* _in_x"));
/// ```
pub fn generate_code_aliasing(
    name: &str,
    sig: &ElementwiseSignature,
    code: KernelCode<'_>,
    types: &[(char, ScalarType)],
    indexing: Indexing,
    width: IndexWidth,
    aliasing: Aliasing,
) -> Result<KernelSource, CodegenError> {
    check_kernel_name(name).map_err(CodegenError::Name)?;
    for (part, text) in code.parts() {
        check_body(text).map_err(|error| match part {
            "body" => CodegenError::Body {
                kernel: name.to_string(),
                error,
            },
            _ => CodegenError::Code {
                kernel: name.to_string(),
                part,
                error: Box::new(error),
            },
        })?;
    }
    // CuPy's `${operation};`: a body may leave out its last `;`.
    let body = crate::body::terminated(code.body);
    let mut used: Vec<char> = Vec::new();
    for (_, p) in sig.lists() {
        if let ParamType::Placeholder(c) = p.ty
            && !used.contains(&c)
        {
            used.push(c);
        }
    }
    let mut typedefs = String::new();
    for c in &used {
        let t = types
            .iter()
            .find(|(p, _)| p == c)
            .map(|(_, t)| *t)
            .ok_or_else(|| CodegenError::UnboundPlaceholder {
                kernel: name.to_string(),
                placeholder: *c,
            })?;
        let _ = writeln!(typedefs, "typedef {} {c};", c_type(t));
    }
    let all_types: Vec<ScalarType> = sig
        .lists()
        .filter_map(|(_, p)| match p.ty {
            ParamType::Concrete(t) => Some(t),
            ParamType::Placeholder(c) => types.iter().find(|(p, _)| *p == c).map(|(_, t)| *t),
        })
        .collect();
    let includes = half_prelude(&all_types);

    let (index_t, variant) = match width {
        IndexWidth::I32 => ("unsigned int", "i32"),
        IndexWidth::I64 => ("long long", "i64"),
    };
    let entry = match indexing {
        Indexing::Contiguous => format!("{name}__contiguous_{variant}"),
        Indexing::Strided { ndim } => format!("{name}__strided{ndim}_{variant}"),
    };
    // Arrays indexed by the loop (not raw), in signature order: inputs then outputs.
    let looped: Vec<&Param> = sig
        .inputs
        .iter()
        .chain(&sig.outputs)
        .filter(|p| !p.raw)
        .collect();

    let mut params: Vec<String> = Vec::new();
    // With `Aliasing::InPlace` a non-`raw` input may be the very output it is read into, so
    // only `raw` pointers, which never alias another argument, are `__restrict__` then.
    let pointer = |p: &Param, prefix: &str| match p.raw {
        true => format!("* __restrict__ {}", p.name),
        false if aliasing == Aliasing::Distinct => format!("* __restrict__ {prefix}{}", p.name),
        false => format!("* {prefix}{}", p.name),
    };
    for p in &sig.inputs {
        params.push(format!("const {}{}", type_name(p), pointer(p, "_in_")));
    }
    for p in &sig.outputs {
        params.push(format!("{}{}", type_name(p), pointer(p, "_out_")));
    }
    for p in &sig.params {
        params.push(format!("const {} {}", type_name(p), p.name));
    }
    params.push(format!("const {index_t} n"));

    let mut src = String::new();
    let _ = writeln!(src, "// kusari elementwise kernel `{name}` ({entry})");
    src.push_str(&includes);
    src.push_str(&typedefs);
    let line_of = |src: &str| src.lines().count() + 2;
    if !code.preamble.is_empty() {
        let _ = writeln!(src, "#line 1 \"{name}_preamble\"");
        for line in code.preamble.lines() {
            let _ = writeln!(src, "{line}");
        }
        let next = line_of(&src);
        let _ = writeln!(src, "#line {next} \"{entry}\"");
    }
    if let Indexing::Strided { ndim } = indexing {
        let nd = ndim.max(1);
        let _ = writeln!(
            src,
            "struct _Layout {{ long long shape[{nd}]; long long strides[{}][{nd}]; }};",
            looped.len().max(1)
        );
        params.push("const _Layout _layout".to_string());
    }
    let _ = writeln!(src, "extern \"C\" __global__ void {entry}(");
    let _ = writeln!(src, "    {}) {{", params.join(",\n    "));
    if !code.loop_prep.is_empty() {
        let _ = writeln!(src, "#line 1 \"{name}_loop_prep\"");
        for line in code.loop_prep.lines() {
            let _ = writeln!(src, "  {line}");
        }
        let next = line_of(&src);
        let _ = writeln!(src, "#line {next} \"{entry}\"");
    }
    let _ = writeln!(
        src,
        "  for ({index_t} i = ({index_t})blockIdx.x * blockDim.x + threadIdx.x; i < n; i += ({index_t})blockDim.x * gridDim.x) {{"
    );
    let offset = |k: usize| match indexing {
        Indexing::Contiguous => "i".to_string(),
        Indexing::Strided { .. } => format!("_off[{k}]"),
    };
    if let Indexing::Strided { ndim } = indexing {
        let _ = writeln!(src, "    long long _off[{}] = {{0}};", looped.len().max(1));
        let _ = writeln!(src, "    long long _rem = (long long)i;");
        let _ = writeln!(
            src,
            "    for (int _d = {} - 1; _d >= 0; --_d) {{",
            ndim.max(1)
        );
        let _ = writeln!(src, "      const long long _c = _rem % _layout.shape[_d];");
        let _ = writeln!(src, "      _rem /= _layout.shape[_d];");
        let _ = writeln!(
            src,
            "      for (int _a = 0; _a < {}; ++_a) _off[_a] += _c * _layout.strides[_a][_d];",
            looped.len()
        );
        let _ = writeln!(src, "    }}");
    }
    let looped_inputs = sig.inputs.iter().filter(|p| !p.raw).count();
    for (k, p) in looped.iter().enumerate() {
        if k < looped_inputs {
            let _ = writeln!(
                src,
                "    const {} {} = _in_{}[{}];",
                type_name(p),
                p.name,
                p.name,
                offset(k)
            );
        } else {
            let _ = writeln!(
                src,
                "    {}& {} = _out_{}[{}];",
                type_name(p),
                p.name,
                p.name,
                offset(k)
            );
        }
    }
    let _ = writeln!(src, "#line 1 \"{name}\"");
    for line in body.lines() {
        let _ = writeln!(src, "    {line}");
    }
    let _ = writeln!(src, "  }}");
    if !code.after_loop.is_empty() {
        let _ = writeln!(src, "#line 1 \"{name}_after_loop\"");
        for line in code.after_loop.lines() {
            let _ = writeln!(src, "  {line}");
        }
    }
    let _ = writeln!(src, "}}");
    Ok(KernelSource { entry, source: src })
}

#[cfg(test)]
mod tests {
    use super::*;

    /// Each `#line N "<entry>"` after a part of the user's code gives the next line its real
    /// number in the generated source, so errors outside the user's code point at it.
    #[test]
    fn line_directives_resume_the_generated_numbering_after_each_part() {
        let sig = ElementwiseSignature::new("T x", "T w", "").unwrap();
        let code = KernelCode {
            preamble: "__device__ T f(T v) {\n  return v;\n}",
            loop_prep: "int c = 0;\n(void)c;",
            body: "w = f(x);",
            after_loop: "(void)c;",
        };
        for indexing in [Indexing::Contiguous, Indexing::Strided { ndim: 2 }] {
            let src = generate_code(
                "k",
                &sig,
                code,
                &[('T', ScalarType::Float64)],
                indexing,
                IndexWidth::I32,
            )
            .unwrap();
            let lines: Vec<&str> = src.source.lines().collect();
            for part in ["preamble", "loop_prep", "after_loop"] {
                assert!(
                    lines.contains(&format!("#line 1 \"k_{part}\"").as_str()),
                    "{part}:\n{}",
                    src.source
                );
            }
            let resumes: Vec<usize> = lines
                .iter()
                .enumerate()
                .filter_map(|(at, l)| {
                    let n = l
                        .strip_prefix("#line ")?
                        .strip_suffix(&format!(" \"{}\"", src.entry))?;
                    // The directive is line at + 1; the line after it is at + 2.
                    assert_eq!(n.parse::<usize>().unwrap(), at + 2, "{l}");
                    Some(at)
                })
                .collect();
            assert_eq!(resumes.len(), 2, "after the preamble and loop_prep");
            let typedef = lines
                .iter()
                .position(|l| *l == "typedef double T;")
                .unwrap();
            let preamble = lines.iter().position(|l| l.contains("T f(T v)")).unwrap();
            let kernel = lines.iter().position(|l| l.contains("__global__")).unwrap();
            let prep = lines.iter().position(|l| l.contains("int c = 0;")).unwrap();
            let looped = lines.iter().position(|l| l.contains("for (")).unwrap();
            let after = lines.iter().rposition(|l| l.contains("(void)c;")).unwrap();
            assert!(typedef < preamble && preamble < kernel && kernel < prep && prep < looped);
            assert!(looped < after && after == lines.len() - 2, "{}", src.source);
        }
        // Without the parts, nothing of them is generated.
        let plain = generate(
            "k",
            &sig,
            "w = x;",
            &[('T', ScalarType::Float64)],
            Indexing::Contiguous,
            IndexWidth::I32,
        )
        .unwrap();
        assert_eq!(plain.source.matches("#line").count(), 1);
    }
}
