//! NVRTC compiles generated kernels to PTX and cubins (no GPU needed). Skips with a printed reason when
//! NVRTC is not installed, unless `KUSARI_REQUIRE_NVRTC=1` (set by CI), which makes that a failure.
#![cfg(feature = "nvrtc")]

use kusari_kernels::cache::BinaryCache;
use kusari_kernels::codegen::{IndexWidth, Indexing, KernelSource, generate};
use kusari_kernels::compile::{
    CompileError, ELF_MAGIC, Target, compile_binary, compile_binary_cached, compile_ptx,
    compile_ptx_cached, nvrtc_available, supported_archs, target_for,
};
use kusari_kernels::{ElementwiseSignature, ScalarType};

pub(crate) fn nvrtc_or_skip(test: &str) -> bool {
    if nvrtc_available() {
        return true;
    }
    assert!(
        !kusari_kernels::env::require_nvrtc(),
        "{test}: KUSARI_REQUIRE_NVRTC is set but NVRTC cannot be loaded"
    );
    eprintln!(
        "SKIPPED {test}: NVRTC is not installed (pip install nvidia-cuda-nvrtc; add nvidia/cu13/lib to LD_LIBRARY_PATH)"
    );
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

#[test]
fn half_kernels_compile_without_cuda_headers() {
    if !nvrtc_or_skip("half_kernels_compile_without_cuda_headers") {
        return;
    }
    let muladd = ElementwiseSignature::new("T x, T y, T z", "T w", "").unwrap();
    let convert = ElementwiseSignature::new("T a", "float32 out", "").unwrap();
    // Scalar parameters, compound assignment, casts from integers and mixed half types.
    let mixed = ElementwiseSignature::new(
        "T x, raw int64 table, bfloat16 b, float16 h",
        "T y, int32 k",
        "T alpha",
    )
    .unwrap();
    let mixed_body = "y = alpha * x;\ny += (T)table[i % n];\ny *= 2;\ny -= b * h;\ny /= 3.0;\nk = (int)y + (x > y ? 1 : 0);";
    for t in [ScalarType::Float16, ScalarType::BFloat16] {
        for (sig, body) in [
            (&muladd, "w = x * y + z;"),
            (&convert, "out = (float)a;"),
            (&mixed, mixed_body),
        ] {
            for indexing in [Indexing::Contiguous, Indexing::Strided { ndim: 2 }] {
                let src =
                    generate("half", sig, body, &[('T', t)], indexing, IndexWidth::I32).unwrap();
                assert!(!src.source.contains("#include"));
                for arch in ["compute_80", "compute_90"] {
                    let ptx = compile_ptx(&src, arch).unwrap_or_else(|e| panic!("{t}: {e}"));
                    assert!(ptx.contains(&src.entry));
                }
            }
        }
    }
}

fn muladd(t: ScalarType) -> KernelSource {
    let sig = ElementwiseSignature::new("T x, T y, T z", "T w", "").unwrap();
    generate(
        "muladd",
        &sig,
        "w = x * y + z;",
        &[('T', t)],
        Indexing::Contiguous,
        IndexWidth::I32,
    )
    .unwrap()
}

#[test]
fn cubins_for_ampere_and_hopper_are_elf_files() {
    if !nvrtc_or_skip("cubins_for_ampere_and_hopper_are_elf_files") {
        return;
    }
    let archs = supported_archs().unwrap();
    assert!(archs.contains(&80) && archs.contains(&90), "{archs:?}");
    for t in [
        ScalarType::Float32,
        ScalarType::Float16,
        ScalarType::BFloat16,
    ] {
        let src = muladd(t);
        for (major, minor) in [(8, 0), (9, 0)] {
            let (target, cubin) =
                compile_binary(&src, &target_for(major, minor)).unwrap_or_else(|e| panic!("{e}"));
            assert_eq!(target, Target::Cubin { major, minor });
            assert_eq!(target.to_string(), format!("sm_{major}{minor}"));
            assert_eq!(&cubin[..4], b"\x7fELF");
        }
    }
}

#[test]
fn ptx_images_are_nul_terminated() {
    if !nvrtc_or_skip("ptx_images_are_nul_terminated") {
        return;
    }
    let src = muladd(ScalarType::Float32);
    let (target, ptx) = compile_binary(&src, &Target::Ptx { major: 9, minor: 0 }).unwrap();
    assert_eq!(target.to_string(), "compute_90");
    assert_eq!(ptx.last(), Some(&0));
    assert_eq!(
        ptx.iter().filter(|&&b| b == 0).count(),
        1,
        "one NUL, at the end"
    );
    let text = std::str::from_utf8(&ptx[..ptx.len() - 1]).unwrap();
    assert!(text.contains(".entry muladd__contiguous_i32("), "{text}");
    assert!(text.contains(".target sm_90"), "{text}");
    // The same text as compile_ptx, which has no NUL.
    assert_eq!(compile_ptx(&src, "compute_90").unwrap(), text);
}

#[test]
fn a_cubin_nvrtc_cannot_make_falls_back_to_ptx_for_an_older_architecture() {
    if !nvrtc_or_skip("a_cubin_nvrtc_cannot_make_falls_back_to_ptx_for_an_older_architecture") {
        return;
    }
    let archs = supported_archs().unwrap();
    let src = muladd(ScalarType::Float32);
    // A device newer than anything this NVRTC knows: PTX for the newest it supports.
    let newest = *archs.last().unwrap();
    let (target, ptx) = compile_binary(&src, &target_for(99, 9)).unwrap();
    assert_eq!(
        target,
        Target::Ptx {
            major: newest / 10,
            minor: newest % 10
        }
    );
    assert_eq!(ptx.last(), Some(&0));
    assert!(!ptx.starts_with(ELF_MAGIC));
    // A compute capability between two supported ones: the one below.
    if !archs.contains(&91) {
        let below = *archs.iter().rev().find(|&&a| a < 91).unwrap();
        let (target, _) = compile_binary(&src, &target_for(9, 1)).unwrap();
        assert_eq!(target.arch_number(), below);
        assert!(!target.is_cubin());
    }
    // Older than everything it supports: an error naming the device's architecture.
    let oldest = archs[0];
    assert!(oldest > 30, "{archs:?}");
    match compile_binary(&src, &target_for(3, 0)) {
        Err(e @ CompileError::Failed { .. }) => {
            let msg = e.to_string();
            assert!(msg.contains("sm_30") && msg.contains("older"), "{msg}");
        }
        other => panic!("expected an error, got {other:?}"),
    }
}

#[test]
fn a_binary_compile_error_names_the_body_line() {
    if !nvrtc_or_skip("a_binary_compile_error_names_the_body_line") {
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
    for target in [target_for(9, 0), Target::Ptx { major: 8, minor: 0 }] {
        let err = compile_binary(&src, &target).unwrap_err();
        let CompileError::Failed {
            entry,
            arch,
            log,
            numbered_source,
        } = &err
        else {
            panic!("expected a compile failure, got {err:?}");
        };
        assert_eq!(entry, "broken__contiguous_i32");
        assert_eq!(arch, &target.to_string());
        assert!(log.contains("undefined_thing"), "{log}");
        assert!(numbered_source.contains("| #line 1 \"broken\""));
        let shown = err.to_string();
        assert!(shown.contains("broken(2)"), "{shown}");
        assert!(
            shown.contains(&format!("does not compile for {target}")),
            "{shown}"
        );
    }
}

#[test]
fn the_binary_cache_compiles_once_and_keeps_cubin_and_ptx_apart() {
    if !nvrtc_or_skip("the_binary_cache_compiles_once_and_keeps_cubin_and_ptx_apart") {
        return;
    }
    let dir = std::env::temp_dir().join(format!("kusari-binary-cache-{}", std::process::id()));
    let _ = std::fs::remove_dir_all(&dir);
    let src = muladd(ScalarType::BFloat16);
    let sm90 = target_for(9, 0);
    let cache = BinaryCache::new(Some(dir.clone()));
    let (t1, a) = compile_binary_cached(&src, &sm90, &cache).unwrap();
    let (t2, b) = compile_binary_cached(&src, &sm90, &cache).unwrap();
    assert_eq!((t1, t2), (sm90, sm90));
    assert_eq!(a, b);
    assert!(a.starts_with(ELF_MAGIC));
    assert_eq!((cache.stats().compiles, cache.stats().memory_hits), (1, 1));
    assert_eq!(
        *a,
        compile_binary(&src, &sm90).unwrap().1,
        "the bytes NVRTC makes"
    );

    // From disk in another cache: still a cubin, and no NVRTC run.
    let warm = BinaryCache::new(Some(dir.clone()));
    let (t3, c) = compile_binary_cached(&src, &sm90, &warm).unwrap();
    assert_eq!((t3, &c), (sm90, &a));
    assert_eq!((warm.stats().compiles, warm.stats().disk_hits), (0, 1));

    // PTX for the same architecture, and compile_ptx_cached's PTX text, are other entries.
    let compute90 = Target::Ptx { major: 9, minor: 0 };
    let (t4, ptx) = compile_binary_cached(&src, &compute90, &warm).unwrap();
    assert_eq!(t4, compute90);
    assert_eq!(ptx.last(), Some(&0));
    let text = compile_ptx_cached(&src, "compute_90", &warm).unwrap();
    assert_eq!(text.last().copied().map(|b| b != 0), Some(true));
    assert_eq!(warm.stats().compiles, 2);
    std::fs::remove_dir_all(dir).unwrap();
}
