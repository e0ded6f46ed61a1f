//! The built-in CUDA kernels of the array operations: one elementwise kernel per op of
//! [`crate::op`] (its body from the op's description), and the copy, matrix-product, fill and
//! cast kernels; and the built-in reductions ([`reductions`]). Pure definitions, the same in
//! every build (the one without the `cuda` feature lists them too, through
//! `kusari::array_kernels` and `kusari::array_reduction_kernels`).

pub(crate) mod reductions;

use std::sync::OnceLock;

use kusari_kernels::ElementwiseDef;

use crate::dtype::DType;
use crate::op::{
    Abs, Add, BinaryOp, CmpOp, Cos, Div, Equal, Erf, Exp, ExpM1, FloatBinaryOp, FloatUnaryOp,
    Greater, GreaterEqual, Less, LessEqual, Log, Log1p, MUL_ADD_CUDA, Maximum, Minimum, Mul, Neg,
    NotEqual, POW_SCALAR_CUDA, Pow, Relu, Sigmoid, SigmoidGrad, Sin, Sqrt, Sub, Tanh, UnaryOp,
    WHERE_CUDA,
};

pub(crate) fn binary_kernel<O: BinaryOp>() -> ElementwiseDef {
    ElementwiseDef::new(O::NAME, "T a, T b", "T out", "", O::CUDA)
}

/// The same body with the scalar parameter as `b` (or as `a` when it comes first).
pub(crate) fn scalar_kernel<O: BinaryOp>(scalar_first: bool) -> ElementwiseDef {
    if scalar_first {
        ElementwiseDef::new(O::NAME, "T b", "T out", "T a", O::CUDA)
    } else {
        ElementwiseDef::new(O::NAME, "T a", "T out", "T b", O::CUDA)
    }
}

pub(crate) fn float_binary_kernel<O: FloatBinaryOp>() -> ElementwiseDef {
    ElementwiseDef::new(O::NAME, "T a, T b", "T out", "", O::CUDA)
}

pub(crate) fn unary_kernel<O: UnaryOp>() -> ElementwiseDef {
    ElementwiseDef::new(O::NAME, "T a", "T out", "", O::CUDA)
}

pub(crate) fn float_unary_kernel<O: FloatUnaryOp>() -> ElementwiseDef {
    ElementwiseDef::new(O::NAME, "T a", "T out", "", O::CUDA)
}

pub(crate) fn compare_kernel<O: CmpOp>() -> ElementwiseDef {
    ElementwiseDef::new(O::NAME, "T a, T b", "bool out", "", O::CUDA)
}

pub(crate) static POW_SCALAR: ElementwiseDef =
    ElementwiseDef::new("pow", "T a", "T out", "T b", POW_SCALAR_CUDA);
pub(crate) static GREATER_SCALAR: ElementwiseDef =
    ElementwiseDef::new("greater", "T a", "bool out", "T b", Greater::CUDA);
pub(crate) static WHERE: ElementwiseDef =
    ElementwiseDef::new("where", "bool c, T a, T b", "T out", "", WHERE_CUDA);
pub(crate) static MUL_ADD: ElementwiseDef =
    ElementwiseDef::new("mul_add", "T x, T y, T z", "T w", "", MUL_ADD_CUDA);

/// A C-contiguous copy of any layout (the strided variant reads views in place).
pub(crate) static COPY: ElementwiseDef =
    ElementwiseDef::new("kusari_copy", "T a", "T out", "", "out = a;");

/// Chainer's SGD update, `param -= lr * grad`, written in place into the caller's `param`.
pub(crate) static SGD_UPDATE: ElementwiseDef = ElementwiseDef::new(
    "kusari_sgd_update",
    "T grad",
    "T param",
    "T lr",
    "param -= lr * grad;",
);

