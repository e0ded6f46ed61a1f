//! Strings kept for the life of the process, one copy per distinct text: what a kernel
//! definition built at run time (a signature or body assembled from a config) holds, since a
//! definition's strings are `&'static str`.
//!
//! Kernels are recognised by their strings' addresses (two launches of one `static` share
//! their compiled variants), so a definition's strings must outlive every launch of it, and
//! the compiled variants are kept for the life of the process anyway. Interning gives each
//! distinct text one leaked copy: building the same definition again, from new `String`s,
//! returns the same addresses, so it reuses the variants compiled for the first, and the
//! memory kept grows with the number of distinct texts, not with the number of definitions
//! built.

use std::collections::HashSet;
use std::sync::{Mutex, OnceLock, PoisonError};

/// `text` as a string that lives as long as the process: the same address for the same text
/// on every call, from any thread.
///
/// ```
/// use kusari_kernels::intern;
/// let body = format!("y = x * {};", 2);
/// let a = intern(&body);
/// let b = intern(&String::from("y = x * 2;"));
/// assert_eq!(a, "y = x * 2;");
/// assert!(std::ptr::eq(a, b)); // one copy per distinct text
/// ```
pub fn intern(text: &str) -> &'static str {
    static TEXTS: OnceLock<Mutex<HashSet<&'static str>>> = OnceLock::new();
    let mut texts = TEXTS
        .get_or_init(Default::default)
        .lock()
        .unwrap_or_else(PoisonError::into_inner);
    if let Some(&kept) = texts.get(text) {
        return kept;
    }
    let kept: &'static str = Box::leak(text.to_owned().into_boxed_str());
    texts.insert(kept);
    kept
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn each_distinct_text_is_kept_once_across_threads() {
        let texts: Vec<String> = (0..8).map(|k| format!("intern-test-{}", k % 3)).collect();
        let kept: Vec<usize> = std::thread::scope(|s| {
            let handles: Vec<_> = texts
                .iter()
                .map(|t| s.spawn(move || intern(t).as_ptr() as usize))
                .collect();
            handles.into_iter().map(|h| h.join().unwrap()).collect()
        });
        for (a, ta) in kept.iter().zip(&texts) {
            for (b, tb) in kept.iter().zip(&texts) {
                assert_eq!(a == b, ta == tb, "{ta} / {tb}");
            }
        }
        assert_eq!(intern(""), "");
    }
}
