//! The host suite: everything that runs on the CPU, and the device-agnostic tests whose CUDA half
//! runs wherever a CUDA device can be used (a GPU, or the emulated device under
//! `KUSARI_CUDA_EMULATE`; elsewhere it prints `SKIPPED`). One module per concept:
//!
//! | module | what it tests |
//! |---|---|
//! | `arrays` | `Array`: constructors, dtypes, views, arithmetic, reductions, matmul |
//! | `graph` | the backward graph, higher-order gradients, `grad`, configuration, old-style functions |
//! | `functions` | the built-in functions (`F::`): forward values, gradients, errors |
//! | `api` | the forms a Chainer or PyTorch user writes first |
//! | `errors` | every user mistake is an `Err` naming the op, the input, the shapes and the dtypes |
//! | `gradient_check` | finite differences and the gradient checkers |
//! | `body_ops` | ops declared by `#[function_node(kernel(..))]`: the body is the op (`op_tests!`) |
//! | `derived_builtins` | built-ins whose backward is derived from their formula, against hand-derived derivatives; `formula = ".."` ops |
//! | `fuse` | `kusari::fuse`: closures traced into one op, against the unfused closure |
//! | `elementwise_ops` | `ElementwiseOp`: ops written as a body, their backward derived (`op_tests!`) |
//! | `op_harness` | `op_tests!` cases of the built-ins and the examples' ops |
//! | `cnn` | the network layer's links (convolutions, batch normalization) and the CNN example |
//! | `nn_layers` | convolution, deconvolution, pooling, batch normalization (`op_tests!` and errors) |
//! | `macro_ops` | ops declared with `#[function_node]` |
//! | `macro_forms` | every form `#[function_node]` and `#[derive(Link)]` accept, one module each |
//! | `links`, `optimizers`, `serialize`, `train` | links, optimizers, checkpoints, the MLP example |
//! | `kernel_sources` | every kernel kusari launches compiles with NVRTC |
//! | `hostile` | what a careless or adversarial user does |
//! | `integer_dtypes` | int8, int16, uint8, uint16, uint32, uint64: promotion, wrapping arithmetic, reductions, kernels |
//!
//! A test that needs a process to itself (a memory limit, a configuration it changes) runs in a
//! child process of this binary ([`kusari_tests::run_test_in_child`]).

mod api;
mod arrays;
mod body_ops;
mod cnn;
mod derived_builtins;
mod elementwise_ops;
mod errors;
mod functions;
mod fuse;
mod gradient_check;
mod graph;
mod hostile;
mod integer_dtypes;
mod kernel_sources;
mod links;
mod macro_forms;
mod macro_ops;
mod nn_layers;
mod op_harness;
mod optimizers;
mod serialize;
mod train;

/// Every `.rs` file of this suite is a module of it: a file added without its `mod` line would
/// otherwise never run.
#[test]
fn every_file_is_a_module() {
    kusari_tests::assert_every_file_is_a_module(
        concat!(env!("CARGO_MANIFEST_DIR"), "/tests/host"),
        include_str!("main.rs"),
    );
}
