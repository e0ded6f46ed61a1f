//! Launching elementwise kernels: bind the placeholders, pick the variant (contiguous or
//! strided, 32- or 64-bit indexing), compile it once (NVRTC through the on-disk binary cache),
//! load it once per device (the upload cache), and launch it over the broadcast shape.
//!
//! A warm launch takes two read-locked map lookups and no string work: the parsed signature is
//! memoised per kernel and the loaded function per (variant, device).

use std::collections::HashMap;
use std::ffi::c_void;
use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::{Arc, OnceLock, PoisonError, RwLock};

use kusari_kernels::cache::CacheKey;
use kusari_kernels::codegen::{
    Aliasing, IndexWidth, Indexing, KernelSource, generate_code_aliasing,
};
use kusari_kernels::compile::{Target, global_cache};
use kusari_kernels::upload::UploadCache;
use kusari_kernels::{ElementwiseDef, ElementwiseSignature, KernelStats, ScalarType};

use super::device::{CudaDevice, device};
use super::driver::{Backend, BinaryTarget, Function, Module};
use super::memory::CudaStorage;
use crate::error::{Error, Result};
use crate::launch_plan::{CachedVariant, LaunchArgs, Operand, aliasing_of, plan};
use crate::layout::Layout;
use crate::scalar::Scalar;
use crate::{DType, Device};

/// A kernel's identity for the memo tables: its strings' addresses and lengths (the preamble,
/// `loop_prep` and `after_loop` included, so a kernel that differs only there is another kernel). Two kernels with
/// the same addresses are the same kernel; equal kernels at other addresses get their own entry
/// and share the compiled binary through the binary cache, whose key is the source.
#[derive(Clone, Copy, PartialEq, Eq, Hash)]
struct KernelId([(usize, usize); 8]);

impl KernelId {
    fn of(k: &ElementwiseDef) -> Self {
        let id = |s: &str| (s.as_ptr() as usize, s.len());
        KernelId([
            id(k.name),
            id(k.inputs),
            id(k.outputs),
            id(k.params),
            id(k.body),
            id(k.preamble),
            id(k.loop_prep),
            id(k.after_loop),
        ])
    }
}

/// What a launch needs to know about a kernel, beyond its strings.
struct Parsed {
    sig: ElementwiseSignature,
    /// Loaded functions per variant.
    variants: RwLock<HashMap<VariantKey, Arc<Loaded>>>,
}

#[derive(Clone, PartialEq, Eq, Hash)]
struct VariantKey {
    types: Vec<(char, DType)>,
    indexing: Indexing,
    width: IndexWidth,
    aliasing: Aliasing,
    ordinal: usize,
}

/// A kernel function loaded on a device (keeps its module alive).
pub(crate) struct Loaded {
    pub(super) function: Function,
    pub(super) _module: Module,
}

// SAFETY: a loaded function is a handle the driver lets any thread launch; it is never mutated.
unsafe impl Send for Loaded {}
// SAFETY: as above.
unsafe impl Sync for Loaded {}

/// A kernel's arguments as a launch passes them: one value per parameter, in order, each
/// recorded with the width it was packed in.
#[derive(Default)]
pub(crate) struct KernelArgs {
    /// Scalars and pointers, each in an 8-byte slot (little-endian, so a narrower value is in
    /// the slot's first bytes).
    slots: Vec<u64>,
    /// Structs passed by value, as 8-byte words.
    blobs: Vec<Vec<i64>>,
    /// For each parameter: a slot or a blob, and its width in bytes.
    order: Vec<(Arg, usize)>,
}

#[derive(Clone, Copy)]
enum Arg {
    Slot(usize),
    Blob(usize),
}

impl KernelArgs {
    /// A device pointer.
    pub(crate) fn pointer(&mut self, p: u64) -> &mut Self {
        self.value(p, 8)
    }

    /// A `long long`.
    pub(crate) fn long(&mut self, v: i64) -> &mut Self {
        self.value(v as u64, 8)
    }

    /// A value of `width` bytes, in the low bytes of `bits`.
    pub(crate) fn value(&mut self, bits: u64, width: usize) -> &mut Self {
        self.order.push((Arg::Slot(self.slots.len()), width));
        self.slots.push(bits);
        self
    }

