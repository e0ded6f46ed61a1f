//! [`RawModule`] and [`RawKernel`]: a user's own CUDA source (CuPy's `RawModule` and
//! `RawKernel`), launched with an explicit grid, block, dynamic shared memory and arguments
//! checked against the kernel's declared parameters. The source and the parameter parser are
//! the kernel layer's ([`kusari_kernels::raw`]); the launch is the CUDA backend's.

use std::fmt;
use std::sync::Arc;

use kusari_kernels::ScalarType;
use kusari_kernels::codegen::KernelSource;
use kusari_kernels::raw::{
    BinaryFormat, CType, CompiledClass, RawFunction, RawParam, RawParamType, binary_kernels,
    check_launch, is_name_expression, parse_instance, parse_kernels, raw_source,
};

use crate::config::default_device;
use crate::cuda::RawLoads;
use crate::elementwise_kernel::KernelArg;
use crate::error::{Error, Result};
use crate::launch_plan::{RawArg, RawCode};
use crate::layout::Layout;
use crate::storage::Storage;
use crate::{Array, DType, Device, Scalar};

/// A grid's or a block's dimensions (x, y, z), from one to three numbers: `256`, `(16, 16)`,
/// `[8, 8, 4]`. Missing dimensions are 1.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Dim3(pub [u32; 3]);

impl From<u32> for Dim3 {
    fn from(x: u32) -> Self {
        Dim3([x, 1, 1])
    }
}

impl From<(u32,)> for Dim3 {
    fn from((x,): (u32,)) -> Self {
        Dim3([x, 1, 1])
    }
}

impl From<(u32, u32)> for Dim3 {
    fn from((x, y): (u32, u32)) -> Self {
        Dim3([x, y, 1])
    }
}

impl From<(u32, u32, u32)> for Dim3 {
    fn from((x, y, z): (u32, u32, u32)) -> Self {
        Dim3([x, y, z])
    }
}

impl From<[u32; 1]> for Dim3 {
    fn from([x]: [u32; 1]) -> Self {
        Dim3([x, 1, 1])
    }
}

impl From<[u32; 2]> for Dim3 {
    fn from([x, y]: [u32; 2]) -> Self {
        Dim3([x, y, 1])
    }
}

impl From<[u32; 3]> for Dim3 {
    fn from(d: [u32; 3]) -> Self {
        Dim3(d)
    }
}

/// A CUDA source with one or more `extern "C" __global__` kernels, `__device__` helpers and
/// constants (CuPy's `RawModule`), compiled once per device when one of its kernels is first
/// launched there: with NVRTC on a GPU, with the host C++ compiler on the emulated device, in
/// both cases through the on-disk binary cache and the per-device upload cache.
///
/// ```
/// use kusari::RawModule;
/// let module = RawModule::new(
///     r#"
///     __device__ float twice(float v) { return 2.0f * v; }
///     extern "C" __global__ void double_it(float* x, int n) {
///         int i = blockIdx.x * blockDim.x + threadIdx.x;
///         if (i < n) x[i] = twice(x[i]);
///     }
///     extern "C" __global__ void fill(float* x, float v, int n) {
///         int i = blockIdx.x * blockDim.x + threadIdx.x;
///         if (i < n) x[i] = v;
///     }"#,
/// )
/// .unwrap();
/// assert_eq!(module.kernel_names(), ["double_it", "fill"]);
/// let fill = module.get_function("fill").unwrap();
/// assert_eq!(fill.params().unwrap().len(), 3);
/// assert!(module.get_function("missing").is_err());
/// ```
#[derive(Clone)]
pub struct RawModule {
    inner: Arc<ModuleInner>,
}

struct ModuleInner {
    /// What the module is called in messages (and, for a source, in compiler messages:
    /// `#line 1 "<label>"`).
    label: String,
    /// Its code.
    code: ModuleCode,
    /// The `__global__` functions read from the code, or why they could not be.
    functions: std::result::Result<Vec<RawFunction>, String>,
}

/// A module's code: CUDA source, or a module compiled already.
enum ModuleCode {
    Source {
        /// The user's code.
        code: String,
        /// The compile options, validated.
        options: Vec<String>,
        /// The name expressions (template instances) compiled in.
        names: Arc<[String]>,
    },
    Binary {
        /// What a device loads (PTX NUL-terminated).
        image: Arc<Vec<u8>>,
        /// What it is.
        format: BinaryFormat,
    },
}

impl fmt::Debug for RawModule {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        let mut d = f.debug_struct("RawModule");
        d.field("kernels", &self.kernel_names());
        match &self.inner.code {
            ModuleCode::Source { options, names, .. } => {
                d.field("options", options).field("name_expressions", names)
            }
            ModuleCode::Binary { format, .. } => d.field("format", format),
        };
        d.finish()
    }
}

impl RawModule {
    /// A module from CUDA source, without compile options.
    pub fn new(code: &str) -> Result<RawModule> {
        RawModule::with_options(code, &[])
    }

    /// A module from CUDA source compiled with `options`: macro definitions `-DNAME`,
    /// `-DNAME=VALUE` (or `--define-macro=..`) and removals `-UNAME` (or `--undefine-macro=..`),
    /// which become lines before the code, so that the emulated device and both caches see
    /// them too ([`kusari_kernels::raw::option_lines`]). Another option is an
    /// [`Error::InvalidKernel`] naming it.
    ///
    /// ```
    /// use kusari::RawModule;
    /// let m = RawModule::with_options("extern \"C\" __global__ void k(REAL* x) {}", &["-DREAL=double"])
    ///     .unwrap();
    /// assert!(m.source().starts_with("#define REAL double\n"));
    /// let e = RawModule::with_options("", &["-O3"]).unwrap_err();
    /// assert!(e.to_string().contains("`-O3` is not supported"), "{e}");
    /// ```
    pub fn with_options(code: &str, options: &[&str]) -> Result<RawModule> {
        RawModule::with_name_expressions(code, options, &[])
    }

