//! The CUDA backend's stand-in when kusari is built without the `cuda` feature: the same API,
//! and every operation that would touch a GPU returns [`Error::CudaUnavailable`].
//!
//! ```
//! assert_eq!(kusari::cuda::device_count(), 0);
//! ```

use kusari_kernels::ElementwiseDef;

use crate::cpu::CpuStorage;
use crate::error::{Error, Result};
use crate::launch_plan::{CachedVariant, LaunchArgs, RawArg};
use crate::layout::Layout;
use crate::op::{BinaryOp, CmpOp, FloatBinaryOp, FloatUnaryOp, Reduction, UnaryOp};
use crate::window::Window;
use crate::{DType, Device};

/// Why nothing of CUDA runs in this build; where `KUSARI_CUDA_EMULATE` asks for the emulated
/// device, also that it is part of the missing feature.
fn reason() -> String {
    let base = "kusari was built without its `cuda` feature";
    match crate::env::cuda_emulate() {
        Ok(v) if !v.trim().is_empty() && v.trim() != "0" => format!(
            "{base} (KUSARI_CUDA_EMULATE={v:?} asks for the emulated CUDA device, which is part \
             of that feature: build with it to run CUDA code on the host)"
        ),
        _ => base.to_string(),
    }
}

fn unavailable(op: &str) -> Error {
    Error::CudaUnavailable {
        op: op.to_string(),
        reason: reason(),
    }
}

