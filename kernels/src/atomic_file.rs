//! Writing a file atomically beside its target, with the file mode a user expects, and
//! removing the temporary files that a writer killed half-way left behind: kusari's
//! checkpoints (`kusari::link::save`) and the kernel cache's entries ([`crate::cache`]).
//!
//! The temporary file of `dir/name` is `dir/.name.kusari-tmp-<host>-<pid>-<n>`: hidden, next to
//! the target (a rename within one folder is atomic), and recognisably kusari's, with what tells
//! whether its writer still runs. One is stale when its writer ran on this host and its process
//! is gone (checked on Linux through `/proc`), or when it is older than [`STALE_AGE`] (any host,
//! any system: a write takes seconds, not a day).

use std::fs::{self, OpenOptions};
use std::io::{self, Write};
use std::path::{Path, PathBuf};
use std::sync::atomic::{AtomicU64, Ordering};
use std::time::Duration;

/// What follows the target's name in its temporary files' names.
const MARKER: &str = ".kusari-tmp-";

/// The age from which a temporary file is stale whoever wrote it.
pub const STALE_AGE: Duration = Duration::from_secs(24 * 60 * 60);

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

/// The name of the temporary file number `n` of process `pid` of this host for a file `name`.
#[doc(hidden)]
pub fn temp_name(name: &str, pid: u32, n: u64) -> String {
    format!(".{name}{MARKER}{}-{pid}-{n}", host())
}

/// Writes `bytes` to `path` atomically: to a temporary file beside it, flushed to disk, then
/// renamed over it. A new file gets mode `0666` less the umask (Unix); a replaced one keeps its
/// mode. On an error the temporary file is removed and `path` is as it was.
pub fn write(path: &Path, bytes: &[u8]) -> io::Result<()> {
    let (dir, name) = split(path)?;
    let existing = fs::metadata(path)
        .ok()
        .filter(|m| m.is_file())
        .map(|m| m.permissions());
    let n = COUNTER.fetch_add(1, Ordering::Relaxed);
    let tmp = dir.join(temp_name(&name, std::process::id(), n));
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
pub fn remove_stale(path: &Path) {
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

/// Removes the stale temporary files of every file in `dir` (see the module's docs), and the
/// temporary files of kusari's kernel cache before this module wrote them
/// (`.<name>.<pid>.<n>.tmp`, which do not say their host) once they are a day old; best effort,
/// silently. Returns how many it removed.
pub fn remove_stale_in(dir: &Path) -> usize {
    let Ok(entries) = fs::read_dir(dir) else {
        return 0;
    };
    let this_host = host();
    let mut removed = 0;
    for entry in entries.flatten() {
        let file_name = entry.file_name();
        let Some(hidden) = file_name.to_str().and_then(|f| f.strip_prefix('.')) else {
            continue;
        };
        let stale = match hidden.rfind(MARKER) {
            Some(at) => is_stale(&hidden[at + MARKER.len()..], &this_host, &entry),
            None => is_old_cache_temp(hidden) && older_than_a_day(&entry),
        };
        if stale && fs::remove_file(entry.path()).is_ok() {
            removed += 1;
        }
    }
    removed
}

/// Whether a hidden file's name after its `.` is `<name>.<pid>.<n>.tmp`, the kernel cache's
/// temporary files before [`write`].
fn is_old_cache_temp(hidden: &str) -> bool {
    let Some(rest) = hidden.strip_suffix(".tmp") else {
        return false;
    };
    let mut parts = rest.rsplitn(3, '.');
    matches!(
        (parts.next(), parts.next(), parts.next()),
        (Some(n), Some(pid), Some(name))
            if !name.is_empty() && n.parse::<u64>().is_ok() && pid.parse::<u32>().is_ok()
    )
}

/// Whether `entry` is a file last modified more than [`STALE_AGE`] ago.
fn older_than_a_day(entry: &fs::DirEntry) -> bool {
    entry.file_type().is_ok_and(|t| t.is_file())
        && entry
            .metadata()
            .and_then(|m| m.modified())
            .ok()
            .and_then(|t| t.elapsed().ok())
            .is_some_and(|age| age > STALE_AGE)
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
    (host == this_host && !process_alive(pid)) || older_than_a_day(entry)
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::time::SystemTime;

    /// A pid above Linux's largest `pid_max` (2²²): no process has it.
    const GONE: u32 = 4_194_305;

    #[test]
    fn only_stale_temporary_files_are_removed_from_a_folder() {
        let dir = std::env::temp_dir().join(format!("kusari-atomic-unit-{}", std::process::id()));
        let _ = fs::remove_dir_all(&dir);
        fs::create_dir_all(&dir).unwrap();
        let day_old = SystemTime::now() - STALE_AGE - Duration::from_secs(3600);
        let other = |rest: &str| format!(".e.bin{MARKER}{rest}");
        // (name, made a day old, stale)
        let files = [
            (temp_name("a.bin", GONE, 0), false, true),
            (temp_name("a.bin", std::process::id(), 1), false, false),
            (other("elsewhere-7-0"), false, false),
            (other("elsewhere-8-0"), true, true),
            (".c.bin.7.0.tmp".to_string(), false, false),
            (".d.bin.8.0.tmp".to_string(), true, true),
            (".notes.tmp".to_string(), true, false),
            ("keep.bin".to_string(), true, false),
        ];
        for (name, old, _) in &files {
            fs::write(dir.join(name), b"x").unwrap();
            if *old {
                let f = OpenOptions::new().write(true).open(dir.join(name)).unwrap();
                f.set_modified(day_old).unwrap();
            }
        }
        assert_eq!(remove_stale_in(&dir), 3);
        for (name, _, stale) in &files {
            assert_eq!(dir.join(name).exists(), !stale, "{name}");
        }
        fs::remove_dir_all(&dir).unwrap();
    }
}