/// Chainer's MomentumSGD update, `v = momentum * v - lr * grad; param += v`, written in place
/// into the caller's `param` and `v`.
pub(crate) static MOMENTUM_SGD_UPDATE: ElementwiseDef = ElementwiseDef::new(
    "kusari_momentum_sgd_update",
    "T grad",
    "T param, T v",
    "T lr, T momentum",
    "v = momentum * v - lr * grad;\nparam += v;",
);

/// The matrix product of contiguous `[batch, rows, inner]` and `[batch, inner, cols]` arrays, one
/// thread per output element: for integers, and floats where cuBLAS cannot be loaded.
pub(crate) static MATMUL: ElementwiseDef = ElementwiseDef::new(
    "kusari_matmul",
    "raw T a, raw T b",
    "T out",
    "int64 rows, int64 inner, int64 cols",
    "const long long c_ = (long long)i % cols;\n\
     const long long r_ = ((long long)i / cols) % rows;\n\
     const long long b_ = (long long)i / (cols * rows);\n\
     T acc = 0;\n\
     for (long long t = 0; t < inner; ++t) {\n\
     \x20 acc += a[(b_ * rows + r_) * inner + t] * b[(b_ * inner + t) * cols + c_];\n\
     }\n\
     out = acc;",
);

/// The parameters of a sliding window's kernels: per spatial axis (three, unit axes first)
/// the input and output sizes, the window's size, stride, padding and dilation.
macro_rules! window_params {
    () => {
        "int64 w_i0, int64 w_i1, int64 w_i2, int64 w_o0, int64 w_o1, int64 w_o2, \
         int64 w_k0, int64 w_k1, int64 w_k2, int64 w_s0, int64 w_s1, int64 w_s2, \
         int64 w_p0, int64 w_p1, int64 w_p2, int64 w_d0, int64 w_d1, int64 w_d2"
    };
}

/// im2col: one thread per column element `[plane, k0, k1, k2, o0, o1, o2]` of a C-order
/// `[plane, i0, i1, i2]` input; `w_pad` where the window leaves the input (see `window.rs`).
pub(crate) static IM2COL: ElementwiseDef = ElementwiseDef::new(
    "kusari_im2col",
    "raw T x",
    "T col",
    concat!(window_params!(), ", float64 w_pad"),
    "long long r_ = (long long)i;\n\
     const long long o2 = r_ % w_o2; r_ /= w_o2;\n\
     const long long o1 = r_ % w_o1; r_ /= w_o1;\n\
     const long long o0 = r_ % w_o0; r_ /= w_o0;\n\
     const long long k2 = r_ % w_k2; r_ /= w_k2;\n\
     const long long k1 = r_ % w_k1; r_ /= w_k1;\n\
     const long long k0 = r_ % w_k0; r_ /= w_k0;\n\
     const long long x0 = o0 * w_s0 - w_p0 + k0 * w_d0;\n\
     const long long x1 = o1 * w_s1 - w_p1 + k1 * w_d1;\n\
     const long long x2 = o2 * w_s2 - w_p2 + k2 * w_d2;\n\
     if (0 <= x0 && x0 < w_i0 && 0 <= x1 && x1 < w_i1 && 0 <= x2 && x2 < w_i2) {\n\
     \x20 col = x[((r_ * w_i0 + x0) * w_i1 + x1) * w_i2 + x2];\n\
     } else {\n\
     \x20 col = (T)w_pad;\n\
     }",
);

