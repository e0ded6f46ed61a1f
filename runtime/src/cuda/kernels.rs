//! The built-in CUDA kernels of the array operations: one elementwise kernel per op of
//! [`crate::op`] (its body from the op's description), and the copy, matrix-product, fill and
//! cast kernels. Pure definitions: the build without the `cuda` feature includes this file too,
//! so that [`builtin_kernels`] (listed by `kusari::array_kernels`) and [`source_for`] are the
//! same in every build.

use std::sync::OnceLock;

use kusari_kernels::codegen::{
    generate_code_aliasing, Aliasing, IndexWidth, Indexing, KernelSource,
};
use kusari_kernels::elementwise::InputArg;
use kusari_kernels::loop_plan::{collapse_dims, overlaps_itself, LoopOperand, LoopPlan};
use kusari_kernels::{ElementwiseDef, ElementwiseSignature, Param, ParamType, ScalarType};

use crate::dtype::{DType, Element};
use crate::error::{Error, Result};
use crate::layout::Layout;
use crate::op::{
    Abs, Add, BinaryOp, CmpOp, Div, Equal, Exp, FloatBinaryOp, FloatUnaryOp, Greater, GreaterEqual,
    Less, LessEqual, Log, Maximum, Minimum, Mul, Neg, NotEqual, Pow, Sigmoid, Sqrt, Sub, Tanh,
    UnaryOp, MUL_ADD_CUDA, POW_SCALAR_CUDA, WHERE_CUDA,
};
use crate::scalar::Scalar;

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
fn cast_body(from: DType, to: DType) -> &'static str {
    let half = |d: DType| matches!(d, DType::F16 | DType::BF16);
    match (from, to) {
        // Through float with rounding to odd, then to nearest even: one rounding in all.
        (DType::F64, DType::F16 | DType::BF16) => "out = kusari_f64_to_f32_odd(a);",
        (f, DType::I32) if f.is_float() => {
            "const double v = (double)a; \
             out = v != v ? 0 : (v >= 2147483648.0 ? 2147483647 \
             : (v <= -2147483648.0 ? (-2147483647 - 1) : (int)v));"
        }
        (f, DType::I64) if f.is_float() => {
            "const double v = (double)a; \
             out = v != v ? 0LL : (v >= 9223372036854775808.0 ? 9223372036854775807LL \
             : (v <= -9223372036854775808.0 ? (-9223372036854775807LL - 1) : (long long)v));"
        }
        // A NaN keeps its sign and payload between float and double, as on the host (the
        // device's conversion gives the canonical, positive NaN). Half types go through float.
        (DType::F64, DType::F32) => F64_TO_F32,
        (DType::F32 | DType::F16 | DType::BF16, DType::F64) => F32_TO_F64,
        // Half types convert through float: a conversion between the two half types would
        // otherwise need two user-defined conversions.
        _ if half(from) || half(to) => "out = (float)a;",
        _ => "out = a;",
    }
}

