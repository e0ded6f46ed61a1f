//! UI tests of `#[function_node]`: programs it must accept (and that then run), and one file per
//! mistake it must reject, each with the exact compiler output in a `.stderr` beside it.
//!
//! Regenerate the `.stderr` files after a deliberate change of a message with
//! `TRYBUILD=overwrite cargo test -p kusari-tests --test ui`, then read every diff.

#[test]
fn ui() {
    let t = trybuild::TestCases::new();
    t.pass("ui/pass/*.rs");
    t.compile_fail("ui/fail/*.rs");
}
