//! See the table in main.rs. This module's rows:
//!
//! | what is tried                                                   | the answer                                  |
//! |-----------------------------------------------------------------|---------------------------------------------|
//! | a C/C++ keyword, CUDA built-in, grammar type or placeholder as a parameter name; a kernel named `mul-add`; a body that closes the kernel and defines a second `__global__` function ([`BAD_KERNELS`]) | `Err(InvalidKernel)` naming the name or the bracket, before NVRTC |
//! | 5·10⁴ empty parameters                                          | one mistake per comma; a bounded message    |
//! | a valid cache entry copied over another kernel's file           | a miss: recompiled, never served            |
//! | `KUSARI_KERNEL_CACHE_DIR` set but empty                         | the default directory, not the current one  |
//!
//! Tests that compile with NVRTC print why they skip when it cannot be loaded, unless
//! `KUSARI_REQUIRE_NVRTC` is set (then they fail).

use std::path::{Path, PathBuf};

use kusari::{Array, DType, ElementwiseKernel, Error};
use kusari_kernels::cache::{BinaryCache, CacheKey, default_dir};
use kusari_kernels::codegen::{IndexWidth, Indexing, KernelSource, generate};
use kusari_kernels::compile::compile_ptx_cached;
use kusari_kernels::{ElementwiseSignature, ScalarType};

const fn kernel(
    name: &'static str,
    inputs: &'static str,
    outputs: &'static str,
    body: &'static str,
) -> ElementwiseKernel {
    ElementwiseKernel::new(name, inputs, outputs, "", body)
}

/// Every bad kernel definition tried, and the text its error must hold. Each was accepted and
/// reached NVRTC (which failed with a message about the generated code, or compiled it).
const BAD_KERNELS: &[(ElementwiseKernel, &str)] = &[
    // Parameter names the generated C++ cannot declare.
    (
        kernel("k", "T int", "T w", "w = int;"),
        "`int` is a C++ keyword and cannot name a parameter",
    ),
    (
        kernel("k", "T x", "T return", "return = x;"),
        "`return` is a C++ keyword and cannot name a parameter",
    ),
    (
        ElementwiseKernel::new("k", "T x", "T w", "float32 and", "w = x;"),
        "`and` is a C++ keyword and cannot name a parameter",
    ),
    (
        kernel("k", "T threadIdx", "T w", "w = threadIdx;"),
        "`threadIdx` is a CUDA built-in variable and cannot name a parameter",
    ),
    (
        kernel("k", "T x", "T blockDim", "blockDim = x;"),
        "`blockDim` is a CUDA built-in variable and cannot name a parameter",
    ),
    (
        kernel("k", "T __global__", "T w", "w = x;"),
        "`__global__` is a CUDA qualifier and cannot name a parameter",
    ),
    (
        kernel("k", "T float16", "T w", "w = float16;"),
        "`float16` is a type of the signature grammar and cannot name a parameter",
    ),
    // `T T`: NVRTC said "identifier w is undefined".
    (
        kernel("k", "T x, T T", "T w", "w = x + T;"),
        "`T` is a type placeholder of this signature and cannot name a parameter",
    ),
    (
        ElementwiseKernel::new("k", "T x", "T w", "float32 kusari_f32_to_f16", "w = x;"),
        "`kusari_f32_to_f16` is reserved",
    ),
    // Kernel names that are no C identifier, or a keyword.
    (
        kernel("mul-add", "T x", "T w", "w = x;"),
        "`mul-add` is not a valid kernel name",
    ),
    (
        kernel("k\"\n#include <x>", "T x", "T w", "w = x;"),
        "is not a valid kernel name",
    ),
    (
        kernel("", "T x", "T w", "w = x;"),
        "the kernel name is empty",
    ),
    (
        kernel("return", "T x", "T w", "w = x;"),
        "`return` is a C++ keyword and cannot name a kernel",
    ),
    // Bodies that leave the loop: close the kernel and define a second one.
    (
        kernel(
            "k",
            "T x",
            "T w",
            "w = x; } } extern \"C\" __global__ void evil(float* p) { { p[0] = 1;",
        ),
        "`}` closes nothing",
    ),
    (
        kernel("k", "T x", "T w", "w = x; %> %> void evil() <% <%"),
        "`%>` closes nothing",
    ),
    (
        kernel("k", "T x", "T w", "#define CLOSE }}\nCLOSE void evil() {{"),
        "`#define` in a kernel body",
    ),
    (
        kernel(
            "k",
            "T x",
            "T w",
            "w = x; // \\\n{{\n}} void evil() {{ // \\\n}}",
        ),
        "a line continuation",
    ),
    (kernel("k", "T x", "T w", "w = (x;"), "`(` is never closed"),
];

