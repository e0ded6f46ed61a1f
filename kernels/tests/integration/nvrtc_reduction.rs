//! NVRTC compiles every variant of a reduction kernel (CuPy's `ReductionKernel`): each element
//! type, with and without identity, a wider or preamble-defined reduce type, scalar parameters,
//! and layouts of each rank capacity a launch uses (4, 8, 16). A mistake in an expression is reported at the
//! user's line. Skips with a printed reason when NVRTC is not installed, unless
//! `KUSARI_REQUIRE_NVRTC=1`.
#![cfg(feature = "nvrtc")]

use kusari_kernels::ScalarType;
use kusari_kernels::compile::{CompileError, compile_ptx, nvrtc_available};
use kusari_kernels::reduction::{ReductionDef, combine_entry, generate_reduction};

fn nvrtc_or_skip(test: &str) -> bool {
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

const SUM: ReductionDef = ReductionDef {
    name: "rsum",
    in_params: "T x",
    out_params: "T y",
    map_expr: "x",
    reduce_expr: "a + b",
    post_map_expr: "y = a",
    identity: Some("0"),
    ..ReductionDef::DEFAULT
};
const MAX: ReductionDef = ReductionDef {
    name: "rmax",
    in_params: "T x",
    out_params: "T y",
    map_expr: "x",
    reduce_expr: "a > b ? a : b",
    post_map_expr: "y = a",
    identity: None,
    ..ReductionDef::DEFAULT
};
const L2: ReductionDef = ReductionDef {
    name: "l2",
    in_params: "T x",
    out_params: "T y",
    map_expr: "x * x",
    reduce_expr: "a + b",
    post_map_expr: "y = sqrt(a)",
    identity: Some("0"),
    ..ReductionDef::DEFAULT
}
.with_reduce_type("float64");
const WEIGHTED_MEAN: ReductionDef = ReductionDef {
    name: "wmean",
    in_params: "T x, T w",
    out_params: "T y, int64 count",
    map_expr: "x * w * p",
    reduce_expr: "a + b",
    post_map_expr: "y = a / _N; count = _N",
    identity: Some("0"),
    ..ReductionDef::DEFAULT
}
.with_params("T p");
const ARGMAX: ReductionDef = ReductionDef {
    name: "argmax_like",
    in_params: "T x",
    out_params: "int64 y",
    map_expr: "ArgMax{(double)x, _J}",
    reduce_expr: "pick(a, b)",
    post_map_expr: "y = a.index",
    identity: None,
    ..ReductionDef::DEFAULT
}
.with_reduce_type("ArgMax")
.with_preamble(
    "struct ArgMax { double value; long long index; };\n\
     __device__ ArgMax pick(ArgMax a, ArgMax b) { return b.value > a.value ? b : a; }",
);

#[test]
fn every_reduction_variant_compiles() {
    if !nvrtc_or_skip("every_reduction_variant_compiles") {
        return;
    }
    let floats = [
        ScalarType::Float16,
        ScalarType::BFloat16,
        ScalarType::Float32,
        ScalarType::Float64,
    ];
    let numbers = [ScalarType::Int32, ScalarType::Int64];
    let cases: Vec<(ReductionDef, Vec<ScalarType>)> = vec![
        (SUM, floats.iter().chain(&numbers).copied().collect()),
        (MAX, floats.iter().chain(&numbers).copied().collect()),
        (L2, floats.to_vec()),
        (
            WEIGHTED_MEAN,
            vec![ScalarType::Float32, ScalarType::Float64],
        ),
        (ARGMAX, vec![ScalarType::Float32, ScalarType::Int64]),
    ];
    for (def, types) in cases {
        let sig = def.signature().unwrap_or_else(|e| panic!("{e}"));
        for t in types {
            for (kept, reduced) in [(0, 0), (2, 3), (9, 1)] {
                let src = generate_reduction(&def, &sig, &[('T', t)], kept, reduced)
                    .unwrap_or_else(|e| panic!("{e}"));
                let ptx = compile_ptx(&src, "compute_90")
                    .unwrap_or_else(|e| panic!("{} {t}: {e}", def.name));
                assert!(ptx.contains(&src.entry), "{}", src.entry);
                assert!(ptx.contains(&combine_entry(def.name)));
            }
        }
    }
}

#[test]
fn a_mistake_in_an_expression_is_reported_at_the_user_s_line() {
    if !nvrtc_or_skip("a_mistake_in_an_expression_is_reported_at_the_user_s_line") {
        return;
    }
    let def = ReductionDef {
        name: "broken",
        in_params: "T x",
        out_params: "T y",
        map_expr: "x",
        reduce_expr: "a +\n undefined_thing",
        post_map_expr: "y = a",
        identity: Some("0"),
        ..ReductionDef::DEFAULT
    };
    let sig = def.signature().unwrap();
    let src = generate_reduction(&def, &sig, &[('T', ScalarType::Float32)], 1, 1).unwrap();
    match compile_ptx(&src, "compute_90") {
        Err(CompileError::Failed { log, .. }) => {
            assert!(
                log.contains("broken_reduce_expr(2)") && log.contains("undefined_thing"),
                "{log}"
            );
        }
        other => panic!("expected a compile failure, got {other:?}"),
    }
}
