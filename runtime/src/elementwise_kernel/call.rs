//! [`KernelCall`]: one launch of an [`ElementwiseKernel`] with everything CuPy's kernel call
//! takes: arrays or scalars for its inputs, typed scalar parameters, the caller's own outputs
//! (written in place), the loop's size and the device; and the kernel's methods that launch it.

use kusari_kernels::codegen::KernelSource;
use kusari_kernels::{ElementwiseDef, ParamType, ScalarType};

use super::ElementwiseKernel;
use crate::error::{Error, Result};
use crate::launch_plan::{LaunchArgs, LaunchPlan, Operand, plan, source_for};
use crate::layout::Layout;
use crate::storage::Storage;
use crate::{Array, DType, Device, Scalar, default_device};

/// One argument of a kernel launch: an array or a scalar.
///
/// - For an [`ElementwiseKernel`] array input ([`KernelCall::arg`]): an array is read in place,
///   a scalar broadcasts as a 0-d value (CuPy binds a Python scalar to a `T x` input).
/// - For a [`RawKernel`](crate::RawKernel): an array on a CUDA device is passed as a pointer to
///   its first element (its offset included; its strides are the kernel's business), a scalar
///   by value in the declared parameter's type.
///
/// Every element type and [`Scalar`] convert into it, and so does `&Array`:
/// `K.call().arg(&x).arg(2.0)`, `&[(&x).into(), 2.5f32.into()]`.
#[derive(Clone, Copy, Debug)]
pub enum KernelArg<'a> {
    /// An array, read in place (views of any strides, broadcast to the loop's shape).
    Array(&'a Array),
    /// A scalar, broadcast to every element. Its type binds the input's placeholder only where
    /// no array binds it ([`KernelCall::arg`]).
    Scalar(Scalar),
}

impl<'a> From<&'a Array> for KernelArg<'a> {
    fn from(a: &'a Array) -> Self {
        KernelArg::Array(a)
    }
}

macro_rules! scalar_arg {
    ($($t:ty),*) => {$(
        impl From<$t> for KernelArg<'_> {
            fn from(v: $t) -> Self {
                KernelArg::Scalar(Scalar::from(v))
            }
        }
    )*};
}
scalar_arg!(
    Scalar,
    bool,
    i8,
    i16,
    i32,
    i64,
    u8,
    u16,
    u32,
    u64,
    usize,
    half::f16,
    half::bf16,
    f32,
    f64
);

