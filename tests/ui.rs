//! UI tests of `#[function_node]`: programs it must accept (and that then run), and one file per
//! mistake it must reject, each with the exact compiler output in a `.stderr` beside it.
//!
//! The kernel definitions refused at compile time, one file each in `ui/fail/`:
//!
//! | file                            | what is tried                                        |
//! |---------------------------------|------------------------------------------------------|
//! | `kernel-param-keyword`          | a C++ keyword as a parameter name (`T int`)          |
//! | `kernel-param-cuda-builtin`     | a CUDA built-in as a parameter name (`T threadIdx`)  |
//! | `kernel-param-type-name`        | a type of the grammar as a name (`T float16`)        |
//! | `kernel-param-placeholder`      | a placeholder of the signature as a name (`T T`)     |
//! | `reserved-name-i`, `-n`, `reserved-leading-underscore` | names the generated code uses |
//! | `kernel-name-not-c`             | `name = "mul-add"`                                   |
//! | `kernel-default-name-not-c`     | an op whose default kernel name is not ASCII         |
//! | `kernel-body-unbalanced`        | a body that closes the kernel and defines another    |
//!
//! The misuses of `#[retain(..)]`'s `meta(..)` (an input's shape, dtype and device, without
//! its data), one file each in `ui/fail/` (`ui/pass/retain-meta.rs` is the accepted form):
//!
//! | file                               | what is tried                                     |
//! |------------------------------------|---------------------------------------------------|
//! | `retain-meta-names-non-input`      | `meta(c)` for a `c` that is not an input          |
//! | `retain-meta-and-value`            | `#[retain(a, meta(a))]`                           |
//! | `retain-meta-twice`                | `#[retain(meta(a, b), meta(a))]`                  |
//! | `retain-meta-empty`                | `meta()`                                          |
//! | `retain-meta-of-output`            | `meta(output = 0)`                                |
//! | `retain-unknown-group`             | `shape(a)`, a form that does not exist            |
//! | `backward-takes-meta-as-variable`  | a `meta(a)` input taken as `&Variable`            |
//! | `backward-takes-value-as-meta`     | a retained value taken as `&InputMeta`            |
//! | `backward-meta-out-of-order`       | backward's parameters not in `#[retain]` order    |
//!
//! Regenerate the `.stderr` files after a deliberate change of a message with
//! `TRYBUILD=overwrite cargo test -p kusari-tests --test ui`, then read every diff.

#[test]
fn ui() {
    let t = trybuild::TestCases::new();
    t.pass("ui/pass/*.rs");
    t.compile_fail("ui/fail/*.rs");
}
