//! The operations on CUDA buffers: each takes buffers with their layouts and returns a new
//! C-contiguous buffer. Elementwise ops run the built-in kernels (`kernels.rs`); the rest are
//! transfers, fills, casts, copies, reductions (built-in reduction kernels) and matrix
//! products (cuBLAS, or a plain kernel for integers and where cuBLAS is missing).

use std::ops::Deref;

use kusari_kernels::{ElementwiseDef, ReductionDef};

use super::device::{CudaDevice, device};
use super::driver::{Gemm, GemmType};
use super::launch::{CudaRef, launch_builtin, launch_on};
use super::memory::CudaStorage;
use super::reduction_launch::launch_reduction_on;
use crate::DType;
use crate::builtin_kernels::reductions::{MAX, MIN, SUM, SUM_INT32, SUM_INT64};
use crate::builtin_kernels::{
    COL2IM, COPY, GREATER_SCALAR, IM2COL, MATMUL, MUL_ADD, POW_SCALAR, WHERE, binary_kernel,
    cast_kernel, compare_kernel, fill_kernel, float_binary_kernel, float_unary_kernel,
    scalar_kernel, unary_kernel,
};
use crate::cpu::CpuStorage;
use crate::dtype::{Element, with_dtype};
use crate::error::{Error, Result};
use crate::launch_plan::LaunchArgs;
use crate::layout::Layout;
use crate::op::{
    BinaryOp, CmpOp, FloatBinaryOp, FloatUnaryOp, Reduction, UnaryOp, require_float,
    require_numeric, unsupported,
};
use crate::window::Window;

/// The bytes of a typed slice (every `Element` is a plain value without padding).
fn as_bytes<T: Element>(v: &[T]) -> &[u8] {
    // SAFETY: `T` is one of bool, i32, i64, f16, bf16, f32, f64: no padding, every byte is
    // initialised, and u8 has alignment 1.
    unsafe { std::slice::from_raw_parts(v.as_ptr().cast::<u8>(), std::mem::size_of_val(v)) }
}

/// A buffer in C order for a layout: the buffer itself when the layout already is, else a copy.
enum InOrder<'a> {
    Same(&'a CudaStorage),
    Copy(CudaStorage),
}

impl Deref for InOrder<'_> {
    type Target = CudaStorage;
    fn deref(&self) -> &CudaStorage {
        match self {
            InOrder::Same(s) => s,
            InOrder::Copy(s) => s,
        }
    }
}

/// The only output of a one-output kernel.
fn only_output(kernel: &ElementwiseDef, outputs: Vec<CudaStorage>) -> Result<CudaStorage> {
    outputs
        .into_iter()
        .next()
        .ok_or_else(|| Error::KernelArguments {
            kernel: kernel.name.to_string(),
            msg: "the kernel has no output".to_string(),
        })
}

impl CudaStorage {
    /// The elements of `l` in C order: this buffer when `l` is C-contiguous (read from
    /// `l.offset()`), else a copy (read from 0).
    fn in_order(&self, l: &Layout) -> Result<(InOrder<'_>, usize)> {
        if l.is_contiguous() {
            return Ok((InOrder::Same(self), l.offset()));
        }
        Ok((InOrder::Copy(self.contiguous(l)?), 0))
    }

    /// A host buffer's elements (with layout `l`) copied to `cuda:ordinal`, in C order.
    pub(crate) fn from_host(src: &CpuStorage, l: &Layout, ordinal: usize) -> Result<Self> {
        let op = format!("to_device(cuda:{ordinal})");
        let dev = device(ordinal, &op)?;
        let dst = CudaStorage::alloc(&dev, l.size(), src.dtype())?;
        with_dtype!(src.dtype(), T => {
            let host = src.typed::<T>("to_device", l)?.to_cow("to_device")?;
            dst.write_from_host(as_bytes(&host))?;
        });
        Ok(dst)
    }

    /// The elements of `l` copied to `cuda:ordinal` (another device), in C order.
    pub(crate) fn to_cuda(&self, l: &Layout, ordinal: usize) -> Result<Self> {
        let op = format!("to_device(cuda:{ordinal})");
        let dev = device(ordinal, &op)?;
        let (src, offset) = self.in_order(l)?;
        let dst = CudaStorage::alloc(&dev, l.size(), self.dtype())?;
        dst.copy_from(&src, offset)?;
        Ok(dst)
    }

