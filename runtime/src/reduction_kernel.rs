//! [`ReductionKernel`]: a CUDA reduction kernel as CuPy's `ReductionKernel` (Chainer's
//! `cuda.reduce`) defines it, run over arrays along some axes. Its definition, its checks, its
//! plan and its source are the kernel layer's ([`kusari_kernels::reduction`]); the
//! launch is the storage layer's.

use kusari_kernels::{ParamType, ReductionDef, ScalarType};

use crate::error::{Error, Result};
use crate::layout::{Layout, broadcast_shapes, checked_size, normalize_axes};
use crate::storage::Storage;
use crate::{Array, DType, Scalar};

/// A CUDA reduction kernel (CuPy's `ReductionKernel`): each element of the inputs is mapped to a
/// value (`map_expr`, in terms of the inputs' names), the values of each reduction are combined
/// two at a time (`reduce_expr`, in terms of `a` and `b`), starting from `identity` where there
/// is one, and each result is written to the outputs (`post_map_expr`, in terms of `a`).
/// `_J` (the element's index within its reduction) is in scope in `map_expr`, and `_N` (the
/// number of elements each reduction combines) in every expression.
///
/// ```
/// use kusari::{Array, ReductionDef, ReductionKernel};
/// static L2_NORM: ReductionKernel = ReductionKernel::from_def(ReductionDef {
///     name: "l2_norm",
///     in_params: "T x",
///     out_params: "T y",
///     map_expr: "x * x",
///     reduce_expr: "a + b",
///     post_map_expr: "y = sqrt(a)",
///     identity: Some("0"),
///     ..ReductionDef::DEFAULT
/// });
/// let x = Array::from_vec(vec![3.0f32, 4.0], &[2]).unwrap();
/// match x.to_device(kusari::Device::Cuda(0)) {
///     Ok(x) => {
///         let y = L2_NORM.launch(&[&x], &[], None, false).unwrap();
///         assert_eq!(y[0].to_vec::<f32>().unwrap(), vec![5.0]);
///     }
///     // Like an elementwise kernel, it is CUDA code: host arrays are an error.
///     Err(_) => assert!(L2_NORM.launch(&[&x], &[], None, false).is_err()),
/// }
/// ```
///
/// The kernel's strings (`name`, `in_params`, `out_params`, `params`, `map_expr`,
/// `reduce_expr`, `post_map_expr`, `identity`, `reduce_type`, `preamble`) are its kernel layer
/// definition's, read through `Deref`: `L2_NORM.map_expr`.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct ReductionKernel {
    def: ReductionDef,
}

impl std::ops::Deref for ReductionKernel {
    type Target = ReductionDef;

    fn deref(&self) -> &ReductionDef {
        &self.def
    }
}

impl From<ReductionDef> for ReductionKernel {
    fn from(def: ReductionDef) -> Self {
        ReductionKernel { def }
    }
}

impl ReductionKernel {
    /// A kernel from its definition, written field by field (usable in a `static`): its name,
    /// the array inputs and outputs (the elementwise signature grammar, without `raw`),
    /// `map_expr`, `reduce_expr`, `post_map_expr` and `identity` (`None`: each reduction starts
    /// from its first value, and a reduction of no element is an error), the rest from
    /// [`ReductionDef::DEFAULT`]. Nothing is checked until first use;
    /// [`checked`](Self::checked) checks at once.
    pub const fn from_def(def: ReductionDef) -> Self {
        ReductionKernel { def }
    }

