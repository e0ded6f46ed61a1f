//! Writing a checkpoint atomically beside its target, with the file mode a user expects, and
//! removing the temporary files that a writer killed half-way left behind.
//!
//! The temporary file of `dir/name` is `dir/.name.kusari-tmp-<host>-<pid>-<n>`: hidden, next to
//! the target (a rename within one folder is atomic), and recognisably kusari's, with what tells
//! whether its writer still runs. One is stale when its writer ran on this host and its process
//! is gone (checked on Linux through `/proc`), or when it is older than [`STALE_AGE`] (any host,
//! any system: a save takes seconds, not a day).

use std::fs::{self, OpenOptions};
use std::io::{self, Write};
use std::path::{Path, PathBuf};
use std::sync::atomic::{AtomicU64, Ordering};
use std::time::Duration;

/// What follows the target's name in its temporary files' names.
const MARKER: &str = ".kusari-tmp-";

/// The age from which a temporary file is stale whoever wrote it.
const STALE_AGE: Duration = Duration::from_secs(24 * 60 * 60);

/// Numbers the temporary files of this process (two threads saving the same path at once).
static COUNTER: AtomicU64 = AtomicU64::new(0);

/// The folder and the file name of `path`, or an error for a path that names no file.
fn split(path: &Path) -> io::Result<(PathBuf, String)> {
    let name = path
        .file_name()
        .and_then(|n| n.to_str())
        .ok_or_else(|| {
            io::Error::new(
                io::ErrorKind::InvalidInput,
                "the path names no file (or its name is not UTF-8)",
            )
        })?
        .to_string();
    let dir = match path.parent() {
        Some(p) if !p.as_os_str().is_empty() => p.to_path_buf(),
        _ => PathBuf::from("."),
    };
    Ok((dir, name))
}

/// This host's name as it goes into temporary files' names (`-` is fine: names are read from
/// the right).
fn host() -> String {
    let name = fs::read_to_string("/proc/sys/kernel/hostname").unwrap_or_default();
    let name: String = name
        .trim()
        .chars()
        .map(|c| {
            if c.is_ascii_alphanumeric() || c == '.' || c == '-' {
                c
            } else {
                '_'
            }
        })
        .collect();
    if name.is_empty() {
        "host".to_string()
    } else {
        name
    }
}

/// Whether process `pid` of this host may still run: false only where it is known to be gone
/// (Linux: no `/proc/<pid>`).
fn process_alive(pid: u32) -> bool {
    if pid == std::process::id() {
        return true;
    }
    if cfg!(target_os = "linux") {
        Path::new("/proc").join(pid.to_string()).exists()
    } else {
        true
    }
}

/// Writes `bytes` to `path` atomically: to a temporary file beside it, flushed to disk, then
/// renamed over it. A new file gets mode `0666` less the umask (Unix); a replaced one keeps its
/// mode. On an error the temporary file is removed and `path` is as it was.
pub(crate) fn write(path: &Path, bytes: &[u8]) -> io::Result<()> {
    let (dir, name) = split(path)?;
    let existing = fs::metadata(path)
        .ok()
        .filter(|m| m.is_file())
        .map(|m| m.permissions());
    let n = COUNTER.fetch_add(1, Ordering::Relaxed);
    let tmp = dir.join(format!(
        ".{name}{MARKER}{}-{}-{n}",
        host(),
        std::process::id()
    ));
    let written = (|| {
        let mut options = OpenOptions::new();
        options.write(true).create_new(true);
        #[cfg(unix)]
        {
            use std::os::unix::fs::OpenOptionsExt;
            // The umask applies, as to any file a program creates.
            options.mode(0o666);
        }
        let mut file = options.open(&tmp)?;
        if let Some(permissions) = existing {
            file.set_permissions(permissions)?;
        }
        file.write_all(bytes)?;
        file.sync_all()?;
        drop(file);
        fs::rename(&tmp, path)?;
        // The rename itself on disk (best effort: not every system can sync a folder).
        #[cfg(unix)]
        if let Ok(d) = fs::File::open(&dir) {
            d.sync_all().ok();
        }
        Ok(())
    })();
    if written.is_err() {
        fs::remove_file(&tmp).ok();
    }
    written
}

/// Removes the stale temporary files of `path` (see the module's docs); best effort, silently.
pub(crate) fn remove_stale(path: &Path) {
    let Ok((dir, name)) = split(path) else {
        return;
    };
    let prefix = format!(".{name}{MARKER}");
    let Ok(entries) = fs::read_dir(&dir) else {
        return;
    };
    let this_host = host();
    for entry in entries.flatten() {
        let file_name = entry.file_name();
        let Some(rest) = file_name.to_str().and_then(|f| f.strip_prefix(&prefix)) else {
            continue;
        };
        if is_stale(rest, &this_host, &entry) {
            fs::remove_file(entry.path()).ok();
        }
    }
}

/// Whether the temporary file `entry`, whose name ends in `rest` (`<host>-<pid>-<n>`), is stale.
fn is_stale(rest: &str, this_host: &str, entry: &fs::DirEntry) -> bool {
    let mut parts = rest.rsplitn(3, '-');
    let (Some(n), Some(pid), Some(host)) = (parts.next(), parts.next(), parts.next()) else {
        return false;
    };
    let (Ok(_), Ok(pid)) = (n.parse::<u64>(), pid.parse::<u32>()) else {
        return false;
    };
    if !entry.file_type().is_ok_and(|t| t.is_file()) {
        return false;
    }
    if host == this_host && !process_alive(pid) {
        return true;
    }
    entry
        .metadata()
        .and_then(|m| m.modified())
        .ok()
        .and_then(|t| t.elapsed().ok())
        .is_some_and(|age| age > STALE_AGE)
}