    /// A module from CUDA source with `options` ([`with_options`](Self::with_options)) and
    /// the instances `name_expressions` of its template kernels (CuPy's `name_expressions`):
    /// each, such as `"scale<float, 4>"`, is compiled in, and
    /// [`get_function`](Self::get_function) given the same string returns that instance. Its
    /// parameters are read from the template with the expression's arguments (or the
    /// template's defaults) put in for its type parameters, so its launches are checked as an
    /// `extern "C"` kernel's are. On a GPU, NVRTC says the (mangled) name the instance has in
    /// the compiled module; on the emulated device, the host compiler instantiates it.
    ///
    /// An expression that is not a template's name and arguments (`name<..>`) is an
    /// [`Error::InvalidKernel`].
    ///
    /// ```
    /// use kusari::{Array, Device, RawModule};
    /// let module = RawModule::with_name_expressions(
    ///     r#"template <typename T, int N = 1>
    ///     __global__ void times(T* x, int n) {
    ///         int i = blockIdx.x * blockDim.x + threadIdx.x;
    ///         if (i < n) x[i] *= N;
    ///     }"#,
    ///     &[],
    ///     &["times<float, 3>", "times<double>"],
    /// )
    /// .unwrap();
    /// let k = module.get_function("times<float, 3>").unwrap();
    /// assert_eq!(k.params().unwrap()[0].decl, "T* x");
    /// let x = Array::from_vec(vec![1.0f64, 2.0], &[2]).unwrap();
    /// // `times<float, 3>` takes float arrays.
    /// let e = k.launch(1, 32, &[(&x).into(), 2.into()]).unwrap_err();
    /// assert!(e.to_string().contains("points to float"), "{e}");
    /// if kusari::cuda::is_available() {
    ///     let x = x.to_device(Device::Cuda(0)).unwrap();
    ///     let k = module.get_function("times<double>").unwrap();
    ///     k.launch(1, 32, &[(&x).into(), 2.into()]).unwrap();
    ///     assert_eq!(x.to_vec::<f64>().unwrap(), [1.0, 2.0]);
    /// }
    /// ```
    pub fn with_name_expressions(
        code: &str,
        options: &[&str],
        name_expressions: &[&str],
    ) -> Result<RawModule> {
        RawModule::labelled("raw_module", code, options, name_expressions)
    }

    fn labelled(
        label: &str,
        code: &str,
        options: &[&str],
        name_expressions: &[&str],
    ) -> Result<RawModule> {
        let invalid = |message: String| Error::InvalidKernel {
            kernel: label.to_string(),
            message,
        };
        let options: Vec<String> = options.iter().map(|o| o.to_string()).collect();
        let src = raw_source(label, label, code, &options).map_err(|e| invalid(e.to_string()))?;
        let mut names: Vec<String> = Vec::with_capacity(name_expressions.len());
        for &e in name_expressions {
            if !is_name_expression(e) {
                return Err(invalid(format!(
                    "`{e}` is not a name expression: a template kernel's name and its \
                     arguments, such as `my_kernel<float, 4>`"
                )));
            }
            if !names.iter().any(|n| n == e) {
                names.push(e.to_string());
            }
        }
        Ok(RawModule {
            inner: Arc::new(ModuleInner {
                label: label.to_string(),
                functions: Ok(parse_kernels(&src.source)),
                code: ModuleCode::Source {
                    code: code.to_string(),
                    options,
                    names: names.into(),
                },
            }),
        })
    }

    /// A module compiled already: PTX text (CuPy's `RawModule(path='k.ptx')` with the text).
    /// The driver compiles it for the device when it is loaded. Its `.entry` kernels and their
    /// parameters are read from it (PTX says each one's width, and whether it is a float, an
    /// integer or an 8-byte integer or pointer), and launches are checked against them.
    ///
    /// Only a GPU loads compiled code: on the emulated device, compiling or launching it is an
    /// [`Error::CudaUnavailable`] saying so.
    ///
    /// ```
    /// use kusari::RawModule;
    /// let m = RawModule::from_ptx(
    ///     ".version 8.0\n.target sm_80\n.address_size 64\n\
    ///      .visible .entry fill(\n .param .u64 fill_param_0,\n .param .f32 fill_param_1\n)\n\
    ///      {\n ret;\n}\n",
    /// )
    /// .unwrap();
    /// assert_eq!(m.kernel_names(), ["fill"]);
    /// let fill = m.get_function("fill").unwrap();
    /// let e = fill.launch(1, 1, &[1.5f32.into(), 2.0f32.into()]).unwrap_err();
    /// assert!(e.to_string().contains("8-byte integer or pointer"), "{e}");
    /// ```
    pub fn from_ptx(ptx: &str) -> Result<RawModule> {
        RawModule::from_binary(ptx.as_bytes())
    }

