//! Array operations that are not a single elementwise kernel: transfers, fills, casts, copies,
//! reductions (a simple one-block-per-row kernel) and matrix products (cuBLAS, or a plain kernel
//! for integers and where cuBLAS is missing).

use std::collections::HashMap;
use std::sync::{Arc, OnceLock, PoisonError, RwLock};

use kusari_kernels::reduction::{reduction, reduction_chunks, ReductionKind, REDUCTION_BLOCK};

use super::device::{device, CudaDevice};
use super::driver::{Gemm, GemmType};
use super::launch::{launch, launch_source, Loaded};
use super::memory::CudaStorage;
use crate::cpu::Reduction;
use crate::dtype::{with_dtype, Element};
use crate::error::{Error, Result};
use crate::kernel::{cast_kernel, fill_kernel, COPY, MATMUL};
use crate::layout::Layout;
use crate::storage::Storage;
use crate::{Array, DType, Device};

/// The bytes of a typed slice (every `Element` is a plain value without padding).
fn as_bytes<T: Element>(v: &[T]) -> &[u8] {
    // SAFETY: `T` is one of bool, i32, i64, f16, bf16, f32, f64: no padding, every byte is
    // initialised, and u8 has alignment 1.
    unsafe { std::slice::from_raw_parts(v.as_ptr().cast::<u8>(), std::mem::size_of_val(v)) }
}

/// `a` (on any device) copied to `cuda:ordinal`.
pub(crate) fn to_device(a: &Array, ordinal: usize) -> Result<Array> {
    let op = format!("to_device(cuda:{ordinal})");
    let dev = device(ordinal, &op)?;
    if !a.device().is_cpu() {
        // From another device: a device-to-device copy of its contiguous elements.
        let a = contiguous(a)?;
        let src = CudaStorage::of(&a);
        let dst = CudaStorage::alloc(&dev, a.size(), a.dtype())?;
        dst.copy_from(src, a.layout().offset())?;
        return Ok(Array::from_storage(
            Storage::Cuda(dst),
            Layout::contiguous(a.shape()),
        ));
    }
    let dst = CudaStorage::alloc(&dev, a.size(), a.dtype())?;
    with_dtype!(a.dtype(), T => {
        let host = a.host::<T>("to_device")?.to_cow("to_device")?;
        dst.write_from_host(as_bytes(&host))?;
    });
    Ok(Array::from_storage(
        Storage::Cuda(dst),
        Layout::contiguous(a.shape()),
    ))
}

/// A CUDA array's elements copied to the host, in C order.
pub(crate) fn to_host(a: &Array) -> Result<Array> {
    let a = a.contiguous()?;
    let s = CudaStorage::of(&a);
    let n = a.size();
    if a.dtype() == DType::Bool {
        // Any byte may come back (memory a kernel did not write): only 0 and 1 are bools.
        let mut bytes: Vec<u8> = crate::cpu::pool::alloc("to_host", n)?;
        bytes.resize(n, 0);
        s.read_to_host(a.layout().offset(), &mut bytes)?;
        if let Some(i) = bytes.iter().position(|&b| b > 1) {
            return Err(Error::Cuda {
                op: format!("copy a bool array from {}", a.device()),
                msg: format!(
                    "element {i} holds the byte {:#04x}, which is not a bool (0 or 1): memory no kernel wrote?",
                    bytes[i]
                ),
            });
        }
        let v: Vec<bool> = bytes.into_iter().map(|b| b == 1).collect();
        return Ok(Array::from_cpu_vec(v, a.shape()));
    }
    with_dtype!(a.dtype(), T => {
        let mut v: Vec<T> = crate::cpu::pool::alloc("to_host", n)?;
        // SAFETY: the spare capacity is `n` elements; `read_to_host` fills every byte with
        // values the device wrote for `T` (not bool: handled above; every bit pattern is a
        // valid number) before `set_len`.
        unsafe {
            let bytes = std::slice::from_raw_parts_mut(
                v.as_mut_ptr().cast::<u8>(),
                n * std::mem::size_of::<T>(),
            );
            s.read_to_host(a.layout().offset(), bytes)?;
            v.set_len(n);
        }
        Ok(Array::from_cpu_vec(v, a.shape()))
    })
}

/// A new array of `shape` filled with `value` on `cuda:ordinal`.
pub(crate) fn full(shape: &[usize], value: f64, dtype: DType, ordinal: usize) -> Result<Array> {
    let op = || format!("full_on(cuda:{ordinal})");
    let dev = device(ordinal, &op())?;
    let n = shape
        .iter()
        .try_fold(1usize, |n, &d| n.checked_mul(d))
        .ok_or_else(|| Error::Cuda {
            op: op(),
            msg: format!("the element count of shape {shape:?} overflows"),
        })?;
    // All-zero bytes are +0 in every dtype; -0.0 needs its sign bit, so it goes to the kernel.
    if value == 0.0 && value.is_sign_positive() {
        let s = CudaStorage::alloc(&dev, n, dtype)?;
        s.zero()?;
        return Ok(Array::from_storage(
            Storage::Cuda(s),
            Layout::contiguous(shape),
        ));
    }
    let k = fill_kernel(dtype);
    Ok(super::launch::launch_on(ordinal, k, &[], &[value], Some(shape))?.remove(0))
}