    /// A kernel from its parts in this order (usable in a `static`).
    #[deprecated(
        since = "0.2.0",
        note = "name the fields: `ReductionKernel::from_def(ReductionDef { name, in_params, out_params, map_expr, reduce_expr, post_map_expr, identity, ..ReductionDef::DEFAULT })`"
    )]
    pub const fn new(
        name: &'static str,
        in_params: &'static str,
        out_params: &'static str,
        map_expr: &'static str,
        reduce_expr: &'static str,
        post_map_expr: &'static str,
        identity: Option<&'static str>,
    ) -> Self {
        ReductionKernel::from_def(ReductionDef {
            name,
            in_params,
            out_params,
            map_expr,
            reduce_expr,
            post_map_expr,
            identity,
            ..ReductionDef::DEFAULT
        })
    }

    /// This kernel with scalar parameters, e.g. `"T p"` (in CuPy, the scalars among
    /// `in_params`), in scope in every expression and given to [`launch`](Self::launch) as
    /// [`Scalar`]s.
    pub const fn with_params(mut self, params: &'static str) -> Self {
        self.def = self.def.with_params(params);
        self
    }

    /// This kernel with a reduce type (CuPy's `reduce_type`): the type values are mapped to and
    /// combined in. A type of the signature grammar (`float64`, `T`), a C type (`double`,
    /// `float`, `int`, `long long`, `bool`) or the name of a type the preamble defines; by
    /// default the first output's type.
    ///
    /// ```
    /// use kusari::{ReductionDef, ReductionKernel};
    /// // Sum float32 values in double precision.
    /// static SUM64: ReductionKernel = ReductionKernel::from_def(ReductionDef {
    ///     name: "sum64",
    ///     in_params: "T x",
    ///     out_params: "T y",
    ///     map_expr: "x",
    ///     reduce_expr: "a + b",
    ///     post_map_expr: "y = (T)a",
    ///     identity: Some("0"),
    ///     ..ReductionDef::DEFAULT
    /// })
    /// .with_reduce_type("double");
    /// assert!(SUM64.signature().is_ok());
    /// ```
    pub const fn with_reduce_type(mut self, reduce_type: &'static str) -> Self {
        self.def = self.def.with_reduce_type(reduce_type);
        self
    }

    /// This kernel with a preamble (CuPy's `preamble`): code at file scope before the kernel,
    /// after the placeholders' `typedef`s (device functions, constants, a struct to reduce).
    pub const fn with_preamble(mut self, preamble: &'static str) -> Self {
        self.def = self.def.with_preamble(preamble);
        self
    }

    /// [`from_def`](Self::from_def), checked at once as [`signature`](Self::signature) checks
    /// it.
    ///
    /// ```
    /// use kusari::{ReductionDef, ReductionKernel};
    /// let e = ReductionKernel::checked(ReductionDef {
    ///     name: "k",
    ///     in_params: "T x",
    ///     out_params: "T y",
    ///     map_expr: "x",
    ///     reduce_expr: "a + (b",
    ///     post_map_expr: "y = a",
    ///     ..ReductionDef::DEFAULT
    /// })
    /// .unwrap_err();
    /// assert!(e.to_string().contains("invalid reduce_expr"), "{e}");
    /// ```
    pub fn checked(def: ReductionDef) -> Result<Self> {
        let kernel = ReductionKernel::from_def(def);
        kernel.signature()?;
        Ok(kernel)
    }

    /// [`new`](Self::new), checked at once.
    #[deprecated(
        since = "0.2.0",
        note = "name the fields: `ReductionKernel::checked(ReductionDef { name, in_params, out_params, map_expr, reduce_expr, post_map_expr, identity, ..ReductionDef::DEFAULT })`"
    )]
    pub fn try_new(
        name: &'static str,
        in_params: &'static str,
        out_params: &'static str,
        map_expr: &'static str,
        reduce_expr: &'static str,
        post_map_expr: &'static str,
        identity: Option<&'static str>,
    ) -> Result<Self> {
        ReductionKernel::checked(ReductionDef {
            name,
            in_params,
            out_params,
            map_expr,
            reduce_expr,
            post_map_expr,
            identity,
            ..ReductionDef::DEFAULT
        })
    }

    /// The variants of this kernel that this process has compiled and loaded, on every device,
    /// in no set order (CuPy's `cached_codes` role): one per element types, layout capacity
    /// (`"layouts of up to N axes"`) and device, each with the CUDA source it compiled. Empty
    /// before a launch, and in a build or on a machine without CUDA.
    pub fn cached_variants(&self) -> Vec<crate::CachedVariant> {
        crate::cuda::cached_reduction_variants(&self.def)
    }

    /// The parsed signature, once the whole definition is checked
    /// ([`ReductionDef::signature`]): every mistake at once, in
    /// [`Error::InvalidKernel`].
    pub fn signature(&self) -> Result<kusari_kernels::ElementwiseSignature> {
        Ok(self.def.signature()?)
    }

    /// Runs the kernel over CUDA `inputs` (broadcast together; views of any strides, broadcast
    /// ones included, are read in place) with the scalar `params` (one per declared parameter,
    /// each converted to its declared type where that keeps its value), reducing `axis`
    /// (`None`: every axis; negative axes count from the end; `Some(&[])` reduces nothing)
    /// and keeping the reduced axes as length 1 when `keepdims`. Returns the outputs as new
    /// arrays on the inputs' device.
    ///
    /// Errors: a bad definition ([`Error::InvalidKernel`]); arguments that do not fit the
    /// signature, a parameter its type cannot hold, or a reduction of no element without an
    /// identity ([`Error::KernelArguments`]); an axis out of range ([`Error::Axis`]) or
    /// repeated ([`Error::Shape`]); shapes that do not broadcast ([`Error::Broadcast`]); host inputs
    /// ([`Error::CudaUnavailable`]: the kernel is CUDA code), inputs on different devices
    /// ([`Error::DeviceMismatch`]); an expression that does not compile
    /// ([`Error::KernelCompile`], whose log names the expression and its line).
    pub fn launch(
        &self,
        inputs: &[&Array],
        params: &[Scalar],
        axis: Option<&[isize]>,
        keepdims: bool,
    ) -> Result<Vec<Array>> {
        let def = &self.def;
        let sig = def.signature()?;
        let typed: Vec<(ScalarType, &[usize])> = inputs
            .iter()
            .map(|a| (ScalarType::from(a.dtype()), a.shape()))
            .collect();
        let types = def.bind(&sig, &typed)?;
        def.check_param_count(&sig, params.len())?;
        let args_err = |msg: String| Error::KernelArguments {
            kernel: def.name.to_string(),
            msg,
        };
        let dtype_of = |t: ParamType| match t {
            ParamType::Concrete(t) => DType::from(t),
            ParamType::Placeholder(c) => types
                .iter()
                .find(|(p, _)| *p == c)
                .map_or(DType::F64, |(_, t)| DType::from(*t)),
        };
        let params = sig
            .params
            .iter()
            .zip(params)
            .map(|(p, &v)| {
                let dtype = dtype_of(p.ty);
                v.to_dtype(dtype).ok_or_else(|| {
                    args_err(format!(
                        "parameter `{}` is {v}, which {dtype} cannot hold",
                        p.name
                    ))
                })
            })
            .collect::<Result<Vec<Scalar>>>()?;

        let mut shape: Vec<usize> = Vec::new();
        for a in inputs {
            shape = broadcast_shapes(def.name, &shape, a.shape())?;
        }
        // Broadcast views can make a loop whose element count does not fit (`[2³², 1]` with
        // `[1, 2³²]`): an error, not a count wrapped to 0 (which gave the identity).
        let loop_dtype = inputs.first().map_or(DType::Bool, |a| a.dtype());
        checked_size(def.name, &shape, loop_dtype)?;
        let axes = normalize_axes(def.name, axis, &shape)?;
        let kept: Vec<usize> = (0..shape.len())
            .filter(|d| !axes.contains(d))
            .map(|d| shape[d])
            .collect();
        let n_out = checked_size(def.name, &kept, DType::F64)?;
        let len: usize = axes.iter().map(|&d| shape[d]).product();
        if len == 0 && n_out > 0 && def.identity.is_none() {
            return Err(args_err(format!(
                "reducing axes {axes:?} of shape {shape:?} combines zero elements, and the \
                 kernel has no identity to give such a reduction"
            )));
        }
        let layouts = inputs
            .iter()
            .map(|a| a.layout().broadcast_to(&shape, def.name))
            .collect::<Result<Vec<Layout>>>()?;
        let operands: Vec<(&Storage, &Layout)> = inputs
            .iter()
            .zip(&layouts)
            .map(|(a, l)| (a.storage(), l))
            .collect();
        let outputs = Storage::launch_reduction(def, &operands, &params, &shape, &axes)?;
        let out_shape: Vec<usize> = match keepdims {
            true => (0..shape.len())
                .map(|d| if axes.contains(&d) { 1 } else { shape[d] })
                .collect(),
            false => kept,
        };
        Ok(outputs
            .into_iter()
            .map(|s| Array::from_storage(s, Layout::contiguous(&out_shape)))
            .collect())
    }
}