    /// A module compiled already, told apart by its first bytes: PTX text, a cubin (an ELF
    /// file) or a fatbin. A cubin records its kernels and each parameter's size, nothing more,
    /// so the widths of a launch's arguments are checked, not their types
    /// ([`RawKernel::unchecked_reason`] says so); a fatbin's kernels are not read, and are
    /// looked up by name when launched. Bytes that are none of the three are an
    /// [`Error::InvalidKernel`] saying what they are not. See [`from_ptx`](Self::from_ptx) for
    /// where it runs.
    pub fn from_binary(bytes: &[u8]) -> Result<RawModule> {
        RawModule::binary("raw_module", bytes)
    }

    /// A module compiled already, read from the file at `path` (CuPy's `RawModule(path=..)`):
    /// PTX, a cubin or a fatbin, as [`from_binary`](Self::from_binary) tells them apart. The
    /// module is called by the file's name in messages. A file that cannot be read is an
    /// [`Error::InvalidKernel`] saying why.
    pub fn from_file(path: impl AsRef<std::path::Path>) -> Result<RawModule> {
        let path = path.as_ref();
        let label = path.file_name().map_or_else(
            || path.display().to_string(),
            |n| n.to_string_lossy().into_owned(),
        );
        let bytes = std::fs::read(path).map_err(|e| Error::InvalidKernel {
            kernel: label.clone(),
            message: format!("cannot read `{}`: {e}", path.display()),
        })?;
        RawModule::binary(&label, &bytes)
    }

    fn binary(label: &str, bytes: &[u8]) -> Result<RawModule> {
        let format = BinaryFormat::of(bytes).map_err(|message| Error::InvalidKernel {
            kernel: label.to_string(),
            message,
        })?;
        let mut image = bytes.to_vec();
        if format == BinaryFormat::Ptx && image.last() != Some(&0) {
            // The driver reads PTX up to its NUL.
            image.push(0);
        }
        let functions = match binary_kernels(&image, format) {
            Ok(f) => Ok(f),
            Err(why) if format == BinaryFormat::Cubin => {
                return Err(Error::InvalidKernel {
                    kernel: label.to_string(),
                    message: format!("the cubin cannot be read: {why}"),
                });
            }
            Err(why) => Err(why),
        };
        Ok(RawModule {
            inner: Arc::new(ModuleInner {
                label: label.to_string(),
                code: ModuleCode::Binary {
                    image: Arc::new(image),
                    format,
                },
                functions,
            }),
        })
    }

    /// The kernels the module has that can be asked for by name: for a source, the `extern
    /// "C" __global__` kernels it declares in a form kusari reads; for PTX or a cubin, every
    /// kernel (by its compiled name: C++-mangled unless declared `extern "C"`); for a fatbin,
    /// none known.
    pub fn kernel_names(&self) -> Vec<&str> {
        let Ok(functions) = &self.inner.functions else {
            return Vec::new();
        };
        functions
            .iter()
            .filter(|f| f.extern_c)
            .map(|f| f.name.as_str())
            .collect()
    }

    /// The name expressions compiled in ([`with_name_expressions`](Self::with_name_expressions)).
    pub fn name_expressions(&self) -> Vec<&str> {
        match &self.inner.code {
            ModuleCode::Source { names, .. } => names.iter().map(String::as_str).collect(),
            ModuleCode::Binary { .. } => Vec::new(),
        }
    }

    /// What the module was made from when compiled already (PTX, a cubin, a fatbin); `None`
    /// for CUDA source.
    pub fn binary_format(&self) -> Option<BinaryFormat> {
        match &self.inner.code {
            ModuleCode::Source { .. } => None,
            ModuleCode::Binary { format, .. } => Some(*format),
        }
    }

    /// The translation unit compiled: the options' `#define` lines, a `#line` directive, and
    /// the code. For a module compiled already: its PTX, or nothing for a cubin or a fatbin.
    pub fn source(&self) -> String {
        self.kernel_source(&self.inner.label).source
    }

    fn kernel_source(&self, entry: &str) -> KernelSource {
        match &self.inner.code {
            ModuleCode::Source { code, options, .. } => {
                raw_source(&self.inner.label, entry, code, options)
                    .expect("the options and the code were checked when the module was made")
            }
            ModuleCode::Binary { image, format } => KernelSource {
                entry: entry.to_string(),
                source: match format {
                    BinaryFormat::Ptx => {
                        String::from_utf8_lossy(image.strip_suffix(&[0]).unwrap_or(image))
                            .into_owned()
                    }
                    _ => String::new(),
                },
            },
        }
    }

    /// The code a launch of the kernel `entry` runs (`instance`: which name expression it is).
    fn raw_code(&self, entry: &str, instance: Option<usize>) -> RawCode {
        match &self.inner.code {
            ModuleCode::Source { names, .. } => RawCode::Source {
                src: self.kernel_source(entry),
                names: names.clone(),
                instance,
            },
            ModuleCode::Binary { image, format } => RawCode::Binary {
                entry: entry.to_string(),
                image: image.clone(),
                format: *format,
            },
        }
    }

    /// Compiles the module for `device` and loads it there (CuPy's `RawModule.compile()`), so
    /// that a mistake in the code is found before any launch: a compile error is an
    /// [`Error::KernelCompile`] with the compiler's log and the code numbered as written. The
    /// kernels of the module then launch on that device without compiling or loading anything
    /// (the binary and upload caches hold it). The host is an [`Error::KernelArguments`]; a
    /// build or machine without CUDA an [`Error::CudaUnavailable`]. A module compiled already
    /// is loaded (a GPU's driver checks it then).
    ///
    /// ```
    /// use kusari::{Device, Error, RawModule};
    /// let m = RawModule::new("extern \"C\" __global__ void k(float* x) { x[0] = undeclared; }")
    ///     .unwrap();
    /// assert!(matches!(m.compile(Device::Cpu), Err(Error::KernelArguments { .. })));
    /// if kusari::cuda::is_available() {
    ///     let e = m.compile(Device::Cuda(0)).unwrap_err();
    ///     assert!(matches!(e, Error::KernelCompile { .. }), "{e}");
    /// }
    /// ```
    pub fn compile(&self, device: Device) -> Result<()> {
        Storage::compile_raw(
            &self.inner.label,
            &self.raw_code(&self.inner.label, None),
            device,
        )
    }

