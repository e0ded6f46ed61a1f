//! [`ElementwiseKernel`] as written: its definition, its options and its checks (the
//! definition, the checks and the binding of its type placeholders are the kernel layer's,
//! [`kusari_kernels::ElementwiseDef`]); and [`array_kernels`], the built-in kernels.

use kusari_kernels::{ElementwiseDef, ElementwiseSignature, ScalarType};

use crate::error::Result;
use crate::{Array, DType};

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
///
/// The kernel's strings (`name`, `inputs`, `outputs`, `params`, `body`, `preamble`,
/// `loop_prep`, `after_loop`) are its kernel layer definition's, read through `Deref`:
/// `MUL_ADD.body`.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct ElementwiseKernel {
    def: ElementwiseDef,
    no_return: bool,
    reduce_dims: bool,
}

impl std::ops::Deref for ElementwiseKernel {
    type Target = ElementwiseDef;

    fn deref(&self) -> &ElementwiseDef {
        &self.def
    }
}

impl From<ElementwiseDef> for ElementwiseKernel {
    fn from(def: ElementwiseDef) -> Self {
        ElementwiseKernel {
            def,
            no_return: false,
            reduce_dims: true,
        }
    }
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
            def: ElementwiseDef::new(name, inputs, outputs, params, body),
            no_return: false,
            reduce_dims: true,
        }
    }

    /// This kernel with a preamble (CuPy's `preamble`): device helper functions and constants
    /// placed before the kernel, after the placeholders' `typedef`s. Its brackets must balance
    /// and, like the body, it may hold no preprocessor directive but `#pragma`: write
    /// `constexpr` constants and `__device__` functions instead of `#define`s. A macro defined
    /// before the kernel would apply to the code kusari generates after it, so it could change
    /// the kernel's parameter list behind the launch's back (`#define long int` shrinks the
    /// layout struct the launch passes by value) or hide a brace the body's check cannot see
    /// (`#define END }`, used in the body); both are memory errors on a real GPU, from safe
    /// code. The preamble is part of the generated source, so a kernel that differs only in its
    /// preamble compiles to another binary.
    ///
    /// ```
    /// use kusari::ElementwiseKernel;
    /// static SQUARE_PLUS: ElementwiseKernel =
    ///     ElementwiseKernel::new("square_plus", "T x", "T y", "T c", "y = square(x) + c;")
    ///         .with_preamble("__device__ T square(T v) { return v * v; }");
    /// assert!(SQUARE_PLUS.signature().is_ok());
    /// ```
    pub const fn with_preamble(mut self, preamble: &'static str) -> Self {
        self.def = self.def.with_preamble(preamble);
        self
    }

    /// This kernel with `loop_prep` (CuPy's): code before the elementwise loop, run once by
    /// each thread, e.g. a value every element uses. `n` and the scalar parameters are in scope.
    ///
    /// ```
    /// use kusari::ElementwiseKernel;
    /// static SCALE: ElementwiseKernel =
    ///     ElementwiseKernel::new("scale_by_len", "T x", "T y", "", "y = x * inv_n;")
    ///         .with_loop_prep("const T inv_n = (T)1 / (T)n;");
    /// assert!(SCALE.signature().is_ok());
    /// ```
    pub const fn with_loop_prep(mut self, loop_prep: &'static str) -> Self {
        self.def = self.def.with_loop_prep(loop_prep);
        self
    }

    /// This kernel with `after_loop` (CuPy's): code after the elementwise loop, run once by
    /// each thread, with what [`loop_prep`](Self::with_loop_prep) declared in scope.
    pub const fn with_after_loop(mut self, after_loop: &'static str) -> Self {
        self.def = self.def.with_after_loop(after_loop);
        self
    }

    /// This kernel with CuPy's `no_return=True`: a launch returns no arrays (an empty `Vec`),
    /// for kernels that write only into outputs the caller gives ([`KernelCall::out`](crate::KernelCall::out)).
    ///
    /// ```
    /// use kusari::ElementwiseKernel;
    /// static SCALE_IN_PLACE: ElementwiseKernel =
    ///     ElementwiseKernel::new("scale_in_place", "T x", "T w", "T a", "w = a * x;").with_no_return();
    /// assert!(SCALE_IN_PLACE.no_return());
    /// ```
    pub const fn with_no_return(mut self) -> Self {
        self.no_return = true;
        self
    }

    /// Whether a launch returns nothing ([`with_no_return`](Self::with_no_return)).
    pub const fn no_return(&self) -> bool {
        self.no_return
    }

    /// This kernel with CuPy's `reduce_dims` set (`true` by default): whether a strided launch
    /// collapses the loop's axes first, dropping axes of length 1 and merging neighbours that
    /// every array steps through as one axis ([`kusari_kernels::loop_plan::collapse_dims`]),
    /// so each element's offsets take fewer divisions. The results are the same either way;
    /// the variant compiled may differ in its number of axes (its entry point's `stridedN`).
    pub const fn with_reduce_dims(mut self, reduce_dims: bool) -> Self {
        self.reduce_dims = reduce_dims;
        self
    }

    /// Whether strided launches collapse the loop's axes
    /// ([`with_reduce_dims`](Self::with_reduce_dims)).
    pub const fn reduce_dims(&self) -> bool {
        self.reduce_dims
    }

    /// A kernel from its parts, checked as [`signature`](Self::signature) checks it: the name,
    /// the signature (including every parameter name) and the body. [`new`](Self::new) is the
    /// `const` form, which checks nothing until the kernel is first used.
    ///
    /// The parts may be built at run time (`String`s, `&str`s of any lifetime, as CuPy's
    /// kernels are): each is [`intern`](crate::intern)ed, kept for the life of the process once
    /// per distinct text, so the same definition built again shares the variants compiled for
    /// the first. The `with_*` options take `'static` strings: give them `kusari::intern(&s)`.
    ///
    /// ```
    /// use kusari::ElementwiseKernel;
    /// let err = ElementwiseKernel::try_new("scale", "T x, T int", "T w", "", "w = x;").unwrap_err();
    /// assert!(err.to_string().contains("`int` is a C++ keyword and cannot name a parameter"));
    /// let (factor, ty) = (3, "float32");
    /// let k = ElementwiseKernel::try_new(
    ///     format!("times_{factor}"),
    ///     format!("{ty} x"),
    ///     format!("{ty} y"),
    ///     "",
    ///     format!("y = x * {factor}"),
    /// )
    /// .unwrap()
    /// .with_preamble(kusari::intern(&format!("// built for {ty}")));
    /// assert_eq!((k.name, k.body), ("times_3", "y = x * 3"));
    /// ```
    pub fn try_new(
        name: impl AsRef<str>,
        inputs: impl AsRef<str>,
        outputs: impl AsRef<str>,
        params: impl AsRef<str>,
        body: impl AsRef<str>,
    ) -> Result<Self> {
        let i = |s: &dyn AsRef<str>| crate::intern(s.as_ref());
        let kernel =
            ElementwiseKernel::new(i(&name), i(&inputs), i(&outputs), i(&params), i(&body));
        kernel.signature()?;
        Ok(kernel)
    }

    /// The parsed signature, once the whole definition is checked: the kernel's name must be
    /// a C identifier and not a keyword ([`kusari_kernels::names`]), the signature must parse
    /// with names the generated code can use ([`kusari_kernels::signature`]), and the brackets
    /// of the body, the preamble, `loop_prep` and `after_loop` must balance
    /// ([`kusari_kernels::body`]). Every mistake is reported at once, in
    /// [`Error::InvalidKernel`](crate::Error::InvalidKernel).
    pub fn signature(&self) -> Result<ElementwiseSignature> {
        Ok(self.def.signature()?)
    }

    /// The variants of this kernel that this process has compiled and loaded, on every device,
    /// in no set order (CuPy's `cached_codes` role): one per element types, loop form
    /// (contiguous or strided over N axes, 32- or 64-bit indices, in place or not) and device,
    /// each with the CUDA source it compiled. Kernels with the same strings at the same
    /// addresses (one `static`, or [`kusari::intern`](crate::intern)ed strings) share their
    /// variants. Empty before a launch, and in a build or on a machine without CUDA.
    ///
    /// ```
    /// use kusari::{Array, DType, Device, ElementwiseKernel};
    /// static NEG: ElementwiseKernel = ElementwiseKernel::new("neg", "T x", "T y", "", "y = -x;");
    /// assert!(NEG.cached_variants().is_empty());
    /// if kusari::cuda::is_available() {
    ///     let x = Array::zeros(&[4], DType::F32).unwrap().to_device(Device::Cuda(0)).unwrap();
    ///     NEG.launch(&[&x], &[]).unwrap();
    ///     let v = NEG.cached_variants();
    ///     assert_eq!(v.len(), 1);
    ///     assert_eq!((v[0].device, &v[0].types[..], &v[0].form[..]), (Device::Cuda(0), &[('T', DType::F32)][..], "contiguous"));
    /// }
    /// ```
    pub fn cached_variants(&self) -> Vec<crate::CachedVariant> {
        crate::cuda::cached_variants(&self.def)
    }

    /// Binds each type placeholder to the dtype of the array inputs that use it, checking that a
    /// placeholder gets one dtype and that concrete types match. Returns `(placeholder, dtype)`
    /// pairs in order of first use.
    pub fn bind(&self, inputs: &[&Array]) -> Result<Vec<(char, DType)>> {
        let def = &self.def;
        let typed: Vec<(ScalarType, &[usize])> = inputs
            .iter()
            .map(|a| (ScalarType::from(a.dtype()), a.shape()))
            .collect();
        Ok(def
            .bind(&def.signature()?, &typed)?
            .into_iter()
            .map(|(c, t)| (c, DType::from(t)))
            .collect())
    }
}