/// One launch of an [`ElementwiseKernel`], built argument by argument and run by
/// [`run`](Self::run) ([`ElementwiseKernel::call`] starts one). For the common case,
/// [`ElementwiseKernel::launch`] is shorter.
///
/// ```
/// use kusari::{Array, DType, ElementwiseKernel, Scalar};
/// static AXPY: ElementwiseKernel =
///     ElementwiseKernel::new("axpy", "T x, T y", "T w", "T a", "w = a * x + y;");
/// let x = Array::zeros(&[3], DType::F32).unwrap();
/// let call = AXPY.call().arg(&x).arg(1.0).param(2.0);
/// // The scalar `y` is float32 here: the array `x` binds `T`.
/// assert!(call.source().unwrap().source.contains("typedef float T;"));
/// ```
///
/// # Arguments and their types
/// - **Inputs**, one per input of the signature, in order ([`arg`](Self::arg),
///   [`args`](Self::args)): an array, or a scalar (not for a `raw` input, which the body
///   indexes). The non-`raw` ones broadcast together into the loop's shape.
/// - **Type placeholders** bind as for arrays: every array using `T` must have one dtype. A
///   scalar binds weakly, as CuPy binds a Python scalar: where an array binds `T`, the scalar
///   is converted to that type; where only scalars bind `T`, they must have one dtype, which
///   `T` takes (scalars that disagree are an error naming the placeholder). Outputs given
///   bind as array inputs do (CuPy's `'X x' -> 'Z z'` with `z` passed in): a placeholder
///   that only outputs use needs them, and a call without them is an error naming them.
/// - **Parameters** ([`param`](Self::param), [`params`](Self::params)), one per scalar
///   parameter, each converted to its declared type by [`Scalar::to_dtype`]: an `i64` reaches
///   an `int64` parameter exactly, and a value that does not fit (2.5 or 2^40 for an `int32`, a float
///   for a `bool`) is an [`Error::KernelArguments`] naming the kernel, the
///   parameter, its type and the value. A scalar input is checked the same way.
/// - **Outputs** ([`out`](Self::out)): none (each output is a new C-contiguous array of the
///   loop's shape) or one per output of the signature, written in place (see below).
/// - **Size** ([`size`](Self::size)): CuPy's `size=`. As in CuPy, the arrays given for non-`raw`
///   inputs and outputs decide the loop's shape (broadcast together); a scalar given for a
///   non-`raw` input decides nothing. A launch where no array decides it needs a size, and a
///   launch where one does refuses one: both are [`Error::KernelArguments`] naming the
///   arguments.
/// - **Device** ([`device`](Self::device)): the arrays' device; a launch with no array
///   argument runs on the device given here or else on [`default_device`] (see
///   [`using_device`](crate::using_device)), which must be a CUDA device.
///
/// # Outputs written in place
/// An output given must have the kernel's dtype for it, be on the launch's device and, unless
/// `raw`, have the loop's shape (outputs are not broadcast: a launch whose inputs are scalars
/// writes over its output's shape). A non-`raw` output may be a strided view (transposed, sliced, flipped)
/// but not one that holds an element twice (a broadcast view); a `raw` output must be
/// C-contiguous (the body indexes it flat). Each is an [`Error::KernelArguments`] naming the
/// output.
///
/// An output may share memory with an input only where that is safe: the input is not `raw`
/// and is the very same view (same buffer, offset, strides in the loop's shape and dtype), so
/// each element is read before it is written by the one thread that writes it, as in
/// `w = w - lr * g` with `w` both input and output. Every other overlap (another view of the
/// same buffer, a `raw` array, two outputs) is an error naming both arguments.
///
/// The write goes to the output's buffer, which every clone and view of that array shares:
/// they all see the new values, as NumPy and CuPy views do (a [`Variable`](crate::Variable)
/// whose data it is included). kusari's own array operations never write into an existing
/// buffer; only launches with outputs given do (the SGD and MomentumSGD updates of CUDA
/// parameters among them), ordered on the device's stream after every launch that reads the
/// buffer before.
#[derive(Clone, Debug)]
#[must_use = "a kernel call does nothing until it is run"]
pub struct KernelCall<'a> {
    kernel: &'a ElementwiseKernel,
    inputs: Vec<KernelArg<'a>>,
    params: Vec<Scalar>,
    outputs: Option<Vec<&'a Array>>,
    size: Option<usize>,
    device: Option<Device>,
}

impl<'a> KernelCall<'a> {
    pub(crate) fn new(kernel: &'a ElementwiseKernel) -> Self {
        KernelCall {
            kernel,
            inputs: Vec::new(),
            params: Vec::new(),
            outputs: None,
            size: None,
            device: None,
        }
    }

    /// The next input: an array or a scalar.
    pub fn arg(mut self, arg: impl Into<KernelArg<'a>>) -> Self {
        self.inputs.push(arg.into());
        self
    }