    /// The kernel `name` (CuPy's `get_function`): an `extern "C"` kernel of the source (any
    /// other has a C++-mangled compiled name), one of the module's name expressions, or, for a
    /// module compiled already, a kernel by its compiled name. A name the source declares in
    /// no form kusari reads and does not mention at all is an [`Error::InvalidKernel`] listing
    /// the kernels it has, as is a template instance not among the name expressions; one it
    /// mentions but does not declare readably (a kernel made by a macro) is looked up when
    /// first launched, and its arguments are not checked ([`RawKernel::unchecked_reason`]).
    pub fn get_function(&self, name: &str) -> Result<RawKernel> {
        let invalid = |message: String| Error::InvalidKernel {
            kernel: name.to_string(),
            message,
        };
        let (params, instance) = match &self.inner.code {
            ModuleCode::Source { names, .. } if is_name_expression(name) => {
                let Some(i) = names.iter().position(|n| n == name) else {
                    return Err(invalid(format!(
                        "`{name}` is not among the module's name expressions ({}); a template \
                         kernel's instance is compiled only when named in \
                         `RawModule::with_name_expressions`",
                        if names.is_empty() {
                            "it has none".to_string()
                        } else {
                            names.join(", ")
                        }
                    )));
                };
                let source = self.kernel_source(name).source;
                let params = match parse_instance(&source, name) {
                    Some(f) => match f.unchecked {
                        Some(why) => Err(format!("{why}; its arguments are not checked")),
                        None => Ok(f.params),
                    },
                    None => Err(format!(
                        "no template kernel the source declares in a form kusari reads takes \
                         the arguments of `{name}`, so its arguments are not checked"
                    )),
                };
                (params, Some(i))
            }
            ModuleCode::Source { code, .. } => (self.source_params(name, code)?, None),
            ModuleCode::Binary { format, .. } => (self.binary_params(name, *format)?, None),
        };
        // Parameters of types kusari does not read pass their arguments as given; those known
        // only by their size are checked for it alone.
        let unknown: Vec<String> = (params.iter().flatten().enumerate())
            .filter(|(_, p)| p.ty == RawParamType::Unknown)
            .map(|(i, p)| format!("parameter {i} (declared `{}`)", p.decl))
            .collect();
        let sized: Vec<String> = (params.iter().flatten().enumerate())
            .filter(|(_, p)| {
                matches!(
                    p.ty,
                    RawParamType::Compiled {
                        class: CompiledClass::Bytes,
                        ..
                    }
                )
            })
            .map(|(i, _)| i.to_string())
            .collect();
        let mut notes = Vec::new();
        if !unknown.is_empty() {
            notes.push(format!(
                "{} of a type kusari does not read (a struct, a template argument), so its \
                 argument is passed as given, unchecked",
                unknown.join(", ")
            ));
        }
        if !sized.is_empty() {
            notes.push(format!(
                "parameter(s) {} are known only by their size (the compiled module records no \
                 more), so only the widths of their arguments are checked",
                sized.join(", ")
            ));
        }
        Ok(RawKernel {
            inner: Arc::new(KernelInner {
                source: self.kernel_source(name),
                code: self.raw_code(name, instance),
                params,
                unknown: (!notes.is_empty()).then(|| notes.join("; ")),
                loads: RawLoads::default(),
            }),
        })
    }

    /// The parameters of the kernel `name` of a source module, or why they are not read.
    fn source_params(
        &self,
        name: &str,
        code: &str,
    ) -> Result<std::result::Result<Vec<RawParam>, String>> {
        let invalid = |message: String| Error::InvalidKernel {
            kernel: name.to_string(),
            message,
        };
        if !kusari_kernels::names::is_c_identifier(name) {
            return Err(invalid(format!(
                "`{name}` is not a kernel name (a C identifier) or a name expression \
                 (`name<arguments>`)"
            )));
        }
        let functions = self.inner.functions.as_deref().unwrap_or_default();
        Ok(match functions.iter().find(|f| f.name == name) {
            Some(f) if f.extern_c => match &f.unchecked {
                Some(why) => Err(format!("{why}; its arguments are not checked")),
                None => Ok(f.params.clone()),
            },
            Some(_) => {
                return Err(invalid(format!(
                    "`{name}` is not declared `extern \"C\"`: its compiled name is C++-mangled, \
                     so the module cannot be asked for it by name; declare it \
                     `extern \"C\" __global__ void {name}(..)`"
                )));
            }
            None if mentions(code, name) => Err(format!(
                "`{name}` is not declared as `extern \"C\" __global__ void {name}(..)` in a form \
                 kusari reads (a name made by `##`?), so its arguments are not checked; a \
                 template kernel is asked for by a name expression (`{name}<float>`, given to \
                 `RawModule::with_name_expressions`)"
            )),
            None => return Err(self.no_such_kernel(name)),
        })
    }

