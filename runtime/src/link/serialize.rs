//! Saving and loading a link's parameters as a [safetensors](https://huggingface.co/docs/safetensors)
//! file, by name.
//!
//! A parameter's tensor is named by its [path](Link::named_params) without the leading `/`:
//! `/l1/W` is saved as `l1/W`. Dtypes map one to one (`bool` → `BOOL`, `int32` → `I32`, `int64` →
//! `I64`, `float16` → `F16`, `bfloat16` → `BF16`, `float32` → `F32`, `float64` → `F64`); data is
//! little-endian in C order, copied to the host from CUDA.

use std::borrow::Cow;
use std::collections::BTreeSet;
use std::path::Path;

use safetensors::tensor::{Dtype, SafeTensors, TensorView, View};

use super::{Link, Parameter};
use crate::dtype::with_dtype;
use crate::error::{Error, Result};
use crate::{Array, DType, Element};
use kusari_kernels::atomic_file;

/// How many of a file's tensor names an error lists when a parameter is missing from it.
const LISTED_NAMES: usize = 8;

/// How [`load_with`] and [`load_from_bytes_with`] treat a file that does not match the link
/// exactly.
///
/// ```
/// let options = kusari::link::LoadOptions::default();
/// assert!(options.strict);
/// ```
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct LoadOptions {
    /// Whether tensors in the file that the link has no parameter for are an error (`true`, the
    /// default) or ignored. A parameter missing from the file is an error either way.
    pub strict: bool,
}

impl Default for LoadOptions {
    fn default() -> Self {
        LoadOptions { strict: true }
    }
}

/// Saves every parameter of `link` to a safetensors file at `path`, replacing it atomically: the
/// file is written beside it, under a temporary name, flushed to disk, then renamed over it, so
/// a save that fails or is killed half-way leaves the old checkpoint as it was.
///
/// - **File mode** (Unix): a new checkpoint gets the mode the process's umask gives (`0644`
///   under the usual umask `022`, as `std::fs::File::create` would), so that others can load
///   it where the umask lets them; a replaced checkpoint keeps its own mode.
/// - **Temporary files**: the temporary file is `.<name>.kusari-tmp-<host>-<pid>-<n>` in the
///   checkpoint's folder. A save that is killed leaves it behind; the next [`save`] or [`load`]
///   of the same path removes it, once the process that wrote it is gone (on Linux, a process of
///   this host whose id no longer runs) or it is a day old (any host, any system).
///
/// The file's bytes are put together in memory (as [`save_to_bytes`] does) before they are
/// written. Every parameter must be initialised ([`Error::UninitializedParams`] names those that
/// are not); a file that cannot be written is [`Error::CheckpointFile`].
///
/// ```
/// use kusari::link::{load, save, Linear};
/// use kusari::{DType, Link, Result};
/// # fn main() -> Result<()> {
/// let path = std::env::temp_dir().join(format!("kusari-doc-save-{}.safetensors", std::process::id()));
/// let trained = Linear::new(Some(3), 2, false, DType::F32)?;
/// save(&trained, &path)?;
///
/// let restored = Linear::new(None, 2, false, DType::F32)?; // W's shape comes from the file
/// load(&restored, &path)?;
/// assert_eq!(restored.W.array()?.to_vec::<f32>()?, trained.W.array()?.to_vec::<f32>()?);
/// # std::fs::remove_file(&path).ok();
/// # Ok(()) }
/// ```
pub fn save(link: &dyn Link, path: impl AsRef<Path>) -> Result<()> {
    let path = path.as_ref();
    let file_error = |msg: String| Error::CheckpointFile {
        op: "save",
        file: path.display().to_string(),
        msg,
    };
    let tensors = host_tensors(link, "save")?;
    let bytes = safetensors::serialize(named(&tensors), None)
        .map_err(|e| file_error(format!("cannot serialise the parameters: {e}")))?;
    drop(tensors);
    atomic_file::remove_stale(path);
    atomic_file::write(path, &bytes).map_err(|e| file_error(format!("cannot write the file: {e}")))
}

/// The bytes of the safetensors file [`save`] would write.
///
/// ```
/// use kusari::link::{save_to_bytes, EltwiseParamProduct};
/// use kusari::{DType, Result};
/// # fn main() -> Result<()> {
/// let bytes = save_to_bytes(&EltwiseParamProduct::new(&[2, 3], DType::F64)?)?;
/// // An 8-byte header length, the JSON header, then 6 float64 values.
/// assert!(bytes.len() > 8 + 6 * 8);
/// # Ok(()) }
/// ```
pub fn save_to_bytes(link: &dyn Link) -> Result<Vec<u8>> {
    let tensors = host_tensors(link, "save_to_bytes")?;
    safetensors::serialize(named(&tensors), None).map_err(|e| Error::CheckpointFile {
        op: "save_to_bytes",
        file: "<memory>".to_string(),
        msg: format!("cannot serialise the parameters: {e}"),
    })
}

