//! The binary cache: compiled kernels kept on disk across processes, and in memory within one.
//!
//! - Directory ([`crate::env`]): `KUSARI_KERNEL_CACHE_DIR`, else `$XDG_CACHE_HOME/kusari/kernels`, else
//!   `~/.cache/kusari/kernels`. A variable that is empty or only whitespace counts as unset (an
//!   empty directory would otherwise be the current one).
//! - Key: a 128-bit hash of everything that determines the binary: source, compile options,
//!   NVRTC version, architecture and kusari's version ([`CacheKey`]).
//! - Files are written to a temporary name and renamed into place, so a reader never sees a
//!   partial file and concurrent writers (threads or processes) cannot corrupt an entry. The
//!   temporary files of writers killed half-way are removed by the first write of a later
//!   process ([`crate::atomic_file`]). Each file
//!   stores its length and a checksum; a truncated or corrupt file is recompiled and replaced.
//! - Each file also stores the full key it was written for, and a read checks it against the key
//!   asked for: a valid entry copied or renamed over another key's file (by a user, a sync tool
//!   or a careless script) is a miss, recompiled and replaced, never loaded as the other kernel.
//!   This guards against mix-ups, not against someone who can write the directory: they can
//!   write any entry they like.
//! - A directory that cannot be created or written is reported once on stderr and the cache
//!   keeps working in memory: it is never an error at start-up (CuPy breaks on a read-only
//!   home, cupy#2296).

use std::collections::HashMap;
use std::path::{Path, PathBuf};
use std::sync::atomic::{AtomicBool, AtomicUsize, Ordering};
use std::sync::{Arc, Mutex, PoisonError};

/// Format 2: the magic, the key (16 bytes), the payload's length (8) and a checksum of the key
/// and the payload (8), all little-endian, then the payload. Format 1 had no key; its files read
/// as corrupt and are replaced.
const MAGIC: &[u8; 8] = b"KUSARIK2";
const HEADER: usize = 8 + 16 + 8 + 8;

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

