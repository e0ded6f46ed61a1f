//! Elementwise kernels as `#[function_node]`'s `#[forward_gpu(..)]` declares them (CuPy's
//! `ElementwiseKernel`): the signature, checked with the grammar the macro used at compile time,
//! and the binding of type placeholders to the dtypes of the arrays at launch.

use kusari_kernels::codegen::{generate, IndexWidth, Indexing, KernelSource};
use kusari_kernels::{ElementwiseSignature, ParamType, ScalarType};

use std::sync::OnceLock;

use crate::error::{Error, Result};
use crate::{Array, DType};

/// How many signature mistakes an [`Error::InvalidKernel`] message shows (the rest are counted).
const MAX_REPORTED: usize = 20;

/// A CUDA elementwise kernel: a name, the input, output and scalar-parameter signatures, and the
/// loop body (see [`kusari_kernels::signature`] for the grammar).
///
/// ```
/// use kusari::{Array, DType, ElementwiseKernel};
/// static MUL_ADD: ElementwiseKernel =
///     ElementwiseKernel::new("mul_add_fwd", "T x, T y, T z", "T w", "", "w = x * y + z;");
/// let x = Array::zeros(&[3], DType::F32).unwrap();
/// let types = MUL_ADD.bind(&[&x, &x, &x]).unwrap();
/// assert_eq!(types, vec![('T', DType::F32)]);
/// ```
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct ElementwiseKernel {
    /// The kernel's name (shown by profilers and in messages).
    pub name: &'static str,
    /// Array inputs, e.g. `"T x, T y"`.
    pub inputs: &'static str,
    /// Array outputs, e.g. `"T w"`.
    pub outputs: &'static str,
    /// Scalar parameters, e.g. `"T alpha"` (may be empty).
    pub params: &'static str,
    /// The loop body, in CUDA C.
    pub body: &'static str,
}

impl ElementwiseKernel {
    /// A kernel from its parts (usable in a `static`).
    pub const fn new(
        name: &'static str,
        inputs: &'static str,
        outputs: &'static str,
        params: &'static str,
        body: &'static str,
    ) -> Self {
        ElementwiseKernel {
            name,
            inputs,
            outputs,
            params,
            body,
        }
    }

    /// A kernel from its parts, checked as [`signature`](Self::signature) checks it: the name,
    /// the signature (including every parameter name) and the body. [`new`](Self::new) is the
    /// `const` form, which checks nothing until the kernel is first used.
    ///
    /// ```
    /// use kusari::ElementwiseKernel;
    /// let err = ElementwiseKernel::try_new("scale", "T x, T int", "T w", "", "w = x;").unwrap_err();
    /// assert!(err.to_string().contains("`int` is a C++ keyword and cannot name a parameter"));
    /// ```
    pub fn try_new(
        name: &'static str,
        inputs: &'static str,
        outputs: &'static str,
        params: &'static str,
        body: &'static str,
    ) -> Result<Self> {
        let kernel = ElementwiseKernel::new(name, inputs, outputs, params, body);
        kernel.signature()?;
        Ok(kernel)
    }

    /// The parsed signature, once the whole definition is checked: the kernel's name must be
    /// a C identifier and not a keyword ([`kusari_kernels::names`]), the signature must parse
    /// with names the generated code can use ([`kusari_kernels::signature`]), and the body's
    /// brackets must balance ([`kusari_kernels::body`]). Every mistake is reported at once, in
    /// [`Error::InvalidKernel`].
    pub fn signature(&self) -> Result<ElementwiseSignature> {
        let mut problems = Vec::new();
        if let Err(e) = kusari_kernels::names::check_kernel_name(self.name) {
            problems.push(e.to_string());
        }
        let sig = ElementwiseSignature::new(self.inputs, self.outputs, self.params);
        if let Err(errors) = &sig {
            let source = |l| match l {
                kusari_kernels::SignatureList::Inputs => self.inputs,
                kusari_kernels::SignatureList::Outputs => self.outputs,
                kusari_kernels::SignatureList::Params => self.params,
            };
            let mut lines: Vec<String> = errors
                .iter()
                .take(MAX_REPORTED)
                .map(|e| format!("{}: {}", e.list, e.render(source(e.list))))
                .collect();
            if errors.len() > MAX_REPORTED {
                lines.push(format!(
                    "... and {} more mistakes",
                    errors.len() - MAX_REPORTED
                ));
            }
            problems.push(format!("invalid signature:\n{}", lines.join("\n")));
        }
        if let Err(e) = kusari_kernels::body::check_body(self.body) {
            problems.push(format!("invalid body: {}", e.render(self.body)));
        }
        match sig {
            Ok(sig) if problems.is_empty() => Ok(sig),
            _ => Err(Error::InvalidKernel {
                kernel: self.name.to_string(),
                message: problems.join("\n"),
            }),
        }
    }

