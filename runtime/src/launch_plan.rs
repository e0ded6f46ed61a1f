//! The plan of an elementwise launch, pure and the same in every build: the arguments as the
//! layers take them ([`LaunchArgs`], [`Operand`]; a raw launch's [`RawArg`]), every check of them against the kernel's
//! signature, the binding of its placeholders and the variant it runs ([`plan`], giving a
//! [`LaunchPlan`]), and the source that variant compiles ([`source_for`]). The CUDA backend
//! launches what the plan says; the build without CUDA checks and shows the same plan.

use kusari_kernels::codegen::{
    Aliasing, IndexWidth, Indexing, KernelSource, generate_code_aliasing,
};
use kusari_kernels::elementwise::InputArg;
use kusari_kernels::loop_plan::{LoopOperand, LoopPlan, collapse_dims, overlaps_itself};
use kusari_kernels::{ElementwiseDef, ElementwiseSignature, Param, ParamType, ScalarType};

use crate::dtype::{DType, Element};
use crate::error::{Error, Result};
use crate::layout::Layout;
use crate::scalar::Scalar;

/// What a launch passes for an array input of a kernel: an array (its buffer as the caller's
/// layer holds it, `A`), or a scalar broadcast as a 0-d value.
#[derive(Clone, Copy, Debug)]
pub(crate) enum Operand<A> {
    Array(A),
    Scalar(Scalar),
}

/// One argument of a raw kernel's launch, in the kernel's parameter order, with arrays as `A`
/// (an array's first element is passed as a device pointer).
#[derive(Clone, Copy, Debug)]
pub(crate) enum RawArg<A> {
    /// An array.
    Array(A),
    /// A value of `.1` bytes in the low bytes of `.0`.
    Value(u64, usize),
}

/// The code a raw kernel runs: a function of a CUDA source, compiled for each device, or of a
/// module compiled already.
#[derive(Clone, Debug)]
#[cfg_attr(not(feature = "cuda"), allow(dead_code))] // The build without CUDA launches nothing.
pub(crate) enum RawCode {
    /// A source; the kernel is `src.entry`, or, with `instance`, the template instance
    /// `names[instance]` (a name expression, compiled with all of the module's `names`).
    Source {
        /// The module's translation unit, with this kernel as its entry.
        src: KernelSource,
        /// The module's name expressions.
        names: std::sync::Arc<[String]>,
        /// Which of them this kernel is, if any.
        instance: Option<usize>,
    },
    /// A compiled module (PTX, a cubin, a fatbin) and the kernel's name in it.
    Binary {
        /// The kernel's compiled name.
        entry: String,
        /// What a device loads.
        image: std::sync::Arc<Vec<u8>>,
        /// What it is.
        format: kusari_kernels::raw::BinaryFormat,
    },
}