/// Loads every parameter of `link` from the safetensors file at `path`, strictly: see
/// [`load_from_bytes_with`] for the rules. A file that cannot be read or parsed is
/// [`Error::CheckpointFile`] naming it.
///
/// ```
/// use kusari::link::{load, Linear};
/// use kusari::{DType, Error, Result};
/// # fn main() -> Result<()> {
/// let l = Linear::new(Some(3), 2, false, DType::F32)?;
/// let err = load(&l, "no/such/model.safetensors").unwrap_err();
/// assert!(matches!(err, Error::CheckpointFile { .. }));
/// assert!(err.to_string().contains("no/such/model.safetensors"));
/// # Ok(()) }
/// ```
pub fn load(link: &dyn Link, path: impl AsRef<Path>) -> Result<()> {
    load_with(link, path, LoadOptions::default())
}

/// [`load`] with [`LoadOptions`].
///
/// ```
/// use kusari::link::{load_with, save, EltwiseParamProduct, LoadOptions, Linear};
/// use kusari::{DType, Result};
/// # fn main() -> Result<()> {
/// let path = std::env::temp_dir().join(format!("kusari-doc-load-with-{}.safetensors", std::process::id()));
/// save(&Linear::new(Some(2), 2, false, DType::F32)?, &path)?; // tensors W and b
///
/// let scale = EltwiseParamProduct::new(&[2, 2], DType::F32)?; // a parameter W, no b
/// assert!(load_with(&scale, &path, LoadOptions::default()).is_err());
/// load_with(&scale, &path, LoadOptions { strict: false })?;
/// # std::fs::remove_file(&path).ok();
/// # Ok(()) }
/// ```
pub fn load_with(link: &dyn Link, path: impl AsRef<Path>, options: LoadOptions) -> Result<()> {
    let path = path.as_ref();
    let file = path.display().to_string();
    atomic_file::remove_stale(path);
    let bytes = std::fs::read(path).map_err(|e| Error::CheckpointFile {
        op: "load",
        file: file.clone(),
        msg: format!("cannot read the file: {e}"),
    })?;
    load_checkpoint(link, &bytes, options, "load", file)
}

/// Loads every parameter of `link` from the bytes of a safetensors file, strictly: see
/// [`load_from_bytes_with`].
///
/// ```
/// use kusari::link::{load_from_bytes, save_to_bytes, EltwiseParamProduct};
/// use kusari::{DType, Result};
/// # fn main() -> Result<()> {
/// let a = EltwiseParamProduct::new(&[3], DType::F64)?;
/// a.W.set_array(kusari::Array::from_vec(vec![1.0, 2.0, 3.0], &[3])?)?;
/// let b = EltwiseParamProduct::new(&[3], DType::F64)?;
/// load_from_bytes(&b, &save_to_bytes(&a)?)?;
/// assert_eq!(b.W.array()?.to_vec::<f64>()?, vec![1.0, 2.0, 3.0]);
/// # Ok(()) }
/// ```
pub fn load_from_bytes(link: &dyn Link, bytes: &[u8]) -> Result<()> {
    load_from_bytes_with(link, bytes, LoadOptions::default())
}

/// Loads every parameter of `link` from the bytes of a safetensors file.
///
/// Each parameter takes the tensor of its name, on the parameter's device. The tensor must have
/// the parameter's dtype and, if the parameter is initialised, its shape; an uninitialised
/// (lazy) parameter is initialised with the tensor's shape. A parameter with no tensor is an
/// error, and so, when `options.strict`, is a tensor with no parameter.
///
/// Everything is checked before any parameter changes: [`Error::CheckpointMismatch`] lists every
/// problem found, and the link is left as it was. Bytes that are not a safetensors file are
/// [`Error::CheckpointFile`].
///
/// ```
/// use kusari::link::{load_from_bytes_with, save_to_bytes, EltwiseParamProduct, LoadOptions};
/// use kusari::{DType, Error, Result};
/// # fn main() -> Result<()> {
/// let bytes = save_to_bytes(&EltwiseParamProduct::new(&[3], DType::F64)?)?;
/// let other = EltwiseParamProduct::new(&[4], DType::F64)?;
/// let err = load_from_bytes_with(&other, &bytes, LoadOptions::default()).unwrap_err();
/// assert!(matches!(err, Error::CheckpointMismatch { .. }));
/// assert!(err.to_string().contains("W: shape [4] in the link, [3] in the file"), "{err}");
/// # Ok(()) }
/// ```
pub fn load_from_bytes_with(link: &dyn Link, bytes: &[u8], options: LoadOptions) -> Result<()> {
    let file = format!("<{} bytes>", bytes.len());
    load_checkpoint(link, bytes, options, "load_from_bytes", file)
}

