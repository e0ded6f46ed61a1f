//! The generated CUDA source, compared with reviewed copies in `tests/snapshots/`. After an
//! intended change to the generator, run with `KUSARI_BLESS=1` and review the diff.

use kusari_kernels::codegen::{generate, IndexWidth, Indexing};
use kusari_kernels::{ElementwiseSignature, ScalarType};

fn check(name: &str, actual: &str) {
    let path = std::path::Path::new(env!("CARGO_MANIFEST_DIR"))
        .join("tests/snapshots")
        .join(name);
    if std::env::var_os("KUSARI_BLESS").is_some() {
        std::fs::write(&path, actual).expect("snapshot written");
        return;
    }
    let expected = std::fs::read_to_string(&path).unwrap_or_else(|e| {
        panic!(
            "{}: {e} (run with KUSARI_BLESS=1 to create it)",
            path.display()
        )
    });
    assert_eq!(
        actual,
        expected,
        "generated source differs from {}",
        path.display()
    );
}

#[test]
fn muladd_contiguous_float32_with_32_bit_indexing() {
    let sig = ElementwiseSignature::new("T x, T y, T z", "T w", "").unwrap();
    let src = generate(
        "muladd_fwd",
        &sig,
        "w = x * y + z;",
        &[('T', ScalarType::Float32)],
        Indexing::Contiguous,
        IndexWidth::I32,
    )
    .unwrap();
    check("muladd_contiguous_i32.cu", &src.source);
}

#[test]
fn strided_two_outputs_raw_input_scalar_param_and_64_bit_indexing() {
    let sig = ElementwiseSignature::new("T x, raw int64 table, float32 s", "T gx, T gy", "T alpha")
        .unwrap();
    let body = "gx = alpha * x;\ngy = (T)table[i % n] * s;";
    let src = generate(
        "mixed",
        &sig,
        body,
        &[('T', ScalarType::Float64)],
        Indexing::Strided { ndim: 3 },
        IndexWidth::I64,
    )
    .unwrap();
    check("mixed_strided3_i64.cu", &src.source);
}

#[test]
fn an_unbound_placeholder_is_an_error_not_bad_source() {
    let sig = ElementwiseSignature::new("T x", "T y", "").unwrap();
    let err = generate(
        "k",
        &sig,
        "y = x;",
        &[],
        Indexing::Contiguous,
        IndexWidth::I32,
    )
    .unwrap_err();
    assert!(err.contains("placeholder `T` is not bound"), "{err}");
}

#[test]
fn index_width_switches_at_two_to_the_31() {
    assert_eq!(IndexWidth::for_len((1 << 31) - 1), IndexWidth::I32);
    assert_eq!(IndexWidth::for_len(1 << 31), IndexWidth::I64);
}
