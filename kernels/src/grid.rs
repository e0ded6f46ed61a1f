//! The grid of an elementwise launch: how many blocks of how many threads cover `n` elements on
//! a device with a given number of multiprocessors (pure arithmetic; no GPU needed).

/// Threads per block of every elementwise launch.
pub const BLOCK: u32 = 256;

/// Blocks per multiprocessor the grid aims for: enough resident warps to hide memory latency;
/// the grid-stride loop covers the rest.
const BLOCKS_PER_SM: u32 = 8;

/// Grid and block size for `n` elements on a device with `sm_count` multiprocessors, or `None`
/// when there is nothing to do (a zero-size array launches nothing).
///
/// ```
/// use kusari_kernels::grid::{launch_config, BLOCK};
/// assert_eq!(launch_config(0, 132), None);
/// assert_eq!(launch_config(1000, 132), Some((4, BLOCK)));       // ceil(1000 / 256)
/// assert_eq!(launch_config(1 << 30, 132), Some((132 * 8, BLOCK))); // capped; the loop strides
/// ```
pub fn launch_config(n: usize, sm_count: u32) -> Option<(u32, u32)> {
    launch_config_capped(n, sm_count.max(1).saturating_mul(BLOCKS_PER_SM))
}

/// Grid and block size for `n` elements in at most `max_blocks` blocks (at least one), or `None`
/// for `n == 0`: a grid that covers `n`, one thread an element, up to the cap; beyond it the
/// kernel's grid-stride loop goes round more than once.
///
/// ```
/// use kusari_kernels::grid::{launch_config_capped, BLOCK};
/// assert_eq!(launch_config_capped(1 << 20, 1 << 16), Some((4096, BLOCK))); // covers
/// assert_eq!(launch_config_capped(1 << 30, 1 << 16), Some((1 << 16, BLOCK))); // strides
/// ```
pub fn launch_config_capped(n: usize, max_blocks: u32) -> Option<(u32, u32)> {
    if n == 0 {
        return None;
    }
    let needed = n.div_ceil(BLOCK as usize);
    Some((needed.min(max_blocks.max(1) as usize) as u32, BLOCK))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn launch_config_covers_small_arrays_and_caps_large_ones() {
        assert_eq!(launch_config(1, 1), Some((1, BLOCK)));
        assert_eq!(launch_config(256, 10), Some((1, BLOCK)));
        assert_eq!(launch_config(257, 10), Some((2, BLOCK)));
        assert_eq!(
            launch_config(usize::MAX / 2, 0),
            Some((BLOCKS_PER_SM, BLOCK))
        );
        assert_eq!(launch_config_capped(513, 0), Some((1, BLOCK)));
        assert_eq!(launch_config_capped(513, 2), Some((2, BLOCK)));
        assert_eq!(launch_config_capped(513, 5), Some((3, BLOCK)));
    }
}
