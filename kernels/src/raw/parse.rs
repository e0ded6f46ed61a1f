//! The C declaration parser: the `__global__` functions a raw source declares
//! ([`parse_kernels`]), found in the tokens the compiler sees ([`super::preprocess`]: macros
//! expanded, conditions decided), each parameter list read into [`RawParam`]s, with `typedef`
//! and `using` aliases of types.

use std::collections::HashMap;
use std::rc::Rc;

use super::params::{CType, RawFunction, RawParam, RawParamType};
use super::preprocess::{PpKind, preprocess};

/// A token of the source as the compiler sees it (after [`preprocess`]): an identifier or
/// number, a string or character literal, or one punctuation character (`::` is two).
#[derive(Clone, Debug, PartialEq, Eq)]
enum Token {
    Word(String),
    Str(String),
    Punct(char),
}

/// The source's tokens after preprocessing, each with why it may not be what the compiler
/// sees, if so.
fn tokens(source: &str) -> (Vec<Token>, Vec<Option<Rc<str>>>) {
    let mut toks = Vec::new();
    let mut why = Vec::new();
    for t in preprocess(source) {
        let kinds = match t.kind {
            PpKind::Ident(w) | PpKind::Number(w) => vec![Token::Word(w)],
            PpKind::Str(s) | PpKind::Char(s) => vec![Token::Str(s)],
            PpKind::Punct(p) => p.chars().map(Token::Punct).collect(),
        };
        for k in kinds {
            toks.push(k);
            why.push(t.uncertain.clone());
        }
    }
    (toks, why)
}

fn word(t: &Token) -> Option<&str> {
    match t {
        Token::Word(w) => Some(w),
        _ => None,
    }
}

/// Words that qualify a parameter's type without changing what it is.
const QUALIFIERS: &[&str] = &[
    "const",
    "volatile",
    "__restrict__",
    "__restrict",
    "restrict",
    "__grid_constant__",
    "struct",
    "class",
    "std",
];

/// The words of the built-in arithmetic types.
const TYPE_WORDS: &[&str] = &[
    "bool", "char", "short", "int", "long", "signed", "unsigned", "float", "double", "void",
];

/// Named types the parser knows.
fn named_type(name: &str) -> Option<CType> {
    Some(match name {
        "int8_t" => CType::Int(1),
        "uint8_t" => CType::UInt(1),
        "int16_t" => CType::Int(2),
        "uint16_t" => CType::UInt(2),
        "int32_t" => CType::Int(4),
        "uint32_t" | "uint" => CType::UInt(4),
        "int64_t" | "ptrdiff_t" | "ssize_t" | "intptr_t" | "longlong" => CType::Int(8),
        "uint64_t" | "size_t" | "uintptr_t" | "ulonglong" => CType::UInt(8),
        "half" | "__half" => CType::Half,
        "__nv_bfloat16" | "nv_bfloat16" => CType::BFloat16,
        _ => return None,
    })
}

/// The type the built-in type words `words` spell (`unsigned long long`, `float`, ...);
/// `Err(())` for `void`, `None` for a combination that is no type.
fn builtin_type(words: &[&str]) -> Option<Result<CType, ()>> {
    let count = |w: &str| words.iter().filter(|&&x| x == w).count();
    let unsigned = count("unsigned") > 0;
    let longs = count("long");
    if words == ["void"] {
        return Some(Err(()));
    }
    let t = if count("bool") == 1 && words.len() == 1 {
        CType::Bool
    } else if count("float") == 1 && words.len() == 1 {
        CType::Float
    } else if count("double") == 1 && words.len() - longs == 1 {
        CType::Double
    } else {
        if count("float") + count("double") + count("bool") + count("void") > 0 {
            return None;
        }
        let bytes = if count("char") == 1 {
            1
        } else if count("short") == 1 {
            2
        } else if longs > 0 {
            8
        } else {
            4
        };
        if unsigned {
            CType::UInt(bytes)
        } else {
            CType::Int(bytes)
        }
    };
    Some(Ok(t))
}

