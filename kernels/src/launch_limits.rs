//! CUDA's launch limits: the largest grid, block and dynamic shared memory a launch may ask
//! for, and the check of a raw launch against them ([`check_launch`]). Elementwise and
//! reduction launches choose their own grids within these ([`crate::grid`]).

/// Most threads a block may have.
pub const MAX_BLOCK_THREADS: u64 = 1024;

/// Largest block dimensions (x, y, z).
pub const MAX_BLOCK_DIMS: [u32; 3] = [1024, 1024, 64];

/// Largest grid dimensions (x, y, z).
pub const MAX_GRID_DIMS: [u32; 3] = [i32::MAX as u32, 65535, 65535];

/// Most dynamic shared memory a launch may ask for: CUDA's default limit per block, 48 KiB (a
/// kernel raises it on a GPU with `cudaFuncSetAttribute`, which kusari does not call).
pub const MAX_DYNAMIC_SHARED_BYTES: usize = 48 * 1024;

/// Checks a launch's grid, block and dynamic shared memory against CUDA's limits (those of
/// every device since compute capability 3.0), saying which is exceeded and by what.
///
/// ```
/// use kusari_kernels::launch_limits::check_launch;
/// assert!(check_launch([4, 1, 1], [256, 1, 1], 0).is_ok());
/// let e = check_launch([1, 1, 1], [64, 32, 1], 0).unwrap_err();
/// assert!(e.contains("2048 threads"), "{e}");
/// ```
pub fn check_launch(grid: [u32; 3], block: [u32; 3], shared_bytes: usize) -> Result<(), String> {
    let show = |d: [u32; 3]| format!("({}, {}, {})", d[0], d[1], d[2]);
    if grid.contains(&0) || block.contains(&0) {
        return Err(format!(
            "grid {} and block {} must have no zero dimension",
            show(grid),
            show(block)
        ));
    }
    let threads: u64 = block.iter().map(|&d| u64::from(d)).product();
    if threads > MAX_BLOCK_THREADS {
        return Err(format!(
            "block {} has {threads} threads; a block has at most {MAX_BLOCK_THREADS}",
            show(block)
        ));
    }
    for (what, dims, max) in [
        ("block", block, MAX_BLOCK_DIMS),
        ("grid", grid, MAX_GRID_DIMS),
    ] {
        if let Some(axis) = (0..3).find(|&a| dims[a] > max[a]) {
            return Err(format!(
                "{what} {} exceeds the largest {what} {} in {}",
                show(dims),
                show(max),
                ["x", "y", "z"][axis]
            ));
        }
    }
    if shared_bytes > MAX_DYNAMIC_SHARED_BYTES {
        return Err(format!(
            "{shared_bytes} bytes of dynamic shared memory exceed the {MAX_DYNAMIC_SHARED_BYTES} \
             bytes (48 KiB) a block has by default"
        ));
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn launch_limits_name_what_is_exceeded() {
        assert!(check_launch([1, 1, 1], [1024, 1, 1], MAX_DYNAMIC_SHARED_BYTES).is_ok());
        assert!(check_launch(MAX_GRID_DIMS, [32, 32, 1], 0).is_ok());
        let e = check_launch([1, 0, 1], [1, 1, 1], 0).unwrap_err();
        assert!(
            e.contains("grid (1, 0, 1)") && e.contains("no zero dimension"),
            "{e}"
        );
        let e = check_launch([1, 1, 1], [1, 1, 128], 0).unwrap_err();
        assert!(
            e.contains("block (1, 1, 128) exceeds") && e.ends_with("in z"),
            "{e}"
        );
        let e = check_launch([1, 70000, 1], [1, 1, 1], 0).unwrap_err();
        assert!(
            e.contains("grid (1, 70000, 1) exceeds") && e.ends_with("in y"),
            "{e}"
        );
        let e = check_launch([1, 1, 1], [1, 1, 1], MAX_DYNAMIC_SHARED_BYTES + 1).unwrap_err();
        assert!(e.contains("49153 bytes of dynamic shared memory"), "{e}");
    }
}