    /// A struct of 8-byte words passed by value.
    pub(crate) fn words(&mut self, words: Vec<i64>) -> &mut Self {
        self.order
            .push((Arg::Blob(self.blobs.len()), words.len() * 8));
        self.blobs.push(words);
        self
    }

    /// The `kernelParams` array (pointers into `self`, valid while it is neither moved nor
    /// changed) and each parameter's width.
    fn params(&mut self) -> (Vec<*mut c_void>, Vec<usize>) {
        let slots = self.slots.as_mut_ptr();
        let mut ptrs = Vec::with_capacity(self.order.len());
        let mut widths = Vec::with_capacity(self.order.len());
        for &(arg, width) in &self.order {
            ptrs.push(match arg {
                // SAFETY: `i` indexes `slots`.
                Arg::Slot(i) => unsafe { slots.add(i) }.cast::<c_void>(),
                Arg::Blob(i) => self.blobs[i].as_mut_ptr().cast::<c_void>(),
            });
            widths.push(width);
        }
        (ptrs, widths)
    }
}

impl Loaded {
    /// Launches a one-dimensional grid with `args`.
    ///
    /// # Safety
    /// `args` must match the kernel's parameter list in count, order and types, and every
    /// device pointer among them must be valid for what the kernel reaches.
    pub(crate) unsafe fn launch_args(
        &self,
        dev: &CudaDevice,
        grid: u32,
        block: u32,
        args: &mut KernelArgs,
        op: &str,
    ) -> Result<()> {
        // SAFETY: forwarded contract.
        unsafe { self.launch_dims(dev, [grid, 1, 1], [block, 1, 1], args, op) }
    }

    /// [`Loaded::launch_args`] with a three-dimensional grid and block.
    ///
    /// # Safety
    /// As for [`Loaded::launch_args`].
    pub(crate) unsafe fn launch_dims(
        &self,
        dev: &CudaDevice,
        grid: [u32; 3],
        block: [u32; 3],
        args: &mut KernelArgs,
        op: &str,
    ) -> Result<()> {
        // SAFETY: forwarded contract.
        unsafe { self.launch_shared(dev, grid, block, 0, args, op) }
    }

    /// [`Loaded::launch_dims`] with `shared_bytes` of dynamic shared memory per block.
    ///
    /// # Safety
    /// As for [`Loaded::launch_args`].
    pub(crate) unsafe fn launch_shared(
        &self,
        dev: &CudaDevice,
        grid: [u32; 3],
        block: [u32; 3],
        shared_bytes: u32,
        args: &mut KernelArgs,
        op: &str,
    ) -> Result<()> {
        let (mut params, widths) = args.params();
        // SAFETY: the caller upholds the parameter contract; `args` outlives the launch.
        let r = unsafe {
            dev.backend.launch(
                &self.function,
                grid,
                block,
                shared_bytes,
                &mut params,
                &widths,
            )
        };
        dev.check(r, || format!("launch {op} on cuda:{}", dev.ordinal))?;
        LAUNCHES.fetch_add(1, Ordering::Relaxed);
        Ok(())
    }

    /// Launches a kernel whose parameters are all 8-byte values (pointers and `long long`s),
    /// as the emulator's tests do.
    #[cfg(test)]
    pub(crate) fn launch(
        &self,
        dev: &CudaDevice,
        grid: u32,
        block: u32,
        values: &mut [u64],
        op: &str,
    ) -> Result<()> {
        let mut args = KernelArgs::default();
        for &v in values.iter() {
            args.value(v, 8);
        }
        // SAFETY: the callers pass the parameter list of the kernels they generated.
        unsafe { self.launch_args(dev, grid, block, &mut args, op) }
    }
}

/// Every kernel launched so far, by identity.
fn kernels() -> &'static RwLock<HashMap<KernelId, Arc<Parsed>>> {
    static TABLE: OnceLock<RwLock<HashMap<KernelId, Arc<Parsed>>>> = OnceLock::new();
    TABLE.get_or_init(Default::default)
}