/// Kernels whose signatures name concrete dtypes, made once per process.
struct Generated {
    /// `out = v` for each dtype, in `DType::ALL` order.
    fill: Vec<ElementwiseDef>,
    /// `out = a` from each dtype to each dtype (`from * 7 + to`).
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
                    cast_body(from, to),
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

/// Every built-in kernel, each with the dtypes its type placeholders take (none for kernels of
/// concrete types; half-precision math runs in float32), so that a test can compile every one.
pub(crate) fn builtin_kernels() -> Vec<(ElementwiseDef, &'static [DType])> {
    const ALL: &[DType] = &DType::ALL;
    const NUM: &[DType] = &[DType::I32, DType::I64, DType::F32, DType::F64];
    const FLOAT: &[DType] = &[DType::F32, DType::F64];
    const CMP: &[DType] = &[DType::Bool, DType::I32, DType::I64, DType::F32, DType::F64];
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
    all.push((unary_kernel::<Neg>(), NUM));
    all.push((unary_kernel::<Abs>(), NUM));
    for k in [
        float_unary_kernel::<Exp>(),
        float_unary_kernel::<Log>(),
        float_unary_kernel::<Sqrt>(),
        float_unary_kernel::<Tanh>(),
        float_unary_kernel::<Sigmoid>(),
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

/// What a launch passes for an array input of a kernel: an array (its buffer as the caller's
/// layer holds it, `A`), or a scalar broadcast as a 0-d value.
#[derive(Clone, Copy, Debug)]
pub(crate) enum Operand<A> {
    Array(A),
    Scalar(Scalar),
}

/// A launch's arguments, with arrays as `A` (buffers and layouts at the storage layer's level
/// or the CUDA backend's).
pub(crate) struct LaunchArgs<'a, A> {
    /// One per input of the signature.
    pub inputs: Vec<Operand<A>>,
    /// One per scalar parameter.
    pub params: &'a [Scalar],
    /// The caller's outputs, one per output of the signature, or `None` for new ones.
    pub outputs: Option<Vec<A>>,
    /// The loop's size, for a kernel whose array inputs are all `raw`.
    pub size: Option<usize>,
    /// Whether the strided variant collapses the loop's axes (CuPy's `reduce_dims`).
    pub reduce_dims: bool,
    /// Whether each parameter is cast to its declared type as the host's ops cast an `f64`
    /// (the built-in ops' launches), rather than checked to fit it (a user's launch).
    pub cast_params: bool,
}

impl<'a, A: Copy> LaunchArgs<'a, A> {
    /// The same arguments, each array (inputs and outputs) as `f` makes it: the storage layer
    /// describes its buffers as dtypes for a plan, the array layer its arrays as buffers.
    pub fn map_arrays<B>(&self, f: impl Fn(A) -> B) -> LaunchArgs<'a, B> {
        LaunchArgs {
            inputs: self
                .inputs
                .iter()
                .map(|a| match *a {
                    Operand::Array(a) => Operand::Array(f(a)),
                    Operand::Scalar(v) => Operand::Scalar(v),
                })
                .collect(),
            params: self.params,
            outputs: self
                .outputs
                .as_ref()
                .map(|o| o.iter().map(|&a| f(a)).collect()),
            size: self.size,
            reduce_dims: self.reduce_dims,
            cast_params: self.cast_params,
        }
    }
}

/// A launch's plan: everything but the buffers. [`source_for`] and the CUDA launch both follow
/// it, so the source a user inspects is the source a launch compiles.
#[derive(Debug)]
#[cfg_attr(not(feature = "cuda"), allow(dead_code))]
pub(crate) struct Planned {
    /// The placeholders' types.
    pub types: Vec<(char, DType)>,
    /// Per input, the scalar given for it converted to its element type (`None` for arrays).
    pub scalars: Vec<Option<Scalar>>,
    /// The scalar parameters, converted to their declared types.
    pub params: Vec<Scalar>,
    /// The element type of each output.
    pub output_dtypes: Vec<DType>,
    /// The loop's shape (the new outputs' shape).
    pub shape: Vec<usize>,
    /// The loop's variant.
    pub indexing: Indexing,
    /// 32- or 64-bit indices.
    pub width: IndexWidth,
    /// For the strided variant, the layout struct the kernel takes by value: the (collapsed)
    /// shape, then the strides of each looped input and non-`raw` output.
    pub layout_words: Vec<i64>,
}

fn arguments(kernel: &ElementwiseDef, msg: String) -> Error {
    Error::KernelArguments {
        kernel: kernel.name.to_string(),
        msg,
    }
}

/// Plans a launch of `kernel` over arrays given as their dtypes and layouts: checks every
/// argument against the signature (counts, dtypes, a scalar's value against its type, given
/// outputs' shapes and layouts), binds the placeholders, and picks the variant. See
/// `ElementwiseKernel::call` for the rules.
pub(crate) fn plan(
    kernel: &ElementwiseDef,
    sig: &ElementwiseSignature,
    args: &LaunchArgs<'_, (DType, &Layout)>,
) -> Result<Planned> {
    kernel.check_param_count(sig, args.params.len())?;
    let given = args.outputs.as_deref();
    if let Some(outs) = given {
        if outs.len() != sig.outputs.len() {
            return Err(arguments(
                kernel,
                format!(
                    "{} output(s) given, the signature declares {} (give all of them or none)",
                    outs.len(),
                    sig.outputs.len()
                ),
            ));
        }
    }
    let bind_args: Vec<InputArg<'_>> = args
        .inputs
        .iter()
        .map(|a| match a {
            Operand::Array((d, l)) => InputArg::Array(ScalarType::from(*d), l.shape()),
            Operand::Scalar(s) => InputArg::Scalar(ScalarType::from(s.dtype())),
        })
        .collect();
    let types: Vec<(char, DType)> = kernel
        .bind_args(sig, &bind_args)?
        .into_iter()
        .map(|(c, t)| (c, DType::from(t)))
        .collect();
    let type_of = |p: &Param| -> DType {
        match p.ty {
            ParamType::Concrete(t) => DType::from(t),
            ParamType::Placeholder(c) => types
                .iter()
                .find(|(q, _)| *q == c)
                .map_or(DType::F32, |(_, d)| *d),
        }
    };
    let declared = |p: &Param| match p.ty {
        ParamType::Concrete(_) => String::new(),
        ParamType::Placeholder(c) => format!(" (placeholder `{c}`)"),
    };
    let convert = |what: &str, p: &Param, v: Scalar| {
        let to = type_of(p);
        v.to_dtype(to).ok_or_else(|| {
            arguments(
                kernel,
                format!(
                    "{what} `{}` is {v}, which does not fit its type {to}{}",
                    p.name,
                    declared(p)
                ),
            )
        })
    };
    let scalars = sig
        .inputs
        .iter()
        .zip(&args.inputs)
        .map(|(p, a)| match a {
            Operand::Scalar(v) => convert("argument", p, *v).map(Some),
            Operand::Array(_) => Ok(None),
        })
        .collect::<Result<Vec<_>>>()?;
    let params = sig
        .params
        .iter()
        .zip(args.params)
        .map(|(p, v)| match args.cast_params {
            true => Ok(cast_f64(v.to_f64(), type_of(p))),
            false => convert("parameter", p, *v),
        })
        .collect::<Result<Vec<_>>>()?;
    let output_dtypes: Vec<DType> = sig.outputs.iter().map(type_of).collect();
    for ((p, &(d, l)), want) in sig
        .outputs
        .iter()
        .zip(given.unwrap_or(&[]))
        .zip(&output_dtypes)
    {
        if d != *want {
            return Err(arguments(
                kernel,
                format!(
                    "output `{}` is {d} {:?}, but the kernel writes {want}{} there",
                    p.name,
                    l.shape(),
                    declared(p)
                ),
            ));
        }
        if p.raw && !l.is_contiguous() {
            return Err(arguments(
                kernel,
                format!(
                    "output `{}` is a strided view {:?}, but a raw output is indexed by the body \
                     as a flat C-order array: give a C-contiguous array",
                    p.name,
                    l.shape()
                ),
            ));
        }
        if !p.raw && overlaps_itself(l.shape(), &strides_i64(l)) {
            return Err(arguments(
                kernel,
                format!(
                    "output `{}` {:?} (strides {:?}) holds some elements more than once (a \
                     broadcast view?): each element of an output must be its own",
                    p.name,
                    l.shape(),
                    l.strides()
                ),
            ));
        }
    }
    let shaped_by_outputs = given.is_some_and(|o| o.iter().zip(&sig.outputs).any(|(_, p)| !p.raw));
    if !(shaped_by_outputs && args.size.is_none()) {
        kernel.check_loop_size(sig, args.size)?;
    }

    let scalar_layout = Layout::contiguous(&[]);
    let input_layouts: Vec<&Layout> = args
        .inputs
        .iter()
        .map(|a| match a {
            Operand::Array((_, l)) => *l,
            Operand::Scalar(_) => &scalar_layout,
        })
        .collect();
    fn operand<'l>(l: &&'l Layout) -> LoopOperand<'l> {
        LoopOperand {
            shape: l.shape(),
            contiguous: l.is_contiguous(),
        }
    }
    let inputs: Vec<LoopOperand<'_>> = input_layouts.iter().map(operand).collect();
    let output_layouts: Vec<&Layout> = given.unwrap_or(&[]).iter().map(|(_, l)| *l).collect();
    let outputs: Vec<LoopOperand<'_>> = output_layouts.iter().map(operand).collect();
    let size_shape = args.size.map(|s| [s]);
    let plan = LoopPlan::with_outputs(sig, &inputs, &outputs, size_shape.as_ref().map(|s| &s[..]))?;
    for (p, l) in sig.outputs.iter().zip(&output_layouts) {
        if !p.raw && l.shape() != plan.shape.as_slice() {
            return Err(arguments(
                kernel,
                format!(
                    "output `{}` has shape {:?}, but the loop's shape is {:?} (an output is not \
                     broadcast: give one of the loop's shape)",
                    p.name,
                    l.shape(),
                    plan.shape
                ),
            ));
        }
    }

    let mut indexing = plan.indexing;
    let mut layout_words = Vec::new();
    if let Indexing::Strided { .. } = plan.indexing {
        let strides_of = |l: &Layout| -> Result<Vec<i64>> {
            Ok(strides_i64(
                &l.broadcast_to(&plan.shape, "ElementwiseKernel")?,
            ))
        };
        let mut strides: Vec<Vec<i64>> = Vec::new();
        for &i in &plan.looped {
            strides.push(strides_of(input_layouts[i])?);
        }
        let fresh = Layout::contiguous(&plan.shape);
        for (k, p) in sig.outputs.iter().enumerate() {
            if !p.raw {
                strides.push(strides_of(
                    output_layouts.get(k).copied().unwrap_or(&fresh),
                )?);
            }
        }
        let mut shape: Vec<usize> = plan.shape.clone();
        if args.reduce_dims {
            (shape, strides) = collapse_dims(&shape, &strides);
        }
        indexing = Indexing::Strided { ndim: shape.len() };
        let nd = shape.len().max(1);
        layout_words = shape.iter().map(|&d| d as i64).collect();
        layout_words.resize(nd, 1);
        for mut s in strides {
            s.resize(nd, 0);
            layout_words.extend(s);
        }
        if plan.looped.is_empty() && sig.outputs.iter().all(|p| p.raw) {
            layout_words.resize(2 * nd, 0);
        }
    }
    Ok(Planned {
        types,
        scalars,
        params,
        output_dtypes,
        shape: plan.shape,
        indexing,
        width: plan.width,
        layout_words,
    })
}