/// A C-contiguous copy of a CUDA array (itself when already contiguous).
pub(crate) fn contiguous(a: &Array) -> Result<Array> {
    if a.is_contiguous() {
        return Ok(a.clone());
    }
    Ok(launch(&COPY, &[a], &[], None)?.remove(0))
}

/// A CUDA array converted to `dtype`.
pub(crate) fn astype(a: &Array, dtype: DType) -> Result<Array> {
    let k = cast_kernel(a.dtype(), dtype);
    Ok(launch(k, &[a], &[], None)?.remove(0))
}

fn reduction_kind(kind: Reduction) -> ReductionKind {
    match kind {
        Reduction::Sum => ReductionKind::Sum,
        Reduction::Max => ReductionKind::Max,
        Reduction::Min => ReductionKind::Min,
    }
}

/// Reduces the CUDA array `a` over `axes` (sorted, distinct), giving the kept axes' shape.
/// Half-precision arrays are reduced in float32.
///
/// The reduced axes are moved last (a permuted copy), giving `[rows, len]`. Rows that alone fill
/// the device get one block each. Few long rows (`sum` or `mean` of everything, every loss)
/// are split: a first pass reduces chunks of each row in parallel into `[rows, chunks]` partial
/// results, and the row kernel reduces those, so a full reduction uses every SM instead of one.
pub(crate) fn reduce(a: &Array, axes: &[usize], kind: Reduction) -> Result<Array> {
    if matches!(a.dtype(), DType::F16 | DType::BF16) {
        return reduce(&astype(a, DType::F32)?, axes, kind).and_then(|r| astype(&r, a.dtype()));
    }
    let kept: Vec<usize> = (0..a.ndim()).filter(|x| !axes.contains(x)).collect();
    let perm: Vec<usize> = kept.iter().chain(axes).copied().collect();
    let out_shape: Vec<usize> = kept.iter().map(|&x| a.shape()[x]).collect();
    let rows: usize = out_shape.iter().product();
    let len: usize = axes.iter().map(|&x| a.shape()[x]).product();
    let Device::Cuda(ordinal) = a.device() else {
        unreachable!("the caller checked the device")
    };
    let dev = device(ordinal, "reduce")?;
    let out = CudaStorage::alloc(&dev, rows, a.dtype())?;
    if rows > 0 {
        let src = contiguous(&a.transpose(Some(&perm))?)?;
        let mut input = CudaStorage::of(&src).ptr_at(src.layout().offset());
        let mut row_len = len;
        let kind = reduction_kind(kind);
        // Kept alive until the second pass has read it.
        let mut partials = None;
        if let Some(chunk) = chunk_for(rows, len, dev.sm_count() as usize) {
            let chunks = len.div_ceil(chunk);
            let p = CudaStorage::alloc(&dev, rows * chunks, a.dtype())?;
            let first = reduction_function(&dev, kind, a.dtype(), true)?;
            let grid = (rows * chunks).min(dev.sm_count() as usize * 32) as u32;
            let mut values = [input, p.ptr_at(0), rows as u64, len as u64, chunk as u64];
            first.launch(&dev, grid, REDUCTION_BLOCK, &mut values, "reduce (chunks)")?;
            input = p.ptr_at(0);
            row_len = chunks;
            partials = Some(p);
        }
        let loaded = reduction_function(&dev, kind, a.dtype(), false)?;
        let grid = rows.min(dev.sm_count() as usize * 32).max(1) as u32;
        let mut values: [u64; 4] = [input, out.ptr_at(0), rows as u64, row_len as u64];
        loaded.launch(&dev, grid, REDUCTION_BLOCK, &mut values, "reduce")?;
        drop(partials);
    }
    Ok(Array::from_storage(
        Storage::Cuda(out),
        Layout::contiguous(&out_shape),
    ))
}

/// Elements each thread of a chunk folds, at least: below that a block's start-up and its tree
/// cost more than its loads.
const ELEMENTS_PER_THREAD: usize = 16;