/// The types of names that `typedef words NAME;` and `using NAME = words;` give, as the
/// words.
fn aliases(toks: &[Token]) -> HashMap<String, Vec<String>> {
    let mut map = HashMap::new();
    let mut i = 0;
    let words_until = |from: usize, end: &dyn Fn(&Token) -> bool| -> Option<(Vec<String>, usize)> {
        let mut ws = Vec::new();
        let mut j = from;
        while j < toks.len() && !end(&toks[j]) {
            match &toks[j] {
                Token::Word(w) => ws.push(w.clone()),
                Token::Punct('*') => ws.push("*".into()),
                _ => return None,
            }
            j += 1;
        }
        Some((ws, j))
    };
    while i < toks.len() {
        match (&toks[i], toks.get(i + 1), toks.get(i + 2)) {
            (Token::Word(t), _, _) if t == "typedef" => {
                if let Some((mut ws, _)) = words_until(i + 1, &|t| *t == Token::Punct(';'))
                    && let Some(name) = ws.pop().filter(|n| n != "*")
                {
                    map.insert(name, ws);
                }
            }
            (Token::Word(u), Some(Token::Word(name)), Some(Token::Punct('='))) if u == "using" => {
                if let Some((ws, _)) = words_until(i + 3, &|t| *t == Token::Punct(';')) {
                    map.insert(name.clone(), ws);
                }
            }
            _ => {}
        }
        i += 1;
    }
    map
}

/// One parameter's declaration, from its tokens.
fn parse_param(toks: &[Token], aliases: &HashMap<String, Vec<String>>) -> RawParam {
    let decl = toks
        .iter()
        .map(|t| match t {
            Token::Word(w) => w.clone(),
            Token::Str(s) => format!("\"{s}\""),
            Token::Punct(c) => c.to_string(),
        })
        .collect::<Vec<_>>()
        .join(" ")
        .replace(" *", "*")
        .replace("[ ]", "[]")
        .replace(" [", "[");
    let unknown = |name: Option<String>| RawParam {
        name,
        ty: RawParamType::Unknown,
        decl: decl.clone(),
    };
    let mut depth = 0usize;
    let mut words: Vec<String> = Vec::new();
    let mut i = 0;
    while i < toks.len() {
        match &toks[i] {
            Token::Word(w) if w == "__align__" || w == "alignas" => {
                // Skip the parenthesised argument.
                while i < toks.len() && toks[i] != Token::Punct(')') {
                    i += 1;
                }
            }
            Token::Word(w) if QUALIFIERS.contains(&w.as_str()) => {}
            Token::Word(w) => words.push(w.clone()),
            Token::Punct('*') => {
                depth += 1;
                // Qualifiers between stars belong to the pointer.
            }
            Token::Punct('[') => {
                depth += 1;
                while i < toks.len() && toks[i] != Token::Punct(']') {
                    i += 1;
                }
            }
            Token::Punct(':') => {}
            // A default argument ends what matters.
            Token::Punct('=') => break,
            // References, templates and function pointers are beyond this parser.
            _ => return unknown(None),
        }
        i += 1;
    }
    // The name: a last word that is not a type word, after some type.
    let name = match words.last() {
        Some(last)
            if words.len() >= 2
                && !TYPE_WORDS.contains(&last.as_str())
                && named_type(last).is_none() =>
        {
            words.pop()
        }
        _ => None,
    };
    // Expand aliases (a few levels: `#define real float_t`, `typedef float float_t;`).
    for _ in 0..4 {
        if let [only] = &words[..]
            && let Some(expansion) = aliases.get(only)
        {
            let mut expanded: Vec<String> = Vec::new();
            for w in expansion {
                if w == "*" {
                    depth += 1;
                } else if !QUALIFIERS.contains(&w.as_str()) {
                    expanded.push(w.clone());
                }
            }
            words = expanded;
        }
    }
    let refs: Vec<&str> = words.iter().map(String::as_str).collect();
    let base: Option<Result<CType, ()>> = match refs[..] {
        [] => None,
        [one] if named_type(one).is_some() => named_type(one).map(Ok),
        _ if refs.iter().all(|w| TYPE_WORDS.contains(w)) => builtin_type(&refs),
        _ => None,
    };
    let ty = match (depth, base) {
        (0, Some(Ok(t))) => RawParamType::Scalar(t),
        (0, Some(Err(()))) | (0, None) => return unknown(name),
        (1, Some(Ok(t))) => RawParamType::Pointer(Some(t)),
        _ => RawParamType::Pointer(None),
    };
    RawParam { name, ty, decl }
}

