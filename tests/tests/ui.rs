//! UI tests of `#[function_node]` and `#[derive(Link)]`: one file per mistake they must reject,
//! each with the exact compiler output in a `.stderr` beside it. (What they accept, compiled and
//! run, is the host suite's `macro_forms` module: ordinary tests, so that trybuild only checks
//! these files and never links one.)
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
//! | `kernel-code-unbalanced`        | preamble, loop_prep, after_loop checked as a body is |
//!
//! The misuses of `#[retain(..)]`'s `meta(..)` (an input's shape, dtype and device, without
//! its data), one file each in `ui/fail/` (`tests/host/macro_forms/retain_meta.rs` is the accepted form):
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
//! Backward parameters whose types the generated call cannot pass, each reported at the type
//! with the accepted forms (`tests/host/macro_forms/backward_parameter_forms.rs` has the accepted ones: full
//! paths, lifetimes, `std::option::Option`, an alias of `Variable`):
//!
//! | file                                     | what is tried                                 |
//! |------------------------------------------|-----------------------------------------------|
//! | `backward-gradient-list`                 | Chainer's `grad_outputs: &[Option<Variable>]` |
//! | `backward-gradient-list-several-outputs` | the same for two outputs (no count error too) |
//! | `backward-gradient-by-value`             | `gy: Variable`                                |
//! | `backward-gradient-array`                | `gy: &Array`                                  |
//! | `backward-gradient-option-by-value`      | `Option<Variable>` and `&Option<Variable>`    |
//! | `backward-needs-not-last`                | `needs: &[usize]` before the gradient         |
//! | `backward-retained-types`                | a retained input `&Array`, output `Variable`  |
//! | `backward-meta-wrong-type`               | a `meta(b)` input taken as `&Array`           |
//! | `backward-gradient-unknown-type`         | a type left to rustc: its error is at it      |
//!
//! Keys and attributes given twice, each an error at the second (no value silently wins):
//!
//! | file                           | what is tried                                         |
//! |--------------------------------|-------------------------------------------------------|
//! | `duplicate-function-node-name` | `#[function_node(name = "a", name = "b")]`            |
//! | `duplicate-function-node-keys` | `crate` and `non_differentiable` twice                |
//! | `duplicate-forward-gpu-body`   | two `body = ..` in `#[forward_gpu(..)]`               |
//! | `duplicate-forward-gpu-keys`   | `inputs`, `outputs`, `params`, `name`, `dtypes` twice |
//! | `duplicate-retain-input`       | `#[retain(x, x)]`                                     |
//! | `duplicate-retain-output`      | `#[retain(output = 0, output = 0)]`                   |
//! | `duplicate-helper-attributes`  | two `#[retain(..)]`, two `#[forward_gpu(..)]`         |
//! | `duplicate-link-keys`          | `#[kusari(crate = ..)]` twice, `skip` twice           |
//!
//! Ops declared by `#[function_node(kernel(..))]` (the body is the op) and `formula = ".."`,
//! refused at compile time at the string at fault (`tests/host/body_ops.rs` and
//! `tests/host/derived_builtins.rs` have the accepted forms):
//!
//! | file                        | what is tried                                             |
//! |-----------------------------|-----------------------------------------------------------|
//! | `body-op-loop`              | a loop in the body: not in the expression language        |
//! | `body-op-pointer`           | a pointer (`*(&x)`) in the body                           |
//! | `body-op-two-placeholders`  | `T x, U y`: the gradients would have no single type       |
//! | `body-op-preamble`          | `preamble` and `dtypes`, which an op that is its body has no use for |
//! | `body-op-with-forward`      | a `forward` method beside `kernel(..)`                    |
//! | `body-op-missing-body`      | `kernel(..)` without `body`                               |
//! | `formula-not-expression`    | `formula = "x[0] * 2"`: indexing                          |
//! | `formula-derived-with-retain` | `#[retain]` on an op whose backward is derived from its formula |
//! | `retain-on-backward`        | `#[retain]` on `backward` of an op that has a `forward`   |
//!
//! Regenerate the `.stderr` files after a deliberate change of a message with
//! `TRYBUILD=overwrite cargo test -p kusari-tests --test ui`, then read every diff (one group
//! alone: `cargo test -p kusari-tests --test ui -- ui trybuild=duplicate-`).

#[test]
fn ui() {
    let t = trybuild::TestCases::new();
    t.compile_fail("ui/fail/*.rs");
}