    /// The parameters of the kernel `name` of a module compiled already, or why they are not
    /// read.
    fn binary_params(
        &self,
        name: &str,
        format: BinaryFormat,
    ) -> Result<std::result::Result<Vec<RawParam>, String>> {
        match &self.inner.functions {
            Ok(functions) => match functions.iter().find(|f| f.name == name) {
                Some(f) => Ok(Ok(f.params.clone())),
                None => Err(self.no_such_kernel(name)),
            },
            Err(why)
                if name
                    .chars()
                    .all(|c| c.is_ascii_alphanumeric() || "_$.".contains(c)) =>
            {
                Ok(Err(format!(
                    "{why} ({format}); its arguments are not checked"
                )))
            }
            Err(_) => Err(Error::InvalidKernel {
                kernel: name.to_string(),
                message: format!("`{name}` is not a compiled kernel's name"),
            }),
        }
    }

    fn no_such_kernel(&self, name: &str) -> Error {
        let names = self.kernel_names();
        let which = match self.inner.code {
            ModuleCode::Source { .. } => "`extern \"C\" __global__` kernels",
            ModuleCode::Binary { .. } => "kernels",
        };
        Error::InvalidKernel {
            kernel: name.to_string(),
            message: format!(
                "the module has no kernel `{name}`; its {which}: {}",
                if names.is_empty() {
                    "none".to_string()
                } else {
                    names.join(", ")
                }
            ),
        }
    }
}

/// Whether `code` holds `name` as a whole identifier.
fn mentions(code: &str, name: &str) -> bool {
    let ident = |c: char| c.is_ascii_alphanumeric() || c == '_';
    code.match_indices(name).any(|(at, _)| {
        !code[..at].chars().next_back().is_some_and(ident)
            && !code[at + name.len()..].chars().next().is_some_and(ident)
    })
}

/// One `extern "C" __global__` kernel of a user's CUDA source (CuPy's `RawKernel`), launched
/// with an explicit grid, block, dynamic shared memory and arguments.
///
/// Each launch checks its arguments against the parameters the source declares, where kusari
/// reads them ([`kusari_kernels::raw::parse_kernels`]), since on a GPU a wrong argument is
/// silent memory corruption: their count; an array for each pointer and a scalar for each
/// value; an array's dtype against the pointee type (bytes — `char*`, `void*` — and types
/// kusari does not know take any array); and each scalar converted to the declared type with
/// [`Scalar::to_dtype`]'s rules (an `int` parameter refuses an int64 beyond its range, an
/// integer parameter a fractional float) and packed at its width. The grid, block and shared
/// memory are checked against CUDA's limits. Each mistake is an
/// [`Error::KernelArguments`] naming the kernel, the parameter (index, name and declaration)
/// and the argument.
///
/// The kernel writes through the pointers it gets: every array sharing a written buffer (a
/// view of it) sees the writes, as in CuPy. What it reaches through them — indices within the
/// arrays' sizes — is the kernel's own business, as in CUDA; the emulated device traps an
/// access past an allocation.
///
/// ```
/// use kusari::{Array, Device, RawKernel, Scalar};
/// let saxpy = RawKernel::new(
///     r#"extern "C" __global__ void saxpy(float a, const float* x, float* y, int n) {
///         int i = blockIdx.x * blockDim.x + threadIdx.x;
///         if (i < n) y[i] = a * x[i] + y[i];
///     }"#,
///     "saxpy",
/// )
/// .unwrap();
/// let x = Array::from_vec(vec![1.0f32, 2.0, 3.0], &[3]).unwrap();
/// // A pointer parameter given a scalar is refused before anything runs.
/// let e = saxpy
///     .launch(1, 32, &[2.0f32.into(), 1.0f32.into(), (&x).into(), 3.into()])
///     .unwrap_err();
/// assert!(e.to_string().contains("parameter 1 `x`"), "{e}");
/// if kusari::cuda::is_available() {
///     let x = x.to_device(Device::Cuda(0)).unwrap();
///     let y = Array::ones(&[3], kusari::DType::F32).unwrap().to_device(Device::Cuda(0)).unwrap();
///     saxpy.launch(1, 32, &[2.0f32.into(), (&x).into(), (&y).into(), 3.into()]).unwrap();
///     assert_eq!(y.to_vec::<f32>().unwrap(), vec![3.0, 5.0, 7.0]);
/// }
/// ```
#[derive(Clone)]
pub struct RawKernel {
    inner: Arc<KernelInner>,
}

struct KernelInner {
    /// The module's source, with this kernel as its entry (for a module compiled already, its
    /// PTX or nothing).
    source: KernelSource,
    /// What a launch runs.
    code: RawCode,
    /// The declared parameters, or why they could not be read.
    params: std::result::Result<Vec<RawParam>, String>,
    /// The parameters of types kusari does not read, whose arguments pass unchecked.
    unknown: Option<String>,
    /// The function loaded per device.
    loads: RawLoads,
}

impl fmt::Debug for RawKernel {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("RawKernel")
            .field("name", &self.name())
            .field("params", &self.inner.params)
            .finish()
    }
}

/// An argument as the launch packs it.
enum Packed<'a> {
    Array(&'a Array),
    Value(u64, usize),
}

impl RawKernel {
    /// The kernel `name` of `code` (CuPy's `RawKernel(code, name)`): a module of its own,
    /// labelled with the kernel's name in compiler messages. Errors as
    /// [`RawModule::get_function`]'s.
    pub fn new(code: &str, name: &str) -> Result<RawKernel> {
        RawKernel::with_options(code, name, &[])
    }

