//! [`ElementwiseKernel`]: a CUDA elementwise kernel as `#[function_node]`'s `#[forward_gpu(..)]`
//! declares it (CuPy's `ElementwiseKernel`), run over arrays. Its definition, its checks and the
//! binding of its type placeholders are the kernel layer's ([`kusari_kernels::ElementwiseDef`]);
//! the launch is the storage layer's. [`KernelCall`] (`kernel/call.rs`) is one launch with
//! everything CuPy's kernel call takes.

mod call;

pub use call::{KernelArg, KernelCall};

use kusari_kernels::codegen::KernelSource;
use kusari_kernels::{ElementwiseDef, ElementwiseSignature, ParamType, ScalarType};

use crate::error::Result;
use crate::{Array, DType, Scalar};

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
    /// for kernels that write only into outputs the caller gives ([`KernelCall::out`]).
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

    /// A launch of this kernel to build argument by argument: arrays or scalars for its inputs,
    /// typed parameters, outputs to write in place, the loop's size, the device (see
    /// [`KernelCall`] for the rules).
    ///
    /// ```no_run
    /// use kusari::{Array, Device, DType, ElementwiseKernel};
    /// static SGD: ElementwiseKernel =
    ///     ElementwiseKernel::new("sgd", "T w, T g", "T out", "T lr", "out = w - lr * g;")
    ///         .with_no_return();
    /// # fn main() -> kusari::Result<()> {
    /// let w = Array::ones(&[3], DType::F32)?.to_device(Device::Cuda(0))?;
    /// let g = Array::ones(&[3], DType::F32)?.to_device(Device::Cuda(0))?;
    /// SGD.call().args(&[&w, &g]).param(0.1).out(&w).run()?; // w -= 0.1 * g, in place
    /// assert_eq!(w.to_vec::<f32>()?, vec![0.9; 3]);
    /// # Ok(()) }
    /// ```
    pub fn call(&self) -> KernelCall<'_> {
        KernelCall::new(self)
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
    /// with names the generated code can use ([`kusari_kernels::signature`]), and the brackets
    /// of the body, the preamble, `loop_prep` and `after_loop` must balance
    /// ([`kusari_kernels::body`]). Every mistake is reported at once, in
    /// [`Error::InvalidKernel`](crate::Error::InvalidKernel).
    pub fn signature(&self) -> Result<ElementwiseSignature> {
        Ok(self.def.signature()?)
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

    /// The CUDA source a launch over `inputs` compiles: placeholders bound from the inputs'
    /// dtypes, the contiguous variant when every non-`raw` input is C-contiguous in the loop's
    /// (broadcast) shape and the strided one otherwise, and 64-bit indexing from 2^31 elements.
    /// The scalar parameters are not needed here. A kernel whose array inputs are all `raw`
    /// needs its loop's size: [`source_for_sized`](Self::source_for_sized); any other launch's
    /// source is [`KernelCall::source`].
    pub fn source_for(&self, inputs: &[&Array]) -> Result<KernelSource> {
        self.source_of(inputs, None)
    }

    /// The CUDA source [`launch_sized`](Self::launch_sized) compiles.
    pub fn source_for_sized(&self, inputs: &[&Array], size: usize) -> Result<KernelSource> {
        self.source_of(inputs, Some(size))
    }

    fn source_of(&self, inputs: &[&Array], size: Option<usize>) -> Result<KernelSource> {
        // The parameters' values do not change the source: zeros of their declared types.
        let sig = self.signature()?;
        let types = self.def.bind(
            &sig,
            &inputs
                .iter()
                .map(|a| (ScalarType::from(a.dtype()), a.shape()))
                .collect::<Vec<_>>(),
        )?;
        let params: Vec<Scalar> = sig
            .params
            .iter()
            .map(|p| match p.ty {
                ParamType::Concrete(t) => DType::from(t),
                ParamType::Placeholder(c) => types
                    .iter()
                    .find(|(q, _)| *q == c)
                    .map_or(DType::F64, |(_, t)| DType::from(*t)),
            })
            .map(|d| {
                Scalar::from(false)
                    .to_dtype(d)
                    .unwrap_or(Scalar::Bool(false))
            })
            .collect();
        let mut call = self.call().args(inputs).params(&params);
        if let Some(size) = size {
            call = call.size(size);
        }
        call.source()
    }

    /// Runs the kernel over CUDA `inputs` (broadcast together; views of any strides are read in
    /// place) with the scalar `params`, returning the outputs as new C-contiguous arrays of the
    /// broadcast shape on the inputs' device. Each parameter keeps its type on the way: it is
    /// converted to the parameter's declared type by [`Scalar::to_dtype`], and one that does not
    /// fit is an [`Error::KernelArguments`](crate::Error::KernelArguments) naming the kernel,
    /// the parameter, its type and the value. Plain numbers convert: `&[2.0.into()]`,
    /// `&[Scalar::from(1i64 << 60)]`.
    ///
    /// For scalars as inputs, outputs written in place, an explicit device and the rest of
    /// CuPy's call, build the launch with [`call`](Self::call).
    ///
    /// The first launch of a variant (dtypes, contiguous or strided, 32- or 64-bit indexing)
    /// compiles it with NVRTC for the device's architecture through the on-disk cache and loads
    /// it on the device; later launches reuse the loaded function. CUDA and host inputs mixed
    /// are [`Error::DeviceMismatch`](crate::Error::DeviceMismatch); host inputs only, no CUDA
    /// driver, or a build without the `cuda` feature are
    /// [`Error::CudaUnavailable`](crate::Error::CudaUnavailable).
    ///
    /// The loop runs over the non-`raw` inputs; a kernel whose array inputs are all `raw` has
    /// no such shape, and launching it here is an
    /// [`Error::KernelArguments`](crate::Error::KernelArguments) that says to give its size
    /// with [`launch_sized`](Self::launch_sized).
    ///
    /// ```
    /// use kusari::{Array, DType, ElementwiseKernel, Scalar};
    /// static SHIFT: ElementwiseKernel =
    ///     ElementwiseKernel::new("shift", "int64 x", "int64 y", "int64 d", "y = x + d;");
    /// let x = Array::zeros(&[2], DType::I64).unwrap();
    /// let e = SHIFT.launch(&[&x], &[2.5.into()]).unwrap_err();
    /// assert!(e.to_string().contains("parameter `d` is 2.5 (float64), which does not fit its type int64"), "{e}");
    /// // An i64 keeps every bit (with a GPU, this runs): SHIFT.launch(&[&x], &[Scalar::from(1i64 << 60)])
    /// ```
    pub fn launch(&self, inputs: &[&Array], params: &[Scalar]) -> Result<Vec<Array>> {
        self.call().args(inputs).params(params).run()
    }

    /// Runs a kernel whose array inputs are all `raw` over `size` elements (CuPy's `size=`):
    /// `i` runs over `0..size`, `n` is `size`, and the non-`raw` outputs are new arrays of
    /// shape `[size]`. A non-`raw` input is an
    /// [`Error::KernelArguments`](crate::Error::KernelArguments) naming it (its shape sets the
    /// loop's; use [`launch`](Self::launch)). A kernel with no array input at all runs on
    /// [`default_device`](crate::default_device) (or the device given to
    /// [`KernelCall::device`]). Otherwise as [`launch`](Self::launch).
    ///
    /// ```
    /// use kusari::{Array, DType, ElementwiseKernel};
    /// static REVERSE: ElementwiseKernel =
    ///     ElementwiseKernel::new("reverse", "raw T a", "T y", "", "y = a[n - 1 - i];");
    /// let a = Array::zeros(&[4], DType::F32).unwrap();
    /// let e = REVERSE.launch(&[&a], &[]).unwrap_err();
    /// assert!(e.to_string().contains("every array input is raw"), "{e}");
    /// ```
    pub fn launch_sized(
        &self,
        inputs: &[&Array],
        params: &[Scalar],
        size: usize,
    ) -> Result<Vec<Array>> {
        self.call().args(inputs).params(params).size(size).run()
    }
}

/// Every elementwise kernel kusari's own array operations launch on CUDA, each with the dtypes
/// its type placeholders take there (half-precision math runs in float32), so that a test can
/// compile every one with NVRTC. The built-in functions run these (they declare no kernels of
/// their own); a `#[function_node]` op lists its `#[forward_gpu(..)]` kernel in `Op::KERNELS`.
pub fn array_kernels() -> Vec<(ElementwiseKernel, &'static [DType])> {
    crate::cuda::builtin_kernels()
        .into_iter()
        .map(|(k, dtypes)| (ElementwiseKernel::from(k), dtypes))
        .collect()
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::Error;
    use kusari_kernels::codegen::{generate, IndexWidth, Indexing};
    use kusari_kernels::ParamType;

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
        // a scalar, where, mul_add, copy, matmul, the 2 optimizer updates, 7 fills and 49 casts.
        assert_eq!(all.len(), 18 + 1 + 2 + 5 + 6 + 4 + 2 + 2 + 7 + 49);
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
            k.launch(&[&a], &[2.0.into()]),
            Err(Error::CudaUnavailable { .. })
        ));
    }
}