fn leak(s: String) -> &'static str {
    Box::leak(s.into_boxed_str())
}

#[test]
fn bad_kernel_definitions_are_refused_before_nvrtc_sees_them() {
    let x = Array::zeros(&[3], DType::F32).unwrap();
    for (k, want) in BAD_KERNELS {
        let what = format!("{:?}", (k.name, k.inputs, k.outputs, k.params, k.body));
        let err = k.signature().expect_err(&what);
        let Error::InvalidKernel { kernel, message } = &err else {
            panic!("{what}: expected Error::InvalidKernel, got {err:?}");
        };
        assert_eq!(kernel, k.name);
        assert!(message.contains(want), "{what}: {message}");
        // The same refusal at construction, and wherever the kernel is used.
        let built = ElementwiseKernel::try_new(k.name, k.inputs, k.outputs, k.params, k.body);
        assert_eq!(built.expect_err(&what), err);
        assert_eq!(k.bind(&[&x]).expect_err(&what), err);
        assert_eq!(k.launch(&[&x], &[1.0.into()]).expect_err(&what), err);
    }
    // The checks refuse nothing kusari itself declares.
    for (k, _) in kusari::array_kernels() {
        k.signature()
            .unwrap_or_else(|e| panic!("kusari's own kernel {} is refused: {e}", k.name));
    }
}

/// The error points at the offending name within its list, with the list's source underlined.
#[test]
fn the_error_underlines_the_name() {
    let k = kernel("k", "T x, T threadIdx", "T w", "w = x;");
    let message = k.signature().unwrap_err().to_string();
    assert!(
        message.contains("  T x, T threadIdx\n         ^^^^^^^^^"),
        "{message}"
    );
}

/// 5·10⁴ empty parameters: each is its own mistake at its own comma, and the message shows the
/// first few and counts the rest instead of rendering 5·10⁴ copies of a 10⁵-character line.
#[test]
fn fifty_thousand_empty_parameters() {
    let inputs = leak(format!("{}T x", ", ".repeat(50_000)));
    let errors = ElementwiseSignature::new(inputs, "T w", "").unwrap_err();
    assert_eq!(errors.len(), 50_000);
    let mut starts: Vec<usize> = errors.iter().map(|e| e.span.start).collect();
    starts.dedup();
    assert_eq!(starts.len(), 50_000, "every error at its own comma");

    let message = kernel("k", inputs, "T w", "w = x;")
        .signature()
        .unwrap_err()
        .to_string();
    assert!(message.contains("and 49980 more mistakes"), "{message}");
    assert!(message.len() < 10_000, "{} bytes", message.len());
}

/// A scratch directory, removed first if a previous run left it.
fn scratch(name: &str) -> PathBuf {
    let dir = std::env::temp_dir().join(format!("kusari-hostile-{name}-{}", std::process::id()));
    let _ = std::fs::remove_dir_all(&dir);
    dir
}

/// The one cache file in `dir`.
fn only_entry(dir: &Path) -> PathBuf {
    let files: Vec<PathBuf> = std::fs::read_dir(dir)
        .unwrap()
        .map(|e| e.unwrap().path())
        .filter(|p| p.extension().is_some_and(|e| e == "bin"))
        .collect();
    assert_eq!(files.len(), 1, "{files:?}");
    files.into_iter().next().unwrap()
}