/// A parameter's values on the host, as safetensors stores them.
struct HostTensor {
    name: String,
    dtype: Dtype,
    shape: Vec<usize>,
    data: Vec<u8>,
}

impl View for &HostTensor {
    fn dtype(&self) -> Dtype {
        self.dtype
    }

    fn shape(&self) -> &[usize] {
        &self.shape
    }

    fn data(&self) -> Cow<'_, [u8]> {
        Cow::Borrowed(&self.data)
    }

    fn data_len(&self) -> usize {
        self.data.len()
    }
}

fn named(tensors: &[HostTensor]) -> impl Iterator<Item = (&str, &HostTensor)> {
    tensors.iter().map(|t| (t.name.as_str(), t))
}

/// The tensor name of a parameter path: the path without its leading `/`.
fn tensor_name(path: &str) -> &str {
    path.strip_prefix('/').unwrap_or(path)
}

/// Every parameter of `link` on the host, or the names of those not initialised.
fn host_tensors(link: &dyn Link, op: &'static str) -> Result<Vec<HostTensor>> {
    let params = link.named_state();
    let uninitialised: Vec<String> = params
        .iter()
        .filter(|(_, p)| !p.is_initialized())
        .map(|(path, _)| tensor_name(path).to_string())
        .collect();
    if !uninitialised.is_empty() {
        return Err(Error::UninitializedParams {
            op,
            names: uninitialised,
        });
    }
    params
        .iter()
        .map(|(path, p)| {
            let array = p.array()?;
            let data = with_dtype!(array.dtype(), T => T::encode_le(&array.to_vec::<T>()?));
            Ok(HostTensor {
                name: tensor_name(path).to_string(),
                dtype: safetensors_dtype(array.dtype()),
                shape: array.shape().to_vec(),
                data,
            })
        })
        .collect()
}

/// Checks the whole file against the link, then sets every parameter.
fn load_checkpoint(
    link: &dyn Link,
    bytes: &[u8],
    options: LoadOptions,
    op: &'static str,
    file: String,
) -> Result<()> {
    let checkpoint = match SafeTensors::deserialize(bytes) {
        Ok(checkpoint) => checkpoint,
        Err(e) => {
            return Err(Error::CheckpointFile {
                op,
                file,
                msg: format!("not a valid safetensors file: {e}"),
            });
        }
    };
    let params = link.named_state();
    let matched = match match_tensors(&params, &checkpoint, options) {
        Ok(matched) => matched,
        Err(problems) => {
            return Err(Error::CheckpointMismatch { op, file, problems });
        }
    };
    // Converting and moving the values can fail (a CUDA device): do it all before setting any.
    let arrays = matched
        .iter()
        .map(|(p, view)| array_from_view(view, p.dtype()).to_device(p.device()))
        .collect::<Result<Vec<_>>>()?;
    // Lazy parameters take the file's values directly: no initializer runs (none can fail, and
    // the default generator is not drawn from).
    for ((p, _), array) in matched.into_iter().zip(arrays) {
        p.assign(array)?;
    }
    Ok(())
}

