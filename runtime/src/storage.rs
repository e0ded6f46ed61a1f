//! Where an array's elements live, and the one place that picks a device: [`Storage`] is an enum
//! over the backends (the CUDA variant is uninhabited when kusari is built without its `cuda`
//! feature), and each operation is a `match` on the device(s) of its operands that hands buffers
//! and layouts to that backend and returns a new buffer. Operands on different devices are
//! [`Error::DeviceMismatch`]. Shapes (broadcasting, views, sizes) are the caller's: `Array`
//! checks them and passes the result's shape where a backend needs it.

use std::borrow::Cow;

use kusari_kernels::ElementwiseDef;

use crate::cpu::{CpuRef, CpuStorage};
use crate::cuda::{CudaRef, CudaStorage};
use crate::dtype::Element;
use crate::error::{Error, Result};
use crate::launch_plan::{LaunchArgs, Operand, RawArg, source_for};
use crate::layout::{Layout, checked_size};
use crate::op::{
    BinaryOp, BnDims, CmpOp, FloatBinaryOp, FloatUnaryOp, Reduction, SoftmaxForm, UnaryOp,
};
use crate::window::{ConvDims, ConvPass, Window};
use crate::{DType, Device};

/// An array's buffer on one device. Shared between views through `Arc`.
#[derive(Debug)]
pub(crate) enum Storage {
    Cpu(CpuStorage),
    Cuda(CudaStorage),
}

/// Operands of `op` on two devices.
#[cold]
fn mismatch(op: &str, lhs: &Storage, rhs: &Storage) -> Error {
    Error::DeviceMismatch {
        op: op.to_string(),
        lhs: lhs.device(),
        rhs: rhs.device(),
    }
}

