//! Thread-local configuration (Chainer's `chainer.config`): training mode, backprop recording and
//! debug checks, changed for a scope with RAII guards.
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

use std::cell::{Cell, RefCell};
use std::marker::PhantomData;
use std::sync::atomic::{AtomicU8, Ordering};
use std::sync::OnceLock;

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
    *ENV.get_or_init(|| {
        std::env::var("KUSARI_DEBUG")
            .map(|v| {
                matches!(
                    v.trim().to_ascii_lowercase().as_str(),
                    "1" | "true" | "yes" | "on"
                )
            })
            .unwrap_or(false)
    })
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

/// A scoped change: the fields in `mask` take the values in `bits` while the guard `id` lives.
#[derive(Clone, Copy)]
struct Override {
    id: u64,
    mask: u8,
    bits: u8,
}

/// This thread's configuration: where it started, the live scoped changes in the order they were
/// made, and the configuration they add up to (cached, read on every function application).
struct Scopes {
    base: u8,
    overrides: Vec<Override>,
    next_id: u64,
}

impl Scopes {
    fn effective(&self) -> u8 {
        self.overrides
            .iter()
            .fold(self.base, |acc, o| (acc & !o.mask) | (o.bits & o.mask))
    }
}

thread_local! {
    static CURRENT: Cell<Config> = Cell::new(global());
    static SCOPES: RefCell<Option<Scopes>> = const { RefCell::new(None) };
}

/// This thread's configuration.
pub fn current() -> Config {
    CURRENT.with(Cell::get)
}

/// Whether this thread is in training mode.
pub fn train() -> bool {
    current().train
}

/// Whether applying functions records the graph on this thread.
pub fn enable_backprop() -> bool {
    current().enable_backprop
}

/// Whether debug checks are on for this thread.
pub fn debug() -> bool {
    current().debug
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
    id: u64,
    _thread_bound: PhantomData<*const ()>,
}

impl Drop for ConfigGuard {
    fn drop(&mut self) {
        let bits = SCOPES.with(|s| {
            let mut s = s.borrow_mut();
            let scopes = s.as_mut()?;
            let at = scopes.overrides.iter().rposition(|o| o.id == self.id)?;
            scopes.overrides.remove(at);
            Some(scopes.effective())
        });
        if let Some(bits) = bits {
            CURRENT.with(|c| c.set(Config::from_bits(bits)));
        }
    }
}

const ALL_FIELDS: u8 = TRAIN | BACKPROP | DEBUG | FALLBACK;

/// Sets the fields in `mask` to their values in `config` until the guard drops.
fn scoped(mask: u8, config: Config) -> ConfigGuard {
    let (id, bits) = SCOPES.with(|s| {
        let mut s = s.borrow_mut();
        let scopes = s.get_or_insert_with(|| Scopes {
            base: current().bits(),
            overrides: Vec::new(),
            next_id: 0,
        });
        let id = scopes.next_id;
        scopes.next_id += 1;
        scopes.overrides.push(Override {
            id,
            mask,
            bits: config.bits(),
        });
        (id, scopes.effective())
    });
    CURRENT.with(|c| c.set(Config::from_bits(bits)));
    ConfigGuard {
        id,
        _thread_bound: PhantomData,
    }
}

/// Sets this thread's whole configuration until the guard drops.
pub fn using_config(config: Config) -> ConfigGuard {
    scoped(ALL_FIELDS, config)
}

/// Training mode on or off until the guard drops.
pub fn using_train(train: bool) -> ConfigGuard {
    scoped(TRAIN, Config { train, ..current() })
}

/// Graph recording on or off until the guard drops.
pub fn using_backprop(enable_backprop: bool) -> ConfigGuard {
    scoped(
        BACKPROP,
        Config {
            enable_backprop,
            ..current()
        },
    )
}

/// Debug checks on or off until the guard drops.
pub fn using_debug(debug: bool) -> ConfigGuard {
    scoped(DEBUG, Config { debug, ..current() })
}

/// Host fallback allowed or forbidden until the guard drops (see [`Config::host_fallback`]).
///
/// ```
/// let _strict = kusari::config::using_host_fallback(false);
/// assert!(!kusari::config::current().host_fallback);
/// ```
pub fn using_host_fallback(host_fallback: bool) -> ConfigGuard {
    scoped(
        FALLBACK,
        Config {
            host_fallback,
            ..current()
        },
    )
}

/// No graph is recorded until the guard drops (Chainer's `no_backprop_mode`).
pub fn no_backprop_mode() -> ConfigGuard {
    using_backprop(false)
}

/// The graph is recorded until the guard drops, even inside `no_backprop_mode`.
pub fn force_backprop_mode() -> ConfigGuard {
    using_backprop(true)
}
