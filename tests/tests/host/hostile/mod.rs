//! Hostile inputs: what a careless or adversarial user does, and what kusari must answer.
//!
//! Every case here once crashed kusari, raced it, leaked or gave a wrong answer. Each module is
//! one row of the table; each test names the input it tries and asserts the answer:
//!
//! | module        | what is tried                                                       | the answer                         |
//! |---------------|---------------------------------------------------------------------|------------------------------------|
//! | `shapes`      | element counts, strides and byte sizes that overflow; huge steps    | `Err` naming the op and the shape  |
//! | `allocation`  | buffers larger than memory, or than a process memory limit          | `Err(OutOfMemory)` with the bytes  |
//! | `concurrency` | many threads accumulating into one gradient; guards dropped out of order | no lost update, exact restore |
//! | `memory`      | double backprop into a leaf, then dropping it; a node of 10⁵ inputs | freed buffers; linear time         |
//! | `numerics`    | half-precision means of many elements; fractional scalars on ints   | the float64 answer; `Err`          |
//! | `kernels`     | corrupted or swapped cache entries; names that are not C names      | rejected before NVRTC sees them    |

mod allocation;
mod concurrency;
mod kernels;
mod memory;
mod numerics;
mod shapes;

/// Runs the `#[ignore]`d test `name` of this binary in a child process, with an address-space
/// limit of `limit_kib` KiB when given, and fails if the child does not pass. A child that
/// aborts or crashes fails here with its output.
pub(crate) fn run_child(name: &str, limit_kib: Option<u64>) {
    run_child_with(name, limit_kib, |_| {});
}

/// [`run_child`] with the child's command set up further by `configure` (its environment).
pub(crate) fn run_child_with(
    name: &str,
    limit_kib: Option<u64>,
    configure: impl FnOnce(&mut std::process::Command),
) {
    let limit = limit_kib.map_or(String::new(), |k| format!("ulimit -v {k};"));
    let (status, text) =
        kusari_tests::run_test_in_child(&format!("hostile::{name}"), &limit, configure);
    assert!(
        status.success() && text.contains("1 passed"),
        "child {name} failed ({status}):\n{text}"
    );
}