    /// [`RawKernel::new`] with compile options, as [`RawModule::with_options`] takes them.
    pub fn with_options(code: &str, name: &str, options: &[&str]) -> Result<RawKernel> {
        let label = if kusari_kernels::names::is_c_identifier(name) {
            name
        } else {
            "raw_kernel"
        };
        RawModule::labelled(label, code, options, &[])?.get_function(name)
    }

    /// The kernel's name.
    pub fn name(&self) -> &str {
        &self.inner.source.entry
    }

    /// The parameters the source declares, as kusari reads them; `None` when it could not
    /// ([`unchecked_reason`](Self::unchecked_reason) says why), and launches pass their
    /// arguments unchecked.
    pub fn params(&self) -> Option<&[RawParam]> {
        self.inner.params.as_deref().ok()
    }

    /// Why the arguments of this kernel's launches are not checked, or not all of them, if so:
    /// a declaration kusari could not find or that depends on what it cannot know when it
    /// reads the source (`#if __CUDA_ARCH__ >= 800`; then no argument is checked), or
    /// parameters of types it does not read (then theirs are not). Every launch error of the
    /// kernel repeats it.
    ///
    /// ```
    /// use kusari::RawKernel;
    /// let k = RawKernel::new(
    ///     "struct P { float a, b; };\n\
    ///      extern \"C\" __global__ void k(P p, float* out) { out[0] = p.a + p.b; }",
    ///     "k",
    /// )
    /// .unwrap();
    /// let why = k.unchecked_reason().unwrap();
    /// assert!(why.contains("parameter 0 (declared `P p`)"), "{why}");
    /// let e = k.launch(1, 1, &[1.0f32.into(), 2.0f32.into()]).unwrap_err().to_string();
    /// assert!(e.contains("parameter 1 `out`") && e.contains("declared `P p`"), "{e}");
    /// ```
    pub fn unchecked_reason(&self) -> Option<&str> {
        match &self.inner.params {
            Err(why) => Some(why),
            Ok(_) => self.inner.unknown.as_deref(),
        }
    }

    /// `e` naming why this kernel's arguments are not all checked, if they are not: a launch
    /// that fails may have failed for it.
    fn noting_unchecked(&self, e: Error) -> Error {
        let Some(why) = self.unchecked_reason() else {
            return e;
        };
        match e {
            Error::KernelArguments { kernel, msg } => Error::KernelArguments {
                kernel,
                msg: format!("{msg} (note: {why})"),
            },
            Error::Cuda { op, msg } => Error::Cuda {
                op,
                msg: format!("{msg} (note: {why})"),
            },
            other => other,
        }
    }

    /// The source compiled for it (its module's), with the kernel as the entry point: what a
    /// test gives NVRTC to check that it compiles without a GPU.
    pub fn source(&self) -> &KernelSource {
        &self.inner.source
    }

    /// The devices this kernel is loaded on (CuPy's `cached_codes` role for a raw kernel,
    /// whose source is [`source`](Self::source)): each first launch on a device compiles
    /// (through the binary cache) and loads it there. Empty before a launch, and in a build
    /// or on a machine without CUDA.
    pub fn loaded_devices(&self) -> Vec<Device> {
        (self.inner.loads.ordinals().into_iter())
            .map(Device::Cuda)
            .collect()
    }

    /// Launches the kernel on a `grid` of blocks of `block` threads with `args` (CuPy's
    /// `kernel(grid, block, args)`), on the CUDA device of its array arguments (the default
    /// device when there are none). The work is queued on the device's stream, like every
    /// other CUDA operation; reading an array back waits for it.
    ///
    /// The first launch on a device compiles the module (through the binary cache) and loads
    /// it (through the upload cache); later launches do neither. Errors: see [`RawKernel`];
    /// a host array is an [`Error::KernelArguments`] naming it, arrays on two devices an
    /// [`Error::DeviceMismatch`], code that does not compile an [`Error::KernelCompile`] with
    /// the compiler's log and the code numbered as the user numbers it, and no CUDA device an
    /// [`Error::CudaUnavailable`].
    pub fn launch(
        &self,
        grid: impl Into<Dim3>,
        block: impl Into<Dim3>,
        args: &[KernelArg<'_>],
    ) -> Result<()> {
        self.launch_with_shared_mem(grid, block, 0, args)
    }

    /// [`launch`](Self::launch) with `shared_mem` bytes of dynamic shared memory per block
    /// (CuPy's `shared_mem=`), which the kernel declares as `extern __shared__ T name[];`. At
    /// most 48 KiB, CUDA's default limit.
    pub fn launch_with_shared_mem(
        &self,
        grid: impl Into<Dim3>,
        block: impl Into<Dim3>,
        shared_mem: usize,
        args: &[KernelArg<'_>],
    ) -> Result<()> {
        let (Dim3(grid), Dim3(block)) = (grid.into(), block.into());
        self.launch_checked(grid, block, shared_mem, args)
            .map_err(|e| self.noting_unchecked(e))
    }

    fn launch_checked(
        &self,
        grid: [u32; 3],
        block: [u32; 3],
        shared_mem: usize,
        args: &[KernelArg<'_>],
    ) -> Result<()> {
        check_launch(grid, block, shared_mem).map_err(|msg| self.arg_error(msg))?;
        let packed = self.pack(args)?;
        let raw_args: Vec<RawArg<(&Storage, &Layout)>> = packed
            .iter()
            .map(|p| match *p {
                Packed::Array(a) => RawArg::Array((a.storage(), a.layout())),
                Packed::Value(bits, width) => RawArg::Value(bits, width),
            })
            .collect();
        // `check_launch` kept `shared_mem` within 48 KiB.
        let dims = (grid, block, shared_mem as u32);
        // SAFETY: the arguments were checked against the declared parameters where they could
        // be read (count, pointer or value, widths); what the kernel reaches through the
        // pointers is its own business, as documented.
        unsafe {
            Storage::launch_raw(
                self.name(),
                &self.inner.code,
                &self.inner.loads,
                dims,
                &raw_args,
                default_device(),
            )
        }
    }

    fn arg_error(&self, msg: String) -> Error {
        Error::KernelArguments {
            kernel: self.name().to_string(),
            msg,
        }
    }

    /// The arguments checked against the declared parameters and packed.
    fn pack<'a>(&self, args: &[KernelArg<'a>]) -> Result<Vec<Packed<'a>>> {
        let Ok(params) = &self.inner.params else {
            return Ok(args
                .iter()
                .map(|a| match *a {
                    KernelArg::Array(a) => Packed::Array(a),
                    KernelArg::Scalar(s) => {
                        let (bits, width) = s.to_bits();
                        Packed::Value(bits, width)
                    }
                })
                .collect());
        };
        if params.len() != args.len() {
            let decls: Vec<&str> = params.iter().map(|p| p.decl.as_str()).collect();
            return Err(self.arg_error(format!(
                "it takes {} parameter(s) ({}), but {} argument(s) were given",
                params.len(),
                decls.join(", "),
                args.len()
            )));
        }
        params
            .iter()
            .zip(args)
            .enumerate()
            .map(|(i, (p, a))| self.pack_one(i, p, *a))
            .collect()
    }