    /// Binds each type placeholder to the dtype of the array inputs that use it, checking that a
    /// placeholder gets one dtype and that concrete types match. Returns `(placeholder, dtype)`
    /// pairs in order of first use.
    pub fn bind(&self, inputs: &[&Array]) -> Result<Vec<(char, DType)>> {
        self.bind_parsed(&self.signature()?, inputs)
    }

    /// [`bind`](Self::bind) with the signature already parsed.
    pub(crate) fn bind_parsed(
        &self,
        sig: &ElementwiseSignature,
        inputs: &[&Array],
    ) -> Result<Vec<(char, DType)>> {
        if inputs.len() != sig.inputs.len() {
            return Err(Error::InputCount {
                function: format!("kernel {}", self.name),
                expected: sig.inputs.len(),
                actual: inputs.len(),
            });
        }
        let mut bound: Vec<(char, DType, &str)> = Vec::new();
        for (param, array) in sig.inputs.iter().zip(inputs) {
            let dtype = array.dtype();
            match param.ty {
                ParamType::Concrete(t) if DType::from(t) != dtype => {
                    return Err(Error::KernelArguments {
                        kernel: self.name.to_string(),
                        msg: format!(
                            "argument `{}` is {dtype} {:?}, but the signature declares {t}",
                            param.name,
                            array.shape()
                        ),
                    });
                }
                ParamType::Concrete(_) => {}
                ParamType::Placeholder(c) => match bound.iter().find(|(p, ..)| *p == c) {
                    Some((_, first, first_name)) if *first != dtype => {
                        return Err(Error::KernelArguments {
                            kernel: self.name.to_string(),
                            msg: format!(
                                "argument `{}` is {dtype}, but placeholder `{c}` was bound to {first} by `{first_name}`",
                                param.name
                            ),
                        });
                    }
                    Some(_) => {}
                    None => bound.push((c, dtype, &param.name)),
                },
            }
        }
        Ok(bound.into_iter().map(|(c, d, _)| (c, d)).collect())
    }

    /// The CUDA source a launch over `inputs` compiles: placeholders bound from the inputs'
    /// dtypes, the contiguous variant when every non-`raw` input is C-contiguous in the loop's
    /// (broadcast) shape and the strided one otherwise, and 64-bit indexing from 2^31 elements.
    pub fn source_for(&self, inputs: &[&Array]) -> Result<KernelSource> {
        let sig = self.signature()?;
        let types: Vec<(char, ScalarType)> = self
            .bind(inputs)?
            .into_iter()
            .map(|(c, d)| (c, ScalarType::from(d)))
            .collect();
        let plan = LoopPlan::new(&sig, inputs, None)?;
        generate(
            self.name,
            &sig,
            self.body,
            &types,
            plan.indexing,
            plan.width,
        )
        .map_err(|source| Error::Codegen {
            kernel: self.name.to_string(),
            source: Box::new(source),
        })
    }

