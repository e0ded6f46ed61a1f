//! The plan of a reduction launch: how the threads share the work ([`ReductionPlan`],
//! [`Strategy`]), and the dimensions the kernel walks ([`coalesce`], [`layout_words`]). Pure
//! arithmetic on shapes and strides.

/// Threads per block of every reduction kernel launch.
pub const REDUCE_BLOCK: u32 = 256;

/// Threads of a warp: the group of [`Strategy::WarpPerOutput`].
pub const WARP: u32 = 32;

/// How the threads of a launch share the work of its reductions.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Strategy {
    /// Each thread reduces one output: for many outputs whose elements are few, or strided so
    /// that consecutive outputs are consecutive in memory (a reduction over leading axes, where
    /// consecutive threads then read consecutive addresses).
    ThreadPerOutput,
    /// Each warp reduces one output, its lanes reading consecutive elements: many outputs of
    /// moderate length.
    WarpPerOutput,
    /// Each block reduces one output: fewer, longer reductions.
    BlockPerOutput,
    /// Reductions over leading axes (not along memory) with too few outputs for a thread each:
    /// each block reduces 8 consecutive outputs, 32 threads each. A warp's threads take the 8
    /// outputs at 4 consecutive reduced indices, so it reads whole 32-byte sectors; each
    /// output's threads combine in shared memory.
    ColumnBlock,
    /// Few long reductions: each is split into `chunks` chunks, one block each, whose partial
    /// results a second pass combines.
    Split {
        /// Chunks per output.
        chunks: usize,
    },
}

/// A launch's plan: the strategy, and what it gives the kernels.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct ReductionPlan {
    /// How the work is shared.
    pub strategy: Strategy,
    /// Threads that reduce one chunk together (1, [`WARP`] or [`REDUCE_BLOCK`]).
    pub group: u32,
    /// Chunks per output (1 unless split).
    pub chunks: usize,
    /// Elements per chunk (the whole reduction unless split; at least 1).
    pub chunk: usize,
    /// Blocks of the first pass (a grid-stride loop covers the rest).
    pub grid: u32,
    /// Whether a block's consecutive threads take consecutive outputs (and an output's threads
    /// are `REDUCE_BLOCK / group` apart): [`Strategy::ColumnBlock`]. Otherwise an output's
    /// threads are consecutive.
    pub transposed: bool,
}

/// Elements each thread of a split chunk folds, at least.
const ELEMENTS_PER_THREAD: usize = 16;

/// Reductions this short are folded by one thread each.
const THREAD_MAX_LEN: usize = 16;

/// Reductions up to this long are folded by a warp each.
const WARP_MAX_LEN: usize = 2048;

/// Outputs per block of [`Strategy::ColumnBlock`] (and the fewest that use it).
const COLUMN_OUTPUTS: usize = 8;

