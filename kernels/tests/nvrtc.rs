//! NVRTC compiles generated kernels to PTX (no GPU needed). Skips with a printed reason when
//! NVRTC is not installed, unless `KUSARI_REQUIRE_NVRTC=1` (set by CI), which makes that a failure.
#![cfg(feature = "nvrtc")]

use kusari_kernels::cache::BinaryCache;
use kusari_kernels::codegen::{generate, IndexWidth, Indexing};
use kusari_kernels::compile::{compile_ptx, compile_ptx_cached, nvrtc_available, CompileError};
use kusari_kernels::{ElementwiseSignature, ScalarType};

fn nvrtc_or_skip(test: &str) -> bool {
    if nvrtc_available() {
        return true;
    }
    assert!(
        std::env::var_os("KUSARI_REQUIRE_NVRTC").is_none(),
        "{test}: KUSARI_REQUIRE_NVRTC is set but NVRTC cannot be loaded"
    );
    eprintln!("SKIPPED {test}: NVRTC is not installed (pip install nvidia-cuda-nvrtc; add nvidia/cu13/lib to LD_LIBRARY_PATH)");
    false
}

#[test]
fn every_indexing_variant_compiles_for_ampere_and_hopper() {
    if !nvrtc_or_skip("every_indexing_variant_compiles_for_ampere_and_hopper") {
        return;
    }
    let sig = ElementwiseSignature::new("T x, T y, raw float32 table", "T w, int32 k", "T alpha")
        .unwrap();
    let body = "w = x * y + alpha + (T)table[i % n];\nk = (int)w;";
    for t in [ScalarType::Float32, ScalarType::Float64] {
        for indexing in [Indexing::Contiguous, Indexing::Strided { ndim: 3 }] {
            for width in [IndexWidth::I32, IndexWidth::I64] {
                let src = generate("probe", &sig, body, &[('T', t)], indexing, width).unwrap();
                for arch in ["compute_80", "compute_90"] {
                    let ptx = compile_ptx(&src, arch).unwrap_or_else(|e| panic!("{e}"));
                    assert!(
                        ptx.contains(&src.entry),
                        "PTX defines the entry point {}",
                        src.entry
                    );
                    assert!(
                        ptx.contains(&format!(".target sm_{}", &arch[8..])),
                        "PTX targets {arch}"
                    );
                }
            }
        }
    }
}

#[test]
fn a_compile_error_names_the_body_line_and_shows_the_source() {
    if !nvrtc_or_skip("a_compile_error_names_the_body_line_and_shows_the_source") {
        return;
    }
    let sig = ElementwiseSignature::new("T x", "T y", "").unwrap();
    let src = generate(
        "broken",
        &sig,
        "y = x;\ny = undefined_thing;",
        &[('T', ScalarType::Float32)],
        Indexing::Contiguous,
        IndexWidth::I32,
    )
    .unwrap();
    match compile_ptx(&src, "compute_90") {
        Err(CompileError::Failed {
            entry,
            log,
            numbered_source,
            ..
        }) => {
            assert_eq!(entry, "broken__contiguous_i32");
            // `#line` maps the error to line 2 of the user's body.
            assert!(
                log.contains("broken(2)") && log.contains("undefined_thing"),
                "{log}"
            );
            assert!(
                numbered_source.contains("| #line 1 \"broken\""),
                "{numbered_source}"
            );
        }
        other => panic!("expected a compile failure, got {other:?}"),
    }
}

#[test]
fn the_cache_compiles_once_per_key_across_processes() {
    if !nvrtc_or_skip("the_cache_compiles_once_per_key_across_processes") {
        return;
    }
    let dir = std::env::temp_dir().join(format!("kusari-nvrtc-cache-{}", std::process::id()));
    let _ = std::fs::remove_dir_all(&dir);
    let sig = ElementwiseSignature::new("T x", "T y", "").unwrap();
    let src = generate(
        "twice",
        &sig,
        "y = 2 * x;",
        &[('T', ScalarType::Float32)],
        Indexing::Contiguous,
        IndexWidth::I32,
    )
    .unwrap();
    let cold = BinaryCache::new(Some(dir.clone()));
    let a = compile_ptx_cached(&src, "compute_90", &cold).unwrap();
    let b = compile_ptx_cached(&src, "compute_90", &cold).unwrap();
    assert_eq!(a, b);
    assert_eq!((cold.stats().compiles, cold.stats().memory_hits), (1, 1));
    let warm = BinaryCache::new(Some(dir.clone()));
    let c = compile_ptx_cached(&src, "compute_90", &warm).unwrap();
    assert_eq!(
        (warm.stats().compiles, warm.stats().disk_hits),
        (0, 1),
        "a disk hit runs no NVRTC"
    );
    assert_eq!(a, c);
    compile_ptx_cached(&src, "compute_80", &warm).unwrap();
    assert_eq!(
        warm.stats().compiles,
        1,
        "another architecture is another key"
    );
    std::fs::remove_dir_all(dir).unwrap();
}