/// Reduction kernels need CUDA: never reached, as no CUDA buffer exists in this build.
pub(crate) fn launch_reduction_on(
    ordinal: usize,
    _def: &kusari_kernels::ReductionDef,
    _inputs: &[CudaRef<'_>],
    _params: &[crate::scalar::Scalar],
    _shape: &[usize],
    _axes: &[usize],
) -> Result<Vec<CudaStorage>> {
    Err(unavailable(&format!("reduction kernel on cuda:{ordinal}")))
}

/// A CUDA buffer: none can exist in this build, so every method is a `match` on nothing.
#[derive(Debug)]
pub(crate) enum CudaStorage {}

/// A CUDA buffer and the layout into it.
pub(crate) type CudaRef<'a> = (&'a CudaStorage, &'a Layout);

impl CudaStorage {
    pub(crate) fn dtype(&self) -> DType {
        match *self {}
    }

    pub(crate) fn ordinal(&self) -> usize {
        match *self {}
    }

    pub(crate) fn full(
        _shape: &[usize],
        _value: f64,
        _dtype: DType,
        ordinal: usize,
    ) -> Result<Self> {
        Err(unavailable(&format!("full_on(cuda:{ordinal})")))
    }

    pub(crate) fn from_host(_src: &CpuStorage, _l: &Layout, ordinal: usize) -> Result<Self> {
        Err(unavailable(&format!("to_device(cuda:{ordinal})")))
    }

    pub(crate) fn to_cuda(&self, _l: &Layout, _ordinal: usize) -> Result<Self> {
        match *self {}
    }

    pub(crate) fn to_host(&self, _l: &Layout) -> Result<CpuStorage> {
        match *self {}
    }

    pub(crate) fn launch(
        ordinal: usize,
        kernel: &ElementwiseDef,
        _args: &LaunchArgs<'_, CudaRef<'_>>,
    ) -> Result<(Vec<Option<CudaStorage>>, Vec<usize>)> {
        Err(unavailable(&format!(
            "kernel {} on cuda:{ordinal}",
            kernel.name
        )))
    }

    pub(crate) fn assemble(
        _shape: &[usize],
        _dtype: DType,
        _fill: f64,
        ordinal: usize,
        _pieces: &[(CudaRef<'_>, &Layout)],
    ) -> Result<Self> {
        Err(unavailable(&format!("assemble on cuda:{ordinal}")))
    }

    pub(crate) fn take(
        &self,
        _l: &Layout,
        _idx: &[i64],
        _dims: (usize, usize, usize),
    ) -> Result<Self> {
        match *self {}
    }

    pub(crate) fn scatter_add(
        &self,
        _l: &Layout,
        _idx: &[i64],
        _n_out: usize,
        _dims: (usize, usize),
    ) -> Result<Self> {
        match *self {}
    }

    pub(crate) fn contiguous(&self, _l: &Layout) -> Result<Self> {
        match *self {}
    }

    pub(crate) fn astype(&self, _l: &Layout, _dtype: DType) -> Result<Self> {
        match *self {}
    }

    pub(crate) fn unary<O: UnaryOp>(&self, _l: &Layout) -> Result<Self> {
        match *self {}
    }

    pub(crate) fn float_unary<O: FloatUnaryOp>(&self, _l: &Layout) -> Result<Self> {
        match *self {}
    }

    pub(crate) fn binary<O: BinaryOp>(
        &self,
        _l: &Layout,
        _rhs: &Self,
        _rl: &Layout,
    ) -> Result<Self> {
        match *self {}
    }

    pub(crate) fn float_binary<O: FloatBinaryOp>(
        &self,
        _l: &Layout,
        _rhs: &Self,
        _rl: &Layout,
    ) -> Result<Self> {
        match *self {}
    }

    pub(crate) fn compare<O: CmpOp>(&self, _l: &Layout, _rhs: &Self, _rl: &Layout) -> Result<Self> {
        match *self {}
    }

    pub(crate) fn binary_scalar<O: BinaryOp>(
        &self,
        _l: &Layout,
        _s: f64,
        _scalar_first: bool,
    ) -> Result<Self> {
        match *self {}
    }

    pub(crate) fn pow_scalar(&self, _l: &Layout, _p: f64) -> Result<Self> {
        match *self {}
    }

    pub(crate) fn gt_scalar(&self, _l: &Layout, _s: f64) -> Result<Self> {
        match *self {}
    }

    pub(crate) fn where_cond(
        &self,
        _cl: &Layout,
        _a: CudaRef<'_>,
        _b: CudaRef<'_>,
    ) -> Result<Self> {
        match *self {}
    }

    pub(crate) fn mul_add(&self, _xl: &Layout, _y: CudaRef<'_>, _z: CudaRef<'_>) -> Result<Self> {
        match *self {}
    }

    pub(crate) fn reduce(
        &self,
        _op: &'static str,
        _l: &Layout,
        _axes: &[usize],
        _kind: Reduction,
    ) -> Result<Self> {
        match *self {}
    }

    pub(crate) fn im2col(
        &self,
        _op: &'static str,
        _l: &Layout,
        _w: &Window,
        _pad: f64,
    ) -> Result<Self> {
        match *self {}
    }

    pub(crate) fn col2im(&self, _op: &'static str, _l: &Layout, _w: &Window) -> Result<Self> {
        match *self {}
    }

    pub(crate) fn matmul(
        &self,
        _l: &Layout,
        _rhs: &Self,
        _rl: &Layout,
        _batch: &[usize],
        _nkm: (usize, usize, usize),
    ) -> Result<Self> {
        match *self {}
    }
}

pub use kusari_kernels::KernelStats;

/// The counters (all zero in this build).
pub fn kernel_stats() -> KernelStats {
    KernelStats::default()
}

/// Number of CUDA devices: 0 in this build.
pub fn device_count() -> usize {
    0
}

/// Whether a CUDA device can be used: never in this build.
pub fn is_available() -> bool {
    false
}

/// Why CUDA cannot be used: this build has no CUDA backend.
pub fn unavailable_reason() -> Option<String> {
    Some(reason())
}

/// Waits for a device: an error for `cuda:N` in this build.
pub fn synchronize(device: Device) -> Result<()> {
    match device {
        Device::Cpu => Ok(()),
        Device::Cuda(i) => Err(unavailable(&format!("synchronize(cuda:{i})"))),
    }
}

/// A device's name and compute capability: an error in this build.
pub fn properties(ordinal: usize) -> Result<(String, (u32, u32))> {
    Err(unavailable(&format!("properties(cuda:{ordinal})")))
}

pub use crate::device::host_fallback_count;

pub use crate::device::DeviceProperties;

/// A device's properties: an error in this build.
pub fn device_properties(ordinal: usize) -> Result<DeviceProperties> {
    Err(unavailable(&format!("properties(cuda:{ordinal})")))
}

/// The emulated CUDA device: an error in this build, which has no CUDA backend to emulate.
pub fn emulate(devices: usize) -> Result<()> {
    Err(unavailable(&format!("cuda::emulate({devices})")))
}

/// Whether CUDA runs on the emulated device: never in this build.
pub fn is_emulated() -> bool {
    false
}

/// Bytes the emulated devices hold: none in this build.
pub fn emulated_bytes_in_use() -> usize {
    0
}

/// A raw kernel's loaded functions: none in this build.
#[derive(Default)]
pub(crate) struct RawLoads {
    _none: (),
}

impl RawLoads {
    /// The devices the function is loaded on: none in this build.
    pub(crate) fn ordinals(&self) -> Vec<usize> {
        Vec::new()
    }
}

/// A raw launch's grid, block and dynamic shared memory bytes.
pub(crate) type RawDims = ([u32; 3], [u32; 3], u32);

/// Launches a raw kernel: an error in this build.
///
/// # Safety
/// None needed: nothing runs.
pub(crate) unsafe fn launch_raw(
    ordinal: usize,
    code: &crate::launch_plan::RawCode,
    _loads: &RawLoads,
    _dims: RawDims,
    _args: &[RawArg<CudaRef<'_>>],
) -> Result<()> {
    Err(unavailable(&format!(
        "raw kernel {} on cuda:{ordinal}",
        code.name()
    )))
}

/// Compiles a raw module: an error in this build.
pub(crate) fn compile_raw(ordinal: usize, code: &crate::launch_plan::RawCode) -> Result<()> {
    Err(unavailable(&format!(
        "raw module {} on cuda:{ordinal}",
        code.name()
    )))
}

/// The variants of an elementwise kernel loaded on a device: none in this build.
pub(crate) fn cached_variants(_kernel: &ElementwiseDef) -> Vec<CachedVariant> {
    Vec::new()
}

/// The variants of a reduction kernel loaded on a device: none in this build.
pub(crate) fn cached_reduction_variants(_def: &kusari_kernels::ReductionDef) -> Vec<CachedVariant> {
    Vec::new()
}

pub(crate) fn check_device(device: Device, op: &str) -> Result<()> {
    match device {
        Device::Cpu => Ok(()),
        Device::Cuda(_) => Err(unavailable(op)),
    }
}