/// The variants of `kernel` this process has loaded, on every device, in no set order. Each
/// source is generated again (a pure function of the variant).
pub(crate) fn cached_variants(kernel: &ElementwiseDef) -> Vec<CachedVariant> {
    let Some(parsed) = kernels()
        .read()
        .unwrap_or_else(PoisonError::into_inner)
        .get(&KernelId::of(kernel))
        .cloned()
    else {
        return Vec::new();
    };
    let keys: Vec<VariantKey> = (parsed.variants.read())
        .unwrap_or_else(PoisonError::into_inner)
        .keys()
        .cloned()
        .collect();
    keys.into_iter()
        .filter_map(|key| {
            let types: Vec<(char, ScalarType)> = key
                .types
                .iter()
                .map(|&(c, d)| (c, ScalarType::from(d)))
                .collect();
            let source = generate_code_aliasing(
                kernel.name,
                &parsed.sig,
                kernel.code(),
                &types,
                key.indexing,
                key.width,
                key.aliasing,
            )
            .ok()?;
            Some(CachedVariant {
                device: Device::Cuda(key.ordinal),
                form: form_of(key.indexing, key.width, key.aliasing),
                types: key.types,
                source,
            })
        })
        .collect()
}

/// The form of an elementwise variant, as [`CachedVariant::form`] describes it.
fn form_of(indexing: Indexing, width: IndexWidth, aliasing: Aliasing) -> String {
    let mut form = match indexing {
        Indexing::Contiguous => "contiguous".to_string(),
        Indexing::Strided { ndim } => format!("strided, {ndim} axes"),
    };
    if width == IndexWidth::I64 {
        form.push_str(", 64-bit indices");
    }
    if aliasing == Aliasing::InPlace {
        form.push_str(", in place");
    }
    form
}

fn parsed(kernel: &ElementwiseDef) -> Result<Arc<Parsed>> {
    let table = kernels();
    let id = KernelId::of(kernel);
    if let Some(p) = table
        .read()
        .unwrap_or_else(PoisonError::into_inner)
        .get(&id)
    {
        return Ok(p.clone());
    }
    let p = Arc::new(Parsed {
        sig: kernel.signature()?,
        variants: RwLock::default(),
    });
    table
        .write()
        .unwrap_or_else(PoisonError::into_inner)
        .insert(id, p.clone());
    Ok(p)
}

/// A loaded module and the names its name expressions' kernels have in it.
type LoadedModule = (Module, Arc<[String]>);

/// Modules loaded per (device, binary), with the names their name expressions' kernels have in
/// them: a second kernel whose source is identical loads nothing.
fn uploads() -> &'static UploadCache<usize, LoadedModule> {
    static UPLOADS: OnceLock<UploadCache<usize, LoadedModule>> = OnceLock::new();
    UPLOADS.get_or_init(UploadCache::default)
}

static LAUNCHES: AtomicUsize = AtomicUsize::new(0);

/// The counters since the process started.
pub fn kernel_stats() -> KernelStats {
    let c = global_cache().stats();
    KernelStats {
        compiles: c.compiles,
        disk_hits: c.disk_hits,
        memory_hits: c.memory_hits,
        module_loads: uploads().stats().loads,
        launches: LAUNCHES.load(Ordering::Relaxed),
    }
}

/// Compiles (through the binary cache) and loads (through the upload cache) a generated kernel
/// on `dev`. `op` names it in errors.
pub(crate) fn launch_source(dev: &CudaDevice, op: &str, src: &KernelSource) -> Result<Arc<Loaded>> {
    let module = load_source(dev, op, src)?;
    let function = dev.check(module.function(&src.entry), || {
        format!("find {} in its module on cuda:{}", src.entry, dev.ordinal)
    })?;
    Ok(Arc::new(Loaded {
        function,
        _module: module,
    }))
}

/// The module of `src` on `dev`: compiled through the binary cache and loaded through the upload
/// cache (once per device).
pub(crate) fn load_source(dev: &CudaDevice, op: &str, src: &KernelSource) -> Result<Module> {
    load_named(dev, op, src, &[]).map(|(module, _)| module)
}

