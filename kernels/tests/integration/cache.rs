//! The binary cache on disk: hits and misses, corrupt files, an unwritable directory, and
//! concurrent writers in several processes (the test binary runs itself as the other writers).

use std::path::PathBuf;
use std::sync::atomic::{AtomicUsize, Ordering};

use kusari_kernels::cache::{BinaryCache, CacheKey};

fn scratch_dir(name: &str) -> PathBuf {
    let dir = std::env::temp_dir().join(format!("kusari-cache-{name}-{}", std::process::id()));
    let _ = std::fs::remove_dir_all(&dir);
    dir
}

fn key(tag: &str) -> CacheKey {
    CacheKey::new(tag, &["--std=c++17".to_string()], (13, 5), "compute_90")
}

#[test]
fn compiles_once_then_reads_disk_then_memory() {
    let dir = scratch_dir("hits");
    let compiles = AtomicUsize::new(0);
    let compile = || -> Result<Vec<u8>, String> {
        compiles.fetch_add(1, Ordering::SeqCst);
        Ok(b"ptx bytes".to_vec())
    };
    let first = BinaryCache::new(Some(dir.clone()));
    assert_eq!(
        *first.get_or_compile(key("a"), compile).unwrap(),
        b"ptx bytes"
    );
    assert_eq!(
        *first.get_or_compile(key("a"), compile).unwrap(),
        b"ptx bytes"
    );
    let s = first.stats();
    assert_eq!((s.compiles, s.memory_hits, s.disk_hits), (1, 1, 0));

    // A new process (here: a new cache on the same directory) reads the file.
    let second = BinaryCache::new(Some(dir.clone()));
    assert_eq!(
        *second.get_or_compile(key("a"), compile).unwrap(),
        b"ptx bytes"
    );
    assert_eq!(second.stats().disk_hits, 1);
    assert_eq!(compiles.load(Ordering::SeqCst), 1, "no second compile");
    // A different key compiles.
    second.get_or_compile(key("b"), compile).unwrap();
    assert_eq!(compiles.load(Ordering::SeqCst), 2);
    std::fs::remove_dir_all(dir).unwrap();
}

#[test]
fn a_truncated_file_is_recompiled_and_replaced() {
    let dir = scratch_dir("corrupt");
    BinaryCache::new(Some(dir.clone()))
        .get_or_compile(key("c"), || Ok::<_, String>(b"good binary".to_vec()))
        .unwrap();
    let file = std::fs::read_dir(&dir)
        .unwrap()
        .map(|e| e.unwrap().path())
        .find(|p| p.extension().is_some_and(|e| e == "bin"))
        .expect("cache file written");
    let bytes = std::fs::read(&file).unwrap();
    std::fs::write(&file, &bytes[..bytes.len() - 3]).unwrap();

    let cache = BinaryCache::new(Some(dir.clone()));
    let got = cache
        .get_or_compile(key("c"), || Ok::<_, String>(b"good binary".to_vec()))
        .unwrap();
    assert_eq!(*got, b"good binary");
    let s = cache.stats();
    assert_eq!((s.corrupt, s.compiles, s.disk_hits), (1, 1, 0));
    assert_eq!(
        std::fs::read(&file).unwrap(),
        bytes,
        "the file was replaced by a valid one"
    );
    std::fs::remove_dir_all(dir).unwrap();
}

#[test]
fn an_unwritable_directory_falls_back_to_memory() {
    // A directory below a regular file can never be created, even by root.
    let base = scratch_dir("unwritable");
    std::fs::create_dir_all(&base).unwrap();
    let blocker = base.join("a-file");
    std::fs::write(&blocker, b"not a directory").unwrap();
    let cache = BinaryCache::new(Some(blocker.join("kernels")));
    for _ in 0..2 {
        let got = cache
            .get_or_compile(key("d"), || Ok::<_, String>(b"bin".to_vec()))
            .unwrap();
        assert_eq!(*got, b"bin");
    }
    let s = cache.stats();
    assert_eq!((s.compiles, s.memory_hits), (1, 1), "kept in memory");
    std::fs::remove_dir_all(base).unwrap();
}

#[test]
fn compile_errors_are_returned_and_not_cached() {
    let cache = BinaryCache::new(None);
    let err = cache
        .get_or_compile(key("e"), || Err::<Vec<u8>, _>("nvrtc said no"))
        .unwrap_err();
    assert_eq!(err, "nvrtc said no");
    let ok = cache
        .get_or_compile(key("e"), || Ok::<_, &str>(b"later".to_vec()))
        .unwrap();
    assert_eq!(*ok, b"later");
}

/// Several processes and threads write the same entries at once; every reader then finds a
/// complete, valid file.
#[test]
fn concurrent_writers_in_several_processes_do_not_corrupt_entries() {
    let payload =
        |k: usize| -> Vec<u8> { (0..64 * 1024).map(|i| ((i * 31 + k) % 251) as u8).collect() };
    if let Some(dir) = crate::child_dir() {
        let cache = BinaryCache::new(Some(dir));
        std::thread::scope(|s| {
            for t in 0..4 {
                let cache = &cache;
                s.spawn(move || {
                    for k in 0..8 {
                        let k = (k + t) % 8;
                        let got = cache
                            .get_or_compile(key(&format!("k{k}")), || Ok::<_, String>(payload(k)))
                            .unwrap();
                        assert_eq!(*got, payload(k));
                    }
                });
            }
        });
        return;
    }
    let dir = scratch_dir("concurrent");
    let children: Vec<_> = (0..4)
        .map(|_| {
            std::process::Command::new(std::env::current_exe().unwrap())
                .args([
                    "--exact",
                    "cache::concurrent_writers_in_several_processes_do_not_corrupt_entries",
                    "--test-threads=1",
                ])
                .env(crate::CHILD_DIR_VAR, &dir)
                .stdout(std::process::Stdio::piped())
                .stderr(std::process::Stdio::piped())
                .spawn()
                .unwrap()
        })
        .collect();
    for c in children {
        let out = c.wait_with_output().unwrap();
        assert!(
            out.status.success(),
            "a writer process failed: {}",
            String::from_utf8_lossy(&out.stderr)
        );
    }
    let fresh = BinaryCache::new(Some(dir.clone()));
    for k in 0..8 {
        let got = fresh
            .get_or_compile(key(&format!("k{k}")), || {
                Err::<Vec<u8>, _>("must be on disk")
            })
            .unwrap();
        assert_eq!(*got, payload(k));
    }
    assert_eq!(fresh.stats().disk_hits, 8);
    let leftovers: Vec<_> = std::fs::read_dir(&dir)
        .unwrap()
        .map(|e| e.unwrap().file_name())
        .filter(|n| n.to_string_lossy().ends_with(".tmp"))
        .collect();
    assert!(leftovers.is_empty(), "temporary files left: {leftovers:?}");
    std::fs::remove_dir_all(dir).unwrap();
}