    /// The elements of `l` copied to the host, in C order.
    pub(crate) fn to_host(&self, l: &Layout) -> Result<CpuStorage> {
        let (s, offset) = self.in_order(l)?;
        let n = l.size();
        if self.dtype() == DType::Bool {
            // Any byte may come back (memory a kernel did not write): only 0 and 1 are bools.
            let mut bytes: Vec<u8> = crate::cpu::pool::alloc("to_host", n)?;
            bytes.resize(n, 0);
            s.read_to_host(offset, &mut bytes)?;
            if let Some(i) = bytes.iter().position(|&b| b > 1) {
                return Err(Error::Cuda {
                    op: format!("copy a bool array from cuda:{}", self.ordinal()),
                    msg: format!(
                        "element {i} holds the byte {:#04x}, which is not a bool (0 or 1): memory no kernel wrote?",
                        bytes[i]
                    ),
                });
            }
            let v: Vec<bool> = bytes.into_iter().map(|b| b == 1).collect();
            return Ok(CpuStorage::from_vec(v));
        }
        with_dtype!(self.dtype(), T => {
            let mut v: Vec<T> = crate::cpu::pool::alloc("to_host", n)?;
            // SAFETY: the spare capacity is `n` elements; `read_to_host` fills every byte with
            // values the device wrote for `T` (not bool: handled above; every bit pattern is a
            // valid number) before `set_len`.
            unsafe {
                let bytes = std::slice::from_raw_parts_mut(
                    v.as_mut_ptr().cast::<u8>(),
                    n * std::mem::size_of::<T>(),
                );
                s.read_to_host(offset, bytes)?;
                v.set_len(n);
            }
            Ok(CpuStorage::from_vec(v))
        })
    }

