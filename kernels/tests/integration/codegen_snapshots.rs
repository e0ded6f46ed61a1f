//! The generated CUDA source, compared with reviewed copies in `tests/snapshots/`. After an
//! intended change to the generator, run with `KUSARI_BLESS=1` and review the diff.

use kusari_kernels::codegen::{
    BFLOAT16_PRELUDE, CodegenError, FLOAT16_PRELUDE, HALF_PRELUDE, IndexWidth, Indexing, c_type,
    generate,
};
use kusari_kernels::{ElementwiseSignature, ScalarType};

fn check(name: &str, actual: &str) {
    let path = std::path::Path::new(env!("CARGO_MANIFEST_DIR"))
        .join("tests/snapshots")
        .join(name);
    if kusari_kernels::env::bless() {
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
    assert_eq!(
        err,
        CodegenError::UnboundPlaceholder {
            kernel: "k".into(),
            placeholder: 'T'
        }
    );
    assert!(
        err.to_string().contains("placeholder `T` is not bound"),
        "{err}"
    );
}

#[test]
fn index_width_switches_at_two_to_the_31() {
    assert_eq!(IndexWidth::for_len((1 << 31) - 1), IndexWidth::I32);
    assert_eq!(IndexWidth::for_len(1 << 31), IndexWidth::I64);
}

#[test]
fn half_types_come_from_the_prelude_not_cuda_headers() {
    let sig =
        ElementwiseSignature::new("T x, T y, bfloat16 b", "T w, float32 f", "T alpha").unwrap();
    let src = generate(
        "halves",
        &sig,
        "w = x * y + alpha;\nf = (float)b;",
        &[('T', ScalarType::Float16)],
        Indexing::Contiguous,
        IndexWidth::I32,
    )
    .unwrap();
    assert!(!src.source.contains("#include"), "{}", src.source);
    assert!(
        src.source.contains(HALF_PRELUDE),
        "both preludes, float16 first"
    );
    assert!(src.source.contains("typedef float16 T;"));
    assert!(src.source.contains("const bfloat16* __restrict__ _in_b"));
    check("halves_contiguous_i32.cu", &src.source);

    // Only the prelude a kernel needs.
    let sig = ElementwiseSignature::new("T x", "T y", "").unwrap();
    let bf = generate(
        "bf",
        &sig,
        "y = x;",
        &[('T', ScalarType::BFloat16)],
        Indexing::Contiguous,
        IndexWidth::I32,
    )
    .unwrap();
    assert!(bf.source.contains(BFLOAT16_PRELUDE));
    assert!(!bf.source.contains("struct float16"));
    let f32 = generate(
        "f",
        &sig,
        "y = x;",
        &[('T', ScalarType::Float32)],
        Indexing::Contiguous,
        IndexWidth::I32,
    )
    .unwrap();
    assert!(!f32.source.contains("struct float16") && !f32.source.contains("struct bfloat16"));
}

#[test]
fn half_c_types_are_the_prelude_structs() {
    assert_eq!(c_type(ScalarType::Float16), "float16");
    assert_eq!(c_type(ScalarType::BFloat16), "bfloat16");
    assert!(FLOAT16_PRELUDE.contains("asm(\"cvt.rn.f16.f32 %0, %1;\" : \"=h\"(bits) : \"f\"(f));"));
    assert!(FLOAT16_PRELUDE.contains("asm(\"cvt.f32.f16 %0, %1;\" : \"=f\"(f) : \"h\"(bits));"));
    assert!(BFLOAT16_PRELUDE.contains("__float_as_uint(f)"));
    // NaN stays NaN of the same sign, quiet.
    assert!(BFLOAT16_PRELUDE.contains("bits = (unsigned short)((u >> 16) | 0x0040u);"));
    // The PTX is device code only; the host (the emulated device) has portable forms.
    assert!(FLOAT16_PRELUDE.contains("#ifdef __CUDA_ARCH__"));
    assert!(FLOAT16_PRELUDE.contains("float16(float f) : bits(kusari_f32_to_f16(f)) {}"));
    assert!(BFLOAT16_PRELUDE.contains("__uint_as_float(((unsigned int)bits) << 16)"));
    assert_eq!(HALF_PRELUDE, format!("{FLOAT16_PRELUDE}{BFLOAT16_PRELUDE}"));
}