/// `v` in `dtype` as the host's ops cast an `f64` (saturating to integers, rounding to floats).
fn cast_f64(v: f64, dtype: DType) -> Scalar {
    match dtype {
        DType::Bool => Scalar::Bool(v != 0.0),
        DType::I32 => Scalar::I32(v as i32),
        DType::I64 => Scalar::I64(v as i64),
        DType::F16 => Scalar::F16(<half::f16 as Element>::from_f64(v)),
        DType::BF16 => Scalar::BF16(<half::bf16 as Element>::from_f64(v)),
        DType::F32 => Scalar::F32(v as f32),
        DType::F64 => Scalar::F64(v),
    }
}

fn strides_i64(l: &Layout) -> Vec<i64> {
    l.strides().iter().map(|&s| s as i64).collect()
}

/// A launch with caller-given outputs may read an input from the very memory it writes (the
/// aliasing the launch's check allows), so its pointers are not `__restrict__`; a launch that
/// allocates its outputs keeps them distinct.
pub(crate) fn aliasing_of<A>(args: &LaunchArgs<'_, A>) -> Aliasing {
    match args.outputs {
        Some(_) => Aliasing::InPlace,
        None => Aliasing::Distinct,
    }
}

/// The CUDA source a launch with `args` compiles (see [`plan`]): placeholders bound from the
/// dtypes, the contiguous variant when every non-`raw` array is C-contiguous in the loop's
/// (broadcast) shape and the strided one otherwise (with its axes collapsed where
/// `reduce_dims`), and 64-bit indexing from 2^31 elements.
pub(crate) fn source_for(
    kernel: &ElementwiseDef,
    args: &LaunchArgs<'_, (DType, &Layout)>,
) -> Result<KernelSource> {
    let sig = kernel.signature()?;
    let planned = plan(kernel, &sig, args)?;
    let types: Vec<(char, ScalarType)> = planned
        .types
        .iter()
        .map(|&(c, d)| (c, ScalarType::from(d)))
        .collect();
    generate_code_aliasing(
        kernel.name,
        &sig,
        kernel.code(),
        &types,
        planned.indexing,
        planned.width,
        aliasing_of(args),
    )
    .map_err(|source| Error::Codegen {
        kernel: kernel.name.to_string(),
        source: Box::new(source),
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    const STEP: ElementwiseDef =
        ElementwiseDef::new("step", "T w, T g", "T out", "T lr", "out = w - lr * g;");

    fn args<'a>(
        inputs: Vec<Operand<(DType, &'a Layout)>>,
        params: &'a [Scalar],
        outputs: Option<Vec<(DType, &'a Layout)>>,
    ) -> LaunchArgs<'a, (DType, &'a Layout)> {
        LaunchArgs {
            inputs,
            params,
            outputs,
            size: None,
            reduce_dims: true,
            cast_params: false,
        }
    }

    fn planned(a: &LaunchArgs<'_, (DType, &Layout)>) -> Result<Planned> {
        plan(&STEP, &STEP.signature()?, a)
    }

    #[test]
    fn parameters_are_checked_or_cast_as_the_launch_asks() {
        let l = Layout::contiguous(&[2]);
        let ints = || {
            vec![
                Operand::Array((DType::I32, &l)),
                Operand::Array((DType::I32, &l)),
            ]
        };
        let e = planned(&args(ints(), &[Scalar::F64(0.5)], None)).unwrap_err();
        assert_eq!(
            e.to_string(),
            "kernel step: parameter `lr` is 0.5 (float64), which does not fit its type int32 \
             (placeholder `T`)"
        );
        let mut cast = args(ints(), &[Scalar::F64(2.7)], None);
        cast.cast_params = true;
        assert_eq!(planned(&cast).unwrap().params, vec![Scalar::I32(2)]);
        assert_eq!(
            cast_f64(-1.5, DType::F16),
            Scalar::F16(half::f16::from_f32(-1.5))
        );
        assert_eq!(cast_f64(3e9, DType::I32), Scalar::I32(i32::MAX));
        assert_eq!(cast_f64(0.0, DType::Bool), Scalar::Bool(false));
    }

    #[test]
    fn a_scalar_input_is_converted_and_outputs_shape_the_loop() {
        let out = Layout::contiguous(&[2, 3]);
        let a = args(
            vec![
                Operand::Scalar(Scalar::I64(3)),
                Operand::Scalar(Scalar::I64(1)),
            ],
            &[Scalar::I64(2)],
            Some(vec![(DType::I64, &out)]),
        );
        let p = planned(&a).unwrap();
        assert_eq!(p.types, vec![('T', DType::I64)]);
        assert_eq!(p.scalars, vec![Some(Scalar::I64(3)), Some(Scalar::I64(1))]);
        assert_eq!(p.shape, vec![2, 3]);
        // Two 0-d inputs broadcast over a contiguous output: one collapsed axis.
        assert_eq!(p.indexing, Indexing::Strided { ndim: 1 });
        assert_eq!(p.layout_words, vec![6, 0, 0, 1]);
        let e = planned(&args(
            vec![
                Operand::Scalar(Scalar::I64(3)),
                Operand::Scalar(Scalar::I64(1)),
            ],
            &[Scalar::I64(2)],
            Some(vec![]),
        ))
        .unwrap_err();
        assert!(
            e.to_string()
                .contains("0 output(s) given, the signature declares 1"),
            "{e}"
        );
    }

    #[test]
    fn without_reduce_dims_every_axis_stays() {
        let x = Layout::contiguous(&[2, 3]);
        let row = Layout::contiguous(&[3]);
        let mut a = args(
            vec![
                Operand::Array((DType::F32, &x)),
                Operand::Array((DType::F32, &row)),
            ],
            &[Scalar::F32(1.0)],
            None,
        );
        let p = planned(&a).unwrap();
        assert_eq!(p.indexing, Indexing::Strided { ndim: 2 });
        assert_eq!(p.layout_words, vec![2, 3, 3, 1, 0, 1, 3, 1]);
        a.reduce_dims = false;
        let x3 = Layout::contiguous(&[4, 2, 3]);
        a.inputs[0] = Operand::Array((DType::F32, &x3));
        assert_eq!(planned(&a).unwrap().indexing, Indexing::Strided { ndim: 3 });
        a.reduce_dims = true;
        assert_eq!(planned(&a).unwrap().indexing, Indexing::Strided { ndim: 2 });
    }
}