    /// A new buffer of `shape`'s size filled with `value` on `cuda:ordinal`.
    pub(crate) fn full(shape: &[usize], value: f64, dtype: DType, ordinal: usize) -> Result<Self> {
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
            return Ok(s);
        }
        let k = fill_kernel(dtype);
        only_output(k, launch_builtin(ordinal, k, &[], &[value], Some(n))?.0)
    }

    /// Runs `kernel` with `args` on `cuda:ordinal`, as [`launch_on`] does.
    pub(crate) fn launch(
        ordinal: usize,
        kernel: &ElementwiseDef,
        args: &LaunchArgs<'_, CudaRef<'_>>,
    ) -> Result<(Vec<Option<CudaStorage>>, Vec<usize>)> {
        launch_on(ordinal, kernel, args)
    }

    /// The elements of `l` in C order, in a buffer of their own.
    pub(crate) fn contiguous(&self, l: &Layout) -> Result<Self> {
        only_output(
            &COPY,
            launch_builtin(self.ordinal(), &COPY, &[(self, l)], &[], None)?.0,
        )
    }

    /// The elements of `l` converted to `dtype`.
    pub(crate) fn astype(&self, l: &Layout, dtype: DType) -> Result<Self> {
        let k = cast_kernel(self.dtype(), dtype);
        only_output(
            k,
            launch_builtin(self.ordinal(), k, &[(self, l)], &[], None)?.0,
        )
    }

    /// Runs an op's kernel on `inputs` (this buffer's device), returning its one output.
    /// Half-precision operands compute in float32, as on the host; with `keep_dtype` the result
    /// goes back to their dtype.
    fn op(
        &self,
        kernel: &ElementwiseDef,
        inputs: &[CudaRef<'_>],
        params: &[f64],
        keep_dtype: bool,
    ) -> Result<Self> {
        let ordinal = self.ordinal();
        let half = inputs
            .iter()
            .map(|(s, _)| s.dtype())
            .find(|d| matches!(d, DType::F16 | DType::BF16));
        let Some(half) = half else {
            return only_output(
                kernel,
                launch_builtin(ordinal, kernel, inputs, params, None)?.0,
            );
        };
        let wide = inputs
            .iter()
            .map(|&(s, l)| match s.dtype() == half {
                true => Ok(Some((
                    s.astype(l, DType::F32)?,
                    Layout::contiguous(l.shape()),
                ))),
                false => Ok(None),
            })
            .collect::<Result<Vec<Option<(CudaStorage, Layout)>>>>()?;
        let refs: Vec<CudaRef<'_>> = wide
            .iter()
            .zip(inputs)
            .map(|(w, &input)| match w {
                Some((s, l)) => (s, l),
                None => input,
            })
            .collect();
        let (outputs, shape) = launch_builtin(ordinal, kernel, &refs, params, None)?;
        let out = only_output(kernel, outputs)?;
        if keep_dtype {
            out.astype(&Layout::contiguous(&shape), half)
        } else {
            Ok(out)
        }
    }

    pub(crate) fn unary<O: UnaryOp>(&self, l: &Layout) -> Result<Self> {
        require_numeric(O::NAME, self.dtype(), l.shape())?;
        self.op(&unary_kernel::<O>(), &[(self, l)], &[], true)
    }

    pub(crate) fn float_unary<O: FloatUnaryOp>(&self, l: &Layout) -> Result<Self> {
        require_float(O::NAME, self.dtype(), l.shape())?;
        self.op(&float_unary_kernel::<O>(), &[(self, l)], &[], true)
    }

    pub(crate) fn binary<O: BinaryOp>(&self, l: &Layout, rhs: &Self, rl: &Layout) -> Result<Self> {
        require_numeric(O::NAME, self.dtype(), l.shape())?;
        self.op(&binary_kernel::<O>(), &[(self, l), (rhs, rl)], &[], true)
    }

    pub(crate) fn float_binary<O: FloatBinaryOp>(
        &self,
        l: &Layout,
        rhs: &Self,
        rl: &Layout,
    ) -> Result<Self> {
        require_float(O::NAME, self.dtype(), l.shape())?;
        self.op(
            &float_binary_kernel::<O>(),
            &[(self, l), (rhs, rl)],
            &[],
            true,
        )
    }

    pub(crate) fn compare<O: CmpOp>(&self, l: &Layout, rhs: &Self, rl: &Layout) -> Result<Self> {
        self.op(&compare_kernel::<O>(), &[(self, l), (rhs, rl)], &[], false)
    }

    pub(crate) fn binary_scalar<O: BinaryOp>(
        &self,
        l: &Layout,
        s: f64,
        scalar_first: bool,
    ) -> Result<Self> {
        require_numeric(O::NAME, self.dtype(), l.shape())?;
        self.op(&scalar_kernel::<O>(scalar_first), &[(self, l)], &[s], true)
    }

    pub(crate) fn pow_scalar(&self, l: &Layout, p: f64) -> Result<Self> {
        require_float("pow", self.dtype(), l.shape())?;
        self.op(&POW_SCALAR, &[(self, l)], &[p], true)
    }

    pub(crate) fn gt_scalar(&self, l: &Layout, s: f64) -> Result<Self> {
        self.op(&GREATER_SCALAR, &[(self, l)], &[s], false)
    }

    pub(crate) fn where_cond(
        &self,
        cl: &Layout,
        (a, al): CudaRef<'_>,
        (b, bl): CudaRef<'_>,
    ) -> Result<Self> {
        self.op(&WHERE, &[(self, cl), (a, al), (b, bl)], &[], true)
    }

    pub(crate) fn mul_add(
        &self,
        xl: &Layout,
        (y, yl): CudaRef<'_>,
        (z, zl): CudaRef<'_>,
    ) -> Result<Self> {
        require_numeric("mul_add", self.dtype(), xl.shape())?;
        self.op(&MUL_ADD, &[(self, xl), (y, yl), (z, zl)], &[], true)
    }

    /// `l`'s elements (planes of the window's input) as columns `[planes, kernel elements,
    /// output positions]`, `pad` outside the input (float32 and float64).
    pub(crate) fn im2col(
        &self,
        op: &'static str,
        l: &Layout,
        w: &Window,
        pad: f64,
    ) -> Result<Self> {
        require_f32_f64(op, self.dtype(), l.shape())?;
        let planes = l.size() / w.input_size().max(1);
        let mut params = window_params(w);
        params.push(pad);
        let size = planes * w.kernel_size() * w.output_size();
        let (outputs, _) =
            launch_builtin(self.ordinal(), &IM2COL, &[(self, l)], &params, Some(size))?;
        only_output(&IM2COL, outputs)
    }

    /// The adjoint of [`CudaStorage::im2col`]: columns summed into planes of the window's
    /// input, each input element gathering what read it.
    pub(crate) fn col2im(&self, op: &'static str, l: &Layout, w: &Window) -> Result<Self> {
        require_f32_f64(op, self.dtype(), l.shape())?;
        let planes = l.size() / (w.kernel_size() * w.output_size()).max(1);
        let size = planes * w.input_size();
        let params = window_params(w);
        let (outputs, _) =
            launch_builtin(self.ordinal(), &COL2IM, &[(self, l)], &params, Some(size))?;
        only_output(&COL2IM, outputs)
    }

    /// Reduces the elements of `l` over `axes` (sorted, distinct), giving the kept axes in C
    /// order. Half-precision buffers are reduced in float32.
    ///
    /// The reduction kernels are built-in `ReductionKernel`s (`reductions.rs`), launched as a
    /// user's are: the input is read in place through its strides, and the launch is planned
    /// from the shape (a thread, a warp or a block per output, or few long reductions split
    /// across blocks with a second pass, so that a full reduction uses every SM).
    pub(crate) fn reduce(
        &self,
        op: &'static str,
        l: &Layout,
        axes: &[usize],
        kind: Reduction,
    ) -> Result<Self> {
        require_numeric(op, self.dtype(), l.shape())?;
        if matches!(self.dtype(), DType::F16 | DType::BF16) {
            let wide = self.astype(l, DType::F32)?;
            let reduced = wide.reduce(op, &Layout::contiguous(l.shape()), axes, kind)?;
            let kept: Vec<usize> = (0..l.ndim())
                .filter(|x| !axes.contains(x))
                .map(|x| l.shape()[x])
                .collect();
            return reduced.astype(&Layout::contiguous(&kept), self.dtype());
        }
        let def = builtin_reduction(kind, self.dtype());
        let mut outputs =
            launch_reduction_on(self.ordinal(), def, &[(self, l)], &[], l.shape(), axes)?;
        Ok(outputs.remove(0))
    }

    /// The product of `self` [.., n, k] and `rhs` [.., k, m] with batch axes broadcast to
    /// `batch`: `batch + [n, m]` in C order. Integer dtypes, and floats where cuBLAS cannot be
    /// loaded, use a plain kernel; float32 and float64 use cuBLAS.
    pub(crate) fn matmul(
        &self,
        l: &Layout,
        rhs: &Self,
        rl: &Layout,
        batch: &[usize],
        (n, k, m): (usize, usize, usize),
    ) -> Result<Self> {
        let dev = device(self.ordinal(), "matmul")?;
        let mut a_shape = batch.to_vec();
        a_shape.extend([n, k]);
        let mut b_shape = batch.to_vec();
        b_shape.extend([k, m]);
        let al = l.broadcast_to(&a_shape, "matmul")?;
        let bl = rl.broadcast_to(&b_shape, "matmul")?;
        let batches: usize = batch.iter().product();
        let fits = |x: usize| i32::try_from(x).is_ok();
        let blas_ok = GemmType::of(self.dtype()).is_some()
            && [n, k, m, batches].into_iter().all(fits)
            && dev.backend.has_blas();
        if !blas_ok {
            // The kernel's `raw` inputs are copied to C order by the launch.
            let params = [n as f64, k as f64, m as f64];
            let inputs = [(self, &al), (rhs, &bl)];
            let size = batches * n * m;
            let (outputs, _) =
                launch_builtin(self.ordinal(), &MATMUL, &inputs, &params, Some(size))?;
            return only_output(&MATMUL, outputs);
        }
        let (a, a_offset) = self.in_order(&al)?;
        let (b, b_offset) = rhs.in_order(&bl)?;
        let out = CudaStorage::alloc(&dev, batches * n * m, self.dtype())?;
        if batches * n * m > 0 {
            if k == 0 {
                out.zero()?;
            } else {
                gemm(
                    &dev,
                    (&a, a_offset),
                    (&b, b_offset),
                    &out,
                    batches,
                    (n, k, m),
                )?;
            }
        }
        Ok(out)
    }
}