/// The reduction kernels kusari's own `sum`, `max` and `min` launch on CUDA (`mean` divides a
/// sum), each with the dtypes it runs in there (half types are reduced in float32), so that a
/// test can compile every one with NVRTC.
pub fn array_reduction_kernels() -> Vec<(ReductionKernel, &'static [DType])> {
    crate::builtin_kernels::reductions::builtin_reductions()
        .into_iter()
        .map(|(k, dtypes)| (ReductionKernel::from(k), dtypes))
        .collect()
}

#[cfg(test)]
mod tests {
    use super::*;

    const SUM: ReductionKernel = ReductionKernel::from_def(ReductionDef {
        name: "rsum",
        in_params: "T x",
        out_params: "T y",
        map_expr: "x",
        reduce_expr: "a + b",
        post_map_expr: "y = a",
        identity: Some("0"),
        ..ReductionDef::DEFAULT
    });
    const MAX: ReductionKernel = ReductionKernel::from_def(ReductionDef {
        name: "rmax",
        in_params: "T x",
        out_params: "T y",
        map_expr: "x",
        reduce_expr: "a > b ? a : b",
        post_map_expr: "y = a",
        identity: None,
        ..ReductionDef::DEFAULT
    });

    #[test]
    fn arguments_are_checked_before_the_device() {
        let x = Array::zeros(&[2, 3], DType::F32).unwrap();
        let e = SUM.launch(&[&x], &[], Some(&[2]), false).unwrap_err();
        assert!(matches!(e, Error::Axis { axis: 2, .. }), "{e}");
        let e = SUM.launch(&[&x], &[], Some(&[0, -2]), false).unwrap_err();
        assert!(e.to_string().contains("repeated axis"), "{e}");
        let e = SUM
            .launch(&[&x], &[Scalar::from(1.0)], None, false)
            .unwrap_err();
        assert!(e.to_string().contains("1 scalar parameter(s) given"), "{e}");
        let scaled = SUM.with_params("int32 k");
        let e = scaled
            .launch(&[&x], &[Scalar::from(2.5f64)], None, false)
            .unwrap_err()
            .to_string();
        assert!(
            e.contains("parameter `k` is 2.5 (float64), which int32 cannot hold"),
            "{e}"
        );
        let empty = Array::zeros(&[2, 0], DType::F32).unwrap();
        let e = MAX.launch(&[&empty], &[], Some(&[1]), false).unwrap_err();
        assert!(
            e.to_string().contains("combines zero elements") && e.to_string().contains("[2, 0]"),
            "{e}"
        );
        // Host arrays: the kernel is CUDA code.
        let e = SUM.launch(&[&x], &[], None, false).unwrap_err();
        assert!(matches!(e, Error::CudaUnavailable { .. }), "{e}");
        assert!(
            e.to_string().contains("reduction kernel is CUDA code"),
            "{e}"
        );
        let y = Array::zeros(&[4], DType::F32).unwrap();
        let two = ReductionKernel::from_def(ReductionDef {
            name: "two",
            in_params: "T x, T w",
            out_params: "T y",
            map_expr: "x * w",
            reduce_expr: "a + b",
            post_map_expr: "y = a",
            identity: Some("0"),
            ..ReductionDef::DEFAULT
        });
        assert!(matches!(
            two.launch(&[&x, &y], &[], None, false),
            Err(Error::Broadcast { .. })
        ));
    }
}
