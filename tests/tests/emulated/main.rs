//! The emulated-device suite: tests that ask for kusari's emulated CUDA device themselves
//! (`cuda::emulate(2)`, before any other CUDA call of this process), so that they run on any
//! machine, GPU or not, wherever a C++ compiler can build the kernels for the host (elsewhere they
//! print `SKIPPED`, a failure under `KUSARI_REQUIRE_GPU`).
//!
//! | module | what it tests |
//! |---|---|
//! | `compiled_modules` | `RawModule` from PTX, a cubin, a fatbin or a file: read, checked, refused by the emulated device |
//! | `cached_variants` | what a kernel compiled (`cached_variants`, `loaded_devices`); kernels from owned strings |
//! | `device` | the emulated device itself: memory errors as errors naming the memory, poisoned memory, two devices |
//! | `elementwise_calls` | `ElementwiseKernel::call`: typed parameters, outputs given, scalars, `reduce_dims` |
//! | `elementwise_code` | a kernel's code besides its body: preamble, `loop_prep`, `after_loop` |
//! | `reduction_kernels` | `ReductionKernel` against f64 references, every plan strategy |
//! | `name_expressions` | template kernels by name expressions, and NVRTC's lowered names |
//! | `raw_kernels` | `RawKernel` and `RawModule`: grids, shared memory, atomics, the caches |
//! | `sanitizer` | the sanitizer's gallery of broken kernels (races, uninitialized reads, bounds, warp masks) and their fixes; warp intrinsics; crashes as errors; kernels named like C library functions |

mod cached_variants;
mod compiled_modules;
mod device;
mod elementwise_calls;
mod elementwise_code;
mod name_expressions;
mod raw_kernels;
mod reduction_kernels;
mod sanitizer;

/// Two emulated devices for this process (every test calls this before any other CUDA call);
/// false, after printing why the test skips, where the device cannot run (no C++ compiler), and
/// a failure there under `KUSARI_REQUIRE_GPU`.
#[must_use]
pub(crate) fn emulated(test: &str) -> bool {
    kusari::cuda::emulate(2).unwrap_or_else(|e| panic!("the emulated device: {e}"));
    kusari::testing::cuda_or_skip(test)
        .unwrap_or_else(|e| panic!("{e}"))
        .is_some()
}

/// Every `.rs` file of this suite is a module of it.
#[test]
fn every_file_is_a_module() {
    kusari_tests::assert_every_file_is_a_module(
        concat!(env!("CARGO_MANIFEST_DIR"), "/tests/emulated"),
        include_str!("main.rs"),
    );
}