    /// Runs the kernel over CUDA `inputs` (broadcast together; views of any strides are read in
    /// place) with the scalar `params` (converted to their declared types), returning the
    /// outputs as new C-contiguous arrays of the broadcast shape on the inputs' device.
    ///
    /// The first launch of a variant (dtypes, contiguous or strided, 32- or 64-bit indexing)
    /// compiles it with NVRTC for the device's architecture through the on-disk cache and loads
    /// it on the device; later launches reuse the loaded function. CUDA and host inputs mixed
    /// are [`Error::DeviceMismatch`]; host inputs only, no CUDA driver, or a build without the
    /// `cuda` feature are [`Error::CudaUnavailable`].
    pub fn launch(&self, inputs: &[&Array], params: &[f64]) -> Result<Vec<Array>> {
        if let (Some(gpu), Some(host)) = (
            inputs.iter().find(|a| a.on_cuda()),
            inputs.iter().find(|a| !a.on_cuda()),
        ) {
            return Err(Error::DeviceMismatch {
                op: format!("kernel {}", self.name),
                lhs: gpu.device(),
                rhs: host.device(),
            });
        }
        if let Some(host) = inputs.iter().find(|a| !a.on_cuda()) {
            self.source_for(inputs)?;
            self.check_param_count(&self.signature()?, params)?;
            return Err(Error::CudaUnavailable {
                op: format!("kernel {}", self.name),
                reason: format!(
                    "its inputs must be CUDA arrays, but one is on {} (move it with to_device)",
                    host.device()
                ),
            });
        }
        crate::cuda::launch(self, inputs, params, None)
    }

    /// An error unless `params` has one value per scalar parameter of `sig` (this kernel's).
    pub(crate) fn check_param_count(
        &self,
        sig: &ElementwiseSignature,
        params: &[f64],
    ) -> Result<()> {
        let expected = sig.params.len();
        if params.len() != expected {
            return Err(Error::KernelArguments {
                kernel: self.name.to_string(),
                msg: format!(
                    "{} scalar parameter(s) given, the signature declares {expected}",
                    params.len()
                ),
            });
        }
        Ok(())
    }
}

/// Counters of the CUDA kernel machinery, for tests and benchmarks.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct KernelStats {
    /// Kernel binaries compiled by NVRTC in this process.
    pub compiles: usize,
    /// Binaries read from the on-disk cache.
    pub disk_hits: usize,
    /// Binaries found in the in-memory cache.
    pub memory_hits: usize,
    /// Modules loaded onto a device.
    pub module_loads: usize,
    /// Kernels launched (zero-size launches, which run nothing, are not counted).
    pub launches: usize,
}

/// The loop a launch runs over `inputs`: the arrays it indexes (the non-`raw` inputs), its
/// shape (theirs broadcast together, unless given), and the source variant that shape needs:
/// contiguous when every looped input is C-contiguous in the loop's shape, strided otherwise,
/// with 64-bit indexing from 2^31 elements.
pub(crate) struct LoopPlan<'a> {
    #[cfg_attr(not(feature = "cuda"), allow(dead_code))]
    pub(crate) looped: Vec<&'a Array>,
    #[cfg_attr(not(feature = "cuda"), allow(dead_code))]
    pub(crate) shape: Vec<usize>,
    pub(crate) indexing: Indexing,
    pub(crate) width: IndexWidth,
}

impl<'a> LoopPlan<'a> {
    pub(crate) fn new(
        sig: &ElementwiseSignature,
        inputs: &[&'a Array],
        shape: Option<&[usize]>,
    ) -> Result<Self> {
        let looped: Vec<&Array> = sig
            .inputs
            .iter()
            .zip(inputs)
            .filter(|(p, _)| !p.raw)
            .map(|(_, a)| *a)
            .collect();
        let shape = match shape {
            Some(s) => s.to_vec(),
            None => {
                let mut s: Vec<usize> = Vec::new();
                for a in &looped {
                    s = crate::layout::broadcast_shapes("ElementwiseKernel", &s, a.shape())?;
                }
                s
            }
        };
        let contiguous = looped
            .iter()
            .all(|a| a.shape() == shape.as_slice() && a.is_contiguous());
        let indexing = if contiguous {
            Indexing::Contiguous
        } else {
            Indexing::Strided { ndim: shape.len() }
        };
        let width = IndexWidth::for_len(shape.iter().product());
        Ok(LoopPlan {
            looped,
            shape,
            indexing,
            width,
        })
    }
}

/// A C-contiguous copy of any layout (the strided variant reads views in place).
pub(crate) static COPY: ElementwiseKernel =
    ElementwiseKernel::new("kusari_copy", "T a", "T out", "", "out = a;");

/// The matrix product of contiguous `[batch, rows, inner]` and `[batch, inner, cols]` arrays, one
/// thread per output element: for integers, and floats where cuBLAS cannot be loaded.
pub(crate) static MATMUL: ElementwiseKernel = ElementwiseKernel::new(
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

#[cfg_attr(not(feature = "cuda"), allow(dead_code))]
fn dtype_index(d: DType) -> usize {
    DType::ALL
        .iter()
        .position(|&x| x == d)
        .expect("DType::ALL lists every dtype")
}

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
        // Half types convert through float: a conversion between the two half types would
        // otherwise need two user-defined conversions.
        _ if half(from) || half(to) => "out = (float)a;",
        _ => "out = a;",
    }
}