    fn pack_one<'a>(&self, i: usize, p: &RawParam, arg: KernelArg<'a>) -> Result<Packed<'a>> {
        let param = match &p.name {
            Some(n) => format!("parameter {i} `{n}` (declared `{}`)", p.decl),
            None => format!("parameter {i} (declared `{}`)", p.decl),
        };
        match (p.ty, arg) {
            (RawParamType::Pointer(pointee), KernelArg::Array(a)) => match pointee {
                Some(t) if !t.addresses(ScalarType::from(a.dtype())) => {
                    Err(self.arg_error(format!(
                        "{param} points to {t}, but argument {i} is a {} array",
                        a.dtype()
                    )))
                }
                _ => Ok(Packed::Array(a)),
            },
            (RawParamType::Pointer(_), KernelArg::Scalar(s)) => Err(self.arg_error(format!(
                "{param} is a pointer, but argument {i} is the scalar {s}; pass an array"
            ))),
            (RawParamType::Scalar(t), KernelArg::Array(a)) => Err(self.arg_error(format!(
                "{param} is a {t} value, but argument {i} is a {} array of shape {}; pass a \
                 scalar",
                a.dtype(),
                show_shape(a.shape())
            ))),
            (RawParamType::Scalar(t), KernelArg::Scalar(s)) => match scalar_bits(t, s) {
                Some((bits, width)) => Ok(Packed::Value(bits, width)),
                None => Err(self.arg_error(format!(
                    "{param} cannot hold argument {i}, {s}: it does not convert to {t} without \
                     changing its value"
                ))),
            },
            (RawParamType::Unknown, KernelArg::Array(a)) => Ok(Packed::Array(a)),
            (RawParamType::Unknown, KernelArg::Scalar(s)) => {
                let (bits, width) = s.to_bits();
                Ok(Packed::Value(bits, width))
            }
            (ty @ RawParamType::Compiled { bytes, class }, KernelArg::Array(a)) => match class {
                CompiledClass::IntegerOrPointer => Ok(Packed::Array(a)),
                CompiledClass::Bytes if bytes == 8 => Ok(Packed::Array(a)),
                _ => Err(self.arg_error(format!(
                    "{param} is a {ty}, but argument {i} is a {} array of shape {}; pass a scalar",
                    a.dtype(),
                    show_shape(a.shape())
                ))),
            },
            (ty @ RawParamType::Compiled { bytes, class }, KernelArg::Scalar(s)) => match class {
                CompiledClass::Integer | CompiledClass::IntegerOrPointer => {
                    let width = u8::try_from(bytes).unwrap_or(0);
                    scalar_bits(CType::Int(width), s)
                        .or_else(|| scalar_bits(CType::UInt(width), s))
                        .map(|(bits, width)| Packed::Value(bits, width))
                        .ok_or_else(|| {
                            self.arg_error(format!(
                                "{param} is a {ty}, but argument {i}, {s}, is not an integer \
                                 that fits it"
                            ))
                        })
                }
                CompiledClass::Bytes => match s.to_bits() {
                    (bits, width) if width == bytes => Ok(Packed::Value(bits, width)),
                    (_, width) => Err(self.arg_error(format!(
                        "{param} is a {ty}, but argument {i}, {s}, is {width} byte(s); pass a \
                         scalar of exactly {bytes} byte(s) (the module records only the size)"
                    ))),
                },
            },
        }
    }
}

fn show_shape(shape: &[usize]) -> String {
    format!("{shape:?}")
}

