//! The translation unit compiled for a raw source and its options ([`raw_source`]): `-D`/`-U`
//! options as `#define`/`#undef` lines, then `#line 1 "<label>"` so that compiler logs number
//! the user's lines as the user does.

use std::fmt;

use crate::codegen::KernelSource;
use crate::names::is_c_identifier;

/// A source or options a raw kernel cannot be made from.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct RawSourceError(pub String);

impl fmt::Display for RawSourceError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(&self.0)
    }
}

impl std::error::Error for RawSourceError {}

/// The `#define` / `#undef` lines of compile options. Accepted: `-DNAME`, `-DNAME=VALUE`,
/// `-D NAME=VALUE` (two options), `--define-macro=NAME=VALUE`, `-UNAME`, `-U NAME` and
/// `--undefine-macro=NAME`, as NVRTC reads them (`-DNAME` defines `NAME` as `1`). They are
/// applied as lines of the source, so that the emulated device and the caches see them too.
/// Any other option is an error, as is a name that is no C identifier or a value with a line
/// break.
///
/// ```
/// use kusari_kernels::raw::option_lines;
/// let lines = option_lines(&["-DBLOCK=256".into(), "-DFAST".into(), "-UOLD".into()]).unwrap();
/// assert_eq!(lines, "#define BLOCK 256\n#define FAST 1\n#undef OLD\n");
/// assert!(option_lines(&["--use_fast_math".into()]).is_err());
/// ```
pub fn option_lines(options: &[String]) -> Result<String, RawSourceError> {
    let mut out = String::new();
    let mut iter = options.iter().map(|o| o.trim());
    while let Some(opt) = iter.next() {
        let mut separate = |flag: &str| {
            iter.next().map(str::to_string).ok_or_else(|| {
                RawSourceError(format!("compile option `{flag}` needs a macro name"))
            })
        };
        let (define, arg) = if let Some(rest) = opt.strip_prefix("--define-macro=") {
            (true, rest.to_string())
        } else if let Some(rest) = opt.strip_prefix("--undefine-macro=") {
            (false, rest.to_string())
        } else if opt == "-D" {
            (true, separate(opt)?)
        } else if opt == "-U" {
            (false, separate(opt)?)
        } else if let Some(rest) = opt.strip_prefix("-D") {
            (true, rest.to_string())
        } else if let Some(rest) = opt.strip_prefix("-U") {
            (false, rest.to_string())
        } else {
            return Err(RawSourceError(format!(
                "compile option `{opt}` is not supported: a raw kernel takes macro definitions \
                 (`-DNAME`, `-DNAME=VALUE`, `--define-macro=NAME=VALUE`) and removals (`-UNAME`, \
                 `--undefine-macro=NAME`)"
            )));
        };
        let (name, value) = match arg.split_once('=') {
            Some((n, v)) if define => (n.trim(), Some(v.trim())),
            _ => (arg.trim(), None),
        };
        if !is_c_identifier(name) {
            return Err(RawSourceError(format!(
                "compile option `{opt}`: `{name}` is not a macro name (a C identifier)"
            )));
        }
        if value.is_some_and(|v| v.contains(['\n', '\r', '\0'])) {
            return Err(RawSourceError(format!(
                "compile option `{opt}`: a macro value may not hold a line break or a NUL"
            )));
        }
        match (define, value) {
            (true, Some(v)) => out.push_str(&format!("#define {name} {v}\n")),
            (true, None) => out.push_str(&format!("#define {name} 1\n")),
            (false, _) => out.push_str(&format!("#undef {name}\n")),
        }
    }
    Ok(out)
}

/// The translation unit of `code` compiled with `options` ([`option_lines`]): the options'
/// lines, `#line 1 "<label>"`, then the code, so that compiler messages give the code's own
/// line numbers under `label`. `entry` is the kernel the source is compiled for (the label of
/// NVRTC's program); a module's kernels share one source and one binary.
///
/// ```
/// use kusari_kernels::raw::raw_source;
/// let src = raw_source("scale", "k", "__global__ void k() {}", &["-DN=4".into()]).unwrap();
/// assert_eq!(src.source, "#define N 4\n#line 1 \"scale\"\n__global__ void k() {}\n");
/// assert_eq!(src.entry, "k");
/// ```
pub fn raw_source(
    label: &str,
    entry: &str,
    code: &str,
    options: &[String],
) -> Result<KernelSource, RawSourceError> {
    if code.contains('\0') {
        return Err(RawSourceError("the source contains a NUL byte".into()));
    }
    let mut source = option_lines(options)?;
    source.push_str(&format!("#line 1 \"{label}\"\n"));
    source.push_str(code);
    if !code.ends_with('\n') {
        source.push('\n');
    }
    Ok(KernelSource {
        entry: entry.to_string(),
        source,
    })
}

/// `source` ([`raw_source`]'s) with the user's code numbered as the user numbers it, and the
/// lines before it (the options' `#define`s) unnumbered: what a compile error shows.
pub fn numbered_user_source(source: &str) -> String {
    let mut out = String::new();
    let mut line: Option<usize> = None;
    for l in source.lines() {
        match line {
            Some(n) => {
                out.push_str(&format!("{n:4} | {l}\n"));
                line = Some(n + 1);
            }
            None => {
                out.push_str(&format!("     | {l}\n"));
                if l.starts_with("#line 1 ") {
                    line = Some(1);
                }
            }
        }
    }
    out
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn options_become_defines_and_bad_ones_are_named() {
        let opts = |o: &[&str]| option_lines(&o.iter().map(|s| s.to_string()).collect::<Vec<_>>());
        assert_eq!(
            opts(&[
                "-D",
                "A=2",
                "--define-macro=B=x y",
                "-U",
                "C",
                "--undefine-macro=D"
            ])
            .unwrap(),
            "#define A 2\n#define B x y\n#undef C\n#undef D\n"
        );
        let e = opts(&["-D1X=2"]).unwrap_err().to_string();
        assert!(e.contains("`1X` is not a macro name"), "{e}");
        let e = opts(&["-DA=1\n#include <x>"]).unwrap_err().to_string();
        assert!(e.contains("line break"), "{e}");
        let e = opts(&["-O3"]).unwrap_err().to_string();
        assert!(e.contains("`-O3` is not supported"), "{e}");
        let e = opts(&["-D"]).unwrap_err().to_string();
        assert!(e.contains("`-D` needs a macro name"), "{e}");
    }

    #[test]
    fn the_user_source_is_numbered_from_its_line_directive() {
        let src = raw_source("m", "k", "line one\nline two", &["-DX".into()]).unwrap();
        assert_eq!(
            numbered_user_source(&src.source),
            "     | #define X 1\n     | #line 1 \"m\"\n   1 | line one\n   2 | line two\n"
        );
        assert!(raw_source("m", "k", "a\0b", &[]).is_err());
    }
}