fn checksum(key: CacheKey, data: &[u8]) -> u64 {
    let h = fnv128(&[&key.0.to_le_bytes(), data]);
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

    /// The key of a module already compiled (PTX, a cubin): its bytes.
    pub fn of_image(image: &[u8]) -> Self {
        CacheKey(fnv128(&[b"compiled module", image]))
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
    /// Valid files written for another key (copied or renamed over this key's file), not served
    /// (and replaced).
    pub wrong_key: usize,
}

/// A two-level cache of compiled kernels.
pub struct BinaryCache {
    dir: Option<PathBuf>,
    memory: Mutex<HashMap<CacheKey, Arc<Vec<u8>>>>,
    warned: AtomicBool,
    /// Whether this cache has removed the stale temporary files of its directory (at its first
    /// write).
    swept: AtomicBool,
    memory_hits: AtomicUsize,
    disk_hits: AtomicUsize,
    compiles: AtomicUsize,
    corrupt: AtomicUsize,
    wrong_key: AtomicUsize,
}

/// The default directory (see the module docs), if a home or cache directory is known
/// ([`crate::env::kernel_cache_dir`]).
pub fn default_dir() -> Option<PathBuf> {
    crate::env::kernel_cache_dir()
}

impl BinaryCache {
    /// A cache in `dir` (`None`: memory only).
    pub fn new(dir: Option<PathBuf>) -> Self {
        BinaryCache {
            dir,
            memory: Mutex::new(HashMap::new()),
            warned: AtomicBool::new(false),
            swept: AtomicBool::new(false),
            memory_hits: AtomicUsize::new(0),
            disk_hits: AtomicUsize::new(0),
            compiles: AtomicUsize::new(0),
            corrupt: AtomicUsize::new(0),
            wrong_key: AtomicUsize::new(0),
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
            wrong_key: self.wrong_key.load(Ordering::Relaxed),
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
        match decode(&bytes, key) {
            Ok(payload) => Some(payload.to_vec()),
            Err(Unusable::Corrupt) => {
                self.corrupt.fetch_add(1, Ordering::Relaxed);
                None
            }
            Err(Unusable::WrongKey) => {
                self.wrong_key.fetch_add(1, Ordering::Relaxed);
                None
            }
        }
    }

    fn write(&self, key: CacheKey, payload: &[u8]) {
        let Some(dir) = &self.dir else { return };
        // Writers killed half-way (the first write only: compiling already cost far more).
        if !self.swept.swap(true, Ordering::Relaxed) {
            crate::atomic_file::remove_stale_in(dir);
        }
        if let Err(e) = write_atomically(dir, &key.file_name(), &encode(key, payload))
            && !self.warned.swap(true, Ordering::Relaxed)
        {
            eprintln!(
                "kusari: kernel cache directory {} is not writable ({e}); compiled kernels are kept in memory only",
                dir.display()
            );
        }
    }
}

/// Why a file's content is not served.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
enum Unusable {
    /// Not a complete entry of this format: truncated, damaged, or another format.
    Corrupt,
    /// A complete, valid entry, written for another key.
    WrongKey,
}

fn encode(key: CacheKey, payload: &[u8]) -> Vec<u8> {
    let mut out = Vec::with_capacity(HEADER + payload.len());
    out.extend_from_slice(MAGIC);
    out.extend_from_slice(&key.0.to_le_bytes());
    out.extend_from_slice(&(payload.len() as u64).to_le_bytes());
    out.extend_from_slice(&checksum(key, payload).to_le_bytes());
    out.extend_from_slice(payload);
    out
}

/// The payload of an entry, if it is valid and was written for `key`.
fn decode(bytes: &[u8], key: CacheKey) -> Result<&[u8], Unusable> {
    let field = |at: usize, len: usize| bytes.get(at..at + len).ok_or(Unusable::Corrupt);
    let u64_at = |at: usize| -> Result<u64, Unusable> {
        Ok(u64::from_le_bytes(
            field(at, 8)?.try_into().map_err(|_| Unusable::Corrupt)?,
        ))
    };
    if field(0, 8)? != MAGIC {
        return Err(Unusable::Corrupt);
    }
    let stored = CacheKey(u128::from_le_bytes(
        field(8, 16)?.try_into().map_err(|_| Unusable::Corrupt)?,
    ));
    let len = u64_at(24)?;
    let sum = u64_at(32)?;
    let payload = bytes.get(HEADER..).ok_or(Unusable::Corrupt)?;
    if payload.len() as u64 != len || checksum(stored, payload) != sum {
        return Err(Unusable::Corrupt);
    }
    if stored != key {
        return Err(Unusable::WrongKey);
    }
    Ok(payload)
}

/// Writes `bytes` to `dir/name` through a temporary file renamed into place
/// ([`crate::atomic_file::write`]).
fn write_atomically(dir: &Path, name: &str, bytes: &[u8]) -> std::io::Result<()> {
    std::fs::create_dir_all(dir)?;
    crate::atomic_file::write(&dir.join(name), bytes)
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
        let key = CacheKey(42);
        let enc = encode(key, b"payload");
        assert_eq!(decode(&enc, key), Ok(&b"payload"[..]));
        assert_eq!(decode(&enc[..enc.len() - 1], key), Err(Unusable::Corrupt));
        let mut bad = enc.clone();
        *bad.last_mut().unwrap() ^= 1;
        assert_eq!(decode(&bad, key), Err(Unusable::Corrupt));
        let mut bad_key = enc.clone();
        bad_key[8] ^= 1;
        assert_eq!(
            decode(&bad_key, key),
            Err(Unusable::Corrupt),
            "the checksum covers the key"
        );
        assert_eq!(decode(b"short", key), Err(Unusable::Corrupt));
        assert_eq!(decode(&enc, CacheKey(43)), Err(Unusable::WrongKey));
    }

    fn scratch(name: &str) -> PathBuf {
        let dir =
            std::env::temp_dir().join(format!("kusari-cache-unit-{name}-{}", std::process::id()));
        let _ = std::fs::remove_dir_all(&dir);
        dir
    }

    /// A process killed while writing an entry leaves its temporary file; the next process to
    /// write into the cache removes it (its writer is gone), and the entry is written anew.
    #[test]
    fn a_killed_writers_temporary_file_is_removed_by_the_next_write() {
        let dir = scratch("killed");
        std::fs::create_dir_all(&dir).unwrap();
        let key = CacheKey::new("mul", &[], (13, 0), "sm_90");
        // A pid above Linux's largest pid_max (2²²): no process has it.
        let left = dir.join(crate::atomic_file::temp_name(
            &key.file_name(),
            4_194_305,
            0,
        ));
        std::fs::write(&left, b"half an entr").unwrap();
        let cache = BinaryCache::new(Some(dir.clone()));
        cache
            .get_or_compile(key, || Ok::<_, String>(b"mul binary".to_vec()))
            .unwrap();
        let names: Vec<String> = std::fs::read_dir(&dir)
            .unwrap()
            .map(|e| e.unwrap().file_name().into_string().unwrap())
            .collect();
        assert_eq!(names, [key.file_name()], "what the cache holds");
        std::fs::remove_dir_all(&dir).unwrap();
    }

    /// A valid entry copied over another key's file is not served as that kernel: it is a miss,
    /// counted, recompiled and replaced by the right entry.
    #[test]
    fn an_entry_copied_over_another_keys_file_is_not_served() {
        let dir = scratch("swap");
        let (mul, add) = (
            CacheKey::new("mul", &[], (13, 0), "sm_90"),
            CacheKey::new("add", &[], (13, 0), "sm_90"),
        );
        let writer = BinaryCache::new(Some(dir.clone()));
        let compiled = |b: &'static [u8]| move || Ok::<_, String>(b.to_vec());
        writer.get_or_compile(mul, compiled(b"mul binary")).unwrap();
        writer.get_or_compile(add, compiled(b"add binary")).unwrap();
        std::fs::copy(dir.join(mul.file_name()), dir.join(add.file_name())).unwrap();

        let reader = BinaryCache::new(Some(dir.clone()));
        let got = reader.get_or_compile(add, compiled(b"add binary")).unwrap();
        assert_eq!(
            *got, b"add binary",
            "the copied mul entry was served as add"
        );
        let s = reader.stats();
        assert_eq!(
            (s.wrong_key, s.compiles, s.disk_hits, s.corrupt),
            (1, 1, 0, 0)
        );
        let fresh = BinaryCache::new(Some(dir.clone()));
        let got = fresh
            .get_or_compile(add, || Err::<Vec<u8>, _>("must be on disk"))
            .unwrap();
        assert_eq!(
            *got, b"add binary",
            "the file was replaced by add's own entry"
        );
        std::fs::remove_dir_all(dir).unwrap();
    }
}