/// `s` as a value of the C type `t` (bits and width), converted by [`Scalar::to_dtype`]'s
/// rules; `None` where that would change it.
fn scalar_bits(t: CType, s: Scalar) -> Option<(u64, usize)> {
    let via = |d: DType| s.to_dtype(d).map(Scalar::to_bits);
    match t {
        CType::Bool => via(DType::Bool),
        CType::Half => via(DType::F16),
        CType::BFloat16 => via(DType::BF16),
        CType::Float => via(DType::F32),
        CType::Double => via(DType::F64),
        CType::Int(_) | CType::UInt(_) => {
            let Some(Scalar::I64(v)) = s.to_dtype(DType::I64) else {
                return None;
            };
            let width = t.size();
            let bits = 8 * width as u32;
            let fits = match t {
                CType::Int(_) if width < 8 => {
                    let half = 1i64 << (bits - 1);
                    (-half..half).contains(&v)
                }
                CType::Int(_) => true,
                _ if width < 8 => (0..1i64 << bits).contains(&v),
                _ => v >= 0,
            };
            let mask = if width < 8 {
                (1u64 << bits) - 1
            } else {
                u64::MAX
            };
            fits.then_some(((v as u64) & mask, width))
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn scalars_convert_to_the_declared_c_type_or_are_refused() {
        assert_eq!(
            scalar_bits(CType::Int(4), Scalar::from(-1i64)),
            Some((0xffff_ffff, 4))
        );
        assert_eq!(scalar_bits(CType::Int(4), Scalar::from(1i64 << 40)), None);
        assert_eq!(scalar_bits(CType::UInt(4), Scalar::from(-1i32)), None);
        assert_eq!(
            scalar_bits(CType::UInt(4), Scalar::from(u32::MAX as i64)),
            Some((u64::from(u32::MAX), 4))
        );
        assert_eq!(
            scalar_bits(CType::Int(1), Scalar::from(-128i32)),
            Some((0x80, 1))
        );
        assert_eq!(scalar_bits(CType::Int(1), Scalar::from(128i32)), None);
        assert_eq!(
            scalar_bits(CType::UInt(2), Scalar::from(65535i32)),
            Some((65535, 2))
        );
        assert_eq!(
            scalar_bits(CType::Int(8), Scalar::from(i64::MIN)),
            Some((i64::MIN as u64, 8))
        );
        assert_eq!(scalar_bits(CType::UInt(8), Scalar::from(-1i64)), None);
        assert_eq!(scalar_bits(CType::Int(4), Scalar::from(2.5f64)), None);
        assert_eq!(
            scalar_bits(CType::Int(4), Scalar::from(2.0f64)),
            Some((2, 4))
        );
        assert_eq!(
            scalar_bits(CType::Float, Scalar::from(3i32)),
            Some((u64::from(3.0f32.to_bits()), 4))
        );
        assert_eq!(scalar_bits(CType::Float, Scalar::from(1e300f64)), None);
        assert_eq!(scalar_bits(CType::Bool, Scalar::from(1i32)), None);
        assert_eq!(scalar_bits(CType::Bool, Scalar::from(true)), Some((1, 1)));
    }

    /// The checks before any device is involved, in every build: with host arrays, a launch
    /// whose arguments fit the declaration fails only because the arrays are on the host.
    #[test]
    fn arguments_are_checked_against_the_declaration_before_the_device() {
        let k = RawKernel::new(
            "extern \"C\" __global__ void k(const double* x, unsigned int n, bool flag) {}",
            "k",
        )
        .unwrap();
        let x = Array::zeros(&[3], DType::F64).unwrap();
        let x32 = Array::zeros(&[3], DType::F32).unwrap();
        let err = |args: &[KernelArg<'_>]| match k.launch(1, 1, args).unwrap_err() {
            Error::KernelArguments { kernel, msg } => {
                assert_eq!(kernel, "k");
                msg
            }
            other => panic!("{other:?}"),
        };
        assert!(err(&[(&x).into()]).contains("takes 3 parameter(s)"));
        assert!(err(&[(&x32).into(), 3.into(), true.into()])
            .contains("parameter 0 `x` (declared `const double* x`) points to double, but argument 0 is a float32 array"));
        assert!(err(&[(&x).into(), (-3).into(), true.into()]).contains(
            "parameter 1 `n` (declared `unsigned int n`) cannot hold argument 1, -3 (int32)"
        ));
        assert!(
            err(&[(&x).into(), 3.into(), 1.into()])
                .contains("parameter 2 `flag` (declared `bool flag`) cannot hold argument 2")
        );
        assert!(
            err(&[(&x).into(), 3.into(), true.into()])
                .contains("argument 0 is an array on the host (float64 [3])")
        );
        assert!(err(&[(&x).into(), 3.into(), true.into()]).contains("to_device"));
        let e = k
            .launch(1, 2048, &[(&x).into(), 3.into(), true.into()])
            .unwrap_err();
        assert!(e.to_string().contains("2048 threads"), "{e}");
    }

    #[test]
    fn dims_take_one_to_three_numbers() {
        assert_eq!(Dim3::from(5), Dim3([5, 1, 1]));
        assert_eq!(Dim3::from((5,)), Dim3([5, 1, 1]));
        assert_eq!(Dim3::from((5, 6)), Dim3([5, 6, 1]));
        assert_eq!(Dim3::from([5, 6]), Dim3([5, 6, 1]));
        assert_eq!(Dim3::from((5, 6, 7)), Dim3([5, 6, 7]));
    }

    #[test]
    fn mentions_matches_whole_identifiers() {
        assert!(mentions("KERNEL(my_kernel)", "my_kernel"));
        assert!(!mentions("my_kernel2(x)", "my_kernel"));
        assert!(!mentions("a_my_kernel", "my_kernel"));
    }
}