/// Each parameter with its tensor, or every problem: missing tensors, extra tensors (when
/// strict), dtypes and shapes that differ.
fn match_tensors<'a, 'p>(
    params: &[(String, &'p Parameter)],
    checkpoint: &SafeTensors<'a>,
    options: LoadOptions,
) -> std::result::Result<Vec<(&'p Parameter, TensorView<'a>)>, Vec<String>> {
    let mut problems = Vec::new();
    let mut missing = Vec::new();
    let mut matched = Vec::new();
    for (path, p) in params {
        let name = tensor_name(path);
        let Ok(view) = checkpoint.tensor(name) else {
            missing.push(name.to_string());
            continue;
        };
        if let Some(problem) = mismatch(name, p, &view) {
            problems.push(problem);
        } else {
            matched.push((*p, view));
        }
    }
    let mut available: Vec<&str> = checkpoint.names();
    available.sort_unstable();
    if !missing.is_empty() {
        problems.insert(
            0,
            format!(
                "no tensor for parameter(s) {}; the file has {} tensor(s): {}",
                missing.join(", "),
                available.len(),
                first_names(&available)
            ),
        );
    }
    if options.strict {
        let known: BTreeSet<&str> = params.iter().map(|(path, _)| tensor_name(path)).collect();
        let extra: Vec<&str> = available
            .into_iter()
            .filter(|name| !known.contains(name))
            .collect();
        if !extra.is_empty() {
            problems.push(format!(
                "the file has tensor(s) the link has no parameter for: {} (load with LoadOptions {{ strict: false }} to ignore them)",
                extra.join(", ")
            ));
        }
    }
    if problems.is_empty() {
        Ok(matched)
    } else {
        Err(problems)
    }
}

/// Why the tensor `name` cannot be loaded into `p`, if it cannot.
fn mismatch(name: &str, p: &Parameter, view: &TensorView<'_>) -> Option<String> {
    if kusari_dtype(view.dtype()) != Some(p.dtype()) {
        return Some(format!(
            "{name}: dtype {} in the link, {} in the file",
            p.dtype(),
            describe_dtype(view.dtype())
        ));
    }
    match p.shape() {
        Some(shape) if shape != view.shape() => Some(format!(
            "{name}: shape {shape:?} in the link, {:?} in the file",
            view.shape()
        )),
        _ => None,
    }
}

/// Up to [`LISTED_NAMES`] names, then how many more there are.
fn first_names(names: &[&str]) -> String {
    if names.is_empty() {
        return "none".to_string();
    }
    let listed = names[..names.len().min(LISTED_NAMES)].join(", ");
    match names.len().checked_sub(LISTED_NAMES) {
        Some(more) if more > 0 => format!("{listed} and {more} more"),
        _ => listed,
    }
}

/// A tensor's values as a host array of `dtype`, the tensor's (checked by [`mismatch`]).
fn array_from_view(view: &TensorView<'_>, dtype: DType) -> Array {
    with_dtype!(dtype, T => Array::from_cpu_vec(T::decode_le(view.data()), view.shape()))
}

fn safetensors_dtype(dtype: DType) -> Dtype {
    match dtype {
        DType::Bool => Dtype::BOOL,
        DType::I8 => Dtype::I8,
        DType::I16 => Dtype::I16,
        DType::I32 => Dtype::I32,
        DType::I64 => Dtype::I64,
        DType::U8 => Dtype::U8,
        DType::U16 => Dtype::U16,
        DType::U32 => Dtype::U32,
        DType::U64 => Dtype::U64,
        DType::F16 => Dtype::F16,
        DType::BF16 => Dtype::BF16,
        DType::F32 => Dtype::F32,
        DType::F64 => Dtype::F64,
    }
}

fn kusari_dtype(dtype: Dtype) -> Option<DType> {
    DType::ALL
        .into_iter()
        .find(|&d| safetensors_dtype(d) == dtype)
}

/// A file's dtype in kusari's words where kusari has it (`float64 (F64)`), else safetensors'.
fn describe_dtype(dtype: Dtype) -> String {
    match kusari_dtype(dtype) {
        Some(d) => format!("{d} ({dtype})"),
        None => format!("{dtype} (not a kusari dtype)"),
    }
}

/// An element's little-endian bytes, as safetensors stores them.
trait LeBytes: Element {
    /// The bytes of `values`.
    fn encode_le(values: &[Self]) -> Vec<u8>;
    /// The elements of `bytes`, whose length is a multiple of the element size.
    fn decode_le(bytes: &[u8]) -> Vec<Self>;
}

impl LeBytes for bool {
    fn encode_le(values: &[Self]) -> Vec<u8> {
        values.iter().map(|&v| u8::from(v)).collect()
    }

    fn decode_le(bytes: &[u8]) -> Vec<Self> {
        bytes.iter().map(|&b| b != 0).collect()
    }
}

macro_rules! impl_le_bytes {
    ($($t:ty),*) => {$(
        impl LeBytes for $t {
            fn encode_le(values: &[Self]) -> Vec<u8> {
                values.iter().flat_map(|v| v.to_le_bytes()).collect()
            }

            fn decode_le(bytes: &[u8]) -> Vec<Self> {
                bytes
                    .chunks_exact(size_of::<$t>())
                    .map(|chunk| {
                        let mut le = [0u8; size_of::<$t>()];
                        le.copy_from_slice(chunk);
                        <$t>::from_le_bytes(le)
                    })
                    .collect()
            }
        }
    )*};
}

impl_le_bytes!(
    i8,
    i16,
    i32,
    i64,
    u8,
    u16,
    u32,
    u64,
    half::f16,
    half::bf16,
    f32,
    f64
);