/// The function whose declaration continues at `toks[at..]` (after `__global__`), and where
/// its parameter list ends.
fn parse_function(
    toks: &[Token],
    at: usize,
    extern_c: bool,
    aliases: &HashMap<String, Vec<String>>,
) -> Option<(RawFunction, usize)> {
    let (name, at) = kernel_name(toks, at)?;
    let name = name.to_string();
    let open = at + 1;
    let close = close_of(toks, open)?;
    let mut parts = split_top_level(&toks[open + 1..close]);
    // `(void)` declares no parameter; an empty last part (a trailing comma) is none either.
    if parts.last().is_some_and(|p| p.is_empty())
        || matches!(&parts[..], [only] if only.len() == 1 && word(&only[0]) == Some("void"))
    {
        parts.pop();
    }
    let params = parts.iter().map(|p| parse_param(p, aliases)).collect();
    Some((
        RawFunction {
            name,
            extern_c,
            params,
            unchecked: None,
        },
        close + 1,
    ))
}

/// The index of the `)` closing the `(` at `open`.
fn close_of(toks: &[Token], open: usize) -> Option<usize> {
    let mut depth = 0;
    for (j, t) in toks.iter().enumerate().skip(open) {
        match t {
            Token::Punct('(') => depth += 1,
            Token::Punct(')') => {
                depth -= 1;
                if depth == 0 {
                    return Some(j);
                }
            }
            _ => {}
        }
    }
    None
}

/// The `__global__` functions `source` declares or defines, in order of first appearance (a
/// prototype and its definition count once), with their parameters. A kernel declared by a
/// macro, or a template, is not among them.
///
/// ```
/// use kusari_kernels::raw::{parse_kernels, CType, RawParamType};
/// let k = parse_kernels(
///     "extern \"C\" __global__ void saxpy(float a, const float* __restrict__ x, float* y, \
///      size_t n) {}",
/// );
/// assert_eq!(k[0].name, "saxpy");
/// assert!(k[0].extern_c);
/// let types: Vec<_> = k[0].params.iter().map(|p| p.ty).collect();
/// assert_eq!(
///     types,
///     [
///         RawParamType::Scalar(CType::Float),
///         RawParamType::Pointer(Some(CType::Float)),
///         RawParamType::Pointer(Some(CType::Float)),
///         RawParamType::Scalar(CType::UInt(8)),
///     ]
/// );
/// assert_eq!(k[0].params[1].name.as_deref(), Some("x"));
/// ```
pub fn parse_kernels(source: &str) -> Vec<RawFunction> {
    let (toks, uncertain) = tokens(source);
    let aliases = aliases(&toks);
    let mut found: Vec<RawFunction> = Vec::new();
    for g in globals(&toks) {
        if g.template.is_some() {
            continue;
        }
        if let Some(f) = parse_global(&toks, &uncertain, &g, &aliases)
            && !found.iter().any(|h| h.name == f.name)
        {
            found.push(f);
        }
    }
    found
}

