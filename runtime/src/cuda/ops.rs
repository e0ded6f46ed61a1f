//! Array operations that are not a single elementwise kernel: transfers, fills, casts, copies,
//! reductions (a simple one-block-per-row kernel) and matrix products (cuBLAS, or a plain kernel
//! for integers and where cuBLAS is missing).

use std::collections::HashMap;
use std::sync::{Arc, Mutex, OnceLock, PoisonError, RwLock};

use cudarc::cublas::result as blas;
use cudarc::cublas::sys as blas_sys;

use kusari_kernels::reduction::{reduction, ReductionKind, REDUCTION_BLOCK};

use super::device::{device, CudaDevice};
use super::launch::{launch, launch_source, Loaded};
use super::memory::CudaStorage;
use crate::cpu::Reduction;
use crate::dtype::{with_dtype, Element};
use crate::error::{Error, Result};
use crate::kernel::{cast_kernel, fill_kernel, to_scalar_type, COPY, MATMUL};
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
    if !a.device().is_cpu() {
        // Across devices through the host: simple, and rare next to kernels.
        return to_device(&to_host(a)?, ordinal);
    }
    let dev = device(ordinal, &op)?;
    let dst = CudaStorage::alloc(&dev, a.size(), a.dtype())?;
    with_dtype!(a.dtype(), T => {
        let host = a.host::<T>("to_device")?.to_cow();
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
    with_dtype!(a.dtype(), T => {
        let mut v: Vec<T> = Vec::with_capacity(n);
        // SAFETY: the spare capacity is `n` elements; `read_to_host` fills every byte with
        // values the device computed for `T` (bool bytes are 0 or 1) before `set_len`.
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
    let dev = device(ordinal, &format!("full_on(cuda:{ordinal})"))?;
    let n: usize = shape.iter().product();
    if value == 0.0 {
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
        let loaded = reduction_function(&dev, reduction_kind(kind), a.dtype())?;
        let grid = rows.min(dev.sm_count as usize * 32).max(1) as u32;
        let mut values: [u64; 4] = [
            CudaStorage::of(&src).ptr_at(src.layout().offset()),
            out.ptr_at(0),
            rows as u64,
            len as u64,
        ];
        loaded.launch(&dev, grid, REDUCTION_BLOCK, &mut values, "reduce")?;
    }
    Ok(Array::from_storage(
        Storage::Cuda(out),
        Layout::contiguous(&out_shape),
    ))
}

fn reduction_function(dev: &CudaDevice, kind: ReductionKind, dtype: DType) -> Result<Arc<Loaded>> {
    type Table = RwLock<HashMap<(ReductionKind, DType, usize), Arc<Loaded>>>;
    static TABLE: OnceLock<Table> = OnceLock::new();
    let table = TABLE.get_or_init(Default::default);
    let key = (kind, dtype, dev.ordinal);
    if let Some(l) = table
        .read()
        .unwrap_or_else(PoisonError::into_inner)
        .get(&key)
    {
        return Ok(l.clone());
    }
    let src = reduction(kind, to_scalar_type(dtype)).map_err(Error::Msg)?;
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
    let blas_ok = matches!(a.dtype(), DType::F32 | DType::F64)
        && [n, k, m, batches].into_iter().all(fits)
        && cublas_present();
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

fn cublas_present() -> bool {
    static PRESENT: OnceLock<bool> = OnceLock::new();
    // SAFETY: only tries to open the shared library.
    *PRESENT.get_or_init(|| unsafe { blas_sys::is_culib_present() })
}

/// A cuBLAS handle per device, bound to the device's stream.
struct Handle(blas_sys::cublasHandle_t);
// SAFETY: a handle is used under the lock of the table that owns it, one thread at a time.
unsafe impl Send for Handle {}

fn gemm(
    dev: &CudaDevice,
    a: &Array,
    b: &Array,
    out: &CudaStorage,
    batches: usize,
    (n, k, m): (usize, usize, usize),
) -> Result<()> {
    static HANDLES: Mutex<Vec<(usize, Handle)>> = Mutex::new(Vec::new());
    let blas_err = |e: blas::CublasError| Error::Cuda {
        op: format!("matmul (cuBLAS) on cuda:{}", dev.ordinal),
        msg: format!("{e:?}"),
    };
    dev.bind()?;
    let mut handles = HANDLES.lock().unwrap_or_else(PoisonError::into_inner);
    let handle = match handles.iter().find(|(o, _)| *o == dev.ordinal) {
        Some((_, h)) => h.0,
        None => {
            let h = blas::create_handle().map_err(blas_err)?;
            // SAFETY: `h` was just created in the bound context; the stream belongs to it.
            unsafe { blas::set_stream(h, dev.stream.cu_stream() as _) }.map_err(blas_err)?;
            handles.push((dev.ordinal, Handle(h)));
            h
        }
    };
    let (pa, pb, pc) = (
        CudaStorage::of(a).ptr_at(a.layout().offset()),
        CudaStorage::of(b).ptr_at(b.layout().offset()),
        out.ptr_at(0),
    );
    let (n_, k_, m_) = (n as i32, k as i32, m as i32);
    let (sa, sb, sc) = ((n * k) as i64, (k * m) as i64, (n * m) as i64);
    let op_n = blas_sys::cublasOperation_t::CUBLAS_OP_N;
    // Row-major C[n, m] = A[n, k] B[k, m] is column-major C^T[m, n] = B^T[m, k] A^T[k, n]:
    // the row-major buffers are already the transposes cuBLAS sees.
    // SAFETY: the pointers address contiguous buffers of `batches` matrices of the stated
    // sizes on this device; the handle is bound to its stream and used under the lock.
    unsafe {
        match a.dtype() {
            DType::F32 => blas::sgemm_strided_batched(
                handle,
                op_n,
                op_n,
                m_,
                n_,
                k_,
                &1.0f32,
                pb as *const f32,
                m_,
                sb,
                pa as *const f32,
                k_,
                sa,
                &0.0f32,
                pc as *mut f32,
                m_,
                sc,
                batches as i32,
            ),
            _ => blas::dgemm_strided_batched(
                handle,
                op_n,
                op_n,
                m_,
                n_,
                k_,
                &1.0f64,
                pb as *const f64,
                m_,
                sb,
                pa as *const f64,
                k_,
                sa,
                &0.0f64,
                pc as *mut f64,
                m_,
                sc,
                batches as i32,
            ),
        }
    }
    .map_err(blas_err)
}