/// How the host executor reads an input (see [`Storage::run_expr`]).
enum InputKind<'a, T> {
    Slice(&'a [T]),
    Scalar(T),
    Cycle(&'a [T]),
    Gathered(usize),
}

impl Storage {
    pub(crate) fn dtype(&self) -> DType {
        match self {
            Storage::Cpu(s) => s.dtype(),
            Storage::Cuda(s) => s.dtype(),
        }
    }

    pub(crate) fn device(&self) -> Device {
        match self {
            Storage::Cpu(_) => Device::Cpu,
            Storage::Cuda(s) => Device::Cuda(s.ordinal()),
        }
    }

    /// The device buffer, when this is one (what NCCL's calls address).
    #[cfg(feature = "nccl")]
    pub(crate) fn cuda_buffer(&self) -> Option<&CudaStorage> {
        match self {
            Storage::Cpu(_) => None,
            Storage::Cuda(s) => Some(s),
        }
    }

    /// A typed reference to a host buffer with `layout`; `None` on a device or for another
    /// element type.
    pub(crate) fn host_ref<'a, T: Element>(&'a self, layout: &'a Layout) -> Option<CpuRef<'a, T>> {
        match self {
            Storage::Cpu(s) => s.as_slice::<T>().map(|data| CpuRef { data, layout }),
            Storage::Cuda(_) => None,
        }
    }

    /// The elements of `layout` on the host: this buffer when it is there, else a C-contiguous
    /// host copy with its layout.
    pub(crate) fn on_host<'a>(
        &'a self,
        layout: &'a Layout,
    ) -> Result<(Cow<'a, CpuStorage>, Cow<'a, Layout>)> {
        match self {
            Storage::Cpu(s) => Ok((Cow::Borrowed(s), Cow::Borrowed(layout))),
            Storage::Cuda(s) => Ok((
                Cow::Owned(s.to_host(layout)?),
                Cow::Owned(Layout::contiguous(layout.shape())),
            )),
        }
    }

    /// `shape`'s elements of `value` (cast to `dtype`) on `device`; `op` names the operation in
    /// errors.
    pub(crate) fn full(
        op: &'static str,
        shape: &[usize],
        value: f64,
        dtype: DType,
        device: Device,
    ) -> Result<Self> {
        match device {
            Device::Cpu => {
                let size = checked_size(op, shape, dtype)?;
                Ok(Storage::Cpu(CpuStorage::full(op, size, value, dtype)?))
            }
            Device::Cuda(i) => Ok(Storage::Cuda(CudaStorage::full(shape, value, dtype, i)?)),
        }
    }

    /// The elements of `l` on `device`, in C order.
    pub(crate) fn to_device(&self, l: &Layout, device: Device) -> Result<Self> {
        Ok(match (self, device) {
            (Storage::Cpu(s), Device::Cpu) => Storage::Cpu(s.contiguous(l)?),
            (Storage::Cpu(s), Device::Cuda(i)) => Storage::Cuda(CudaStorage::from_host(s, l, i)?),
            (Storage::Cuda(s), Device::Cpu) => Storage::Cpu(s.to_host(l)?),
            (Storage::Cuda(s), Device::Cuda(i)) => Storage::Cuda(s.to_cuda(l, i)?),
        })
    }

    /// The elements of `l` in C order, in a buffer of their own.
    pub(crate) fn contiguous(&self, l: &Layout) -> Result<Self> {
        Ok(match self {
            Storage::Cpu(s) => Storage::Cpu(s.contiguous(l)?),
            Storage::Cuda(s) => Storage::Cuda(s.contiguous(l)?),
        })
    }

    /// A new C-contiguous buffer of `shape` on `device`, `fill` (cast to `dtype`) everywhere
    /// but where the pieces go: each piece's elements (a buffer of `dtype` and its layout) are
    /// copied, in C order, to its destination (a layout into the new buffer of the piece's
    /// shape, each element its own). `op` names the operation in errors.
    pub(crate) fn assemble(
        op: &'static str,
        shape: &[usize],
        dtype: DType,
        fill: f64,
        device: Device,
        pieces: &[(&Self, &Layout, &Layout)],
    ) -> Result<Self> {
        let size = checked_size(op, shape, dtype)?;
        match device {
            Device::Cpu => {
                let mut host = Vec::with_capacity(pieces.len());
                for &(s, l, d) in pieces {
                    match s {
                        Storage::Cpu(c) => host.push((c, l, d)),
                        Storage::Cuda(_) => {
                            return Err(Error::DeviceMismatch {
                                op: op.to_string(),
                                lhs: device,
                                rhs: s.device(),
                            });
                        }
                    }
                }
                Ok(Storage::Cpu(CpuStorage::assemble(
                    op, size, dtype, fill, &host,
                )?))
            }
            Device::Cuda(i) => {
                let mut cuda = Vec::with_capacity(pieces.len());
                for &(s, l, d) in pieces {
                    match s {
                        Storage::Cuda(c) if c.ordinal() == i => cuda.push(((c, l), d)),
                        _ => {
                            return Err(Error::DeviceMismatch {
                                op: op.to_string(),
                                lhs: device,
                                rhs: s.device(),
                            });
                        }
                    }
                }
                Ok(Storage::Cuda(CudaStorage::assemble(
                    shape, dtype, fill, i, &cuda,
                )?))
            }
        }
    }

    /// Rows `idx` of `l` seen as `[outer, n, inner]` along its middle axis (indices below `n`,
    /// a zero row for a negative one): `[outer, idx.len(), inner]` in C order.
    pub(crate) fn take(
        &self,
        l: &Layout,
        idx: &[i64],
        dims: (usize, usize, usize),
    ) -> Result<Self> {
        Ok(match self {
            Storage::Cpu(s) => Storage::Cpu(s.take(l, idx, dims)?),
            Storage::Cuda(s) => Storage::Cuda(s.take(l, idx, dims)?),
        })
    }

    /// The adjoint of [`take`](Self::take): `l` seen as `[outer, idx.len(), inner]` added into
    /// zeros `[outer, n_out, inner]` at rows `idx` (negative ones dropped), in the order of
    /// `idx` on every device.
    pub(crate) fn scatter_add(
        &self,
        l: &Layout,
        idx: &[i64],
        n_out: usize,
        dims: (usize, usize),
    ) -> Result<Self> {
        Ok(match self {
            Storage::Cpu(s) => Storage::Cpu(s.scatter_add(l, idx, n_out, dims)?),
            Storage::Cuda(s) => Storage::Cuda(s.scatter_add(l, idx, n_out, dims)?),
        })
    }

    /// The elements of `l` converted to `dtype`, in C order.
    pub(crate) fn astype(&self, l: &Layout, dtype: DType) -> Result<Self> {
        Ok(match self {
            Storage::Cpu(s) => Storage::Cpu(s.astype(l, dtype)?),
            Storage::Cuda(s) => Storage::Cuda(s.astype(l, dtype)?),
        })
    }

    #[inline]
    pub(crate) fn unary<O: UnaryOp>(&self, l: &Layout) -> Result<Self> {
        Ok(match self {
            Storage::Cpu(s) => Storage::Cpu(s.unary::<O>(l)?),
            Storage::Cuda(s) => Storage::Cuda(s.unary::<O>(l)?),
        })
    }

    #[inline]
    pub(crate) fn float_unary<O: FloatUnaryOp>(&self, l: &Layout) -> Result<Self> {
        Ok(match self {
            Storage::Cpu(s) => Storage::Cpu(s.float_unary::<O>(l)?),
            Storage::Cuda(s) => Storage::Cuda(s.float_unary::<O>(l)?),
        })
    }

    /// `O` over `self` and `rhs` broadcast to `shape` (checked by the caller).
    #[inline]
    pub(crate) fn binary<O: BinaryOp>(
        &self,
        l: &Layout,
        rhs: &Self,
        rl: &Layout,
        shape: &[usize],
    ) -> Result<Self> {
        Ok(match (self, rhs) {
            (Storage::Cpu(a), Storage::Cpu(b)) => Storage::Cpu(a.binary::<O>(l, b, rl, shape)?),
            (Storage::Cuda(a), Storage::Cuda(b)) => Storage::Cuda(a.binary::<O>(l, b, rl)?),
            _ => return Err(mismatch(O::NAME, self, rhs)),
        })
    }

    /// `O` over `self` and `rhs` broadcast to `shape` (checked by the caller).
    #[inline]
    pub(crate) fn float_binary<O: FloatBinaryOp>(
        &self,
        l: &Layout,
        rhs: &Self,
        rl: &Layout,
        shape: &[usize],
    ) -> Result<Self> {
        Ok(match (self, rhs) {
            (Storage::Cpu(a), Storage::Cpu(b)) => {
                Storage::Cpu(a.float_binary::<O>(l, b, rl, shape)?)
            }
            (Storage::Cuda(a), Storage::Cuda(b)) => Storage::Cuda(a.float_binary::<O>(l, b, rl)?),
            _ => return Err(mismatch(O::NAME, self, rhs)),
        })
    }

    /// `O` over `self` and `rhs` broadcast to `shape` (checked by the caller), as bools.
    #[inline]
    pub(crate) fn compare<O: CmpOp>(
        &self,
        l: &Layout,
        rhs: &Self,
        rl: &Layout,
        shape: &[usize],
    ) -> Result<Self> {
        Ok(match (self, rhs) {
            (Storage::Cpu(a), Storage::Cpu(b)) => Storage::Cpu(a.compare::<O>(l, b, rl, shape)?),
            (Storage::Cuda(a), Storage::Cuda(b)) => Storage::Cuda(a.compare::<O>(l, b, rl)?),
            _ => return Err(mismatch(O::NAME, self, rhs)),
        })
    }

    /// `O` with the scalar `s` as its second operand, or its first.
    #[inline]
    pub(crate) fn binary_scalar<O: BinaryOp>(
        &self,
        l: &Layout,
        s: f64,
        scalar_first: bool,
    ) -> Result<Self> {
        Ok(match self {
            Storage::Cpu(a) => Storage::Cpu(a.binary_scalar::<O>(l, s, scalar_first)?),
            Storage::Cuda(a) => Storage::Cuda(a.binary_scalar::<O>(l, s, scalar_first)?),
        })
    }

    pub(crate) fn pow_scalar(&self, l: &Layout, p: f64) -> Result<Self> {
        Ok(match self {
            Storage::Cpu(a) => Storage::Cpu(a.pow_scalar(l, p)?),
            Storage::Cuda(a) => Storage::Cuda(a.pow_scalar(l, p)?),
        })
    }

    /// `self > s` as bools, for an `s` the dtype holds exactly.
    pub(crate) fn gt_scalar(&self, l: &Layout, s: f64) -> Result<Self> {
        Ok(match self {
            Storage::Cpu(a) => Storage::Cpu(a.gt_scalar(l, s)?),
            Storage::Cuda(a) => Storage::Cuda(a.gt_scalar(l, s)?),
        })
    }

    /// Elements of `a` where `self` (bools) holds, of `b` elsewhere, all broadcast to `shape`.
    pub(crate) fn where_cond(
        &self,
        cl: &Layout,
        (a, al): (&Self, &Layout),
        (b, bl): (&Self, &Layout),
        shape: &[usize],
    ) -> Result<Self> {
        const OP: &str = "where";
        Ok(match (self, a, b) {
            (Storage::Cpu(c), Storage::Cpu(x), Storage::Cpu(y)) => {
                Storage::Cpu(CpuStorage::where_cond(c, cl, x, al, y, bl, shape)?)
            }
            (Storage::Cuda(c), Storage::Cuda(x), Storage::Cuda(y)) => {
                Storage::Cuda(c.where_cond(cl, (x, al), (y, bl))?)
            }
            (Storage::Cpu(_), Storage::Cpu(_), _) | (Storage::Cuda(_), Storage::Cuda(_), _) => {
                return Err(mismatch(OP, a, b));
            }
            _ => return Err(mismatch(OP, self, a)),
        })
    }

    /// `self * y + z`, all broadcast to `shape`.
    #[inline]
    pub(crate) fn mul_add(
        &self,
        xl: &Layout,
        (y, yl): (&Self, &Layout),
        (z, zl): (&Self, &Layout),
        shape: &[usize],
    ) -> Result<Self> {
        const OP: &str = "mul_add";
        Ok(match (self, y, z) {
            (Storage::Cpu(x), Storage::Cpu(y), Storage::Cpu(z)) => {
                Storage::Cpu(CpuStorage::mul_add(x, xl, y, yl, z, zl, shape)?)
            }
            (Storage::Cuda(x), Storage::Cuda(y), Storage::Cuda(z)) => {
                Storage::Cuda(x.mul_add(xl, (y, yl), (z, zl))?)
            }
            (Storage::Cpu(_), Storage::Cpu(_), _) | (Storage::Cuda(_), Storage::Cuda(_), _) => {
                return Err(mismatch(OP, self, z));
            }
            _ => return Err(mismatch(OP, self, y)),
        })
    }

    /// Softmax or log-softmax along the last axis as one fused operation, C order of `l`'s
    /// shape, where the device has one (the host, for float32 and float64); `None` where the
    /// caller composes it from array operations.
    pub(crate) fn softmax_last(&self, l: &Layout, form: SoftmaxForm) -> Result<Option<Self>> {
        match self {
            Storage::Cpu(s) => Ok(s.softmax_last(l, form)?.map(Storage::Cpu)),
            Storage::Cuda(_) => Ok(None),
        }
    }

    /// The gradient of softmax or log-softmax along the last axis from its output `self` and
    /// the output's gradient `gy` (one shape), fused, where the device has it (the host, float32
    /// and float64); `None` where the caller composes it.
    pub(crate) fn softmax_grad_last(
        &self,
        l: &Layout,
        gy: &Self,
        gl: &Layout,
        form: SoftmaxForm,
    ) -> Result<Option<Self>> {
        match (self, gy) {
            (Storage::Cpu(s), Storage::Cpu(g)) => {
                Ok(s.softmax_grad_last(l, g, gl, form)?.map(Storage::Cpu))
            }
            _ => Ok(None),
        }
    }

    /// Each row's cross-entropy against its label of a `[N, C]` buffer, fused, where the device
    /// has it (the host, float32 and float64); `None` elsewhere.
    pub(crate) fn cross_entropy_rows(&self, l: &Layout, labels: &[i64]) -> Result<Option<Self>> {
        match self {
            Storage::Cpu(s) => Ok(s.cross_entropy_rows(l, labels)?.map(Storage::Cpu)),
            Storage::Cuda(_) => Ok(None),
        }
    }

    /// The softmax cross-entropy's gradient, row by row, where the device has it fused (the
    /// host, float32 and float64); `None` elsewhere.
    pub(crate) fn cross_entropy_grad_rows(
        &self,
        l: &Layout,
        labels: &[i64],
        scale: f64,
    ) -> Result<Option<Self>> {
        match self {
            Storage::Cpu(s) => Ok(s
                .cross_entropy_grad_rows(l, labels, scale)?
                .map(Storage::Cpu)),
            Storage::Cuda(_) => Ok(None),
        }
    }

    /// The reduction of `l`'s elements over `axes` (sorted, distinct), the kept axes in C order.
    pub(crate) fn reduce(
        &self,
        op: &'static str,
        l: &Layout,
        axes: &[usize],
        kind: Reduction,
    ) -> Result<Self> {
        Ok(match self {
            Storage::Cpu(s) => Storage::Cpu(s.reduce(op, l, axes, kind)?),
            Storage::Cuda(s) => Storage::Cuda(s.reduce(op, l, axes, kind)?),
        })
    }

    /// `l`'s elements, planes of `w`'s input, as columns `[planes, kernel elements, output
    /// positions]` in C order, `pad` where a window leaves the input.
    pub(crate) fn im2col(
        &self,
        op: &'static str,
        l: &Layout,
        w: &Window,
        pad: f64,
    ) -> Result<Self> {
        Ok(match self {
            Storage::Cpu(s) => Storage::Cpu(s.im2col(op, l, w, pad)?),
            Storage::Cuda(s) => Storage::Cuda(s.im2col(op, l, w, pad)?),
        })
    }

    /// The adjoint of [`Storage::im2col`]: columns `[planes, kernel elements, output
    /// positions]` summed into planes of `w`'s input, C order.
    pub(crate) fn col2im(&self, op: &'static str, l: &Layout, w: &Window) -> Result<Self> {
        Ok(match self {
            Storage::Cpu(s) => Storage::Cpu(s.col2im(op, l, w)?),
            Storage::Cuda(s) => Storage::Cuda(s.col2im(op, l, w)?),
        })
    }

    /// One of a convolution's products of `self` and `rhs` fused, where the device has it (the
    /// host, float32 and float64: a sample at a time); `None` where the caller composes it.
    pub(crate) fn conv(
        &self,
        op: &'static str,
        l: &Layout,
        (rhs, rl): (&Self, &Layout),
        w: &Window,
        d: ConvDims,
        pass: ConvPass,
    ) -> Result<Option<Self>> {
        match (self, rhs) {
            (Storage::Cpu(a), Storage::Cpu(b)) => {
                Ok(a.conv(op, l, (b, rl), w, d, pass)?.map(Storage::Cpu))
            }
            (Storage::Cuda(_), Storage::Cuda(_)) => Ok(None),
            _ => Err(mismatch(op, self, rhs)),
        }
    }

    /// Batch normalization of `self` (`(N, P, S)`) per `p`, fused where the device has it (the
    /// host, float32 and float64): `[y, mean, var, inv_std]`; `None` where the caller composes
    /// it.
    pub(crate) fn batch_norm(
        &self,
        l: &Layout,
        (gamma, gl): (&Self, &Layout),
        (beta, bl): (&Self, &Layout),
        d: BnDims,
        eps: f64,
    ) -> Result<Option<[Self; 4]>> {
        match (self, gamma, beta) {
            (Storage::Cpu(x), Storage::Cpu(g), Storage::Cpu(b)) => Ok(x
                .batch_norm(l, (g, gl), (b, bl), d, eps)?
                .map(|r| r.map(Storage::Cpu))),
            _ => Ok(None),
        }
    }

    /// The gradients `[gx, ggamma, gbeta]` of [`Storage::batch_norm`] for `gy`, fused where the
    /// device has it; `None` elsewhere.
    pub(crate) fn batch_norm_grad(
        &self,
        l: &Layout,
        rest: [(&Self, &Layout); 4],
        d: BnDims,
    ) -> Result<Option<[Self; 3]>> {
        let Storage::Cpu(x) = self else {
            return Ok(None);
        };
        let mut host = Vec::with_capacity(4);
        for (s, sl) in rest {
            match s {
                Storage::Cpu(s) => host.push((s, sl)),
                Storage::Cuda(_) => return Ok(None),
            }
        }
        let rest = [host[0], host[1], host[2], host[3]];
        Ok(x.batch_norm_grad(l, rest, d)?.map(|r| r.map(Storage::Cpu)))
    }

    /// `self @ rhs` for operands shaped `[.., n, k]` and `[.., k, m]` whose batch axes broadcast
    /// to `batch` (checked by the caller): `batch + [n, m]` in C order.
    pub(crate) fn matmul(
        &self,
        l: &Layout,
        rhs: &Self,
        rl: &Layout,
        batch: &[usize],
        nkm: (usize, usize, usize),
    ) -> Result<Self> {
        Ok(match (self, rhs) {
            (Storage::Cpu(a), Storage::Cpu(b)) => Storage::Cpu(a.matmul(l, b, rl, batch, nkm)?),
            (Storage::Cuda(a), Storage::Cuda(b)) => Storage::Cuda(a.matmul(l, b, rl, batch, nkm)?),
            _ => return Err(mismatch("matmul", self, rhs)),
        })
    }

    /// Runs the elementwise `kernel` with `args` (CUDA buffers on one device; scalars where
    /// inputs are scalars), returning per output its new C-contiguous buffer (`None` for an
    /// output the caller gave, written in place) and the loop's shape. The device is the
    /// arrays', or `device` when no array is given (a launch of a kernel without array
    /// arguments), which must then be a CUDA device.
    ///
    /// Kernels run on CUDA only: host arrays are checked as a launch would check them (the
    /// kernel's definition, the binding of its placeholders, broadcasting, its source, the
    /// parameters) and then refused with [`Error::CudaUnavailable`]; host and CUDA arrays
    /// mixed, or arrays on another device than `device`, are [`Error::DeviceMismatch`].
    pub(crate) fn launch(
        kernel: &ElementwiseDef,
        args: &LaunchArgs<'_, (&Self, &Layout)>,
        device: Option<Device>,
    ) -> Result<(Vec<Option<Self>>, Vec<usize>)> {
        let label = || format!("kernel {}", kernel.name);
        let arrays: Vec<&Self> = args
            .inputs
            .iter()
            .filter_map(|a| match a {
                Operand::Array((s, _)) => Some(*s),
                Operand::Scalar(_) => None,
            })
            .chain(args.outputs.iter().flatten().map(|(s, _)| *s))
            .collect();
        let on = arrays.first().map(|s| s.device()).or(device);
        if let Some(other) = arrays
            .iter()
            .map(|s| s.device())
            .chain(device)
            .find(|&d| Some(d) != on)
        {
            return Err(Error::DeviceMismatch {
                op: label(),
                lhs: on.unwrap_or(Device::Cpu),
                rhs: other,
            });
        }
        match on {
            Some(Device::Cuda(ordinal)) => {
                fn cuda<'s>((s, l): (&'s Storage, &'s Layout)) -> Option<CudaRef<'s>> {
                    match s {
                        Storage::Cuda(c) => Some((c, l)),
                        Storage::Cpu(_) => None,
                    }
                }
                let cuda_args = LaunchArgs {
                    inputs: args
                        .inputs
                        .iter()
                        .filter_map(|a| match *a {
                            Operand::Array(a) => cuda(a).map(Operand::Array),
                            Operand::Scalar(v) => Some(Operand::Scalar(v)),
                        })
                        .collect(),
                    params: args.params,
                    outputs: args
                        .outputs
                        .as_ref()
                        .map(|o| o.iter().filter_map(|&a| cuda(a)).collect()),
                    size: args.size,
                    reduce_dims: args.reduce_dims,
                    cast_params: args.cast_params,
                };
                let (outputs, shape) = CudaStorage::launch(ordinal, kernel, &cuda_args)?;
                Ok((
                    outputs.into_iter().map(|o| o.map(Storage::Cuda)).collect(),
                    shape,
                ))
            }
            host => {
                let described = args.map_arrays(|(s, l)| (s.dtype(), l));
                source_for(kernel, &described)?;
                Err(Error::CudaUnavailable {
                    op: label(),
                    reason: match host {
                        Some(d) if arrays.is_empty() => format!(
                            "it has no array argument, and the device it runs on is {d} (give a \
                             CUDA device, or make one the default with using_device)"
                        ),
                        Some(d) => format!(
                            "its arrays must be CUDA arrays, but one is on {d} (move it with to_device)"
                        ),
                        None => "it has no array argument and no device was given".to_string(),
                    },
                })
            }
        }
    }

    /// Runs the reduction kernel `def` over `inputs` (CUDA buffers on one device, their layouts
    /// broadcast to `shape`) reducing `axes` (sorted, distinct), with `params` converted to their
    /// declared types; returns its outputs, C-contiguous over the kept axes. Host inputs are
    /// refused with [`Error::CudaUnavailable`] (the kernel is CUDA code), host and CUDA inputs
    /// mixed with [`Error::DeviceMismatch`].
    pub(crate) fn launch_reduction(
        def: &kusari_kernels::ReductionDef,
        inputs: &[(&Self, &Layout)],
        params: &[crate::scalar::Scalar],
        shape: &[usize],
        axes: &[usize],
    ) -> Result<Vec<Self>> {
        let label = || format!("kernel {}", def.name);
        let mut cuda: Vec<CudaRef<'_>> = Vec::with_capacity(inputs.len());
        let mut host = None;
        for &(s, l) in inputs {
            match s {
                Storage::Cuda(c) => cuda.push((c, l)),
                Storage::Cpu(_) => host = host.or(Some(s)),
            }
        }
        match (cuda.first(), host) {
            (Some((gpu, _)), Some(host)) => Err(Error::DeviceMismatch {
                op: label(),
                lhs: Device::Cuda(gpu.ordinal()),
                rhs: host.device(),
            }),
            (Some((first, _)), None) => {
                let outputs = crate::cuda::launch_reduction_on(
                    first.ordinal(),
                    def,
                    &cuda,
                    params,
                    shape,
                    axes,
                )?;
                Ok(outputs.into_iter().map(Storage::Cuda).collect())
            }
            (None, Some(host)) => Err(Error::CudaUnavailable {
                op: label(),
                reason: format!(
                    "a reduction kernel is CUDA code: its inputs must be CUDA arrays, but one is on {} (move it with to_device)",
                    host.device()
                ),
            }),
            (None, None) => Err(Error::InputCount {
                function: label(),
                expected: 1,
                actual: 0,
            }),
        }
    }

    /// Launches the raw kernel `name` (the function `src.entry` of the module `src`) with
    /// `args` on the CUDA device its arrays are on, or on `fallback` where no argument is an
    /// array. A host array is refused, naming the argument; so is a launch with no array whose
    /// fallback is the host.
    ///
    /// # Safety
    /// `args` match the kernel's parameter list in count, order and widths, and every array is
    /// large enough for what the kernel reaches through it.
    pub(crate) unsafe fn launch_raw(
        name: &str,
        code: &crate::launch_plan::RawCode,
        loads: &crate::cuda::RawLoads,
        dims: crate::cuda::RawDims,
        args: &[RawArg<(&Self, &Layout)>],
        fallback: Device,
    ) -> Result<()> {
        let refused = |msg: String| Error::KernelArguments {
            kernel: name.to_string(),
            msg,
        };
        let mut ordinal = None;
        let mut cuda = Vec::with_capacity(args.len());
        for (i, a) in args.iter().enumerate() {
            cuda.push(match *a {
                RawArg::Array((Storage::Cuda(s), l)) => {
                    ordinal.get_or_insert(s.ordinal());
                    RawArg::Array((s, l))
                }
                RawArg::Array((host @ Storage::Cpu(_), l)) => {
                    return Err(refused(format!(
                        "argument {i} is an array on the host ({} {:?}); a raw kernel takes \
                         arrays on a CUDA device (move it with `to_device`)",
                        host.dtype(),
                        l.shape()
                    )));
                }
                RawArg::Value(bits, width) => RawArg::Value(bits, width),
            });
        }
        let ordinal = match (ordinal, fallback) {
            (Some(o), _) | (None, Device::Cuda(o)) => o,
            (None, Device::Cpu) => {
                return Err(refused(
                    "no array argument says which CUDA device to run on, and the default \
                     device is the host (set one with `using_device`)"
                        .to_string(),
                ));
            }
        };
        // SAFETY: forwarded contract.
        unsafe { crate::cuda::launch_raw(ordinal, code, loads, dims, &cuda) }
    }

    /// Runs the expression program `program` on host arrays `inputs` (one float dtype,
    /// broadcast to `shape`) with `params` (in that dtype): one new buffer per output. An input
    /// of the full shape and C-contiguous is read in place, one of one element as a scalar, any
    /// other is gathered into C order of `shape` first.
    pub(crate) fn run_expr(
        op: &'static str,
        program: &kusari_kernels::expr::Program,
        inputs: &[(&Self, &Layout)],
        params: &[f64],
        shape: &[usize],
    ) -> Result<Vec<Self>> {
        let dtype = inputs.first().map_or(DType::F32, |(s, _)| s.dtype());
        match dtype {
            DType::F32 => Self::run_expr_as::<f32>(op, program, inputs, params, shape),
            DType::F64 => Self::run_expr_as::<f64>(op, program, inputs, params, shape),
            DType::F16 | DType::BF16 => {
                // Computed in float32, each output rounded once to the half type: what the CUDA
                // kernel's half arithmetic does, which goes through `float`.
                let wide: Vec<(Self, Layout)> = inputs
                    .iter()
                    .map(|(s, l)| Ok((s.astype(l, DType::F32)?, Layout::contiguous(l.shape()))))
                    .collect::<Result<_>>()?;
                let refs: Vec<(&Self, &Layout)> = wide.iter().map(|(s, l)| (s, l)).collect();
                let out = Layout::contiguous(shape);
                Self::run_expr_as::<f32>(op, program, &refs, params, shape)?
                    .iter()
                    .map(|s| s.astype(&out, dtype))
                    .collect()
            }
            other => Err(Error::UnsupportedDType {
                op,
                dtype: other,
                shape: shape.to_vec(),
                expected: "a floating-point dtype",
            }),
        }
    }

    fn run_expr_as<T: crate::cpu::expr::HostFloat>(
        op: &'static str,
        program: &kusari_kernels::expr::Program,
        inputs: &[(&Self, &Layout)],
        params: &[f64],
        shape: &[usize],
    ) -> Result<Vec<Self>> {
        use crate::cpu::expr::{Operand, run};
        let n = checked_size(op, shape, T::DTYPE)?;
        let refs: Vec<CpuRef<'_, T>> = inputs
            .iter()
            .map(|(s, l)| match s {
                Storage::Cpu(c) => c.typed::<T>(op, l),
                Storage::Cuda(_) => Err(Error::DeviceMismatch {
                    op: op.to_string(),
                    lhs: Device::Cpu,
                    rhs: s.device(),
                }),
            })
            .collect::<Result<_>>()?;
        // How each input is read: whole, one value, a contiguous block repeated along leading
        // axes (a bias row), or gathered into C order of `shape` a row at a time.
        let mut gathered: Vec<Vec<T>> = Vec::new();
        let mut kinds: Vec<InputKind<T>> = Vec::with_capacity(refs.len());
        for r in &refs {
            let l = r.layout;
            let strides = l.strides();
            let repeats_one = l
                .shape()
                .iter()
                .zip(&strides)
                .all(|(&d, &st)| d <= 1 || st == 0);
            // The input's shape without its leading 1s, as the trailing axes of `shape`.
            let core = &l.shape()[l.shape().iter().take_while(|&&d| d == 1).count()..];
            let padded = shape.len() >= core.len() && shape[shape.len() - core.len()..] == *core;
            let kind = match r.contiguous() {
                Some(c) if l.shape() == shape => InputKind::Slice(c),
                _ if repeats_one || n <= 1 => {
                    InputKind::Scalar(r.data.get(l.offset()).copied().unwrap_or_default())
                }
                Some(c) if padded && !c.is_empty() => InputKind::Cycle(c),
                _ => {
                    let view = r.view();
                    let b = view
                        .broadcast(ndarray::IxDyn(shape))
                        .expect("the caller broadcast the inputs to `shape`");
                    let mut v: Vec<T> = Vec::with_capacity(n);
                    for lane in b.lanes(ndarray::Axis(shape.len() - 1)) {
                        match lane.as_slice() {
                            Some(s) => v.extend_from_slice(s),
                            None => v.extend(lane.iter().copied()),
                        }
                    }
                    gathered.push(v);
                    InputKind::Gathered(gathered.len() - 1)
                }
            };
            kinds.push(kind);
        }
        let operands: Vec<Operand<'_, T>> = kinds
            .iter()
            .map(|k| match *k {
                InputKind::Slice(c) => Operand::Slice(c),
                InputKind::Scalar(v) => Operand::Scalar(v),
                InputKind::Cycle(c) => Operand::Cycle(c),
                InputKind::Gathered(i) => Operand::Slice(&gathered[i]),
            })
            .collect();
        let params: Vec<T> = params.iter().map(|&p| T::from_f64(p)).collect();
        Ok(run(op, program, &operands, &params, n)?
            .into_iter()
            .map(|v| Storage::Cpu(CpuStorage::from_vec(v)))
            .collect())
    }

    /// Compiles the raw module of `code` (named `name` in errors) for `device` and loads it there.
    /// The host is an error: a raw module is CUDA code.
    pub(crate) fn compile_raw(
        name: &str,
        code: &crate::launch_plan::RawCode,
        device: Device,
    ) -> Result<()> {
        match device {
            Device::Cuda(o) => crate::cuda::compile_raw(o, code),
            Device::Cpu => Err(Error::KernelArguments {
                kernel: name.to_string(),
                msg: "a raw module is compiled for a CUDA device, and the device given is the \
                      host"
                    .to_string(),
            }),
        }
    }
}