/// A window's geometry as the window kernels' parameters (three axes, unit axes first).
fn window_params(w: &Window) -> Vec<f64> {
    w.as_3d().iter().flatten().map(|&v| v as f64).collect()
}

/// float32 or float64, else an error naming `op`.
fn require_f32_f64(op: &'static str, dtype: DType, shape: &[usize]) -> Result<()> {
    match dtype {
        DType::F32 | DType::F64 => Ok(()),
        _ => Err(unsupported(op, dtype, shape, "float32 or float64")),
    }
}

fn gemm(
    dev: &CudaDevice,
    (a, a_offset): (&CudaStorage, usize),
    (b, b_offset): (&CudaStorage, usize),
    out: &CudaStorage,
    batches: usize,
    (n, k, m): (usize, usize, usize),
) -> Result<()> {
    let dtype = GemmType::of(a.dtype())
        .ok_or_else(|| unsupported("matmul", a.dtype(), &[n, k], "float32 or float64 (cuBLAS)"))?;
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
        a: b.ptr_at(b_offset),
        lda: m_,
        stride_a: (k * m) as i64,
        b: a.ptr_at(a_offset),
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

/// The reduction kernel of `kind` over `dtype` (one of int32, int64, float32, float64).
fn builtin_reduction(kind: Reduction, dtype: DType) -> &'static ReductionDef {
    match (kind, dtype) {
        (Reduction::Sum, DType::I32) => &SUM_INT32,
        (Reduction::Sum, DType::I64) => &SUM_INT64,
        (Reduction::Sum, _) => &SUM,
        (Reduction::Max, _) => &MAX,
        (Reduction::Min, _) => &MIN,
    }
}