impl ReductionPlan {
    /// The plan for `n_out` reductions of `len` elements each on a device of `sm_count` SMs.
    /// `inner_contiguous` says whether the reduction runs along memory (the innermost reduced
    /// dimension of the first input has stride 1); `splittable` whether partial results can be
    /// stored (their type's size is known to the host).
    ///
    /// - Few reductions (less than eight blocks per SM) of at least two split chunks (4096
    ///   elements each) are [`Strategy::Split`] into about eight blocks per SM.
    /// - A reduction that does not run along memory (over leading axes) is folded by one thread
    ///   per output (consecutive threads read consecutive addresses) when there are at least 64
    ///   outputs per SM or at most 16 elements per output; otherwise a block folds 8
    ///   consecutive outputs ([`Strategy::ColumnBlock`]), so that the reads stay consecutive, or
    ///   one output where there are fewer than 8.
    /// - Along memory: up to 16 elements a thread each, up to 2048 a warp each, longer a block.
    ///
    /// ```
    /// use kusari_kernels::reduction::{ReductionPlan, Strategy};
    /// let plan = ReductionPlan::new(1, 1 << 20, true, true, 132);
    /// assert_eq!(plan.strategy, Strategy::Split { chunks: 256 });
    /// assert_eq!(ReductionPlan::new(4096, 64, true, true, 132).strategy, Strategy::WarpPerOutput);
    /// ```
    pub fn new(
        n_out: usize,
        len: usize,
        inner_contiguous: bool,
        splittable: bool,
        sm_count: usize,
    ) -> Self {
        let sm = sm_count.max(1);
        let wanted_blocks = sm * 8;
        let min_chunk = REDUCE_BLOCK as usize * ELEMENTS_PER_THREAD;
        let plan = |strategy, group: u32, chunks: usize| {
            let chunk = if chunks > 1 {
                len.div_ceil(chunks)
            } else {
                len.max(1)
            };
            let per_block = (REDUCE_BLOCK / group) as usize;
            let blocks = (n_out * chunks).div_ceil(per_block);
            ReductionPlan {
                strategy,
                group,
                chunks,
                chunk,
                grid: blocks.clamp(1, sm * 32) as u32,
                transposed: matches!(strategy, Strategy::ColumnBlock),
            }
        };
        if splittable && n_out < wanted_blocks && len >= 2 * min_chunk {
            let chunks = (wanted_blocks / n_out.max(1)).clamp(2, len / min_chunk);
            let chunks = len.div_ceil(len.div_ceil(chunks));
            return plan(Strategy::Split { chunks }, REDUCE_BLOCK, chunks);
        }
        if !inner_contiguous {
            if n_out >= sm * REDUCE_BLOCK as usize / 4 || len <= THREAD_MAX_LEN {
                return plan(Strategy::ThreadPerOutput, 1, 1);
            }
            return match n_out < COLUMN_OUTPUTS {
                true => plan(Strategy::BlockPerOutput, REDUCE_BLOCK, 1),
                false => plan(
                    Strategy::ColumnBlock,
                    REDUCE_BLOCK / COLUMN_OUTPUTS as u32,
                    1,
                ),
            };
        }
        if len <= THREAD_MAX_LEN {
            plan(Strategy::ThreadPerOutput, 1, 1)
        } else if len <= WARP_MAX_LEN {
            plan(Strategy::WarpPerOutput, WARP, 1)
        } else {
            plan(Strategy::BlockPerOutput, REDUCE_BLOCK, 1)
        }
    }
}

/// The dimensions of a reduction after [`coalesce`]: the kept ones (the outputs' C order) and
/// the reduced ones, each with its extent and, per input, its stride in elements.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct Coalesced {
    /// Extents of the kept dimensions.
    pub kept: Vec<usize>,
    /// Per input, the strides of the kept dimensions.
    pub kept_strides: Vec<Vec<isize>>,
    /// Extents of the reduced dimensions.
    pub reduced: Vec<usize>,
    /// Per input, the strides of the reduced dimensions.
    pub reduced_strides: Vec<Vec<isize>>,
}