/// The chunk length that splits `rows` rows of `len` elements so that about eight blocks per SM
/// (a full device: 8 x 256 threads per SM) have work, or `None` when the rows alone fill the
/// device or are too short to split.
pub(crate) fn chunk_for(rows: usize, len: usize, sm_count: usize) -> Option<usize> {
    let wanted = sm_count.max(1) * 8;
    let min_chunk = REDUCTION_BLOCK as usize * ELEMENTS_PER_THREAD;
    if rows >= wanted || len < 2 * min_chunk {
        return None;
    }
    let chunks = (wanted / rows).clamp(2, len / min_chunk);
    Some(len.div_ceil(chunks))
}

fn reduction_function(
    dev: &CudaDevice,
    kind: ReductionKind,
    dtype: DType,
    chunked: bool,
) -> Result<Arc<Loaded>> {
    type Table = RwLock<HashMap<(ReductionKind, DType, bool, usize), Arc<Loaded>>>;
    static TABLE: OnceLock<Table> = OnceLock::new();
    let table = TABLE.get_or_init(Default::default);
    let key = (kind, dtype, chunked, dev.ordinal);
    if let Some(l) = table
        .read()
        .unwrap_or_else(PoisonError::into_inner)
        .get(&key)
    {
        return Ok(l.clone());
    }
    let t = kusari_kernels::ScalarType::from(dtype);
    let src = if chunked {
        reduction_chunks(kind, t)
    } else {
        reduction(kind, t)
    }
    .map_err(|source| Error::Codegen {
        kernel: "reduce".to_string(),
        source: Box::new(source),
    })?;
    let l = launch_source(dev, "reduce", &src)?;
    table
        .write()
        .unwrap_or_else(PoisonError::into_inner)
        .insert(key, l.clone());
    Ok(l)
}

/// The product of CUDA arrays `a` [.., n, k] and `b` [.., k, m] with batch axes broadcast to
/// `batch`, as a new array of `out_shape`. Integer dtypes, and floats where cuBLAS cannot be
/// loaded, use a plain kernel; float32 and float64 use cuBLAS.
pub(crate) fn matmul(
    a: &Array,
    b: &Array,
    batch: &[usize],
    (n, k, m): (usize, usize, usize),
    out_shape: &[usize],
) -> Result<Array> {
    let Device::Cuda(ordinal) = a.device() else {
        unreachable!("the caller checked the device")
    };
    let dev = device(ordinal, "matmul")?;
    let mut a_shape = batch.to_vec();
    a_shape.extend([n, k]);
    let mut b_shape = batch.to_vec();
    b_shape.extend([k, m]);
    let a = contiguous(&a.broadcast_to(&a_shape)?)?;
    let b = contiguous(&b.broadcast_to(&b_shape)?)?;
    let batches: usize = batch.iter().product();
    let fits = |x: usize| i32::try_from(x).is_ok();
    let blas_ok = GemmType::of(a.dtype()).is_some()
        && [n, k, m, batches].into_iter().all(fits)
        && dev.backend.has_blas();
    if !blas_ok {
        return Ok(launch(
            &MATMUL,
            &[&a, &b],
            &[n as f64, k as f64, m as f64],
            Some(out_shape),
        )?
        .remove(0));
    }
    let out = CudaStorage::alloc(&dev, batches * n * m, a.dtype())?;
    if batches * n * m > 0 {
        if k == 0 {
            out.zero()?;
        } else {
            gemm(&dev, &a, &b, &out, batches, (n, k, m))?;
        }
    }
    Ok(Array::from_storage(
        Storage::Cuda(out),
        Layout::contiguous(out_shape),
    ))
}

fn gemm(
    dev: &CudaDevice,
    a: &Array,
    b: &Array,
    out: &CudaStorage,
    batches: usize,
    (n, k, m): (usize, usize, usize),
) -> Result<()> {
    let dtype = GemmType::of(a.dtype()).expect("the caller checked the dtype");
    let (n_, k_, m_) = (n as i32, k as i32, m as i32);
    // Row-major C[n, m] = A[n, k] B[k, m] is column-major C^T[m, n] = B^T[m, k] A^T[k, n]:
    // the row-major buffers are already the transposes cuBLAS sees.
    let g = Gemm {
        dtype,
        trans_a: false,
        trans_b: false,
        m: m_,
        n: n_,
        k: k_,
        alpha: 1.0,
        a: CudaStorage::of(b).ptr_at(b.layout().offset()),
        lda: m_,
        stride_a: (k * m) as i64,
        b: CudaStorage::of(a).ptr_at(a.layout().offset()),
        ldb: k_,
        stride_b: (n * k) as i64,
        beta: 0.0,
        c: out.ptr_at(0),
        ldc: m_,
        stride_c: (n * m) as i64,
        batch: batches as i32,
    };
    // SAFETY: the pointers address contiguous buffers of `batches` matrices of the stated
    // sizes on this device.
    let r = unsafe { dev.backend.gemm(&g) };
    dev.check(r, || format!("matmul (cuBLAS) on cuda:{}", dev.ordinal))
}
