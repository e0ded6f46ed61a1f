//! The error type of the runtime: every message names the operation, the shapes and the dtypes.

use crate::device::ParseDeviceError;
use crate::{DType, Device};

/// Alias for `std::result::Result<T, kusari::Error>`.
pub type Result<T, E = Error> = std::result::Result<T, E>;

/// Everything that can go wrong in kusari. Each variant carries the operation or function name.
#[derive(Debug, Clone, PartialEq, thiserror::Error)]
#[non_exhaustive]
pub enum Error {
    // ----- arrays -----
    /// An argument outside what the operation accepts (a ratio outside [0, 1), a label outside
    /// the classes, a hyperparameter out of range, an emulated device count).
    #[error("{op}: {msg}")]
    InvalidArgument {
        /// The operation.
        op: String,
        /// What is wrong with the argument, and what is accepted.
        msg: String,
    },
    /// Two shapes that NumPy's broadcasting rules cannot combine.
    #[error("{op}: shapes {lhs:?} and {rhs:?} cannot be broadcast together")]
    Broadcast {
        /// The operation.
        op: &'static str,
        /// Left operand's shape.
        lhs: Vec<usize>,
        /// Right operand's shape.
        rhs: Vec<usize>,
    },
    /// A shape whose element count, strides or size in bytes do not fit the address space.
    #[error("{op}: shape {shape:?} of {dtype} is too large: {what} overflows")]
    ShapeOverflow {
        /// The operation.
        op: &'static str,
        /// The shape asked for.
        shape: Vec<usize>,
        /// The element type.
        dtype: DType,
        /// What overflows: the element count, the size in bytes or a stride.
        what: &'static str,
    },
    /// A scalar operand that the array's dtype cannot hold exactly (a fraction, NaN, infinity or
    /// a value out of range for an integer array): kusari does not promote dtypes, and rounding
    /// the scalar would give a wrong answer.
    #[error(
        "{op}: the scalar {scalar} is not a {dtype} value ({reason}), and the array is {dtype}{shape:?}; kusari does not promote dtypes: convert the array first (e.g. astype(DType::F64))"
    )]
    ScalarNotRepresentable {
        /// The operation.
        op: &'static str,
        /// The scalar given.
        scalar: f64,
        /// The array's dtype.
        dtype: DType,
        /// The array's shape.
        shape: Vec<usize>,
        /// Why it does not fit: "not an integer" or "out of range".
        reason: &'static str,
    },
    /// A buffer the device cannot provide (NumPy's `MemoryError`).
    #[error("{op}: out of memory on {device}: cannot allocate {bytes} bytes ({})", human_bytes(*bytes))]
    OutOfMemory {
        /// The operation.
        op: String,
        /// Where the buffer was asked for.
        device: Device,
        /// The size asked for.
        bytes: usize,
    },
    /// Operands of different dtypes (kusari never promotes silently).
    #[error(
        "{op}: dtype mismatch, {lhs} {lhs_shape:?} vs {rhs} {rhs_shape:?} (convert one with astype)"
    )]
    DTypeMismatch {
        /// The operation.
        op: &'static str,
        /// Left operand's dtype.
        lhs: DType,
        /// Left operand's shape.
        lhs_shape: Vec<usize>,
        /// Right operand's dtype.
        rhs: DType,
        /// Right operand's shape.
        rhs_shape: Vec<usize>,
    },
    /// An operation applied to a dtype it is not defined for.
    #[error("{op}: not defined for dtype {dtype} (shape {shape:?}); expected {expected}")]
    UnsupportedDType {
        /// The operation.
        op: &'static str,
        /// The dtype given.
        dtype: DType,
        /// The operand's shape.
        shape: Vec<usize>,
        /// What the operation accepts, in words.
        expected: &'static str,
    },
    /// Shapes that do not fit the operation (matmul, reshape, concatenation, ...).
    #[error("{op}: {msg}")]
    Shape {
        /// The operation.
        op: &'static str,
        /// What does not fit, with the shapes.
        msg: String,
    },
    /// An axis outside `-ndim..ndim`.
    #[error("{op}: axis {axis} is out of range for shape {shape:?} ({} dimensions)", shape.len())]
    Axis {
        /// The operation.
        op: &'static str,
        /// The axis given.
        axis: isize,
        /// The operand's shape.
        shape: Vec<usize>,
    },
    /// Operands on different devices.
    #[error("{op}: operands are on different devices, {lhs} and {rhs} (move one with to_device)")]
    DeviceMismatch {
        /// The operation.
        op: String,
        /// First device.
        lhs: Device,
        /// Second device.
        rhs: Device,
    },
    /// Converting to a Rust type that is not the array's dtype.
    #[error("{op}: the array holds {actual}, not {requested} (convert with astype)")]
    ElementType {
        /// The operation.
        op: &'static str,
        /// The dtype asked for.
        requested: DType,
        /// The array's dtype.
        actual: DType,
    },

    // ----- devices -----
    /// A device name that does not parse.
    #[error("invalid device name {name:?}; expected \"cpu\", \"native:0\" or \"cuda:N\"")]
    InvalidDevice {
        /// The name given.
        name: String,
    },
    /// A CUDA operation in a build or on a machine without CUDA.
    #[error("{op}: CUDA is not available: {reason}")]
    CudaUnavailable {
        /// The operation.
        op: String,
        /// Why (built without the `cuda` feature, no driver, ...).
        reason: String,
    },

    /// The CUDA driver or cuBLAS reported an error.
    #[error("{op}: CUDA error: {msg}")]
    Cuda {
        /// The operation.
        op: String,
        /// The driver's message.
        msg: String,
    },
    /// An elementwise kernel whose definition is refused before anything is generated or
    /// compiled: a name that is no C identifier or a keyword, a signature mistake (a parameter
    /// name the generated code cannot use, an unknown type, ...) or a body whose brackets do not
    /// balance. The message lists every mistake found, each with its text underlined.
    #[error("kernel {kernel}: {message}")]
    InvalidKernel {
        /// The kernel's name, as given.
        kernel: String,
        /// What is wrong, and where.
        message: String,
    },
    /// CUDA source that could not be generated (a bad kernel name or body, an unbound
    /// placeholder, an unsupported element type).
    #[error("{source}")]
    Codegen {
        /// The kernel's name.
        kernel: String,
        /// What went wrong.
        #[source]
        source: Box<kusari_kernels::codegen::CodegenError>,
    },
    /// A kernel's arguments that do not fit its signature: a dtype that differs from the declared
    /// type or from the placeholder's binding, or a wrong number of scalar parameters.
    #[error("kernel {kernel}: {msg}")]
    KernelArguments {
        /// The kernel's name.
        kernel: String,
        /// What does not fit, naming the argument.
        msg: String,
    },
    /// A kernel that NVRTC (or the emulated device's compiler) could not compile: its source
    /// holds the compiler's log (lines of the kernel's body numbered as in the body) and the
    /// numbered generated source, or says that NVRTC is missing.
    #[error("kernel {kernel}: {source}")]
    KernelCompile {
        /// The kernel's name.
        kernel: String,
        /// Why it did not compile.
        #[source]
        source: Box<kusari_kernels::CompileError>,
    },
    /// A function without a GPU forward was applied to CUDA arrays while host fallback is
    /// forbidden ([`crate::config::using_host_fallback`]).
    #[error(
        "{function}: no forward_gpu, and host fallback is forbidden (inputs on {device}); implement forward_gpu or allow the fallback"
    )]
    HostFallbackForbidden {
        /// The function's label.
        function: String,
        /// The inputs' device.
        device: Device,
    },

    // ----- functions and the graph -----
    /// A function called with the wrong number of inputs.
    #[error("{function}: expected {expected} input(s), got {actual}")]
    InputCount {
        /// The function's label.
        function: String,
        /// Inputs it takes.
        expected: usize,
        /// Inputs given.
        actual: usize,
    },
    /// A function's forward returned no output, or a different count than declared.
    #[error("{function}: forward returned {actual} output(s), expected {expected}")]
    OutputCount {
        /// The function's label.
        function: String,
        /// Outputs expected.
        expected: usize,
        /// Outputs returned.
        actual: usize,
    },
    /// A device path the function does not implement.
    #[error("{function}: {method} is not implemented (inputs are on {device})")]
    NotImplemented {
        /// The function's label.
        function: String,
        /// The missing method.
        method: &'static str,
        /// The inputs' device.
        device: Device,
    },
    /// `backward` asked for an input or output the function does not have.
    #[error("{function}: backward asks for {what} {index}, but the function has {count} {what}(s)")]
    IndexOutOfRange {
        /// The function's label.
        function: String,
        /// `"input"` or `"output"`.
        what: &'static str,
        /// The index asked for.
        index: usize,
        /// How many there are.
        count: usize,
    },
    /// `backward` read an input or output that `forward` did not retain.
    #[error(
        "{function}: backward reads {what} {index}, which forward did not retain (call ctx.retain_{what}s in forward)"
    )]
    NotRetained {
        /// The function's label.
        function: String,
        /// `"input"` or `"output"`.
        what: &'static str,
        /// The index read.
        index: usize,
    },
    /// `forward` asked to retain an input or output the function does not have.
    #[error("{function}: retain_{what}s index {index} is out of range for {count} {what}(s)")]
    RetainOutOfRange {
        /// The function's label.
        function: String,
        /// `"input"` or `"output"`.
        what: &'static str,
        /// The index given.
        index: usize,
        /// How many there are.
        count: usize,
    },
    /// A backward returned the wrong number of gradients.
    #[error(
        "{function}: backward returned {actual} gradient(s), expected one per input ({expected})"
    )]
    GradientCount {
        /// The function's label.
        function: String,
        /// Its input count.
        expected: usize,
        /// Gradients returned.
        actual: usize,
    },
    /// A gradient whose shape, dtype or device differs from its input's.
    #[error(
        "{function}: gradient for input {input} has {what} {actual}, but the input has {expected}"
    )]
    GradientMismatch {
        /// The function's label.
        function: String,
        /// The input's index.
        input: usize,
        /// `"shape"`, `"dtype"` or `"device"`.
        what: &'static str,
        /// The input's value.
        expected: String,
        /// The gradient's value.
        actual: String,
    },
    /// `backward()` on a non-scalar output whose `grad` was not set.
    #[error(
        "backward: the output has shape {shape:?} and no grad; set its grad (e.g. ones_like) before backward, or reduce it to one element first"
    )]
    GradRequired {
        /// The output's shape.
        shape: Vec<usize>,
    },
    /// A value set as a variable's gradient that does not match the variable.
    #[error("set_grad{name}: gradient has {what} {actual}, but the variable has {expected}")]
    GradDoesNotMatch {
        /// `" (name)"` of the variable, or empty.
        name: String,
        /// `"shape"`, `"dtype"` or `"device"`.
        what: &'static str,
        /// The variable's value.
        expected: String,
        /// The gradient's value.
        actual: String,
    },
    /// `grad(..)` called with inconsistent arguments.
    #[error("grad: {msg}")]
    GradArguments {
        /// What is wrong.
        msg: String,
    },
    /// Debug mode found NaN in a function's output or gradient.
    #[error(
        "{function}: NaN detected in {stage} output {index} (shape {shape:?}); debug mode is on"
    )]
    NanDetected {
        /// The function's label.
        function: String,
        /// `"forward"` or `"backward"`.
        stage: &'static str,
        /// The output (forward) or input (backward) index.
        index: usize,
        /// Its shape.
        shape: Vec<usize>,
    },
    /// A gradient of a function that cannot be differentiated again (old-style functions).
    #[error(
        "{function}: cannot differentiate the gradient of this function again (it is an old-style Function; write it as a FunctionNode for higher-order gradients)"
    )]
    DoubleBackwardUnsupported {
        /// The function's label.
        function: String,
    },
    /// A function that has no backward.
    #[error("{function}: this function is not differentiable")]
    NotDifferentiable {
        /// The function's label.
        function: String,
    },
    /// An error inside a function's forward, with the function and its inputs.
    #[error("{function}.forward({inputs}): {source}")]
    Forward {
        /// The function's label.
        function: String,
        /// The inputs' dtypes and shapes.
        inputs: String,
        /// What went wrong.
        source: Box<Error>,
    },
    /// An error inside a function's backward, with the function and the output gradients.
    #[error("{function}.backward(grad_outputs: {grad_outputs}): {source}")]
    Backward {
        /// The function's label.
        function: String,
        /// The output gradients' dtypes and shapes.
        grad_outputs: String,
        /// What went wrong.
        source: Box<Error>,
    },
    /// A parameter used before it has values.
    #[error(
        "{op}: the {dtype} parameter is not initialised yet: call initialize(shape) or run the link's forward once"
    )]
    ParameterUninitialized {
        /// The operation.
        op: &'static str,
        /// The parameter's dtype.
        dtype: DType,
    },
    /// New values or a gradient that do not match what they replace or belong to.
    #[error("{op}: {subject} has {what} {actual}, expected {expected}")]
    Mismatch {
        /// The operation.
        op: String,
        /// What was given (e.g. `the gradient of l1.W`).
        subject: String,
        /// `shape`, `dtype` or `device`.
        what: &'static str,
        /// What was given, formatted.
        actual: String,
        /// What it must be, formatted.
        expected: String,
    },
    /// An optimizer that cannot update: parameters under one path, state made for another
    /// parameter.
    #[error("{op}: {msg}")]
    Optimizer {
        /// The operation.
        op: String,
        /// What is wrong.
        msg: String,
    },
    /// An [`OpTest`](crate::testing::OpTest) that cannot run or whose check failed.
    #[error("OpTest {name}: {msg}")]
    OpTest {
        /// The op's name in the test.
        name: String,
        /// What failed.
        msg: String,
    },
    /// A failure of one case of an [`OpTest`](crate::testing::OpTest): where, then why.
    #[error("{name} on {device}, {dtype}, {layout} inputs: {source}")]
    OpTestCase {
        /// The op's name in the test.
        name: String,
        /// The device of the case.
        device: Device,
        /// The dtype of the case.
        dtype: DType,
        /// The inputs' layout (contiguous, transposed, ...).
        layout: String,
        /// The failure.
        source: Box<Error>,
    },
    /// An error raised by user code, with its context.
    #[error("{0}")]
    Msg(String),
    /// [`gradient_check`](crate::gradient_check): backward's gradient projected on a random
    /// direction differs from the finite-difference directional derivative.
    #[error(
        "{op}: backward and finite differences disagree on the directional derivative: backward gives {backward}, finite differences give {numerical} (|difference| {difference:e} > tolerance {tolerance:e} = atol {atol:e} + rtol {rtol:e} * |backward|; eps {eps:e}, numerical side in {dtype})\n  inputs: {inputs}\n  direction: {direction}",
        difference = (.backward - .numerical).abs(),
        tolerance = .atol + .rtol * .backward.abs(),
        dtype = .numerical_dtype.map_or_else(|| "each input's own dtype".to_string(), |d| d.to_string()),
    )]
    GradientCheck {
        /// `"check_backward"` or `"check_double_backward"`.
        op: &'static str,
        /// `Σ <grad, direction>` from backward.
        backward: f64,
        /// `(L(x + eps d) - L(x - eps d)) / 2 eps`.
        numerical: f64,
        /// Absolute tolerance.
        atol: f64,
        /// Relative tolerance (of `|backward|`).
        rtol: f64,
        /// Finite-difference step.
        eps: f64,
        /// The dtype the inputs were cast to for the finite differences (`None`: their own).
        numerical_dtype: Option<DType>,
        /// The inputs' and parameters' dtypes and shapes.
        inputs: String,
        /// The first entries of the direction, per differentiated variable.
        direction: String,
    },
    /// [`gradient_check`](crate::gradient_check): finite differences sampled a point where the
    /// function is not differentiable (a kink, a jump, or finite values next to non-finite ones).
    #[error(
        "{op}: the function is not differentiable at {point}: output {output} at {output_index:?} {reason} (samples at -2eps, -eps, 0, eps, 2eps: {samples:?}); move the inputs away from kinks and discontinuities"
    )]
    NonDifferentiable {
        /// `"numerical_grad"`, `"check_backward"` or `"check_double_backward"`.
        op: &'static str,
        /// Where: the input element perturbed and its value, or the check's direction.
        point: String,
        /// The output that gave it away.
        output: usize,
        /// The element of that output.
        output_index: Vec<usize>,
        /// Why, with the numbers.
        reason: String,
        /// The output element at the five sampled points.
        samples: Vec<f64>,
    },
    /// [`gradient_check`](crate::gradient_check): an input that must get no gradient (an integer
    /// input, or one marked in `no_grads`) got one from backward.
    #[error(
        "{op}: inputs[{input}] ({dtype}{shape:?}) must get no gradient (integer inputs never do; others are marked in no_grads), but backward returned one for it"
    )]
    UnexpectedGradient {
        /// `"check_backward"` or `"check_double_backward"`.
        op: &'static str,
        /// The input's index.
        input: usize,
        /// Its dtype.
        dtype: DType,
        /// Its shape.
        shape: Vec<usize>,
    },
    /// [`gradient_check`](crate::gradient_check) called with inconsistent arguments or options,
    /// or with a function that returns different outputs from one call to the next.
    #[error("{op}: {msg}")]
    CheckArguments {
        /// The checking function.
        op: &'static str,
        /// What is wrong, with the shapes and dtypes.
        msg: String,
    },
    /// [`gradient_check`](crate::gradient_check): the checked function failed on the inputs the
    /// finite differences gave it (cast to the numerical side's dtype and perturbed).
    #[error("{op}: the function failed {stage}: {source}")]
    CheckFunction {
        /// The checking function.
        op: &'static str,
        /// On which inputs.
        stage: String,
        /// Its error.
        source: Box<Error>,
    },
    /// [`gradient_check::assert_allclose`](crate::gradient_check::assert_allclose): elements
    /// that differ by more than `atol + rtol * |expected|`.
    #[error(
        "assert_allclose: {failed} of {total} element(s) differ (shape {shape:?}, {dtypes}; tolerance atol {atol:e} + rtol {rtol:e} * |expected|); worst:{worst}"
    )]
    NotClose {
        /// Elements out of tolerance.
        failed: usize,
        /// All elements.
        total: usize,
        /// The arrays' shape.
        shape: Vec<usize>,
        /// `"actual dtype vs expected dtype"`.
        dtypes: String,
        /// Absolute tolerance.
        atol: f64,
        /// Relative tolerance.
        rtol: f64,
        /// Up to five worst elements, one a line: index, actual, expected, |diff| and tolerance.
        worst: String,
    },

    // ----- saving and loading links -----
    /// [`link::save`](crate::link::save) of a link with parameters that are not initialised yet
    /// (a model must be initialised to be saved).
    #[error("{op}: {} parameter(s) not initialised: {}; run the model's forward once (or call initialize) before saving", names.len(), names.join(", "))]
    UninitializedParams {
        /// The saving function.
        op: &'static str,
        /// The parameters' tensor names.
        names: Vec<String>,
    },
    /// A checkpoint file that could not be read or written, or bytes that are not a valid
    /// safetensors file.
    #[error("{op}({file}): {msg}")]
    CheckpointFile {
        /// The saving or loading function.
        op: &'static str,
        /// The file's path; `<N bytes>` (loading) or `<memory>` (saving) for bytes in memory.
        file: String,
        /// What went wrong.
        msg: String,
    },
    /// A checkpoint that does not fit the link it is loaded into: tensors missing or extra,
    /// dtypes or shapes that differ. Nothing was loaded.
    #[error("{op}({file}): the checkpoint does not fit the link, nothing was loaded: {}", problems.join("; "))]
    CheckpointMismatch {
        /// The loading function.
        op: &'static str,
        /// The file's path, or `<N bytes>` for bytes in memory.
        file: String,
        /// Every problem found, naming the tensors with their dtypes and shapes.
        problems: Vec<String>,
    },
}

