//! Every name the macro gives meaning to, in one place.

/// Method names.
pub const FORWARD: &str = "forward";
pub const FORWARD_CPU: &str = "forward_cpu";
pub const FORWARD_GPU: &str = "forward_gpu";
pub const BACKWARD: &str = "backward";
pub const NEW: &str = "new";

/// Helper attributes on methods.
pub const RETAIN: &str = "retain";
/// `#[forward_gpu(..)]` shares its name with the method.
pub const KERNEL_ATTR: &str = FORWARD_GPU;

/// The attribute itself, as messages name it.
pub const FUNCTION_NODE: &str = "function_node";

/// Keys of `#[function_node(..)]`.
pub const NAME: &str = "name";
pub const CRATE: &str = "crate";
pub const NON_DIFFERENTIABLE: &str = "non_differentiable";
/// `kernel(..)`: an op written as its elementwise body, with no `forward`.
pub const KERNEL: &str = "kernel";
/// `formula = ".."`: the forward as one elementwise expression, for `kusari::fuse`.
pub const FORMULA: &str = "formula";
pub const FUNCTION_NODE_KEYS: &[&str] = &[NAME, CRATE, NON_DIFFERENTIABLE, KERNEL, FORMULA];

/// Keys of `#[forward_gpu(..)]`.
pub const INPUTS: &str = "inputs";
pub const OUTPUTS: &str = "outputs";
pub const BODY: &str = "body";
pub const PARAMS: &str = "params";
pub const DTYPES: &str = "dtypes";
pub const PREAMBLE: &str = "preamble";
pub const LOOP_PREP: &str = "loop_prep";
pub const AFTER_LOOP: &str = "after_loop";
pub const KERNEL_KEYS: &[&str] = &[
    INPUTS, OUTPUTS, BODY, PARAMS, NAME, DTYPES, PREAMBLE, LOOP_PREP, AFTER_LOOP,
];

/// Values of `#[forward_gpu(dtypes = "..")]`: the dtype kinds a kernel's inputs may have.
pub const DTYPE_KINDS: &[&str] = &["float", "numeric"];

/// The key of `#[retain(..)]` that names an output by index.
pub const OUTPUT: &str = "output";
/// `#[retain(meta(x))]`: the input's shape, dtype and device, without its data.
pub const META: &str = "meta";
/// The type backward takes a `meta(..)` input as.
pub const INPUT_META: &str = "InputMeta";
/// The type backward takes a retained input or output as.
pub const VARIABLE: &str = "Variable";

/// Type names the macro recognises in signatures.
pub const RESULT: &str = "Result";
pub const OPTION: &str = "Option";

/// Types a backward parameter may be written with that are certainly not `Variable` (nor
/// `InputMeta`) under another name: a parameter of one of these where the generated call passes
/// a `&Variable` is reported by the macro. Other names (aliases, generics) are left to rustc.
pub const KNOWN_TYPES: &[&str] = &[
    VARIABLE, INPUT_META, "Array", OPTION, RESULT, "Vec", "Box", "Rc", "Arc", "String", "str",
    "bool", "char", "f32", "f64", "i8", "i16", "i32", "i64", "i128", "isize", "u8", "u16", "u32",
    "u64", "u128", "usize",
];

/// The helper attribute of `#[derive(Link)]`, on the struct and on its fields. (Not `link`:
/// that is a built-in attribute, and a derive helper may not shadow it.)
pub const KUSARI: &str = "kusari";
/// Keys of `#[kusari(..)]` on the struct.
pub const LINK_CONTAINER_KEYS: &[&str] = &[CRATE];
/// Keys of `#[kusari(..)]` on a field.
pub const SKIP: &str = "skip";
pub const LINK_FIELD_KEYS: &[&str] = &[SKIP];
