//! Launching reduction kernels (CuPy's `ReductionKernel`): coalesce the dimensions, plan the
//! launch from the shape ([`ReductionPlan`]), compile the kernel's two entry points once
//! (NVRTC through the on-disk binary cache), load them once per device, and run the first pass
//! and, for a split reduction, the second.
//!
//! Inputs are read in place through their strides (broadcast axes have stride 0): nothing is
//! copied or transposed.

use std::collections::HashMap;
use std::sync::{Arc, OnceLock, PoisonError, RwLock};

use kusari_kernels::codegen::KernelSource;
use kusari_kernels::reduction::{
    REDUCE_BLOCK, ReduceType, ReductionDef, ReductionPlan, WARP, coalesce, combine_entry,
    generate_reduction, layout_words, rank_capacity,
};
use kusari_kernels::{ParamType, ScalarType};

use super::device::device;
use super::launch::{CudaRef, KernelArgs, Loaded, launch_source};
use super::memory::CudaStorage;
use crate::error::{Error, Result};
use crate::launch_plan::CachedVariant;
use crate::scalar::Scalar;
use crate::{DType, Device};

/// A kernel's identity for the memo table: its strings' addresses and lengths.
#[derive(Clone, Copy, PartialEq, Eq, Hash)]
struct DefId([(usize, usize); 9]);

impl DefId {
    fn of(k: &ReductionDef) -> Self {
        let id = |s: &str| (s.as_ptr() as usize, s.len());
        DefId([
            id(k.name),
            id(k.in_params),
            id(k.out_params),
            id(k.params),
            id(k.map_expr),
            id(k.reduce_expr),
            id(k.post_map_expr),
            id(k.identity.unwrap_or("\0")),
            id(k.preamble),
        ])
    }
}

#[derive(Clone, PartialEq, Eq, Hash)]
struct VariantKey {
    def: DefId,
    reduce_type: (usize, usize),
    types: Vec<(char, ScalarType)>,
    capacity: usize,
    ordinal: usize,
}

/// The two loaded entry points of one variant: the first pass and the split's second.
struct Variant {
    first: Arc<Loaded>,
    combine: Arc<Loaded>,
}

fn dtype_of(t: ParamType, types: &[(char, ScalarType)]) -> Option<DType> {
    match t {
        ParamType::Concrete(t) => Some(DType::from(t)),
        ParamType::Placeholder(c) => types
            .iter()
            .find(|(p, _)| *p == c)
            .map(|(_, t)| DType::from(*t)),
    }
}