/// Kernels whose signatures name concrete dtypes, made once per process.
struct Generated {
    /// `out = v` for each dtype, in `DType::ALL` order.
    fill: Vec<ElementwiseKernel>,
    /// `out = a` from each dtype to each dtype (`from * 7 + to`).
    cast: Vec<ElementwiseKernel>,
}

fn generated() -> &'static Generated {
    static GENERATED: OnceLock<Generated> = OnceLock::new();
    GENERATED.get_or_init(|| {
        let leak = |s: String| -> &'static str { Box::leak(s.into_boxed_str()) };
        let fill = DType::ALL
            .iter()
            .map(|d| {
                let t = d.name();
                ElementwiseKernel::new(
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
                let body = cast_body(from, to);
                cast.push(ElementwiseKernel::new(
                    leak(format!("kusari_cast_{}_to_{}", from.name(), to.name())),
                    leak(format!("{} a", from.name())),
                    leak(format!("{} out", to.name())),
                    "",
                    body,
                ));
            }
        }
        Generated { fill, cast }
    })
}

#[cfg_attr(not(feature = "cuda"), allow(dead_code))]
/// The kernel filling a new array of `dtype` with a scalar.
pub(crate) fn fill_kernel(dtype: DType) -> &'static ElementwiseKernel {
    &generated().fill[dtype_index(dtype)]
}

#[cfg_attr(not(feature = "cuda"), allow(dead_code))]
/// The kernel converting `from` to `to`.
pub(crate) fn cast_kernel(from: DType, to: DType) -> &'static ElementwiseKernel {
    &generated().cast[dtype_index(from) * DType::ALL.len() + dtype_index(to)]
}

/// Every elementwise kernel kusari's own array operations launch on CUDA, each with the dtypes
/// its type placeholders take there (half-precision math runs in float32), so that a test can
/// compile every one with NVRTC. The built-in functions run these (they declare no kernels of
/// their own); a `#[function_node]` op lists its `#[forward_gpu(..)]` kernel in `Op::KERNELS`.
pub fn array_kernels() -> Vec<(ElementwiseKernel, &'static [DType])> {
    const ALL: &[DType] = &DType::ALL;
    const NUMERIC: &[DType] = &[DType::I32, DType::I64, DType::F32, DType::F64];
    let mut all = crate::array::op_kernels();
    all.push((COPY, ALL));
    all.push((MATMUL, NUMERIC));
    let g = generated();
    all.extend(g.fill.iter().chain(&g.cast).map(|k| (*k, &[] as &[DType])));
    all
}

#[cfg(test)]
mod tests {
    use super::*;

    const K: ElementwiseKernel =
        ElementwiseKernel::new("k", "T x, U y, float32 s", "T w", "T alpha", "w = x;");

