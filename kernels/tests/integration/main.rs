//! The kernels crate's integration tests, one binary: the binary cache on disk (`cache`), the
//! generated source against reviewed snapshots (`codegen_snapshots`), the expression language
//! of bodies and its derivatives against finite differences (`expr`), and NVRTC compiling
//! generated kernels (`nvrtc`, `nvrtc_reduction`; feature `nvrtc`).

mod cache;
mod codegen_snapshots;
mod expr;
mod nvrtc;
mod nvrtc_reduction;

/// The variable a child writer process of the cache test is started with: the cache directory
/// it writes to. The only `KUSARI_*` variable these tests read themselves (the crate's own are
/// read by `kusari_kernels::env`).
const CHILD_DIR_VAR: &str = "KUSARI_CACHE_TEST_CHILD_DIR";

/// The cache directory, in a child writer process of the cache test.
fn child_dir() -> Option<std::path::PathBuf> {
    std::env::var_os(CHILD_DIR_VAR).map(std::path::PathBuf::from)
}