/// Runs `def` over `inputs` (CUDA buffers on `cuda:ordinal` whose layouts are broadcast to
/// `shape`) reducing `axes` (sorted, distinct axes of `shape`), with `params` already converted
/// to their declared types. Returns the outputs: new C-contiguous buffers of the kept axes.
/// The caller has checked that a reduction of no element has an identity.
pub(crate) fn launch_reduction_on(
    ordinal: usize,
    def: &ReductionDef,
    inputs: &[CudaRef<'_>],
    params: &[Scalar],
    shape: &[usize],
    axes: &[usize],
) -> Result<Vec<CudaStorage>> {
    let label = || format!("kernel {}", def.name);
    if let Some((other, _)) = inputs.iter().find(|(s, _)| s.ordinal() != ordinal) {
        return Err(Error::DeviceMismatch {
            op: label(),
            lhs: Device::Cuda(ordinal),
            rhs: Device::Cuda(other.ordinal()),
        });
    }
    let sig = def.signature()?;
    let typed: Vec<(ScalarType, &[usize])> = inputs
        .iter()
        .map(|(s, l)| (ScalarType::from(s.dtype()), l.shape()))
        .collect();
    let types = def.bind(&sig, &typed)?;
    let strides: Vec<Vec<isize>> = inputs.iter().map(|(_, l)| l.strides()).collect();
    let dims = coalesce(shape, axes, &strides);
    let n_out: usize = dims.kept.iter().product();
    let len: usize = dims.reduced.iter().product();

    let dev = device(ordinal, &label())?;
    let mut outputs = Vec::with_capacity(sig.outputs.len());
    for p in &sig.outputs {
        let dtype = dtype_of(p.ty, &types).ok_or_else(|| Error::KernelArguments {
            kernel: def.name.to_string(),
            msg: format!("the type of output `{}` is not bound", p.name),
        })?;
        outputs.push(CudaStorage::alloc(&dev, n_out, dtype)?);
    }
    if n_out == 0 {
        return Ok(outputs);
    }
    // The partial results' dtype, where the host knows the reduce type's size.
    let partial_dtype = match def.reduce_type(&sig) {
        Ok(ReduceType::Concrete(t)) => Some(DType::from(t)),
        Ok(ReduceType::Placeholder(c)) => dtype_of(ParamType::Placeholder(c), &types),
        _ => None,
    };
    let inner_contiguous = dims
        .reduced_strides
        .first()
        .is_none_or(|s| s.last().is_none_or(|&s| s == 1));
    let plan = ReductionPlan::new(
        n_out,
        len,
        inner_contiguous,
        partial_dtype.is_some(),
        dev.sm_count() as usize,
    );
    let capacity = rank_capacity(dims.kept.len(), dims.reduced.len());
    let variant = variant(&dev, def, &sig, types, capacity)?;

    let partials = match (plan.chunks > 1, partial_dtype) {
        (true, Some(dtype)) => Some(CudaStorage::alloc(&dev, n_out * plan.chunks, dtype)?),
        _ => None,
    };
    let partials_ptr = partials.as_ref().map_or(0, |p| p.ptr_at(0));
    let scalar_args = |args: &mut KernelArgs| {
        for s in params {
            let (bits, width) = s.to_bits();
            args.value(bits, width);
        }
    };

    let mut args = KernelArgs::default();
    for (s, l) in inputs {
        args.pointer(s.ptr_at(l.offset()));
    }
    for o in &outputs {
        args.pointer(o.ptr_at(0));
    }
    scalar_args(&mut args);
    args.pointer(partials_ptr);
    args.words(layout_words(&dims, capacity));
    args.long(n_out as i64)
        .long(len as i64)
        .long(plan.chunk as i64)
        .long(plan.chunks as i64)
        .value(u64::from(plan.group), 4)
        .value(u64::from(plan.transposed), 4);
    // SAFETY: the function was generated for this signature and these ranks: a pointer per
    // input (each offset valid at every element its strides reach in `shape`), a pointer per
    // output (`n_out` elements), the scalar parameters in their declared types, the partial
    // results (`n_out * chunks` elements of the reduce type when split), the layout struct of
    // `layout_words` for the kernel's capacity, four `long long`s, the `int` group and the `int`
    // transposed flag.
    unsafe {
        variant
            .first
            .launch_args(&dev, plan.grid, REDUCE_BLOCK, &mut args, &label())
    }?;
    if plan.chunks > 1 {
        let group = if plan.chunks > WARP as usize {
            REDUCE_BLOCK
        } else {
            WARP
        };
        let per_block = (REDUCE_BLOCK / group) as usize;
        let grid = n_out
            .div_ceil(per_block)
            .clamp(1, dev.sm_count() as usize * 32) as u32;
        let mut args = KernelArgs::default();
        for o in &outputs {
            args.pointer(o.ptr_at(0));
        }
        scalar_args(&mut args);
        args.pointer(partials_ptr);
        args.long(n_out as i64)
            .long(len as i64)
            .long(plan.chunks as i64)
            .value(u64::from(group), 4);
        // SAFETY: the second pass's parameters: the outputs, the scalar parameters, the
        // partial results written by the first pass (`n_out * chunks`), three `long long`s
        // and the `int` group.
        unsafe {
            variant
                .combine
                .launch_args(&dev, grid, REDUCE_BLOCK, &mut args, &label())
        }?;
    }
    drop(partials);
    Ok(outputs)
}

type Table = RwLock<HashMap<VariantKey, Arc<Variant>>>;

/// Every reduction variant loaded so far.
fn table() -> &'static Table {
    static TABLE: OnceLock<Table> = OnceLock::new();
    TABLE.get_or_init(Default::default)
}

/// The variants of `def` this process has loaded, on every device, in no set order.
pub(crate) fn cached_reduction_variants(def: &ReductionDef) -> Vec<CachedVariant> {
    let id = DefId::of(def);
    let reduce_type = (def.reduce_type.as_ptr() as usize, def.reduce_type.len());
    let keys: Vec<VariantKey> = (table().read())
        .unwrap_or_else(PoisonError::into_inner)
        .keys()
        .filter(|k| k.def == id && k.reduce_type == reduce_type)
        .cloned()
        .collect();
    let Ok(sig) = def.signature() else {
        return Vec::new();
    };
    keys.into_iter()
        .filter_map(|key| {
            let source = generate_reduction(def, &sig, &key.types, key.capacity, 0).ok()?;
            Some(CachedVariant {
                device: Device::Cuda(key.ordinal),
                types: (key.types.iter())
                    .map(|&(c, t)| (c, DType::from(t)))
                    .collect(),
                form: format!("layouts of up to {} axes", key.capacity),
                source,
            })
        })
        .collect()
}

/// The loaded entry points of `def` for `types` and layouts of `capacity` dimensions on `dev`,
/// generated, compiled and loaded on first use.
fn variant(
    dev: &super::device::CudaDevice,
    def: &ReductionDef,
    sig: &kusari_kernels::ElementwiseSignature,
    types: Vec<(char, ScalarType)>,
    capacity: usize,
) -> Result<Arc<Variant>> {
    let table = table();
    let key = VariantKey {
        def: DefId::of(def),
        reduce_type: (def.reduce_type.as_ptr() as usize, def.reduce_type.len()),
        types,
        capacity,
        ordinal: dev.ordinal,
    };
    if let Some(v) = table
        .read()
        .unwrap_or_else(PoisonError::into_inner)
        .get(&key)
    {
        return Ok(v.clone());
    }
    let src =
        generate_reduction(def, sig, &key.types, capacity, 0).map_err(|source| Error::Codegen {
            kernel: def.name.to_string(),
            source: Box::new(source),
        })?;
    let first = launch_source(dev, def.name, &src)?;
    let combine = launch_source(
        dev,
        def.name,
        &KernelSource {
            entry: combine_entry(def.name),
            source: src.source,
        },
    )?;
    let v = Arc::new(Variant { first, combine });
    table
        .write()
        .unwrap_or_else(PoisonError::into_inner)
        .insert(key, v.clone());
    Ok(v)
}