    #[test]
    fn binds_placeholders_and_rejects_conflicts() {
        let f32a = Array::zeros(&[2], DType::F32).unwrap();
        let f64a = Array::zeros(&[2], DType::F64).unwrap();
        assert_eq!(
            K.bind(&[&f64a, &f32a, &f32a]).unwrap(),
            vec![('T', DType::F64), ('U', DType::F32)]
        );
        let e = K.bind(&[&f32a, &f32a, &f64a]).unwrap_err().to_string();
        assert!(
            e.contains("argument `s` is float64") && e.contains("declares float32"),
            "{e}"
        );
        let two = ElementwiseKernel::new("k2", "T x, T y", "T w", "", "w = x + y;");
        let e = two.bind(&[&f32a, &f64a]).unwrap_err().to_string();
        assert!(
            e.contains("`y` is float64") && e.contains("`T` was bound to float32 by `x`"),
            "{e}"
        );
        assert!(matches!(
            two.bind(&[&f32a]),
            Err(Error::InputCount {
                expected: 2,
                actual: 1,
                ..
            })
        ));
    }

    #[test]
    fn the_source_follows_the_inputs_layouts_and_dtypes() {
        let k = ElementwiseKernel::new("madd", "T x, T y", "T w", "", "w = x + y;");
        let a = Array::zeros(&[2, 3], DType::F64).unwrap();
        let src = k.source_for(&[&a, &a]).unwrap();
        assert_eq!(src.entry, "madd__contiguous_i32");
        assert!(src.source.contains("typedef double T;"));
        // A transposed or broadcast operand takes the strided path, with the loop's rank.
        let t = Array::zeros(&[3, 2], DType::F64).unwrap().t();
        assert_eq!(k.source_for(&[&a, &t]).unwrap().entry, "madd__strided2_i32");
        let row = Array::zeros(&[3], DType::F64).unwrap();
        assert_eq!(
            k.source_for(&[&a, &row]).unwrap().entry,
            "madd__strided2_i32"
        );
        let bad = Array::zeros(&[4], DType::F64).unwrap();
        assert!(matches!(
            k.source_for(&[&a, &bad]),
            Err(Error::Broadcast { .. })
        ));
    }

    #[test]
    fn every_array_kernel_parses_and_generates_source_for_its_dtypes() {
        let all = array_kernels();
        // 6 binary ops in 3 forms, pow, 2 unary, 5 float unary, 6 comparisons, pow/greater with
        // a scalar, where, mul_add, copy, matmul, 7 fills and 49 casts.
        assert_eq!(all.len(), 18 + 1 + 2 + 5 + 6 + 4 + 2 + 7 + 49);
        for (k, dtypes) in all {
            let sig = k.signature().unwrap_or_else(|e| panic!("{}: {e}", k.name));
            let placeholders: Vec<char> = sig
                .lists()
                .filter_map(|(_, p)| match p.ty {
                    ParamType::Placeholder(c) => Some(c),
                    ParamType::Concrete(_) => None,
                })
                .collect();
            assert_eq!(placeholders.is_empty(), dtypes.is_empty(), "{}", k.name);
            let bindings: Vec<Vec<(char, ScalarType)>> = if dtypes.is_empty() {
                vec![Vec::new()]
            } else {
                dtypes
                    .iter()
                    .map(|&d| {
                        placeholders
                            .iter()
                            .map(|&c| (c, ScalarType::from(d)))
                            .collect()
                    })
                    .collect()
            };
            for types in bindings {
                let src = generate(
                    k.name,
                    &sig,
                    k.body,
                    &types,
                    Indexing::Contiguous,
                    IndexWidth::I32,
                )
                .unwrap_or_else(|e| panic!("{}: {e}", k.name));
                assert!(
                    src.source.contains(k.body.lines().next().unwrap_or("")),
                    "{}",
                    k.name
                );
            }
        }
    }

    #[test]
    fn launch_checks_arguments_then_reports_no_cuda() {
        let a = Array::zeros(&[2], DType::F32).unwrap();
        let k = ElementwiseKernel::new("k", "T x", "T w", "T alpha", "w = x * alpha;");
        assert!(k
            .launch(&[&a], &[])
            .unwrap_err()
            .to_string()
            .contains("0 scalar parameter(s) given"));
        assert!(matches!(
            k.launch(&[&a], &[2.0]),
            Err(Error::CudaUnavailable { .. })
        ));
    }
}