impl Error {
    /// The innermost error, beneath the forward/backward context that wraps it.
    pub fn root_cause(&self) -> &Error {
        match self {
            Error::Forward { source, .. }
            | Error::Backward { source, .. }
            | Error::OpTestCase { source, .. } => source.root_cause(),
            e => e,
        }
    }

    /// An error with a free-form message, for user-written functions.
    pub fn msg(msg: impl Into<String>) -> Self {
        Error::Msg(msg.into())
    }
}

// ----- the kernel layer's errors, as the runtime reports them -----

impl From<kusari_kernels::InvalidKernel> for Error {
    fn from(e: kusari_kernels::InvalidKernel) -> Self {
        Error::InvalidKernel {
            kernel: e.kernel.to_string(),
            message: e.to_string(),
        }
    }
}

impl From<kusari_kernels::ArgumentError> for Error {
    fn from(e: kusari_kernels::ArgumentError) -> Self {
        use kusari_kernels::ArgumentError as A;
        match e {
            A::InputCount {
                kernel,
                expected,
                actual,
            } => Error::InputCount {
                function: format!("kernel {kernel}"),
                expected,
                actual,
            },
            A::Mismatch { kernel, msg } => Error::KernelArguments {
                kernel: kernel.to_string(),
                msg,
            },
        }
    }
}

/// Inputs of an elementwise kernel whose shapes do not broadcast.
impl From<kusari_kernels::loop_plan::BroadcastError> for Error {
    fn from(e: kusari_kernels::loop_plan::BroadcastError) -> Self {
        Error::Broadcast {
            op: "ElementwiseKernel",
            lhs: e.lhs,
            rhs: e.rhs,
        }
    }
}

/// `1.5 GiB`-style sizes for messages.
fn human_bytes(bytes: usize) -> String {
    const UNITS: [&str; 6] = ["bytes", "KiB", "MiB", "GiB", "TiB", "PiB"];
    let mut v = bytes as f64;
    let mut unit = 0;
    while v >= 1024.0 && unit + 1 < UNITS.len() {
        v /= 1024.0;
        unit += 1;
    }
    if unit == 0 {
        format!("{bytes} bytes")
    } else {
        format!("{v:.1} {}", UNITS[unit])
    }
}

impl From<ParseDeviceError> for Error {
    fn from(e: ParseDeviceError) -> Self {
        Error::InvalidDevice { name: e.name }
    }
}
