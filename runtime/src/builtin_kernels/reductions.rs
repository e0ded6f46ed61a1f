//! The built-in reductions (`sum`, `max`, `min`; `mean` divides a sum) as reduction kernels
//! (CuPy's `ReductionKernel`): the array operations reduce through the same planning, code and
//! launch as a user's `ReductionKernel`. Pure definitions, the same in every build.

use kusari_kernels::ReductionDef;

use crate::dtype::DType;

/// Floating-point sums, and sums of the integers C computes in `int` (8 and 16 bits, which
/// wrap when the result is stored back) or in unsigned arithmetic (which wraps).
pub(crate) const SUM: ReductionDef = ReductionDef {
    name: "kusari_sum",
    in_params: "T x",
    out_params: "T y",
    map_expr: "x",
    reduce_expr: "a + b",
    post_map_expr: "y = a",
    identity: Some("0"),
    ..ReductionDef::DEFAULT
};
/// int32 sums, which wrap on overflow (computed in `unsigned int`, where C defines it).
pub(crate) const SUM_INT32: ReductionDef = ReductionDef {
    name: "kusari_sum_int32",
    in_params: "T x",
    out_params: "T y",
    map_expr: "x",
    reduce_expr: "(T)((unsigned int)a + (unsigned int)b)",
    post_map_expr: "y = a",
    identity: Some("0"),
    ..ReductionDef::DEFAULT
};
/// int64 sums, which wrap on overflow.
pub(crate) const SUM_INT64: ReductionDef = ReductionDef {
    name: "kusari_sum_int64",
    in_params: "T x",
    out_params: "T y",
    map_expr: "x",
    reduce_expr: "(T)((unsigned long long)a + (unsigned long long)b)",
    post_map_expr: "y = a",
    identity: Some("0"),
    ..ReductionDef::DEFAULT
};
/// The maximum; a NaN (`b != b`) wins, and stays (`b > NaN` is false).
pub(crate) const MAX: ReductionDef = ReductionDef {
    name: "kusari_max",
    in_params: "T x",
    out_params: "T y",
    map_expr: "x",
    reduce_expr: "(b != b || b > a) ? b : a",
    post_map_expr: "y = a",
    identity: None,
    ..ReductionDef::DEFAULT
};
/// The minimum; NaN propagates as in [`MAX`].
pub(crate) const MIN: ReductionDef = ReductionDef {
    name: "kusari_min",
    in_params: "T x",
    out_params: "T y",
    map_expr: "x",
    reduce_expr: "(b != b || b < a) ? b : a",
    post_map_expr: "y = a",
    identity: None,
    ..ReductionDef::DEFAULT
};

/// The dtypes the built-in reductions run in on CUDA (half types are reduced in float32).
const REDUCED_DTYPES: &[DType] = &super::DEVICE_NUMERIC;

/// Every built-in reduction kernel with the dtypes it runs in, for a test to compile each.
pub(crate) fn builtin_reductions() -> Vec<(ReductionDef, &'static [DType])> {
    vec![
        (
            SUM,
            &[
                DType::I8,
                DType::I16,
                DType::U8,
                DType::U16,
                DType::U32,
                DType::U64,
                DType::F32,
                DType::F64,
            ],
        ),
        (SUM_INT32, &[DType::I32]),
        (SUM_INT64, &[DType::I64]),
        (MAX, REDUCED_DTYPES),
        (MIN, REDUCED_DTYPES),
    ]
}
