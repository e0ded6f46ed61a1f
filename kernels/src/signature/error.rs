//! A mistake in a signature ([`SignatureError`]): its message and byte range, and the rendering
//! that shows it under the user's text.

use std::fmt;
use std::ops::Range;

use super::SignatureList;

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
    ///
    /// A long source is cut to the line of the mistake and at most [`RENDER_CONTEXT`] characters
    /// either side of it, marked with `...`, so rendering every error of a long signature takes
    /// time linear in the number of errors, not in errors times length.
    pub fn render(&self, source: &str) -> String {
        format!("{}\n{}", self.message, underline(source, self.span.clone()))
    }
}

/// The line of `source` holding `span`, cut to [`RENDER_CONTEXT`] characters either side (marked
/// with `...`), indented by two spaces, and under it the span's text underlined with `^`. Takes
/// time in the context, not in the length of `source` before the span.
pub(crate) fn underline(source: &str, span: Range<usize>) -> String {
    let start = span.start.min(source.len());
    let end = span.end.clamp(start, source.len());
    // Back to the line start, at most RENDER_CONTEXT characters.
    let mut from = start;
    for (i, c) in source[..start].char_indices().rev().take(RENDER_CONTEXT) {
        if c == '\n' {
            break;
        }
        from = i;
    }
    // The underlined text: at most RENDER_CONTEXT characters of it, and of its first line.
    let shown_end = source[start..end]
        .char_indices()
        .take(RENDER_CONTEXT + 1)
        .find(|&(k, c)| c == '\n' || k == RENDER_CONTEXT)
        .map_or(end, |(k, _)| start + k);
    let mut to = shown_end;
    if shown_end == end {
        for (i, c) in source[end..].char_indices().take(RENDER_CONTEXT) {
            if c == '\n' {
                break;
            }
            to = end + i + c.len_utf8();
        }
    }
    let before = if from > 0 && !source[..from].ends_with('\n') {
        "..."
    } else {
        ""
    };
    let after = if to < source.len() && !source[to..].starts_with('\n') {
        "..."
    } else {
        ""
    };
    let column = before.len() + source[from..start].chars().count();
    let width = source[start..shown_end].chars().count().max(1);
    format!(
        "  {before}{}{after}\n  {}{}",
        &source[from..to],
        " ".repeat(column),
        "^".repeat(width)
    )
}

/// How many characters [`SignatureError::render`] shows either side of a mistake.
pub const RENDER_CONTEXT: usize = 40;

impl fmt::Display for SignatureError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "{}: {}", self.list, self.message)
    }
}

impl std::error::Error for SignatureError {}

#[cfg(test)]
mod tests {
    use super::RENDER_CONTEXT;
    use crate::signature::ElementwiseSignature;

    #[test]
    fn render_underlines_the_offending_text() {
        let src = "T x, flaot y";
        let e = &ElementwiseSignature::new(src, "T w", "").unwrap_err()[0];
        assert_eq!(e.render(src).lines().nth(2), Some("       ^^^^^"));
    }

    #[test]
    fn render_cuts_a_long_source_around_the_mistake() {
        let src = format!("{}T i, T z", "T a, ".repeat(1000));
        let e = &ElementwiseSignature::new(&src, "T w", "").unwrap_err()[0];
        let rendered = e.render(&src);
        let lines: Vec<&str> = rendered.lines().collect();
        assert_eq!(lines.len(), 3, "{rendered}");
        assert!(
            lines[1].starts_with("  ...") && lines[1].ends_with("T i, T z"),
            "{rendered}"
        );
        let caret = lines[2].find('^').unwrap();
        assert_eq!(&lines[1][caret..caret + 1], "i");
        assert!(lines[1].len() < 2 * RENDER_CONTEXT + 10);
        // A multi-line source shows the mistake's line only.
        let src = "T x,\nT _y,\nT z";
        let e = &ElementwiseSignature::new(src, "T w", "").unwrap_err()[0];
        assert_eq!(
            e.render(src).lines().skip(1).collect::<Vec<_>>(),
            ["  T _y,", "    ^^"]
        );
    }
}