/// The instance `expression` of a template kernel of `source` (CuPy's name expression:
/// `my_func<float, 4>`, or `my_func<>` for its defaults), its parameters read with the
/// template's type parameters replaced by the expression's arguments (or their defaults). A
/// type parameter given an argument the parser does not read (a template, a qualified name)
/// leaves the parameters of that type [`RawParamType::Unknown`]. The function's name is the
/// expression as given; `None` when `source` declares no template kernel of that name taking
/// as many arguments.
///
/// ```
/// use kusari_kernels::raw::{parse_instance, CType, RawParamType};
/// let src = "template <typename T, int N = 4> __global__ void scale(T* x, T by, int n) {}";
/// let k = parse_instance(src, "scale<double>").unwrap();
/// assert_eq!(k.name, "scale<double>");
/// let types: Vec<_> = k.params.iter().map(|p| p.ty).collect();
/// assert_eq!(
///     types,
///     [
///         RawParamType::Pointer(Some(CType::Double)),
///         RawParamType::Scalar(CType::Double),
///         RawParamType::Scalar(CType::Int(4)),
///     ]
/// );
/// assert!(parse_instance(src, "scale<float, 2, 3>").is_none());
/// assert!(parse_instance(src, "other<float>").is_none());
/// ```
pub fn parse_instance(source: &str, expression: &str) -> Option<RawFunction> {
    let (base, args) = split_expression(expression)?;
    let (toks, uncertain) = tokens(source);
    let aliases = aliases(&toks);
    for g in globals(&toks) {
        let Some(header) = g.template.clone() else {
            continue;
        };
        let params = template_params(&toks[header]);
        if args.len() > params.len()
            || kernel_name(&toks, g.at).map(|(n, _)| n) != Some(base.as_str())
        {
            continue;
        }
        let mut substituted = aliases.clone();
        for (i, (name, is_type, default)) in params.iter().enumerate() {
            let arg = args.get(i).or(default.as_ref());
            if !is_type {
                continue;
            }
            match arg.and_then(|a| type_words(a)) {
                Some(words) => substituted.insert(name.clone(), words),
                None => substituted.remove(name),
            };
        }
        if let Some(mut f) = parse_global(&toks, &uncertain, &g, &substituted) {
            f.name = expression.to_string();
            f.extern_c = false;
            return Some(f);
        }
    }
    None
}

/// Whether `e` is a name expression (CuPy's: a template kernel's name and its arguments,
/// `my_kernel<float, 4>`) that can be compiled in as written: an identifier, then `<..>`, with
/// balanced parentheses and no comment, directive, string, statement or line break.
///
/// ```
/// use kusari_kernels::raw::is_name_expression;
/// assert!(is_name_expression("scale<float, 4>"));
/// assert!(is_name_expression("pick<(2 > 1)>"));
/// let bad = ["scale", "scale<float", "t<float>) x(", "t<1>// c", "<float>", "t<a>;", "t<a>\n#x"];
/// for bad in bad {
///     assert!(!is_name_expression(bad), "{bad}");
/// }
/// ```
pub fn is_name_expression(e: &str) -> bool {
    let mut depth = 0i32;
    for c in e.chars() {
        match c {
            '(' => depth += 1,
            ')' => depth -= 1,
            '\n' | '\r' | '#' | ';' | '{' | '}' | '"' | '\\' => return false,
            _ => {}
        }
        if depth < 0 {
            return false;
        }
    }
    let name_len = e
        .chars()
        .take_while(|&c| c.is_ascii_alphanumeric() || c == '_')
        .count();
    depth == 0
        && name_len > 0
        && !e.contains("//")
        && !e.contains("/*")
        && e[name_len..].trim_start().starts_with('<')
        && e.trim_end().ends_with('>')
}

/// A name expression's template name and its arguments' tokens (`f<float, 4>`: `f`, [`float`],
/// [`4`]).
fn split_expression(expression: &str) -> Option<(String, Vec<Vec<Token>>)> {
    let (toks, _) = tokens(expression);
    let (Some(Token::Word(base)), Some(Token::Punct('<')), Some(Token::Punct('>'))) =
        (toks.first(), toks.get(1), toks.last())
    else {
        return None;
    };
    Some((base.clone(), split_top_level(&toks[2..toks.len() - 1])))
}