/// col2im, im2col's adjoint: one thread per input element `[plane, x0, x1, x2]`, summing the
/// column elements that read it (a gather: no atomics, the same order on every run).
pub(crate) static COL2IM: ElementwiseDef = ElementwiseDef::new(
    "kusari_col2im",
    "raw T col",
    "T x",
    window_params!(),
    "long long r_ = (long long)i;\n\
     const long long x2 = r_ % w_i2; r_ /= w_i2;\n\
     const long long x1 = r_ % w_i1; r_ /= w_i1;\n\
     const long long x0 = r_ % w_i0; r_ /= w_i0;\n\
     T acc = 0;\n\
     for (long long k0 = 0; k0 < w_k0; ++k0) {\n\
     \x20 const long long t0 = x0 + w_p0 - k0 * w_d0;\n\
     \x20 if (t0 < 0 || t0 % w_s0 != 0 || t0 / w_s0 >= w_o0) continue;\n\
     \x20 for (long long k1 = 0; k1 < w_k1; ++k1) {\n\
     \x20   const long long t1 = x1 + w_p1 - k1 * w_d1;\n\
     \x20   if (t1 < 0 || t1 % w_s1 != 0 || t1 / w_s1 >= w_o1) continue;\n\
     \x20   for (long long k2 = 0; k2 < w_k2; ++k2) {\n\
     \x20     const long long t2 = x2 + w_p2 - k2 * w_d2;\n\
     \x20     if (t2 < 0 || t2 % w_s2 != 0 || t2 / w_s2 >= w_o2) continue;\n\
     \x20     const long long k_ = (r_ * w_k0 + k0) * w_k1 * w_k2 + k1 * w_k2 + k2;\n\
     \x20     acc += col[((k_ * w_o0 + t0 / w_s0) * w_o1 + t1 / w_s1) * w_o2 + t2 / w_s2];\n\
     \x20   }\n\
     \x20 }\n\
     }\n\
     x = acc;",
);

/// Rows `idx` of a C-order `[outer, n_in, inner]` array along its middle axis (a zero row where
/// an index is negative): integer-array indexing and embeddings. One thread per output element.
pub(crate) static TAKE: ElementwiseDef = ElementwiseDef::new(
    "kusari_take",
    "raw T x, raw int64 idx",
    "T out",
    "int64 n_in, int64 n_idx, int64 inner",
    "const long long k_ = (long long)i % inner;\n\
     const long long j_ = ((long long)i / inner) % n_idx;\n\
     const long long o_ = (long long)i / (inner * n_idx);\n\
     const long long r_ = idx[j_];\n\
     out = r_ < 0 ? (T)0 : x[(o_ * n_in + r_) * inner + k_];",
);

/// The adjoint of [`TAKE`] without atomics: each output element of `[outer, n_out, inner]` sums,
/// in order, the source rows `order[starts[r]..starts[r + 1]]` that go to its row `r` (the
/// inverse of the index, made on the host), so repeated indices add up in the host's order.
pub(crate) static SCATTER_ADD: ElementwiseDef = ElementwiseDef::new(
    "kusari_scatter_add",
    "raw T src, raw int64 starts, raw int64 order",
    "T out",
    "int64 n_out, int64 n_src, int64 inner",
    "const long long k_ = (long long)i % inner;\n\
     const long long r_ = ((long long)i / inner) % n_out;\n\
     const long long o_ = (long long)i / (inner * n_out);\n\
     T acc = 0;\n\
     for (long long p_ = starts[r_]; p_ < starts[r_ + 1]; ++p_) {\n\
     \x20 acc += src[(o_ * n_src + order[p_]) * inner + k_];\n\
     }\n\
     out = acc;",
);

fn dtype_index(d: DType) -> usize {
    DType::ALL
        .iter()
        .position(|&x| x == d)
        .expect("DType::ALL lists every dtype")
}

/// double to float keeping a NaN's sign and top payload bits (quiet), as x86's `cvtsd2ss`.
const F64_TO_F32: &str = "const double d = (double)a; \
     const unsigned long long u = (unsigned long long)__double_as_longlong(d); \
     out = d != d ? __uint_as_float((unsigned int)((u >> 32) & 0x80000000ull) | 0x7fc00000u \
     | (unsigned int)((u >> 29) & 0x7fffffull)) : (float)d;";

/// float (or a half type, through float) to double keeping a NaN's sign and payload (quiet).
const F32_TO_F64: &str = "const float f = (float)a; const unsigned int u = __float_as_uint(f); \
     out = f != f ? __longlong_as_double((long long)((((unsigned long long)u & 0x80000000ull) << 32) \
     | 0x7ff8000000000000ull | ((unsigned long long)(u & 0x7fffffu) << 29))) : (double)f;";

