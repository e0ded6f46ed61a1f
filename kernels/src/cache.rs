//! The binary cache: compiled kernels kept on disk across processes, and in memory within one.
//!
//! - Directory: `KUSARI_KERNEL_CACHE_DIR`, else `$XDG_CACHE_HOME/kusari/kernels`, else
//!   `~/.cache/kusari/kernels`.
//! - Key: a 128-bit hash of everything that determines the binary: source, compile options,
//!   NVRTC version, architecture and kusari's version ([`CacheKey`]).
//! - Files are written to a temporary name and renamed into place, so a reader never sees a
//!   partial file and concurrent writers (threads or processes) cannot corrupt an entry. Each file
//!   stores its length and a checksum; a truncated or corrupt file is recompiled and replaced.
//! - A directory that cannot be created or written is reported once on stderr and the cache
//!   keeps working in memory: it is never an error at start-up (CuPy breaks on a read-only
//!   home, cupy#2296).

use std::collections::HashMap;
use std::io::Write;
use std::path::{Path, PathBuf};
use std::sync::atomic::{AtomicBool, AtomicUsize, Ordering};
use std::sync::{Arc, Mutex, PoisonError};

const MAGIC: &[u8; 8] = b"KUSARIK1";
const HEADER: usize = 8 + 8 + 8;

/// 128-bit FNV-1a: stable across platforms and versions (unlike `std`'s hashers).
fn fnv128(parts: &[&[u8]]) -> u128 {
    let mut h: u128 = 0x6c62_272e_07bb_0142_62b8_2175_6295_c58d;
    for part in parts {
        for &b in part.iter().chain(&(part.len() as u64).to_le_bytes()) {
            h ^= u128::from(b);
            h = h.wrapping_mul(0x0000_0000_0100_0000_0000_0000_0000_013B);
        }
    }
    h
}

fn checksum(data: &[u8]) -> u64 {
    let h = fnv128(&[data]);
    (h as u64) ^ ((h >> 64) as u64)
}

/// What identifies a compiled kernel.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub struct CacheKey(pub u128);

impl CacheKey {
    /// The key of `source` compiled with `options` by NVRTC `nvrtc_version` for `arch`.
    pub fn new(source: &str, options: &[String], nvrtc_version: (i32, i32), arch: &str) -> Self {
        let opts = options.join("\u{1f}");
        let nvrtc = format!("{}.{}", nvrtc_version.0, nvrtc_version.1);
        CacheKey(fnv128(&[
            source.as_bytes(),
            opts.as_bytes(),
            nvrtc.as_bytes(),
            arch.as_bytes(),
            env!("CARGO_PKG_VERSION").as_bytes(),
        ]))
    }

    fn file_name(self) -> String {
        format!("{:032x}.bin", self.0)
    }
}

/// How the cache answered, counted since it was created.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct CacheStats {
    /// Served from memory.
    pub memory_hits: usize,
    /// Read from disk.
    pub disk_hits: usize,
    /// Compiled (a miss, or a corrupt file).
    pub compiles: usize,
    /// Files found truncated or corrupt (and replaced).
    pub corrupt: usize,
}

/// A two-level cache of compiled kernels.
pub struct BinaryCache {
    dir: Option<PathBuf>,
    memory: Mutex<HashMap<CacheKey, Arc<Vec<u8>>>>,
    warned: AtomicBool,
    memory_hits: AtomicUsize,
    disk_hits: AtomicUsize,
    compiles: AtomicUsize,
    corrupt: AtomicUsize,
}

/// The default directory (see the module docs), if a home or cache directory is known.
pub fn default_dir() -> Option<PathBuf> {
    if let Some(d) = std::env::var_os("KUSARI_KERNEL_CACHE_DIR") {
        return Some(PathBuf::from(d));
    }
    let base = std::env::var_os("XDG_CACHE_HOME")
        .map(PathBuf::from)
        .or_else(|| std::env::var_os("HOME").map(|h| PathBuf::from(h).join(".cache")))?;
    Some(base.join("kusari").join("kernels"))
}

impl BinaryCache {
    /// A cache in `dir` (`None`: memory only).
    pub fn new(dir: Option<PathBuf>) -> Self {
        BinaryCache {
            dir,
            memory: Mutex::new(HashMap::new()),
            warned: AtomicBool::new(false),
            memory_hits: AtomicUsize::new(0),
            disk_hits: AtomicUsize::new(0),
            compiles: AtomicUsize::new(0),
            corrupt: AtomicUsize::new(0),
        }
    }

    /// The directory in use, if any.
    pub fn dir(&self) -> Option<&Path> {
        self.dir.as_deref()
    }

    /// The counters.
    pub fn stats(&self) -> CacheStats {
        CacheStats {
            memory_hits: self.memory_hits.load(Ordering::Relaxed),
            disk_hits: self.disk_hits.load(Ordering::Relaxed),
            compiles: self.compiles.load(Ordering::Relaxed),
            corrupt: self.corrupt.load(Ordering::Relaxed),
        }
    }