/// `toks` split at the commas outside brackets; nothing for no tokens.
fn split_top_level(toks: &[Token]) -> Vec<Vec<Token>> {
    if toks.is_empty() {
        return Vec::new();
    }
    let mut parts = vec![Vec::new()];
    let mut depth = 0i32;
    for t in toks {
        match t {
            Token::Punct('(' | '<' | '[') => depth += 1,
            Token::Punct(')' | '>' | ']') => depth -= 1,
            Token::Punct(',') if depth == 0 => {
                parts.push(Vec::new());
                continue;
            }
            _ => {}
        }
        parts.last_mut().expect("one part at least").push(t.clone());
    }
    parts
}

/// A template's parameters from its header's tokens (`template < typename T , int N = 4 >`):
/// each one's name, whether it is a type, and its default's tokens.
fn template_params(header: &[Token]) -> Vec<(String, bool, Option<Vec<Token>>)> {
    let open = header.iter().position(|t| *t == Token::Punct('<'));
    let close = header.iter().rposition(|t| *t == Token::Punct('>'));
    let (Some(open), Some(close)) = (open, close) else {
        return Vec::new();
    };
    if close <= open {
        return Vec::new();
    }
    split_top_level(&header[open + 1..close])
        .into_iter()
        .map(|p| {
            let eq = p.iter().position(|t| *t == Token::Punct('='));
            let (decl, default) = match eq {
                Some(e) => (&p[..e], Some(p[e + 1..].to_vec())),
                None => (&p[..], None),
            };
            let is_type = matches!(decl.first().and_then(word), Some("typename" | "class"));
            let name = decl.iter().rev().find_map(word).unwrap_or_default();
            (name.to_string(), is_type, default)
        })
        .collect()
}

/// A template argument as a type's words (`unsigned int`, `float *`), or `None` when it is
/// more than words and stars.
fn type_words(arg: &[Token]) -> Option<Vec<String>> {
    arg.iter()
        .map(|t| match t {
            Token::Word(w) => Some(w.clone()),
            Token::Punct('*') => Some("*".to_string()),
            _ => None,
        })
        .collect::<Option<Vec<String>>>()
        .filter(|w| !w.is_empty())
}

/// A `__global__` of the source: the tokens of its declaration before it (`head`), where its
/// template header lies if it has one, where it stands, and its linkage.
struct Global {
    head: std::ops::Range<usize>,
    template: Option<std::ops::Range<usize>>,
    at: usize,
    extern_c: bool,
}

/// Every `__global__` keyword of `toks` outside directives, with its declaration's context.
fn globals(toks: &[Token]) -> Vec<Global> {
    let mut found = Vec::new();
    // For each open brace: whether it opened an `extern "C"` block.
    let mut braces: Vec<bool> = Vec::new();
    // Where the current declaration started (after the last `;`, `{` or `}`).
    let mut decl_start = 0;
    for (i, t) in toks.iter().enumerate() {
        match t {
            Token::Punct('{') => {
                let extern_block = i >= 2
                    && word(&toks[i - 2]) == Some("extern")
                    && toks[i - 1] == Token::Str("C".into());
                braces.push(extern_block);
                decl_start = i + 1;
            }
            Token::Punct('}') => {
                braces.pop();
                decl_start = i + 1;
            }
            Token::Punct(';') => decl_start = i + 1,
            Token::Word(w) if w == "__global__" => {
                let head = &toks[decl_start..i];
                let template = head
                    .iter()
                    .position(|t| word(t) == Some("template"))
                    .map(|at| decl_start + at..i);
                let extern_c = braces.iter().any(|&b| b)
                    || head
                        .windows(2)
                        .any(|w| word(&w[0]) == Some("extern") && w[1] == Token::Str("C".into()));
                found.push(Global {
                    head: decl_start..i,
                    template,
                    at: i + 1,
                    extern_c,
                });
            }
            _ => {}
        }
    }
    found
}