/// The body of the cast kernel from `from` to `to`, converting as the host's `astype` does:
/// integers wrap, floats to integers truncate, saturate and take NaN to 0, and a double rounds
/// to a half type once.
fn cast_body(from: DType, to: DType) -> String {
    let half = |d: DType| matches!(d, DType::F16 | DType::BF16);
    if from.is_float() && to.is_int() {
        // The type's range as doubles: a value at or beyond either end saturates (the upper
        // bound, 2^bits, is exact; the lower is the minimum itself or 0).
        let bits = 8 * to.size_in_bytes() as u32;
        let c = kusari_kernels::codegen::c_type(to.into());
        let (min, max, above) = match to.is_unsigned() {
            true => (
                "0".to_string(),
                format!("{}ull", u64::MAX >> (64 - bits)),
                2f64.powi(bits as i32),
            ),
            false => (
                format!("(-{}ll - 1)", (1u64 << (bits - 1)) - 1),
                format!("{}ll", (1u64 << (bits - 1)) - 1),
                2f64.powi(bits as i32 - 1),
            ),
        };
        let below = match to.is_unsigned() {
            true => 0.0,
            false => -(2f64.powi(bits as i32 - 1)),
        };
        return format!(
            "const double v = (double)a; \
             out = v != v ? ({c})0 : (v >= {above:.1} ? ({c}){max} \
             : (v <= {below:.1} ? ({c}){min} : ({c})v));"
        );
    }
    match (from, to) {
        // Through float with rounding to odd, then to nearest even: one rounding in all.
        (DType::F64, DType::F16 | DType::BF16) => "out = kusari_f64_to_f32_odd(a);",
        // A NaN keeps its sign and payload between float and double, as on the host (the
        // device's conversion gives the canonical, positive NaN). Half types go through float.
        (DType::F64, DType::F32) => F64_TO_F32,
        (DType::F32 | DType::F16 | DType::BF16, DType::F64) => F32_TO_F64,
        // Half types convert through float: a conversion between the two half types would
        // otherwise need two user-defined conversions.
        _ if half(from) || half(to) => "out = (float)a;",
        _ => "out = a;",
    }
    .to_string()
}

/// Kernels whose signatures name concrete dtypes, made once per process.
struct Generated {
    /// `out = v` for each dtype, in `DType::ALL` order.
    fill: Vec<ElementwiseDef>,
    /// `out = a` from each dtype to each dtype (`from * DType::ALL.len() + to`).
    cast: Vec<ElementwiseDef>,
}

fn generated() -> &'static Generated {
    static GENERATED: OnceLock<Generated> = OnceLock::new();
    GENERATED.get_or_init(|| {
        let leak = |s: String| -> &'static str { Box::leak(s.into_boxed_str()) };
        let fill = DType::ALL
            .iter()
            .map(|d| {
                let t = d.name();
                ElementwiseDef::new(
                    leak(format!("kusari_fill_{t}")),
                    "",
                    leak(format!("{t} out")),
                    leak(format!("{t} v")),
                    "out = v;",
                )
            })
            .collect();
        let mut cast = Vec::new();
        for from in DType::ALL {
            for to in DType::ALL {
                cast.push(ElementwiseDef::new(
                    leak(format!("kusari_cast_{}_to_{}", from.name(), to.name())),
                    leak(format!("{} a", from.name())),
                    leak(format!("{} out", to.name())),
                    "",
                    leak(cast_body(from, to)),
                ));
            }
        }
        Generated { fill, cast }
    })
}

/// The kernel filling a new array of `dtype` with a scalar.
pub(crate) fn fill_kernel(dtype: DType) -> &'static ElementwiseDef {
    &generated().fill[dtype_index(dtype)]
}