    /// The binary for `key`: from memory, else from disk, else from `compile` (then stored).
    pub fn get_or_compile<E>(
        &self,
        key: CacheKey,
        compile: impl FnOnce() -> Result<Vec<u8>, E>,
    ) -> Result<Arc<Vec<u8>>, E> {
        if let Some(hit) = self
            .memory
            .lock()
            .unwrap_or_else(PoisonError::into_inner)
            .get(&key)
        {
            self.memory_hits.fetch_add(1, Ordering::Relaxed);
            return Ok(hit.clone());
        }
        let binary = match self.read(key) {
            Some(b) => {
                self.disk_hits.fetch_add(1, Ordering::Relaxed);
                Arc::new(b)
            }
            None => {
                let b = compile()?;
                self.compiles.fetch_add(1, Ordering::Relaxed);
                self.write(key, &b);
                Arc::new(b)
            }
        };
        self.memory
            .lock()
            .unwrap_or_else(PoisonError::into_inner)
            .insert(key, binary.clone());
        Ok(binary)
    }

    fn read(&self, key: CacheKey) -> Option<Vec<u8>> {
        let path = self.dir.as_ref()?.join(key.file_name());
        let bytes = std::fs::read(&path).ok()?;
        match decode(&bytes) {
            Some(payload) => Some(payload.to_vec()),
            None => {
                self.corrupt.fetch_add(1, Ordering::Relaxed);
                None
            }
        }
    }

    fn write(&self, key: CacheKey, payload: &[u8]) {
        let Some(dir) = &self.dir else { return };
        if let Err(e) = write_atomically(dir, &key.file_name(), &encode(payload)) {
            if !self.warned.swap(true, Ordering::Relaxed) {
                eprintln!(
                    "kusari: kernel cache directory {} is not writable ({e}); compiled kernels are kept in memory only",
                    dir.display()
                );
            }
        }
    }
}

fn encode(payload: &[u8]) -> Vec<u8> {
    let mut out = Vec::with_capacity(HEADER + payload.len());
    out.extend_from_slice(MAGIC);
    out.extend_from_slice(&(payload.len() as u64).to_le_bytes());
    out.extend_from_slice(&checksum(payload).to_le_bytes());
    out.extend_from_slice(payload);
    out
}

fn decode(bytes: &[u8]) -> Option<&[u8]> {
    if bytes.len() < HEADER || &bytes[..8] != MAGIC {
        return None;
    }
    let len = u64::from_le_bytes(bytes[8..16].try_into().ok()?) as usize;
    let sum = u64::from_le_bytes(bytes[16..24].try_into().ok()?);
    let payload = bytes.get(HEADER..)?;
    (payload.len() == len && checksum(payload) == sum).then_some(payload)
}

/// Writes `bytes` to `dir/name` through a temporary file renamed into place.
fn write_atomically(dir: &Path, name: &str, bytes: &[u8]) -> std::io::Result<()> {
    std::fs::create_dir_all(dir)?;
    static COUNTER: AtomicUsize = AtomicUsize::new(0);
    let tmp = dir.join(format!(
        ".{name}.{}.{}.tmp",
        std::process::id(),
        COUNTER.fetch_add(1, Ordering::Relaxed)
    ));
    let result = (|| {
        let mut f = std::fs::File::create(&tmp)?;
        f.write_all(bytes)?;
        f.sync_all()?;
        std::fs::rename(&tmp, dir.join(name))
    })();
    if result.is_err() {
        let _ = std::fs::remove_file(&tmp);
    }
    result
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn keys_change_with_every_input() {
        let base = CacheKey::new("src", &["-a".into()], (13, 0), "compute_90");
        assert_eq!(
            base,
            CacheKey::new("src", &["-a".into()], (13, 0), "compute_90")
        );
        assert_ne!(
            base,
            CacheKey::new("src2", &["-a".into()], (13, 0), "compute_90")
        );
        assert_ne!(
            base,
            CacheKey::new("src", &["-b".into()], (13, 0), "compute_90")
        );
        assert_ne!(
            base,
            CacheKey::new("src", &["-a".into()], (13, 1), "compute_90")
        );
        assert_ne!(
            base,
            CacheKey::new("src", &["-a".into()], (13, 0), "compute_80")
        );
    }

    #[test]
    fn encoding_detects_truncation_and_corruption() {
        let enc = encode(b"payload");
        assert_eq!(decode(&enc), Some(&b"payload"[..]));
        assert_eq!(decode(&enc[..enc.len() - 1]), None);
        let mut bad = enc.clone();
        *bad.last_mut().unwrap() ^= 1;
        assert_eq!(decode(&bad), None);
        assert_eq!(decode(b"short"), None);
    }
}