/// [`load_source`] with the name expressions `names` (a template kernel's instances) compiled
/// in, and the names their kernels have in the module, in their order.
pub(crate) fn load_named(
    dev: &CudaDevice,
    op: &str,
    src: &KernelSource,
    names: &[String],
) -> Result<(Module, Arc<[String]>)> {
    let compile_err = |source| Error::KernelCompile {
        kernel: op.to_string(),
        source: Box::new(source),
    };
    let target = dev.backend.binary_target(dev.info.compute_capability);
    let key = Backend::module_key(src, names, target);
    let loaded = uploads().get_or_load(dev.ordinal, key, || {
        let load = |target: BinaryTarget| -> Result<(Module, Arc<[String]>)> {
            let (used, made) = Backend::compile(src, names, target).map_err(compile_err)?;
            let module = dev.check(dev.backend.load_module(&made.binary), || {
                format!("load kernel {} ({used}) on cuda:{}", src.entry, dev.ordinal)
            })?;
            Ok((module, made.lowered.into()))
        };
        // A driver older than NVRTC may refuse its cubin; PTX is then compiled by the driver.
        load(target).or_else(|e| match target {
            BinaryTarget::Nvrtc(Target::Cubin { major, minor }) => {
                load(BinaryTarget::Nvrtc(Target::Ptx { major, minor })).map_err(|_| e)
            }
            _ => Err(e),
        })
    })?;
    Ok(loaded.as_ref().clone())
}

/// A module already compiled (`what`: PTX, a cubin, a fatbin) loaded on `dev` through the upload
/// cache. Only a GPU loads one: the emulated device runs what it compiled from CUDA C++, so
/// there it is [`Error::CudaUnavailable`] saying so.
pub(crate) fn load_image(dev: &CudaDevice, op: &str, image: &[u8], what: &str) -> Result<Module> {
    if !dev.backend.loads_binaries() {
        return Err(Error::CudaUnavailable {
            op: op.to_string(),
            reason: format!(
                "cuda:{} is the emulated device, which runs kernels it compiles from CUDA C++ \
                 source; a module loaded from {what} runs only on a GPU (make the module from \
                 its source with `RawModule::new` to run it here)",
                dev.ordinal
            ),
        });
    }
    let loaded = uploads().get_or_load(dev.ordinal, CacheKey::of_image(image), || {
        let module = dev.check(dev.backend.load_module(image), || {
            format!("load {op} ({what}) on cuda:{}", dev.ordinal)
        })?;
        Ok::<_, Error>((module, Arc::from(Vec::new())))
    })?;
    Ok(loaded.0.clone())
}

/// A CUDA array as a launch takes it: the buffer and the layout into it.
pub(crate) type CudaRef<'a> = (&'a CudaStorage, &'a Layout);