/// The name of the function declared at `toks[at..]` (after `__global__`: specifiers, `void`,
/// `__launch_bounds__(..)`, then the name and `(`), and where the name stands.
fn kernel_name(toks: &[Token], mut at: usize) -> Option<(&str, usize)> {
    loop {
        match (toks.get(at)?, toks.get(at + 1)) {
            (Token::Word(w), Some(Token::Punct('('))) if w == "__launch_bounds__" => {
                at = close_of(toks, at + 1)? + 1;
            }
            (Token::Word(w), Some(Token::Punct('('))) => return Some((w, at)),
            (Token::Word(_), _) => at += 1,
            _ => return None,
        }
    }
}

/// The function `g` declares, read with `aliases`, marked unchecked where its declaration may
/// not be the compiler's.
fn parse_global(
    toks: &[Token],
    uncertain: &[Option<Rc<str>>],
    g: &Global,
    aliases: &HashMap<String, Vec<String>>,
) -> Option<RawFunction> {
    let (mut f, end) = parse_function(toks, g.at, g.extern_c, aliases)?;
    f.unchecked = uncertain[g.head.start..end]
        .iter()
        .find_map(|w| w.as_deref())
        .map(|w| {
            format!(
                "`{}` is declared where the compiler may see another declaration: {w}",
                f.name
            )
        });
    Some(f)
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::raw::raw_source;

    fn types(src: &str) -> Vec<RawParamType> {
        let k = parse_kernels(src);
        assert_eq!(k.len(), 1, "{src}: {k:?}");
        k[0].params.iter().map(|p| p.ty).collect()
    }

    use CType::*;
    use RawParamType::{Pointer, Scalar};

    #[test]
    fn reads_the_builtin_arithmetic_types() {
        assert_eq!(
            types(
                "extern \"C\" __global__ void k(bool a, char b, unsigned char c, short d, \
                 unsigned short e, int f, unsigned g, unsigned int h, long i, long long j, \
                 unsigned long long k, float l, double m, signed n, long int o) {}"
            ),
            [
                Scalar(Bool),
                Scalar(Int(1)),
                Scalar(UInt(1)),
                Scalar(Int(2)),
                Scalar(UInt(2)),
                Scalar(Int(4)),
                Scalar(UInt(4)),
                Scalar(UInt(4)),
                Scalar(Int(8)),
                Scalar(Int(8)),
                Scalar(UInt(8)),
                Scalar(Float),
                Scalar(Double),
                Scalar(Int(4)),
                Scalar(Int(8)),
            ]
        );
    }

    #[test]
    fn reads_pointers_qualifiers_and_named_types() {
        assert_eq!(
            types(
                "extern \"C\" __global__ void k(const float* __restrict__ x, double *y, \
                 int z[], const void* v, float** pp, size_t n, std::int64_t m, const half* h, \
                 __nv_bfloat16 b, const int32_t n2, uint64_t u, float4* f4, int* const cp) {}"
            ),
            [
                Pointer(Some(Float)),
                Pointer(Some(Double)),
                Pointer(Some(Int(4))),
                Pointer(None),
                Pointer(None),
                Scalar(UInt(8)),
                Scalar(Int(8)),
                Pointer(Some(Half)),
                Scalar(BFloat16),
                Scalar(Int(4)),
                Scalar(UInt(8)),
                Pointer(None),
                Pointer(Some(Int(4))),
            ]
        );
    }

    #[test]
    fn names_are_read_and_unnamed_parameters_have_none() {
        let k = parse_kernels("extern \"C\" __global__ void k(float* out, int, unsigned n) {}");
        let names: Vec<_> = k[0].params.iter().map(|p| p.name.as_deref()).collect();
        assert_eq!(names, [Some("out"), None, Some("n")]);
        assert_eq!(k[0].params[0].decl, "float* out");
    }

    #[test]
    fn unknown_by_value_types_are_unknown_not_guessed() {
        assert_eq!(
            types("extern \"C\" __global__ void k(MyStruct s, Foo<int> t, int& r, float* p) {}"),
            [
                RawParamType::Unknown,
                RawParamType::Unknown,
                RawParamType::Unknown,
                Pointer(Some(Float))
            ]
        );
    }

    #[test]
    fn defines_typedefs_and_usings_name_types() {
        let src = "#define real float\n#define N 256\ntypedef unsigned long long u64;\n\
                   using idx_t = int;\ntypedef real* real_ptr;\n\
                   extern \"C\" __global__ void k(real* x, real a, u64 b, idx_t c, real_ptr d) {}";
        assert_eq!(
            types(src),
            [
                Pointer(Some(Float)),
                Scalar(Float),
                Scalar(UInt(8)),
                Scalar(Int(4)),
                Pointer(Some(Float))
            ]
        );
        // Options come as `#define` lines too.
        let src = raw_source(
            "m",
            "k",
            "extern \"C\" __global__ void k(T* x, T a) {}",
            &["-DT=double".into()],
        )
        .unwrap();
        assert_eq!(types(&src.source), [Pointer(Some(Double)), Scalar(Double)]);
    }

    #[test]
    fn reads_the_source_as_the_compiler_sees_it() {
        // A parameter list continued after a backslash (CuPy's RawModule example).
        let k = parse_kernels(
            "extern \"C\"{\n__global__ void s(const float* x, float* y, \\\n unsigned int N) {}\n}",
        );
        assert_eq!(
            k[0].params.iter().map(|p| p.ty).collect::<Vec<_>>(),
            [Pointer(Some(Float)), Pointer(Some(Float)), Scalar(UInt(4))]
        );
        assert!(k[0].extern_c);
        // The branch an option chooses, and a kernel whose head is a macro.
        let src = "#if PRECISION == 2\ntypedef double real;\n#else\ntypedef float real;\n#endif\n\
                   #define KERNEL(name) extern \"C\" __global__ void name\n\
                   KERNEL(k)(real* x) {}";
        for (option, want) in [("-DPRECISION=2", Double), ("-DPRECISION=1", Float)] {
            let src = raw_source("m", "k", src, &[option.into()]).unwrap();
            assert_eq!(types(&src.source), [Pointer(Some(want))], "{option}");
        }
        // What depends on the device is read, and marked.
        let k = parse_kernels(
            "#ifdef __CUDA_ARCH__\n#define T double\n#else\n#define T float\n#endif\n\
             extern \"C\" __global__ void k(T* x) {}\n\
             extern \"C\" __global__ void plain(float* x) {}",
        );
        let why = k[0].unchecked.as_deref().unwrap();
        assert!(
            why.starts_with("`k` is declared where the compiler may see another"),
            "{why}"
        );
        assert!(
            why.contains("`__CUDA_ARCH__` depends on the device"),
            "{why}"
        );
        assert_eq!(k[1].unchecked, None);
    }

    #[test]
    fn finds_every_kernel_with_its_linkage_and_skips_templates_and_comments() {
        let src = "// __global__ void commented(int x) {}\n\
                   /* extern \"C\" __global__ void block_commented() {} */\n\
                   __device__ float helper(float v) { return v; }\n\
                   extern \"C\" __global__ void __launch_bounds__(256, 2) a(int n);\n\
                   extern \"C\" __global__ void a(int n) { if (n) { helper(1.0f); } }\n\
                   __global__ void mangled(float* x) {}\n\
                   template <typename T> __global__ void templated(T* x) {}\n\
                   extern \"C\" {\n\
                   __global__ void in_block(void) {}\n\
                   static __global__ void b2(double d) {}\n\
                   }\n\
                   #define DECLARE(n) __global__ void n()\n";
        let k = parse_kernels(src);
        let summary: Vec<(&str, bool, usize)> = k
            .iter()
            .map(|f| (f.name.as_str(), f.extern_c, f.params.len()))
            .collect();
        assert_eq!(
            summary,
            [
                ("a", true, 1),
                ("mangled", false, 1),
                ("in_block", true, 0),
                ("b2", true, 1)
            ]
        );
    }
}
