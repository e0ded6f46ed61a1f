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

use kusari_kernels::codegen::{generate_code, IndexWidth, Indexing, KernelSource};
use kusari_kernels::compile::{global_cache, Target};
use kusari_kernels::grid::launch_config;
use kusari_kernels::loop_plan::{LoopOperand, LoopPlan};
use kusari_kernels::upload::UploadCache;
use kusari_kernels::{ElementwiseDef, ElementwiseSignature, KernelStats, ParamType, ScalarType};

use super::device::{device, CudaDevice};
use super::driver::{Backend, BinaryTarget, Function, Module};
use super::memory::CudaStorage;
use crate::error::{Error, Result};
use crate::layout::Layout;
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
    ordinal: usize,
}

/// A kernel function loaded on a device (keeps its module alive).
pub(crate) struct Loaded {
    function: Function,
    _module: Module,
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

fn parsed(kernel: &ElementwiseDef) -> Result<Arc<Parsed>> {
    static TABLE: OnceLock<RwLock<HashMap<KernelId, Arc<Parsed>>>> = OnceLock::new();
    let table = TABLE.get_or_init(Default::default);
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

/// Modules loaded per (device, binary): a second kernel whose source is identical loads nothing.
fn uploads() -> &'static UploadCache<usize, (Module, BinaryTarget)> {
    static UPLOADS: OnceLock<UploadCache<usize, (Module, BinaryTarget)>> = OnceLock::new();
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
    let compile_err = |source| Error::KernelCompile {
        kernel: op.to_string(),
        source: Box::new(source),
    };
    let target = dev.backend.binary_target(dev.info.compute_capability);
    let key = Backend::module_key(src, target);
    let (module, _) = uploads()
        .get_or_load(dev.ordinal, key, || {
            let load = |target: BinaryTarget| -> Result<(Module, BinaryTarget)> {
                let (used, binary) = Backend::compile(src, target).map_err(compile_err)?;
                let module = dev.check(dev.backend.load_module(&binary), || {
                    format!("load kernel {} ({used}) on cuda:{}", src.entry, dev.ordinal)
                })?;
                Ok((module, used))
            };
            // A driver older than NVRTC may refuse its cubin; PTX is then compiled by the driver.
            load(target).or_else(|e| match target {
                BinaryTarget::Nvrtc(Target::Cubin { major, minor }) => {
                    load(BinaryTarget::Nvrtc(Target::Ptx { major, minor })).map_err(|_| e)
                }
                _ => Err(e),
            })
        })?
        .as_ref()
        .clone();
    let function = dev.check(module.function(&src.entry), || {
        format!("find {} in its module on cuda:{}", src.entry, dev.ordinal)
    })?;
    Ok(Arc::new(Loaded {
        function,
        _module: module,
    }))
}

/// A scalar parameter's bytes in the kernel's parameter type, and their count.
fn scalar_bytes(t: ScalarType, v: f64) -> (u64, usize) {
    match t {
        ScalarType::Bool => (u64::from(v != 0.0), 1),
        ScalarType::Int32 => (u64::from((v as i32) as u32), 4),
        ScalarType::Int64 => ((v as i64) as u64, 8),
        ScalarType::Float16 => (
            u64::from(<half::f16 as crate::Element>::from_f64(v).to_bits()),
            2,
        ),
        ScalarType::BFloat16 => (
            u64::from(<half::bf16 as crate::Element>::from_f64(v).to_bits()),
            2,
        ),
        ScalarType::Float32 => (u64::from((v as f32).to_bits()), 4),
        ScalarType::Float64 => (v.to_bits(), 8),
    }
}

fn param_type(
    kernel: &str,
    p: &kusari_kernels::Param,
    types: &[(char, DType)],
) -> Result<ScalarType> {
    match p.ty {
        ParamType::Concrete(t) => Ok(t),
        ParamType::Placeholder(c) => types
            .iter()
            .find(|(q, _)| *q == c)
            .map(|(_, d)| ScalarType::from(*d))
            .ok_or_else(|| Error::KernelArguments {
                kernel: kernel.to_string(),
                msg: format!("type placeholder `{c}` is not bound"),
            }),
    }
}

/// A CUDA array as a launch takes it: the buffer and the layout into it.
pub(crate) type CudaRef<'a> = (&'a CudaStorage, &'a Layout);

/// Runs `kernel` over `inputs` (all on `cuda:ordinal`) broadcast together, or over `shape` when
/// given (exactly when no array input is looped over: every one is `raw`, or there is none;
/// [`ElementwiseDef::check_loop_size`]), with the scalar `params` converted to their
/// declared types. Returns the outputs, new C-contiguous buffers, and the loop's shape.
pub(crate) fn launch_on(
    ordinal: usize,
    kernel: &ElementwiseDef,
    inputs: &[CudaRef<'_>],
    params: &[f64],
    shape: Option<&[usize]>,
) -> Result<(Vec<CudaStorage>, Vec<usize>)> {
    let label = || format!("kernel {}", kernel.name);
    let parsed = parsed(kernel)?;
    let sig = &parsed.sig;
    if let Some((other, _)) = inputs.iter().find(|(s, _)| s.ordinal() != ordinal) {
        return Err(Error::DeviceMismatch {
            op: label(),
            lhs: Device::Cuda(ordinal),
            rhs: Device::Cuda(other.ordinal()),
        });
    }
    kernel.check_param_count(sig, params.len())?;
    kernel.check_loop_size(sig, shape.map(|s| s.iter().product()))?;
    let typed: Vec<(ScalarType, &[usize])> = inputs
        .iter()
        .map(|(s, l)| (ScalarType::from(s.dtype()), l.shape()))
        .collect();
    let types: Vec<(char, DType)> = kernel
        .bind(sig, &typed)?
        .into_iter()
        .map(|(c, t)| (c, DType::from(t)))
        .collect();

    // `raw` inputs are indexed by the body as flat C-order arrays: views are copied.
    let copies = sig
        .inputs
        .iter()
        .zip(inputs)
        .map(|(p, &(s, l))| match p.raw && !l.is_contiguous() {
            true => Ok(Some((s.contiguous(l)?, Layout::contiguous(l.shape())))),
            false => Ok(None),
        })
        .collect::<Result<Vec<Option<(CudaStorage, Layout)>>>>()?;
    let args: Vec<CudaRef<'_>> = copies
        .iter()
        .zip(inputs)
        .map(|(copy, &input)| match copy {
            Some((s, l)) => (s, l),
            None => input,
        })
        .collect();

    let operands: Vec<LoopOperand<'_>> = args
        .iter()
        .map(|(_, l)| LoopOperand {
            shape: l.shape(),
            contiguous: l.is_contiguous(),
        })
        .collect();
    let LoopPlan {
        looped,
        shape: loop_shape,
        indexing,
        width,
    } = LoopPlan::new(sig, &operands, shape)?;
    let n: usize = loop_shape.iter().product();

    let dev = device(ordinal, &label())?;
    let mut outputs = Vec::with_capacity(sig.outputs.len());
    for p in &sig.outputs {
        let dtype = DType::from(param_type(kernel.name, p, &types)?);
        outputs.push(CudaStorage::alloc(&dev, n, dtype)?);
    }
    let Some((grid, block)) = launch_config(n, dev.sm_count()) else {
        return Ok((outputs, loop_shape));
    };

    let key = VariantKey {
        types,
        indexing,
        width,
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
            let src = generate_code(
                kernel.name,
                sig,
                kernel.code(),
                &scalar_types,
                indexing,
                width,
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
    for (s, l) in &args {
        values.pointer(s.ptr_at(l.offset()));
    }
    for o in &outputs {
        values.pointer(o.ptr_at(0));
    }
    for (p, &v) in sig.params.iter().zip(params) {
        let (bits, width) = scalar_bytes(param_type(kernel.name, p, &key.types)?, v);
        values.value(bits, width);
    }
    // `n` is `unsigned int` (I32) or `long long` (I64).
    match width {
        IndexWidth::I32 => values.value(n as u64, 4),
        IndexWidth::I64 => values.long(n as i64),
    };
    if let Indexing::Strided { ndim } = indexing {
        let nd = ndim.max(1);
        let mut layout_struct: Vec<i64> = loop_shape.iter().map(|&d| d as i64).collect();
        layout_struct.resize(nd, 1);
        let strides_of = |l: &Layout| -> Result<Vec<i64>> {
            let b = l.broadcast_to(&loop_shape, "ElementwiseKernel")?;
            let mut s: Vec<i64> = b.strides().iter().map(|&s| s as i64).collect();
            s.resize(nd, 0);
            Ok(s)
        };
        for &i in &looped {
            layout_struct.extend(strides_of(args[i].1)?);
        }
        let out_layout = Layout::contiguous(&loop_shape);
        for p in &sig.outputs {
            if !p.raw {
                layout_struct.extend(strides_of(&out_layout)?);
            }
        }
        if looped.is_empty() && sig.outputs.iter().all(|p| p.raw) {
            layout_struct.resize(2 * nd, 0);
        }
        values.words(layout_struct);
    }
    // SAFETY: the function was compiled from the signature these parameters follow: one device
    // pointer per array (inputs, then outputs, each valid for the elements the loop reaches),
    // one value per scalar parameter in its declared type, the element count in the index
    // type, and for the strided variant the layout struct (`long long shape[nd]; long long
    // strides[k][nd]`).
    unsafe { loaded.launch_args(&dev, grid, block, &mut values, &label()) }?;
    Ok((outputs, loop_shape))
}
