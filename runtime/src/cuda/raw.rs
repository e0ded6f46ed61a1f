//! Raw kernels on a CUDA device: a user's module compiled through the binary cache, loaded
//! through the upload cache, and its function launched with the grid, block, dynamic shared
//! memory and arguments the caller checked ([`crate::RawKernel`]).

use std::collections::HashMap;
use std::sync::{Arc, Mutex, PoisonError};

use kusari_kernels::CompileError;
use kusari_kernels::codegen::KernelSource;
use kusari_kernels::raw::numbered_user_source;

use super::CudaRef;
use super::device::CudaDevice;
use super::device::device;
use super::driver::Module;
use super::launch::{KernelArgs, Loaded, load_image, load_named};
use crate::Device;
use crate::error::{Error, Result};
use crate::launch_plan::{RawArg, RawCode};

/// A raw kernel's function, loaded once per device.
#[derive(Default)]
pub(crate) struct RawLoads {
    loaded: Mutex<HashMap<usize, Arc<Loaded>>>,
}

impl RawLoads {
    /// The devices the function is loaded on, in order.
    pub(crate) fn ordinals(&self) -> Vec<usize> {
        let mut ordinals: Vec<usize> = (self.loaded.lock())
            .unwrap_or_else(PoisonError::into_inner)
            .keys()
            .copied()
            .collect();
        ordinals.sort_unstable();
        ordinals
    }
}

/// The launch's configuration: grid, block and dynamic shared memory bytes (checked against
/// CUDA's limits by the caller).
pub(crate) type RawDims = ([u32; 3], [u32; 3], u32);

/// Launches the kernel `code` on `cuda:ordinal` with `args`. The first launch on a device
/// compiles its module (through the binary cache) and loads it (through the upload cache, so a
/// module's other functions load nothing more).
///
/// # Safety
/// `args` match the kernel's parameter list in count, order and widths, and every array is
/// large enough for what the kernel reaches through it.
pub(crate) unsafe fn launch_raw(
    ordinal: usize,
    code: &RawCode,
    loads: &RawLoads,
    (grid, block, shared_bytes): RawDims,
    args: &[RawArg<CudaRef<'_>>],
) -> Result<()> {
    let op = format!("raw kernel {}", code.name());
    if let Some(other) = args.iter().find_map(|a| match a {
        RawArg::Array((s, _)) if s.ordinal() != ordinal => Some(s.ordinal()),
        _ => None,
    }) {
        return Err(Error::DeviceMismatch {
            op,
            lhs: Device::Cuda(ordinal),
            rhs: Device::Cuda(other),
        });
    }
    let dev = device(ordinal, &op)?;
    let cached = loads
        .loaded
        .lock()
        .unwrap_or_else(PoisonError::into_inner)
        .get(&ordinal)
        .cloned();
    let loaded = match cached {
        Some(l) => l,
        None => {
            // Errors name the kernel as a first launch always has.
            let l = Arc::new(load_function(&dev, code.name(), code)?);
            loads
                .loaded
                .lock()
                .unwrap_or_else(PoisonError::into_inner)
                .insert(ordinal, l.clone());
            l
        }
    };
    let mut values = KernelArgs::default();
    for a in args {
        match *a {
            RawArg::Array((s, l)) => values.pointer(s.ptr_at(l.offset())),
            RawArg::Value(bits, width) => values.value(bits, width),
        };
    }
    // SAFETY: forwarded contract; `values` outlives the launch.
    unsafe { loaded.launch_shared(&dev, grid, block, shared_bytes, &mut values, &op) }
}

/// The module of `code` on `dev` (compiled first for a source, through the binary cache; loaded
/// through the upload cache), and the name its kernel has there. `op` names it in errors.
fn load_module(dev: &CudaDevice, op: &str, code: &RawCode) -> Result<(Module, String)> {
    match code {
        RawCode::Source {
            src,
            names,
            instance,
        } => {
            let (module, lowered) =
                load_named(dev, op, src, names).map_err(|e| user_numbered(e, src))?;
            let entry = match instance {
                Some(i) => lowered[*i].clone(),
                None => src.entry.clone(),
            };
            Ok((module, entry))
        }
        RawCode::Binary {
            entry,
            image,
            format,
        } => Ok((
            load_image(dev, op, image, &format.to_string())?,
            entry.clone(),
        )),
    }
}

/// The function `code` names, in its module loaded on `dev`.
fn load_function(dev: &CudaDevice, op: &str, code: &RawCode) -> Result<Loaded> {
    let (module, entry) = load_module(dev, op, code)?;
    let function = dev.check(module.function(&entry), || {
        format!("find {entry} in its module on cuda:{}", dev.ordinal)
    })?;
    Ok(Loaded {
        function,
        _module: module,
    })
}

/// Compiles the module of `code` for `cuda:ordinal` (through the binary cache) and loads it
/// there (through the upload cache), so that its kernels' first launches compile and load
/// nothing.
pub(crate) fn compile_raw(ordinal: usize, code: &RawCode) -> Result<()> {
    let op = format!("raw module {}", code.name());
    let dev = device(ordinal, &op)?;
    load_module(&dev, &op, code).map(drop)
}

/// A compile error with the user's code numbered as the user numbers it (the compiler's log
/// already does, through `#line`), the options' lines before it unnumbered.
fn user_numbered(e: Error, src: &KernelSource) -> Error {
    match e {
        Error::KernelCompile { kernel, source } => {
            let source = match *source {
                CompileError::Failed {
                    entry, arch, log, ..
                } => CompileError::Failed {
                    entry,
                    arch,
                    log,
                    numbered_source: numbered_user_source(&src.source),
                },
                other => other,
            };
            Error::KernelCompile {
                kernel,
                source: Box::new(source),
            }
        }
        other => other,
    }
}