    /// The next inputs, all arrays.
    pub fn args(mut self, arrays: &[&'a Array]) -> Self {
        self.inputs
            .extend(arrays.iter().map(|&a| KernelArg::Array(a)));
        self
    }

    /// The next scalar parameter (`2.0`, `3i64`, a [`Scalar`]).
    pub fn param(mut self, value: impl Into<Scalar>) -> Self {
        self.params.push(value.into());
        self
    }

    /// The next scalar parameters.
    pub fn params(mut self, values: &[Scalar]) -> Self {
        self.params.extend_from_slice(values);
        self
    }

    /// The next output, given by the caller and written in place (see the type's docs).
    pub fn out(mut self, array: &'a Array) -> Self {
        self.outputs.get_or_insert_with(Vec::new).push(array);
        self
    }

    /// The loop's size, for a launch where no array given for a non-`raw` parameter decides it
    /// (every array is `raw`, or scalars are given for the non-`raw` inputs): `i` runs over
    /// `0..size` and `n` is `size`.
    pub fn size(mut self, size: usize) -> Self {
        self.size = Some(size);
        self
    }

    /// The device to run on: the arrays' (a launch on arrays elsewhere is an
    /// [`Error::DeviceMismatch`]), and for a launch without array arguments the one it runs on
    /// instead of [`default_device`].
    pub fn device(mut self, device: Device) -> Self {
        self.device = Some(device);
        self
    }

    /// The launch's arguments as the layers below take them, arrays still arrays.
    fn launch_args(&self) -> LaunchArgs<'_, &'a Array> {
        LaunchArgs {
            inputs: self
                .inputs
                .iter()
                .map(|a| match *a {
                    KernelArg::Array(a) => Operand::Array(a),
                    KernelArg::Scalar(v) => Operand::Scalar(v),
                })
                .collect(),
            params: &self.params,
            outputs: self.outputs.clone(),
            size: self.size,
            reduce_dims: self.kernel.reduce_dims(),
            cast_params: false,
        }
    }

    /// What this launch would do ([`LaunchPlan`]: the bound types, the converted scalars and
    /// parameters, the outputs, the loop's shape and variant), after every check
    /// [`run`](Self::run) makes of the arguments; it runs nothing and needs no device.
    pub fn plan(&self) -> Result<LaunchPlan> {
        let args = self.launch_args().map_arrays(|a| (a.dtype(), a.layout()));
        plan(self.kernel, &self.kernel.signature()?, &args)
    }

    /// The CUDA source this launch compiles, after every check [`run`](Self::run) makes of the
    /// arguments; it runs nothing and needs no device.
    pub fn source(&self) -> Result<KernelSource> {
        let args = self.launch_args().map_arrays(|a| (a.dtype(), a.layout()));
        source_for(self.kernel, &args)
    }

    /// Runs the launch. Returns the outputs: the new arrays (C-contiguous, of the loop's
    /// shape), or the arrays given, now written; nothing for a kernel made
    /// [`with_no_return`](ElementwiseKernel::with_no_return).
    pub fn run(self) -> Result<Vec<Array>> {
        let args = self.launch_args().map_arrays(|a| (a.storage(), a.layout()));
        let has_array =
            self.inputs.iter().any(|a| matches!(a, KernelArg::Array(_))) || self.outputs.is_some();
        let device = match (self.device, has_array) {
            (Some(d), _) => Some(d),
            (None, false) => Some(default_device()),
            (None, true) => None,
        };
        let (fresh, shape) = Storage::launch(self.kernel, &args, device)?;
        if self.kernel.no_return() {
            return Ok(Vec::new());
        }
        let outputs = match self.outputs {
            Some(given) => given.into_iter().cloned().collect(),
            None => fresh
                .into_iter()
                .map(|s| {
                    s.map(|s| Array::from_storage(s, Layout::contiguous(&shape)))
                        .ok_or_else(|| Error::KernelArguments {
                            kernel: self.kernel.name.to_string(),
                            msg: "an output was neither given nor made".to_string(),
                        })
                })
                .collect::<Result<_>>()?,
        };
        Ok(outputs)
    }
}

/// Launching a kernel: the builder ([`KernelCall`]) and the one-line forms.
impl ElementwiseKernel {
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
        let types = ElementwiseDef::bind(
            self,
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
    /// The loop runs over the arrays given for non-`raw` inputs; a launch without one (every
    /// array input `raw`, or scalars given) has no such shape, and is an
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

    /// Runs a launch whose array inputs are all `raw` (or scalars given for the non-`raw` ones)
    /// over `size` elements (CuPy's `size=`): `i` runs over `0..size`, `n` is `size`, and the
    /// non-`raw` outputs are new arrays of shape `[size]`. An array given for a non-`raw` input
    /// is an [`Error::KernelArguments`](crate::Error::KernelArguments) naming it (its shape sets
    /// the loop's; use [`launch`](Self::launch)). A kernel with no array input at all runs on
    /// [`default_device`](crate::default_device) (or the device given to
    /// [`KernelCall::device`]). Otherwise as [`launch`](Self::launch).
    ///
    /// ```
    /// use kusari::{Array, DType, ElementwiseKernel};
    /// static REVERSE: ElementwiseKernel =
    ///     ElementwiseKernel::new("reverse", "raw T a", "T y", "", "y = a[n - 1 - i];");
    /// let a = Array::zeros(&[4], DType::F32).unwrap();
    /// let e = REVERSE.launch(&[&a], &[]).unwrap_err();
    /// assert!(e.to_string().contains("every array argument is raw"), "{e}");
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