/// A valid entry copied over another key's file (two processes' caches merged by hand, a sync
/// tool, a `cp` in the wrong direction) was loaded as the other kernel.
#[test]
fn a_cache_entry_copied_over_another_keys_file_is_not_served() {
    let (a, b) = (scratch("swap-a"), scratch("swap-b"));
    let mul = CacheKey::new("mul source", &[], (13, 0), "sm_90");
    let add = CacheKey::new("add source", &[], (13, 0), "sm_90");
    BinaryCache::new(Some(a.clone()))
        .get_or_compile(mul, || Ok::<_, String>(b"mul binary".to_vec()))
        .unwrap();
    BinaryCache::new(Some(b.clone()))
        .get_or_compile(add, || Ok::<_, String>(b"add binary".to_vec()))
        .unwrap();
    std::fs::copy(only_entry(&a), only_entry(&b)).unwrap();

    let cache = BinaryCache::new(Some(b.clone()));
    let got = cache
        .get_or_compile(add, || Ok::<_, String>(b"add binary".to_vec()))
        .unwrap();
    assert_eq!(*got, b"add binary");
    let stats = cache.stats();
    assert_eq!(
        (stats.wrong_key, stats.disk_hits, stats.compiles),
        (1, 0, 1)
    );
    for dir in [a, b] {
        std::fs::remove_dir_all(dir).unwrap();
    }
}

fn source(name: &str, body: &str) -> KernelSource {
    let sig = ElementwiseSignature::new("T x, T y", "T w", "").unwrap();
    generate(
        name,
        &sig,
        body,
        &[('T', ScalarType::Float32)],
        Indexing::Contiguous,
        IndexWidth::I32,
    )
    .unwrap()
}

/// The same with NVRTC's PTX: `mul`'s entry copied over `add`'s file is not served for `add`.
#[test]
fn a_swapped_ptx_entry_is_recompiled() {
    if !kusari_tests::nvrtc_or_skip("a_swapped_ptx_entry_is_recompiled") {
        return;
    }
    let (mul, add) = (source("mul", "w = x * y;"), source("add", "w = x + y;"));
    let (a, b) = (scratch("ptx-a"), scratch("ptx-b"));
    compile_ptx_cached(&mul, "compute_80", &BinaryCache::new(Some(a.clone()))).unwrap();
    compile_ptx_cached(&add, "compute_80", &BinaryCache::new(Some(b.clone()))).unwrap();
    std::fs::copy(only_entry(&a), only_entry(&b)).unwrap();

    let cache = BinaryCache::new(Some(b.clone()));
    let ptx = compile_ptx_cached(&add, "compute_80", &cache).unwrap();
    let ptx = String::from_utf8_lossy(&ptx);
    assert!(ptx.contains(&add.entry), "add's PTX defines {}", add.entry);
    assert!(!ptx.contains(&mul.entry), "mul's PTX was served for add");
    assert_eq!(cache.stats().wrong_key, 1);
    for dir in [a, b] {
        std::fs::remove_dir_all(dir).unwrap();
    }
}

/// `KUSARI_KERNEL_CACHE_DIR=` (set, empty) made the cache write into the current directory. The
/// test runs itself in a child process with that environment (changing the environment of this
/// multi-threaded process would race the other tests).
#[test]
fn an_empty_cache_dir_variable_is_unset() {
    if kusari_tests::in_child() {
        let home = PathBuf::from(std::env::var_os("HOME").unwrap());
        let expected = home.join(".cache").join("kusari").join("kernels");
        assert_eq!(default_dir(), Some(expected.clone()));
        let key = CacheKey::new("src", &[], (13, 0), "sm_90");
        BinaryCache::new(default_dir())
            .get_or_compile(key, || Ok::<_, String>(b"binary".to_vec()))
            .unwrap();
        assert_eq!(only_entry(&expected).parent(), Some(expected.as_path()));
        return;
    }
    let base = scratch("empty-dir");
    let (home, cwd) = (base.join("home"), base.join("cwd"));
    std::fs::create_dir_all(&home).unwrap();
    std::fs::create_dir_all(&cwd).unwrap();
    for value in ["", "  "] {
        let (status, text) = kusari_tests::run_test_in_child(
            "hostile::kernels::an_empty_cache_dir_variable_is_unset",
            "",
            |c| {
                c.env("KUSARI_KERNEL_CACHE_DIR", value)
                    .env("HOME", &home)
                    .env_remove("XDG_CACHE_HOME")
                    .current_dir(&cwd);
            },
        );
        assert!(
            status.success() && text.contains("1 passed"),
            "KUSARI_KERNEL_CACHE_DIR={value:?}: {text}"
        );
        let written: Vec<_> = std::fs::read_dir(&cwd).unwrap().collect();
        assert!(
            written.is_empty(),
            "written in the current directory: {written:?}"
        );
    }
    std::fs::remove_dir_all(base).unwrap();
}