/// The kernel converting `from` to `to`.
pub(crate) fn cast_kernel(from: DType, to: DType) -> &'static ElementwiseDef {
    &generated().cast[dtype_index(from) * DType::ALL.len() + dtype_index(to)]
}

/// The dtypes the built-in arithmetic kernels run in on CUDA: every integer, float32 and
/// float64 (the half types compute in float32).
pub(crate) const DEVICE_NUMERIC: [DType; 10] = {
    let mut out = [DType::F64; 10];
    let mut k = 0;
    while k < DType::INTEGERS.len() {
        out[k] = DType::INTEGERS[k];
        k += 1;
    }
    out[8] = DType::F32;
    out
};

/// The dtypes the built-in comparisons (and gathers) run in on CUDA: `bool`, then
/// [`DEVICE_NUMERIC`].
pub(crate) const DEVICE_COMPARED: [DType; 11] = {
    let mut out = [DType::Bool; 11];
    let mut k = 0;
    while k < DEVICE_NUMERIC.len() {
        out[k + 1] = DEVICE_NUMERIC[k];
        k += 1;
    }
    out
};

/// Every built-in kernel, each with the dtypes its type placeholders take (none for kernels of
/// concrete types; half-precision math runs in float32), so that a test can compile every one.
pub(crate) fn builtin_kernels() -> Vec<(ElementwiseDef, &'static [DType])> {
    const ALL: &[DType] = &DType::ALL;
    const NUM: &[DType] = &DEVICE_NUMERIC;
    const FLOAT: &[DType] = &[DType::F32, DType::F64];
    const CMP: &[DType] = &DEVICE_COMPARED;
    let mut all = Vec::new();
    macro_rules! binary {
        ($($o:ty),*) => {$(
            all.push((binary_kernel::<$o>(), NUM));
            all.push((scalar_kernel::<$o>(false), NUM));
            all.push((scalar_kernel::<$o>(true), NUM));
        )*};
    }
    binary!(Add, Sub, Mul, Div, Maximum, Minimum);
    all.push((float_binary_kernel::<Pow>(), FLOAT));
    all.push((float_binary_kernel::<SigmoidGrad>(), FLOAT));
    all.push((unary_kernel::<Neg>(), NUM));
    all.push((unary_kernel::<Abs>(), NUM));
    all.push((unary_kernel::<Relu>(), NUM));
    for k in [
        float_unary_kernel::<Exp>(),
        float_unary_kernel::<ExpM1>(),
        float_unary_kernel::<Erf>(),
        float_unary_kernel::<Log>(),
        float_unary_kernel::<Log1p>(),
        float_unary_kernel::<Sqrt>(),
        float_unary_kernel::<Tanh>(),
        float_unary_kernel::<Sigmoid>(),
        float_unary_kernel::<Sin>(),
        float_unary_kernel::<Cos>(),
    ] {
        all.push((k, FLOAT));
    }
    for k in [
        compare_kernel::<Equal>(),
        compare_kernel::<NotEqual>(),
        compare_kernel::<Less>(),
        compare_kernel::<LessEqual>(),
        compare_kernel::<Greater>(),
        compare_kernel::<GreaterEqual>(),
    ] {
        all.push((k, CMP));
    }
    all.push((POW_SCALAR, FLOAT));
    all.push((GREATER_SCALAR, CMP));
    all.push((WHERE, CMP));
    all.push((MUL_ADD, NUM));
    all.push((COPY, ALL));
    all.push((MATMUL, NUM));
    all.push((IM2COL, FLOAT));
    all.push((COL2IM, FLOAT));
    all.push((TAKE, CMP));
    all.push((SCATTER_ADD, NUM));
    all.push((SGD_UPDATE, FLOAT));
    all.push((MOMENTUM_SGD_UPDATE, FLOAT));
    for d in DType::ALL {
        all.push((*fill_kernel(d), &[]));
    }
    for from in DType::ALL {
        for to in DType::ALL {
            all.push((*cast_kernel(from, to), &[]));
        }
    }
    all
}