/// Every elementwise kernel kusari's own array operations launch on CUDA, each with the dtypes
/// its type placeholders take there (half-precision math runs in float32), so that a test can
/// compile every one with NVRTC. The built-in functions run these (they declare no kernels of
/// their own); a `#[function_node]` op lists its `#[forward_gpu(..)]` kernel in `Op::KERNELS`.
pub fn array_kernels() -> Vec<(ElementwiseKernel, &'static [DType])> {
    crate::builtin_kernels::builtin_kernels()
        .into_iter()
        .map(|(k, dtypes)| (ElementwiseKernel::from(k), dtypes))
        .collect()
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::Error;
    use kusari_kernels::ParamType;
    use kusari_kernels::codegen::{IndexWidth, Indexing, generate};

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
        // 6 binary ops in 3 forms, the sigmoid gradient, pow, 3 unary, 10 float unary, 6
        // comparisons, pow/greater with a scalar, where, mul_add, copy, matmul, take and
        // scatter_add, im2col and col2im, the 2 optimizer updates, 13 fills and 169 casts. (The
        // relu and tanh gradients are derived from their formulas, as ElementwiseOps.)
        assert_eq!(
            all.len(),
            18 + 2 + 3 + 10 + 6 + 4 + 2 + 2 + 2 + 2 + 13 + 169
        );
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
        assert!(
            k.launch(&[&a], &[])
                .unwrap_err()
                .to_string()
                .contains("0 scalar parameter(s) given")
        );
        assert!(matches!(
            k.launch(&[&a], &[2.0.into()]),
            Err(Error::CudaUnavailable { .. })
        ));
    }
}
