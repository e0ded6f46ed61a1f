//! Thread-local configuration (Chainer's `chainer.config`): training mode, backprop recording,
//! debug checks and host fallback, changed for a scope with RAII guards; and, beside them, the
//! thread's default device ([`default_device`], changed for a scope with [`using_device`]).
//!
//! Each thread starts from the global defaults ([`global`], [`set_global`]); the debug default
//! is on when the environment variable `KUSARI_DEBUG` is `1` or `true`.
//!
//! ```
//! use kusari::config;
//! assert!(config::train());
//! {
//!     let _eval = config::using_train(false);
//!     assert!(!config::train());
//! }
//! assert!(config::train());
//! ```

use std::cell::Cell;
use std::marker::PhantomData;
use std::sync::OnceLock;
use std::sync::atomic::{AtomicU8, Ordering};

use crate::device::Device;
use crate::error::Result;

/// The configuration values in force on a thread.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Config {
    /// Training mode: functions such as dropout act only when true. Default `true`.
    pub train: bool,
    /// Whether applying functions records the backward graph. Default `true`.
    pub enable_backprop: bool,
    /// Checks every function's outputs and gradients for NaN, naming the function. Default off
    /// unless `KUSARI_DEBUG=1`.
    pub debug: bool,
    /// Whether a function without a GPU forward may run its CPU forward on host copies of CUDA
    /// inputs (ChainerX's fallback; counted by [`crate::cuda::host_fallback_count`]). When
    /// false, such a call is [`Error::HostFallbackForbidden`](crate::Error). Default `true`.
    pub host_fallback: bool,
}

const TRAIN: u8 = 1;
const BACKPROP: u8 = 2;
const DEBUG: u8 = 4;
const SET: u8 = 8;
const FALLBACK: u8 = 16;

static GLOBAL: AtomicU8 = AtomicU8::new(0);

impl Config {
    fn bits(self) -> u8 {
        SET | (self.train as u8 * TRAIN)
            | (self.enable_backprop as u8 * BACKPROP)
            | (self.debug as u8 * DEBUG)
            | (self.host_fallback as u8 * FALLBACK)
    }

    fn from_bits(b: u8) -> Self {
        Config {
            train: b & TRAIN != 0,
            enable_backprop: b & BACKPROP != 0,
            debug: b & DEBUG != 0,
            host_fallback: b & FALLBACK != 0,
        }
    }
}

fn debug_from_env() -> bool {
    static ENV: OnceLock<bool> = OnceLock::new();
    *ENV.get_or_init(crate::env::debug)
}

/// The global defaults that new threads start from.
pub fn global() -> Config {
    let b = GLOBAL.load(Ordering::Relaxed);
    if b & SET != 0 {
        Config::from_bits(b)
    } else {
        Config {
            train: true,
            enable_backprop: true,
            debug: debug_from_env(),
            host_fallback: true,
        }
    }
}

/// Changes the global defaults for threads whose configuration is first read after this call.
pub fn set_global(config: Config) {
    GLOBAL.store(config.bits(), Ordering::Relaxed);
}

/// A live scoped change, one per guard: the fields in `mask` take the values in `bits`.
/// `before` is the configuration just before it (what dropping the newest guard restores).
#[derive(Clone, Copy, Default)]
struct Override {
    mask: u8,
    bits: u8,
    before: u8,
    live: bool,
}

/// How many guards may be nested on one thread with exact out-of-order restores. A guard made
/// beyond it restores the configuration it saw when dropped (the classic scheme).
const MAX_SCOPES: usize = 256;

thread_local! {
    /// This thread's configuration bits; 0 until first read (then the global defaults).
    static CURRENT: Cell<u8> = const { Cell::new(0) };
    /// The live guards' changes, oldest first: the configuration is the thread's defaults
    /// overlaid by each in order. Fixed-size cells, so a guard costs no allocation and no
    /// thread-local destructor.
    static SCOPES: [Cell<Override>; MAX_SCOPES] = const {
        [const { Cell::new(Override { mask: 0, bits: 0, before: 0, live: false }) }; MAX_SCOPES]
    };
    /// How many entries of `SCOPES` are in use (dead entries under a live one included).
    static DEPTH: Cell<usize> = const { Cell::new(0) };
}

fn current_bits() -> u8 {
    CURRENT.with(|c| {
        let b = c.get();
        if b & SET != 0 {
            b
        } else {
            let b = global().bits();
            c.set(b);
            b
        }
    })
}

/// This thread's configuration.
pub fn current() -> Config {
    Config::from_bits(current_bits())
}

/// Whether this thread is in training mode.
pub fn train() -> bool {
    current_bits() & TRAIN != 0
}

/// Whether applying functions records the graph on this thread.
pub fn enable_backprop() -> bool {
    current_bits() & BACKPROP != 0
}

/// Whether debug checks are on for this thread.
pub fn debug() -> bool {
    current_bits() & DEBUG != 0
}

/// Undoes one scoped change of its thread's configuration when dropped: the fields it set go
/// back to what the other live guards (or the thread's defaults) say, whatever the order in
/// which guards are dropped. Not `Send`: it belongs to the thread whose configuration it changed.
///
/// ```
/// use kusari::config;
/// let mut g = config::no_backprop_mode();
/// g = config::using_train(false); // drops the no_backprop_mode guard first
/// assert!(config::enable_backprop() && !config::train());
/// drop(g);
/// assert!(config::enable_backprop() && config::train());
/// ```
#[must_use = "the configuration is restored when the guard is dropped"]
#[derive(Debug)]
pub struct ConfigGuard {
    restore: Restore,
    _thread_bound: PhantomData<*const ()>,
}