/// The reduction of arrays of `shape` (each input's `strides` already broadcast to it) over
/// `axes` (sorted, distinct), with dimensions of extent 1 dropped and neighbours of the same
/// kind (both kept or both reduced) merged where every input steps through them as through one
/// dimension. The element order of the kept dimensions and of the reduced ones is unchanged.
///
/// ```
/// use kusari_kernels::reduction::coalesce;
/// // A contiguous [2, 3, 4] array reduced over its last two axes: 2 rows of 12.
/// let c = coalesce(&[2, 3, 4], &[1, 2], &[vec![12, 4, 1]]);
/// assert_eq!((c.kept, c.reduced), (vec![2], vec![12]));
/// assert_eq!(c.reduced_strides, vec![vec![1]]);
/// ```
pub fn coalesce(shape: &[usize], axes: &[usize], strides: &[Vec<isize>]) -> Coalesced {
    let mut out = Coalesced {
        kept_strides: vec![Vec::new(); strides.len()],
        reduced_strides: vec![Vec::new(); strides.len()],
        ..Coalesced::default()
    };
    // The kind of the previous dimension pushed, to merge only neighbours.
    let mut last: Option<bool> = None;
    for (d, &extent) in shape.iter().enumerate() {
        if extent == 1 {
            continue;
        }
        let reduced = axes.contains(&d);
        let (dims, dim_strides) = match reduced {
            true => (&mut out.reduced, &mut out.reduced_strides),
            false => (&mut out.kept, &mut out.kept_strides),
        };
        let mergeable = last == Some(reduced)
            && strides.iter().zip(dim_strides.iter()).all(|(s, ds)| {
                let prev = *ds.last().unwrap_or(&0);
                prev == s[d] * extent as isize
            });
        if mergeable {
            if let Some(e) = dims.last_mut() {
                *e *= extent;
            }
            for (s, ds) in strides.iter().zip(dim_strides.iter_mut()) {
                if let Some(p) = ds.last_mut() {
                    *p = s[d];
                }
            }
        } else {
            dims.push(extent);
            for (s, ds) in strides.iter().zip(dim_strides.iter_mut()) {
                ds.push(s[d]);
            }
        }
        last = Some(reduced);
    }
    out
}

/// The dimensions a kernel's layout struct has room for, for `kept` kept and `reduced` reduced
/// dimensions: at least 4, else the next power of two. A kernel takes the actual counts at
/// launch, so one compiled kernel serves every rank up to its capacity (few compiled variants:
/// each costs a compile, and on the emulated device host memory for its threads).
///
/// ```
/// use kusari_kernels::reduction::rank_capacity;
/// assert_eq!((rank_capacity(0, 1), rank_capacity(2, 4), rank_capacity(5, 1)), (4, 4, 8));
/// ```
pub fn rank_capacity(kept: usize, reduced: usize) -> usize {
    kept.max(reduced).max(4).next_power_of_two()
}

