//! Every environment variable the kernels crate reads, read here and nowhere else.
//!
//! | Variable | Meaning | Default | Read |
//! |---|---|---|---|
//! | `KUSARI_KERNEL_CACHE_DIR` | the directory of the on-disk kernel cache ([`crate::cache`]) | `$XDG_CACHE_HOME/kusari/kernels`, else `~/.cache/kusari/kernels` | when the process-wide cache is first used (once per process) |
//! | `KUSARI_REQUIRE_NVRTC` | set (to anything): a test that would skip for want of NVRTC fails instead (CI sets it) | unset | by each such test, when it finds NVRTC missing |
//! | `KUSARI_BLESS` | set: the kernels crate's snapshot tests rewrite `tests/snapshots/` instead of comparing | unset | by each snapshot test |
//!
//! A variable that is empty or only whitespace counts as unset.

use std::ffi::OsString;
use std::path::PathBuf;

/// The on-disk kernel cache's directory variable.
pub const KERNEL_CACHE_DIR: &str = "KUSARI_KERNEL_CACHE_DIR";
/// The variable that turns a test's skip for want of NVRTC into a failure.
pub const REQUIRE_NVRTC: &str = "KUSARI_REQUIRE_NVRTC";
/// The variable that makes snapshot tests rewrite their snapshots.
pub const BLESS: &str = "KUSARI_BLESS";

/// `name`'s value, unless it is unset, empty or only whitespace.
fn set(name: &str) -> Option<OsString> {
    std::env::var_os(name).filter(|v| !v.to_string_lossy().trim().is_empty())
}

/// The kernel cache's directory: `KUSARI_KERNEL_CACHE_DIR`, else
/// `$XDG_CACHE_HOME/kusari/kernels`, else `$HOME/.cache/kusari/kernels`; `None` if none is
/// known.
pub fn kernel_cache_dir() -> Option<PathBuf> {
    dir_from(|name| std::env::var_os(name))
}

/// Whether `KUSARI_REQUIRE_NVRTC` is set: a test that finds no NVRTC fails instead of skipping.
///
/// ```
/// // What a test that needs NVRTC does when it is missing.
/// if !kusari_kernels::env::require_nvrtc() {
///     println!("SKIPPED: NVRTC is not available");
/// }
/// ```
pub fn require_nvrtc() -> bool {
    set(REQUIRE_NVRTC).is_some()
}

/// Whether `KUSARI_BLESS` is set: snapshot tests write what they generate instead of comparing.
pub fn bless() -> bool {
    set(BLESS).is_some()
}

/// [`kernel_cache_dir`] with the environment read through `var`. A variable that is empty or only
/// whitespace is unset: `PathBuf::from("")` would be the current directory.
fn dir_from(var: impl Fn(&str) -> Option<OsString>) -> Option<PathBuf> {
    let set = |name: &str| var(name).filter(|v| !v.to_string_lossy().trim().is_empty());
    if let Some(d) = set("KUSARI_KERNEL_CACHE_DIR") {
        return Some(PathBuf::from(d));
    }
    let base = set("XDG_CACHE_HOME")
        .map(PathBuf::from)
        .or_else(|| set("HOME").map(|h| PathBuf::from(h).join(".cache")))?;
    Some(base.join("kusari").join("kernels"))
}

#[cfg(test)]
mod tests {
    use super::*;

    /// `dir_from` with exactly the variables `vars` set.
    fn dir_with(vars: &[(&str, &str)]) -> Option<PathBuf> {
        dir_from(|name| {
            vars.iter()
                .find(|(n, _)| *n == name)
                .map(|(_, v)| OsString::from(v))
        })
    }

    #[test]
    fn an_empty_or_blank_directory_variable_is_unset() {
        let home = Some(PathBuf::from("/home/u/.cache/kusari/kernels"));
        for blank in ["", " ", "\t\n "] {
            assert_eq!(
                dir_with(&[("KUSARI_KERNEL_CACHE_DIR", blank), ("HOME", "/home/u")]),
                home,
                "KUSARI_KERNEL_CACHE_DIR={blank:?} is the default directory, not the current one"
            );
            assert_eq!(
                dir_with(&[("XDG_CACHE_HOME", blank), ("HOME", "/home/u")]),
                home,
                "XDG_CACHE_HOME={blank:?}"
            );
        }
        assert_eq!(
            dir_with(&[("KUSARI_KERNEL_CACHE_DIR", "/k"), ("HOME", "/home/u")]),
            Some(PathBuf::from("/k"))
        );
        assert_eq!(
            dir_with(&[("XDG_CACHE_HOME", "/xdg"), ("HOME", "/home/u")]),
            Some(PathBuf::from("/xdg/kusari/kernels"))
        );
        assert_eq!(dir_with(&[("HOME", "")]), None, "no directory known");
    }
}