/// How a guard undoes its change.
#[derive(Debug)]
enum Restore {
    /// Through its entry in `SCOPES`.
    Slot(usize),
    /// Beyond `MAX_SCOPES`: the configuration it saw (the classic scheme).
    Before(u8),
}

fn apply_override(acc: u8, o: Override) -> u8 {
    (acc & !o.mask) | (o.bits & o.mask)
}

impl Drop for ConfigGuard {
    fn drop(&mut self) {
        let slot = match self.restore {
            Restore::Slot(slot) => slot,
            Restore::Before(before) => {
                CURRENT.with(|c| c.set(before));
                return;
            }
        };
        SCOPES.with(|scopes| {
            let depth = DEPTH.get();
            if slot + 1 == depth {
                // The newest guard (the usual, last-in first-out case): restore what it saw, and
                // release the entries of guards dropped earlier out of order beneath it.
                let before = scopes[slot].get().before;
                let mut d = slot;
                while d > 0 && !scopes[d - 1].get().live {
                    d -= 1;
                }
                DEPTH.set(d);
                CURRENT.with(|c| c.set(before));
            } else {
                // An older guard: take its change out and replay the newer ones over what it saw.
                let mut o = scopes[slot].get();
                o.live = false;
                scopes[slot].set(o);
                let mut acc = o.before;
                for cell in &scopes[slot + 1..depth] {
                    let mut later = cell.get();
                    later.before = acc;
                    cell.set(later);
                    if later.live {
                        acc = apply_override(acc, later);
                    }
                }
                CURRENT.with(|c| c.set(acc));
            }
        });
    }
}

const ALL_FIELDS: u8 = TRAIN | BACKPROP | DEBUG | FALLBACK;

/// Sets the fields in `mask` to their values in `bits` until the guard drops.
fn scoped(mask: u8, bits: u8) -> ConfigGuard {
    let before = current_bits();
    let o = Override {
        mask,
        bits,
        before,
        live: true,
    };
    let depth = DEPTH.get();
    let restore = if depth < MAX_SCOPES {
        SCOPES.with(|scopes| scopes[depth].set(o));
        DEPTH.set(depth + 1);
        Restore::Slot(depth)
    } else {
        Restore::Before(before)
    };
    CURRENT.with(|c| c.set(apply_override(before, o)));
    ConfigGuard {
        restore,
        _thread_bound: PhantomData,
    }
}

/// Sets this thread's whole configuration until the guard drops.
pub fn using_config(config: Config) -> ConfigGuard {
    scoped(ALL_FIELDS, config.bits())
}

/// Training mode on or off until the guard drops.
pub fn using_train(train: bool) -> ConfigGuard {
    scoped(TRAIN, if train { TRAIN } else { 0 })
}

/// Graph recording on or off until the guard drops.
pub fn using_backprop(enable_backprop: bool) -> ConfigGuard {
    scoped(BACKPROP, if enable_backprop { BACKPROP } else { 0 })
}

/// Debug checks on or off until the guard drops.
pub fn using_debug(debug: bool) -> ConfigGuard {
    scoped(DEBUG, if debug { DEBUG } else { 0 })
}

/// Host fallback allowed or forbidden until the guard drops (see [`Config::host_fallback`]).
///
/// ```
/// let _strict = kusari::config::using_host_fallback(false);
/// assert!(!kusari::config::current().host_fallback);
/// ```
pub fn using_host_fallback(host_fallback: bool) -> ConfigGuard {
    scoped(FALLBACK, if host_fallback { FALLBACK } else { 0 })
}

/// No graph is recorded until the guard drops (Chainer's `no_backprop_mode`).
pub fn no_backprop_mode() -> ConfigGuard {
    using_backprop(false)
}

/// The graph is recorded until the guard drops, even inside `no_backprop_mode`.
pub fn force_backprop_mode() -> ConfigGuard {
    using_backprop(true)
}

thread_local! {
    /// This thread's default device.
    static DEFAULT_DEVICE: Cell<Device> = const { Cell::new(Device::Cpu) };
}

/// This thread's default device: where [`Array::from_vec`](crate::Array::from_vec) and
/// [`Array::arange`](crate::Array::arange) place new arrays. The host unless changed with
/// [`using_device`].
pub fn default_device() -> Device {
    DEFAULT_DEVICE.with(Cell::get)
}

/// Restores the previous default device of its thread when dropped.
#[must_use = "the default device is restored when the guard is dropped"]
#[derive(Debug)]
pub struct DeviceGuard {
    previous: Device,
    _thread_bound: PhantomData<*const ()>,
}

impl Drop for DeviceGuard {
    fn drop(&mut self) {
        DEFAULT_DEVICE.with(|d| d.set(self.previous));
    }
}

/// Makes `device` this thread's default device until the guard drops (ChainerX's
/// `using_device`). A CUDA device must exist: on a machine without it this is
/// [`Error::CudaUnavailable`](crate::Error::CudaUnavailable), so device-agnostic code learns at
/// the scope's start.
///
/// ```
/// use kusari::{default_device, using_device, Array, Device};
/// {
///     let _cpu = using_device(Device::Cpu).unwrap();
///     let x = Array::from_vec(vec![1.0f32, 2.0], &[2]).unwrap();
///     assert_eq!(x.device(), Device::Cpu);
/// }
/// if !kusari::cuda::is_available() {
///     assert!(using_device(Device::Cuda(0)).is_err());
/// }
/// assert_eq!(default_device(), Device::Cpu);
/// ```
pub fn using_device(device: Device) -> Result<DeviceGuard> {
    crate::cuda::check_device(device, &format!("using_device({device})"))?;
    let previous = DEFAULT_DEVICE.with(|d| d.replace(device));
    Ok(DeviceGuard {
        previous,
        _thread_bound: PhantomData,
    })
}