/// The layout struct's words for `c` in a kernel of `capacity` dimensions
/// ([`rank_capacity`]): the kept and reduced dimension counts, the kept extents, each input's
/// kept strides, the reduced extents, each input's reduced strides, each list padded to
/// `capacity` (extents with 1, strides with 0).
///
/// ```
/// use kusari_kernels::reduction::{coalesce, layout_words};
/// let c = coalesce(&[2, 3], &[1], &[vec![3, 1]]);
/// assert_eq!(layout_words(&c, 4), vec![1, 1, 2, 1, 1, 1, 3, 0, 0, 0, 3, 1, 1, 1, 1, 0, 0, 0]);
/// ```
pub fn layout_words(c: &Coalesced, capacity: usize) -> Vec<i64> {
    let n_in = c.kept_strides.len().max(1);
    let mut words = vec![c.kept.len() as i64, c.reduced.len() as i64];
    let mut list = |dims: &[usize], strides: &[Vec<isize>]| {
        let mut ext: Vec<i64> = dims.iter().map(|&d| d as i64).collect();
        ext.resize(capacity, 1);
        words.extend(ext);
        for a in 0..n_in {
            let mut s: Vec<i64> = strides
                .get(a)
                .map(|s| s.iter().map(|&x| x as i64).collect())
                .unwrap_or_default();
            s.resize(capacity, 0);
            words.extend(s);
        }
    };
    list(&c.kept, &c.kept_strides);
    list(&c.reduced, &c.reduced_strides);
    words
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn plans_follow_the_shape() {
        let sm = 132;
        // Many short rows: a thread each; moderate rows: a warp each; long: a block each.
        assert_eq!(
            ReductionPlan::new(100_000, 8, true, true, sm).strategy,
            Strategy::ThreadPerOutput
        );
        let warp = ReductionPlan::new(10_000, 100, true, true, sm);
        assert_eq!((warp.strategy, warp.group), (Strategy::WarpPerOutput, 32));
        assert_eq!(warp.grid, 10_000u32.div_ceil(8).min(132 * 32));
        let block = ReductionPlan::new(10_000, 10_000, true, true, sm);
        assert_eq!(
            (block.strategy, block.group),
            (Strategy::BlockPerOutput, 256)
        );
        // Few long rows are split, every chunk non-empty and at least 4096 long.
        let split = ReductionPlan::new(3, 100_000, true, true, sm);
        let Strategy::Split { chunks } = split.strategy else {
            panic!("{split:?}")
        };
        assert_eq!(chunks, split.chunks);
        assert!(chunks >= 2 && split.chunk >= 4096, "{split:?}");
        assert!((chunks - 1) * split.chunk < 100_000 && chunks * split.chunk >= 100_000);
        assert_eq!(split.grid as usize, 3 * chunks);
        // Not splittable (a preamble's type): a block per row instead.
        assert_eq!(
            ReductionPlan::new(3, 100_000, true, false, sm).strategy,
            Strategy::BlockPerOutput
        );
        // Leading axes: a thread per output (coalesced column reads) when outputs are many.
        assert_eq!(
            ReductionPlan::new(100_000, 1000, false, true, sm).strategy,
            Strategy::ThreadPerOutput
        );
        // Fewer: a block per 8 consecutive outputs, 32 threads each, transposed so that a
        // warp reads consecutive addresses; fewer than 8 outputs, a block each.
        let columns = ReductionPlan::new(4096, 4096, false, true, sm);
        assert_eq!(
            (columns.strategy, columns.group, columns.transposed),
            (Strategy::ColumnBlock, 32, true)
        );
        assert_eq!(columns.grid, 4096 / 8);
        assert_eq!(
            ReductionPlan::new(5, 1000, false, true, sm).strategy,
            Strategy::BlockPerOutput
        );
        assert!(!block.transposed && !warp.transposed);
        // Nothing to do still plans one block.
        let empty = ReductionPlan::new(0, 0, true, true, sm);
        assert_eq!((empty.grid, empty.chunk, empty.chunks), (1, 1, 1));
    }

    #[test]
    fn coalescing_merges_neighbours_of_one_kind_and_drops_unit_dims() {
        // Transposed [3, 2] (strides [1, 3]) reduced over axis 0: nothing merges.
        let c = coalesce(&[3, 2], &[0], &[vec![1, 3]]);
        assert_eq!(c.kept, vec![2]);
        assert_eq!(c.reduced, vec![3]);
        assert_eq!(
            (c.kept_strides, c.reduced_strides),
            (vec![vec![3]], vec![vec![1]])
        );
        // Middle axis of [2, 3, 4]: kept dims 0 and 2 are not neighbours.
        let c = coalesce(&[2, 3, 4], &[1], &[vec![12, 4, 1], vec![0, 0, 1]]);
        assert_eq!((c.kept.clone(), c.reduced.clone()), (vec![2, 4], vec![3]));
        assert_eq!(c.kept_strides, vec![vec![12, 1], vec![0, 1]]);
        assert_eq!(c.reduced_strides, vec![vec![4], vec![0]]);
        // A broadcast input stops a merge that the other allows.
        let c = coalesce(&[2, 3], &[0, 1], &[vec![3, 1], vec![0, 1]]);
        assert_eq!(c.reduced, vec![2, 3]);
        let c = coalesce(&[2, 1, 3], &[0, 1, 2], &[vec![3, 3, 1]]);
        assert_eq!((c.reduced, c.reduced_strides), (vec![6], vec![vec![1]]));
        // Everything reduced: no kept dimension, and the lists padded to the capacity.
        let words = layout_words(&coalesce(&[4], &[0], &[vec![1], vec![0]]), 4);
        let mut want = vec![0, 1];
        want.extend([1, 1, 1, 1, 0, 0, 0, 0, 0, 0, 0, 0]);
        want.extend([4, 1, 1, 1, 1, 0, 0, 0, 0, 0, 0, 0]);
        assert_eq!(words, want);
        assert_eq!(rank_capacity(9, 0), 16);
    }
}
