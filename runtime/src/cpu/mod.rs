//! The CPU backend: buffers as `Vec`s per dtype, computed with loops over slices (vectorized math
//! in `math/`) and ndarray views.
//! Its operations (`ops.rs`) take buffers and layouts and return buffers; they never see `Array`.

mod batch_norm;
mod conv;
mod elementwise;
pub(crate) mod expr;
mod expr_float;
mod index;
#[cfg(feature = "jit")]
pub(crate) mod jit;
mod linalg;
mod math;
mod ops;
pub(crate) mod optim;
pub(crate) mod pool;
mod reduce;
mod softmax;
mod storage;
pub(crate) mod threads;
mod window;

pub(crate) use elementwise::{PAR_MIN, map_slices, map1, map1_from, wide, zip2, zip3};
pub(crate) use linalg::matmul;
pub(crate) use reduce::{into_c_vec, reduce};
pub(crate) use storage::{CpuRef, CpuStorage};

/// The size of this CPU's last-level cache in bytes: Linux's record of the highest cache level
/// of CPU 0, else 32 MiB (a common L3 of the x86 servers the speed budgets are measured on).
pub(crate) fn last_level_cache_bytes() -> usize {
    static BYTES: std::sync::OnceLock<usize> = std::sync::OnceLock::new();
    *BYTES.get_or_init(|| read_last_level_cache().unwrap_or(32 << 20))
}

/// The largest cache level in `/sys/devices/system/cpu/cpu0/cache` and its size (`"32768K"`).
fn read_last_level_cache() -> Option<usize> {
    let dir = std::fs::read_dir("/sys/devices/system/cpu/cpu0/cache").ok()?;
    let read = |p: std::path::PathBuf| std::fs::read_to_string(p).ok();
    dir.flatten()
        .filter_map(|e| {
            let level: u32 = read(e.path().join("level"))?.trim().parse().ok()?;
            let size = parse_cache_size(&read(e.path().join("size"))?)?;
            Some((level, size))
        })
        .max()
        .map(|(_, size)| size)
}

/// `"32768K"`, `"1M"` or `"512"` in bytes.
fn parse_cache_size(s: &str) -> Option<usize> {
    let s = s.trim();
    let (digits, unit) = match s.as_bytes().last()? {
        b'K' => (&s[..s.len() - 1], 1 << 10),
        b'M' => (&s[..s.len() - 1], 1 << 20),
        b'G' => (&s[..s.len() - 1], 1 << 30),
        _ => (s, 1),
    };
    digits.parse::<usize>().ok()?.checked_mul(unit)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn cache_sizes_parse() {
        assert_eq!(parse_cache_size("32768K\n"), Some(32 << 20));
        assert_eq!(parse_cache_size("1M"), Some(1 << 20));
        assert_eq!(parse_cache_size("512"), Some(512));
        assert_eq!(parse_cache_size("K"), None);
        assert_eq!(parse_cache_size(""), None);
        assert!(last_level_cache_bytes() > 0);
    }
}