/// Runs `kernel` over `inputs` (all on `cuda:ordinal`) with `f64` parameters cast to their
/// declared types as the host's ops cast (the built-in ops' launches), over `size` elements
/// when given. Returns the outputs, new C-contiguous buffers, and the loop's shape.
pub(crate) fn launch_builtin(
    ordinal: usize,
    kernel: &ElementwiseDef,
    inputs: &[CudaRef<'_>],
    params: &[f64],
    size: Option<usize>,
) -> Result<(Vec<CudaStorage>, Vec<usize>)> {
    let params: Vec<Scalar> = params.iter().map(|&v| Scalar::F64(v)).collect();
    let args = LaunchArgs {
        inputs: inputs.iter().map(|&a| Operand::Array(a)).collect(),
        params: &params,
        outputs: None,
        size,
        reduce_dims: true,
        cast_params: true,
    };
    let (outputs, shape) = launch_on(ordinal, kernel, &args)?;
    Ok((outputs.into_iter().flatten().collect(), shape))
}

/// The device address range `[start, end)` of the bytes a view reaches.
fn byte_span(s: &CudaStorage, l: &Layout) -> (u64, u64) {
    let elem = s.dtype().size_in_bytes() as i128;
    let (mut lo, mut hi) = (0i128, 0i128);
    for (&len, stride) in l.shape().iter().zip(l.strides()) {
        if len == 0 {
            return (0, 0);
        }
        let reach = (len as i128 - 1) * stride as i128;
        if reach < 0 {
            lo += reach;
        } else {
            hi += reach;
        }
    }
    let base = s.ptr_at(l.offset()) as i128;
    ((base + lo * elem) as u64, (base + (hi + 1) * elem) as u64)
}

/// Refuses caller-given outputs that share memory with an input or another output, unless the
/// input is a non-`raw` one read at exactly the element each thread writes (same buffer, same
/// offset, same strides in the loop's shape, same dtype): then each element is read before it
/// is written, by the one thread that writes it.
fn check_aliasing(
    kernel: &ElementwiseDef,
    sig: &ElementwiseSignature,
    inputs: &[Operand<CudaRef<'_>>],
    outputs: &[CudaRef<'_>],
    shape: &[usize],
) -> Result<()> {
    let spans_meet = |a: (u64, u64), b: (u64, u64)| a.0 < b.1 && b.0 < a.1;
    let same_elements = |(s, l): CudaRef<'_>, (os, ol): CudaRef<'_>| -> bool {
        let Ok(b) = l.broadcast_to(shape, "ElementwiseKernel") else {
            return false;
        };
        s.dtype() == os.dtype()
            && s.ptr_at(l.offset()) == os.ptr_at(ol.offset())
            && b.shape() == ol.shape()
            && b.shape()
                .iter()
                .enumerate()
                .all(|(d, &len)| len == 1 || b.stride(d) == ol.stride(d))
    };
    for (k, (op, &out)) in sig.outputs.iter().zip(outputs).enumerate() {
        let span = byte_span(out.0, out.1);
        for (ip, arg) in sig.inputs.iter().zip(inputs) {
            let Operand::Array(input) = *arg else {
                continue;
            };
            if !spans_meet(span, byte_span(input.0, input.1)) {
                continue;
            }
            let why = if ip.raw || op.raw {
                "a raw array's elements may be read or written by any thread"
            } else if same_elements(input, out) {
                continue;
            } else {
                "it reads other elements than the ones written (another offset, strides or \
                 dtype), so one thread could overwrite what another has yet to read"
            };
            return Err(Error::KernelArguments {
                kernel: kernel.name.to_string(),
                msg: format!(
                    "output `{}` shares memory with input `{}`, which is unsafe here: {why}. \
                     An input may be written in place only as the very same view of a non-raw \
                     input and output",
                    op.name, ip.name
                ),
            });
        }
        for (other, &o) in sig.outputs.iter().zip(outputs).take(k) {
            if spans_meet(span, byte_span(o.0, o.1)) {
                return Err(Error::KernelArguments {
                    kernel: kernel.name.to_string(),
                    msg: format!(
                        "outputs `{}` and `{}` share memory: each output needs its own elements",
                        other.name, op.name
                    ),
                });
            }
        }
    }
    Ok(())
}

/// Runs `kernel` on `cuda:ordinal` with `args` (every array on that device), planned as
/// [`plan`] plans it. Returns, per output, the new C-contiguous buffer it got (`None` where the
/// caller gave one, which is written in place) and the loop's shape.
pub(crate) fn launch_on(
    ordinal: usize,
    kernel: &ElementwiseDef,
    args: &LaunchArgs<'_, CudaRef<'_>>,
) -> Result<(Vec<Option<CudaStorage>>, Vec<usize>)> {
    let label = || format!("kernel {}", kernel.name);
    let parsed = parsed(kernel)?;
    let sig = &parsed.sig;
    let arrays = args
        .inputs
        .iter()
        .filter_map(|a| match a {
            Operand::Array(a) => Some(a),
            Operand::Scalar(_) => None,
        })
        .chain(args.outputs.iter().flatten());
    for (s, _) in arrays {
        if s.ordinal() != ordinal {
            return Err(Error::DeviceMismatch {
                op: label(),
                lhs: Device::Cuda(ordinal),
                rhs: Device::Cuda(s.ordinal()),
            });
        }
    }
    let described = args.map_arrays(|(s, l)| (s.dtype(), l));
    let planned = plan(kernel, sig, &described)?;
    if let Some(outputs) = &args.outputs {
        check_aliasing(kernel, sig, &args.inputs, outputs, &planned.shape)?;
    }
    let n: usize = planned.shape.iter().product();
    let dev = device(ordinal, &label())?;

    // A scalar argument is a 0-d array of its (converted) type; `raw` inputs are indexed by the
    // body as flat C-order arrays, so their views are copied.
    let scalar_layout = Layout::contiguous(&[]);
    let mut owned: Vec<Option<(CudaStorage, Layout)>> = Vec::with_capacity(sig.inputs.len());
    for ((p, arg), scalar) in sig.inputs.iter().zip(&args.inputs).zip(&planned.scalars) {
        owned.push(match (arg, scalar) {
            (_, Some(v)) => {
                let s = CudaStorage::alloc(&dev, 1, v.dtype())?;
                let (bits, width) = v.to_bits();
                s.write_from_host(&bits.to_le_bytes()[..width])?;
                Some((s, scalar_layout.clone()))
            }
            (Operand::Array((s, l)), None) if p.raw && !l.is_contiguous() => {
                Some((s.contiguous(l)?, Layout::contiguous(l.shape())))
            }
            _ => None,
        });
    }
    let inputs: Vec<CudaRef<'_>> = owned
        .iter()
        .zip(&args.inputs)
        .filter_map(|(own, arg)| match (own, arg) {
            (Some((s, l)), _) => Some((s, l)),
            (None, Operand::Array(a)) => Some(*a),
            (None, Operand::Scalar(_)) => None,
        })
        .collect();
    let fresh: Vec<Option<CudaStorage>> = match &args.outputs {
        Some(given) => given.iter().map(|_| None).collect(),
        None => planned
            .output_dtypes
            .iter()
            .map(|&dtype| CudaStorage::alloc(&dev, n, dtype).map(Some))
            .collect::<Result<_>>()?,
    };
    let output_ptrs: Vec<u64> = match &args.outputs {
        Some(given) => given.iter().map(|(s, l)| s.ptr_at(l.offset())).collect(),
        None => fresh.iter().flatten().map(|s| s.ptr_at(0)).collect(),
    };
    let Some((grid, block)) = dev.elementwise_grid(n) else {
        return Ok((fresh, planned.shape));
    };

    let key = VariantKey {
        types: planned.types.clone(),
        indexing: planned.indexing,
        width: planned.width,
        aliasing: aliasing_of(args),
        ordinal,
    };
    let cached = parsed
        .variants
        .read()
        .unwrap_or_else(PoisonError::into_inner)
        .get(&key)
        .cloned();
    let loaded = match cached {
        Some(l) => l,
        None => {
            let scalar_types: Vec<(char, ScalarType)> = key
                .types
                .iter()
                .map(|(c, d)| (*c, ScalarType::from(*d)))
                .collect();
            let src = generate_code_aliasing(
                kernel.name,
                sig,
                kernel.code(),
                &scalar_types,
                planned.indexing,
                planned.width,
                key.aliasing,
            )
            .map_err(|source| Error::Codegen {
                kernel: kernel.name.to_string(),
                source: Box::new(source),
            })?;
            let l = launch_source(&dev, kernel.name, &src)?;
            parsed
                .variants
                .write()
                .unwrap_or_else(PoisonError::into_inner)
                .insert(key.clone(), l.clone());
            l
        }
    };

    // Argument values, in the kernel's parameter order.
    let mut values = KernelArgs::default();
    for (s, l) in &inputs {
        values.pointer(s.ptr_at(l.offset()));
    }
    for &p in &output_ptrs {
        values.pointer(p);
    }
    for v in &planned.params {
        let (bits, width) = v.to_bits();
        values.value(bits, width);
    }
    // `n` is `unsigned int` (I32) or `long long` (I64).
    match planned.width {
        IndexWidth::I32 => values.value(n as u64, 4),
        IndexWidth::I64 => values.long(n as i64),
    };
    if let Indexing::Strided { .. } = planned.indexing {
        values.words(planned.layout_words.clone());
    }
    // SAFETY: the function was compiled from the signature these parameters follow: one device
    // pointer per array (inputs, then outputs, each valid for the elements the loop reaches:
    // given outputs have the loop's shape or are raw and the body's to index), one value per
    // scalar parameter in its declared type, the element count in the index type, and for the
    // strided variant the layout struct (`long long shape[nd]; long long strides[k][nd]`).
    unsafe { loaded.launch_args(&dev, grid, block, &mut values, &label()) }?;
    Ok((fresh, planned.shape))
}