impl RawCode {
    /// The kernel's name, as its user knows it.
    pub(crate) fn name(&self) -> &str {
        match self {
            RawCode::Source { src, .. } => &src.entry,
            RawCode::Binary { entry, .. } => entry,
        }
    }
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

/// What an elementwise launch does, decided before anything runs: the types bound to the
/// kernel's placeholders, the arguments converted to their declared types, the outputs it
/// makes, the loop's shape and the variant of the kernel that runs it. The CUDA launch follows
/// it, and the source a launch compiles is generated from it, so the source a user inspects is the
/// source a launch compiles. [`KernelCall::plan`](crate::KernelCall::plan) shows it on any
/// machine, GPU or not.
///
/// ```
/// use kusari::kernels::codegen::{IndexWidth, Indexing};
/// use kusari::{Array, DType, ElementwiseKernel, Scalar};
/// static SCALE: ElementwiseKernel =
///     ElementwiseKernel::new("scale", "T x", "T y", "T a", "y = a * x;");
/// let x = Array::zeros(&[2, 3], DType::F32)?;
/// // No GPU needed: the plan is made, checked and shown on the host.
/// let plan = SCALE.call().args(&[&x]).param(2.5).plan()?;
/// assert_eq!(plan.types, vec![('T', DType::F32)]);
/// assert_eq!(plan.params, vec![Scalar::F32(2.5)]);
/// assert_eq!((plan.output_dtypes.as_slice(), plan.shape.as_slice()), (&[DType::F32][..], &[2, 3][..]));
/// assert_eq!((plan.indexing, plan.width), (Indexing::Contiguous, IndexWidth::I32));
/// # Ok::<(), kusari::Error>(())
/// ```
#[derive(Clone, Debug, PartialEq)]
#[non_exhaustive]
pub struct LaunchPlan {
    /// The placeholders' types, in the order the signature first uses them.
    pub types: Vec<(char, DType)>,
    /// Per input, the scalar given for it converted to its element type (`None` for arrays);
    /// the launch passes it as a 0-d array.
    pub scalars: Vec<Option<Scalar>>,
    /// The scalar parameters, converted to their declared types.
    pub params: Vec<Scalar>,
    /// The element type of each output.
    pub output_dtypes: Vec<DType>,
    /// The loop's shape (the new outputs' shape).
    pub shape: Vec<usize>,
    /// The loop's variant: contiguous, or strided over this many (collapsed) axes.
    pub indexing: Indexing,
    /// 32- or 64-bit indices.
    pub width: IndexWidth,
    /// For the strided variant, the layout struct the kernel takes by value: the (collapsed)
    /// shape, then the strides of each looped input and non-`raw` output; empty otherwise.
    pub layout_words: Vec<i64>,
}

/// One compiled variant of a kernel that this process has loaded on a device: what
/// `ElementwiseKernel::cached_variants` and `ReductionKernel::cached_variants` list (CuPy's
/// `cached_codes` role). A variant is compiled once per element types, loop form and device,
/// and every later launch of that form reuses it.
#[derive(Clone, Debug, PartialEq, Eq)]
#[non_exhaustive]
pub struct CachedVariant {
    /// The device it is loaded on.
    pub device: crate::Device,
    /// The placeholders' types, in the order the signature first uses them.
    pub types: Vec<(char, DType)>,
    /// The loop's form. An elementwise kernel: `"contiguous"`, or `"strided, N axes"`, then
    /// `", 64-bit indices"` past 2^31 elements and `", in place"` for a launch given its
    /// outputs (no `__restrict__` on its pointers). A reduction: `"layouts of up to N axes"`.
    pub form: String,
    /// The CUDA source compiled (its entry point and translation unit).
    pub source: KernelSource,
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
) -> Result<LaunchPlan> {
    kernel.check_param_count(sig, args.params.len())?;
    let given = args.outputs.as_deref();
    if let Some(outs) = given
        && outs.len() != sig.outputs.len()
    {
        return Err(arguments(
            kernel,
            format!(
                "{} output(s) given, the signature declares {} (give all of them or none)",
                outs.len(),
                sig.outputs.len()
            ),
        ));
    }
    let bind_args: Vec<InputArg<'_>> = args
        .inputs
        .iter()
        .map(|a| match a {
            Operand::Array((d, l)) => InputArg::Array(ScalarType::from(*d), l.shape()),
            Operand::Scalar(s) => InputArg::Scalar(ScalarType::from(s.dtype())),
        })
        .collect();
    // Given outputs bind placeholders as array inputs do (CuPy's `'X x' -> 'Z z'`, `z` given)
    // and must match the types the kernel writes (checked there).
    let bind_outs: Vec<(ScalarType, &[usize])> = (given.unwrap_or(&[]).iter())
        .map(|&(d, l)| (ScalarType::from(d), l.shape()))
        .collect();
    let types: Vec<(char, DType)> = kernel
        .bind_call(sig, &bind_args, &bind_outs)?
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
    for (p, &(_, l)) in sig.outputs.iter().zip(given.unwrap_or(&[])) {
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
    // CuPy's rule: the arrays given for non-raw parameters decide the loop's size, else `size`.
    let arrays_in: Vec<bool> = (args.inputs.iter())
        .map(|a| matches!(a, Operand::Array(_)))
        .collect();
    let arrays_out = vec![true; given.map_or(0, <[_]>::len)];
    kernel.check_loop_size_for(sig, args.size, &arrays_in, &arrays_out)?;

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
    // Broadcast views can make a loop whose element count does not fit (`[2³², 1]` with
    // `[1, 2³²]`): an error, not a size wrapped to 0.
    let loop_dtype = output_dtypes.first().copied().unwrap_or(DType::Bool);
    crate::layout::checked_size(kernel.name, &plan.shape, loop_dtype)?;
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
    Ok(LaunchPlan {
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
        DType::I8 => Scalar::I8(v as i8),
        DType::I16 => Scalar::I16(v as i16),
        DType::I32 => Scalar::I32(v as i32),
        DType::I64 => Scalar::I64(v as i64),
        DType::U8 => Scalar::U8(v as u8),
        DType::U16 => Scalar::U16(v as u16),
        DType::U32 => Scalar::U32(v as u32),
        DType::U64 => Scalar::U64(v as u64),
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

    fn planned(a: &LaunchArgs<'_, (DType, &Layout)>) -> Result<LaunchPlan> {
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
