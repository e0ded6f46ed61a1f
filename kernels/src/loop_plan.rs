//! The loop an elementwise launch runs: which inputs it indexes, its shape, and the source
//! variant that shape needs. Pure: shapes and contiguity flags in, a plan out.

use std::fmt;

use crate::codegen::{IndexWidth, Indexing};
use crate::signature::ElementwiseSignature;

/// Two shapes that do not broadcast against each other (NumPy's rules).
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct BroadcastError {
    /// The left shape.
    pub lhs: Vec<usize>,
    /// The right shape.
    pub rhs: Vec<usize>,
}

impl fmt::Display for BroadcastError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(
            f,
            "shapes {:?} and {:?} do not broadcast",
            self.lhs, self.rhs
        )
    }
}

impl std::error::Error for BroadcastError {}

/// The shape two shapes broadcast to, by NumPy's rules: aligned at the last axis, each pair of
/// lengths equal or one of them 1.
///
/// ```
/// use kusari_kernels::loop_plan::broadcast_shapes;
/// assert_eq!(broadcast_shapes(&[3, 1], &[4]).unwrap(), vec![3, 4]);
/// assert!(broadcast_shapes(&[3], &[4]).is_err());
/// ```
pub fn broadcast_shapes(lhs: &[usize], rhs: &[usize]) -> Result<Vec<usize>, BroadcastError> {
    let n = lhs.len().max(rhs.len());
    let at = |s: &[usize], i: usize| {
        if i + s.len() >= n {
            s[i + s.len() - n]
        } else {
            1
        }
    };
    (0..n)
        .map(|i| match (at(lhs, i), at(rhs, i)) {
            (l, r) if l == r || r == 1 => Ok(l),
            (1, r) => Ok(r),
            _ => Err(BroadcastError {
                lhs: lhs.to_vec(),
                rhs: rhs.to_vec(),
            }),
        })
        .collect()
}

/// One array input of a launch, as the plan sees it.
#[derive(Clone, Copy, Debug)]
pub struct LoopOperand<'a> {
    /// Its shape.
    pub shape: &'a [usize],
    /// Whether its elements lie in C order without gaps.
    pub contiguous: bool,
}

/// The loop a launch runs over its inputs: the inputs it indexes (the non-`raw` ones), its shape
/// (theirs broadcast together, unless given), and the source variant: contiguous when every
/// looped input is C-contiguous in the loop's shape, strided otherwise, with 64-bit indexing
/// from 2^31 elements.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct LoopPlan {
    /// Positions, among the inputs, of those the loop indexes.
    pub looped: Vec<usize>,
    /// The loop's shape (also the outputs' shape).
    pub shape: Vec<usize>,
    /// Contiguous or strided.
    pub indexing: Indexing,
    /// 32- or 64-bit element indices.
    pub width: IndexWidth,
}

impl LoopPlan {
    /// The plan for `inputs` (one per input of `sig`), over `shape` when given.
    ///
    /// ```
    /// use kusari_kernels::codegen::Indexing;
    /// use kusari_kernels::loop_plan::{LoopOperand, LoopPlan};
    /// use kusari_kernels::ElementwiseSignature;
    /// let sig = ElementwiseSignature::new("T x, T y", "T w", "").unwrap();
    /// let m = LoopOperand { shape: &[2, 3], contiguous: true };
    /// let row = LoopOperand { shape: &[3], contiguous: true };
    /// let plan = LoopPlan::new(&sig, &[m, row], None).unwrap();
    /// assert_eq!(plan.shape, vec![2, 3]);
    /// assert_eq!(plan.indexing, Indexing::Strided { ndim: 2 });
    /// ```
    pub fn new(
        sig: &ElementwiseSignature,
        inputs: &[LoopOperand<'_>],
        shape: Option<&[usize]>,
    ) -> Result<Self, BroadcastError> {
        Self::with_outputs(sig, inputs, &[], shape)
    }

    /// [`new`](Self::new) with the outputs the caller gave (CuPy's `kernel(x, out)`), one per
    /// output of `sig`, or none: the non-`raw` ones take part in the loop's shape (a kernel
    /// whose inputs are scalars writes over its output's shape) and in the choice of variant
    /// (a strided output view takes the strided one). That each has the loop's shape is the
    /// caller's check.
    ///
    /// ```
    /// use kusari_kernels::codegen::Indexing;
    /// use kusari_kernels::loop_plan::{LoopOperand, LoopPlan};
    /// use kusari_kernels::ElementwiseSignature;
    /// let sig = ElementwiseSignature::new("T v", "T w", "").unwrap();
    /// let scalar = LoopOperand { shape: &[], contiguous: true };
    /// let out = LoopOperand { shape: &[2, 3], contiguous: false };
    /// let plan = LoopPlan::with_outputs(&sig, &[scalar], &[out], None).unwrap();
    /// assert_eq!(plan.shape, vec![2, 3]);
    /// assert_eq!(plan.indexing, Indexing::Strided { ndim: 2 });
    /// ```
    pub fn with_outputs(
        sig: &ElementwiseSignature,
        inputs: &[LoopOperand<'_>],
        outputs: &[LoopOperand<'_>],
        shape: Option<&[usize]>,
    ) -> Result<Self, BroadcastError> {
        let looped_outputs: Vec<&LoopOperand<'_>> = sig
            .outputs
            .iter()
            .zip(outputs)
            .filter(|(p, _)| !p.raw)
            .map(|(_, o)| o)
            .collect();
        let looped: Vec<usize> = sig
            .inputs
            .iter()
            .zip(inputs)
            .enumerate()
            .filter(|(_, (p, _))| !p.raw)
            .map(|(i, _)| i)
            .collect();
        let shape = match shape {
            Some(s) => s.to_vec(),
            None => looped
                .iter()
                .map(|&i| &inputs[i])
                .chain(looped_outputs.iter().copied())
                .try_fold(Vec::new(), |s, o| broadcast_shapes(&s, o.shape))?,
        };
        let contiguous = looped
            .iter()
            .map(|&i| &inputs[i])
            .chain(looped_outputs.iter().copied())
            .all(|o| o.shape == shape.as_slice() && o.contiguous);
        let indexing = if contiguous {
            Indexing::Contiguous
        } else {
            Indexing::Strided { ndim: shape.len() }
        };
        // A shape whose element count overflows takes 64-bit indexing here; launching it is
        // the caller's error to report.
        let len = shape.iter().try_fold(1usize, |n, &d| n.checked_mul(d));
        let width = IndexWidth::for_len(len.unwrap_or(usize::MAX));
        Ok(LoopPlan {
            looped,
            shape,
            indexing,
            width,
        })
    }
}

/// The loop's shape and each operand's strides (in elements, one row per operand, each as long
/// as `shape`) with CuPy's `reduce_dims`: axes of length 1 dropped and neighbouring axes merged
/// where every operand steps through them as through one axis (the outer stride is the inner
/// stride times the inner length), so the strided kernel computes fewer coordinates per
/// element. The elements each operand visits, in loop order, are unchanged.
///
/// ```
/// use kusari_kernels::loop_plan::collapse_dims;
/// // A contiguous [4, 5, 6] array plus a row of 6 broadcast over it: two axes, not three.
/// let (shape, strides) = collapse_dims(&[4, 5, 6], &[vec![30, 6, 1], vec![0, 0, 1]]);
/// assert_eq!(shape, vec![20, 6]);
/// assert_eq!(strides, vec![vec![6, 1], vec![0, 1]]);
/// ```
pub fn collapse_dims(shape: &[usize], strides: &[Vec<i64>]) -> (Vec<usize>, Vec<Vec<i64>>) {
    if shape.contains(&0) {
        return (shape.to_vec(), strides.to_vec());
    }
    let mut out_shape: Vec<usize> = Vec::new();
    let mut out_strides: Vec<Vec<i64>> = vec![Vec::new(); strides.len()];
    for (axis, &len) in shape.iter().enumerate() {
        if len == 1 {
            continue;
        }
        let merges = out_shape.last().is_some() && {
            let last = out_strides.iter().map(|s| s[s.len() - 1]);
            strides
                .iter()
                .zip(last)
                .all(|(s, outer)| outer == s[axis] * len as i64)
        };
        if merges {
            if let Some(l) = out_shape.last_mut() {
                *l *= len;
            }
            for (o, s) in out_strides.iter_mut().zip(strides) {
                if let Some(x) = o.last_mut() {
                    *x = s[axis];
                }
            }
        } else {
            out_shape.push(len);
            for (o, s) in out_strides.iter_mut().zip(strides) {
                o.push(s[axis]);
            }
        }
    }
    (out_shape, out_strides)
}

/// Whether a view (`shape`, `strides` in elements) may reach one element through two indices:
/// a broadcast axis (stride 0 over a length above 1) or axes whose strides interleave. Sorted by
/// stride, each axis must step past everything the axes inside it reach; a view that passes is
/// certainly free of self-overlap (a few exotic non-overlapping views fail, which only makes a
/// caller refuse them).
///
/// ```
/// use kusari_kernels::loop_plan::overlaps_itself;
/// assert!(!overlaps_itself(&[2, 3], &[3, 1]));
/// assert!(!overlaps_itself(&[3, 2], &[1, 3])); // transposed
/// assert!(overlaps_itself(&[2, 3], &[0, 1])); // a broadcast row
/// ```
pub fn overlaps_itself(shape: &[usize], strides: &[i64]) -> bool {
    if shape.contains(&0) {
        return false;
    }
    let mut axes: Vec<(usize, u64)> = shape
        .iter()
        .zip(strides)
        .filter(|&(&len, _)| len > 1)
        .map(|(&len, &s)| (len, s.unsigned_abs()))
        .collect();
    axes.sort_by_key(|&(_, s)| s);
    // One past the largest offset the inner axes reach.
    let mut reach: u64 = 1;
    for (len, stride) in axes {
        if stride < reach {
            return true;
        }
        reach += stride * (len as u64 - 1);
    }
    false
}

#[cfg(test)]
mod tests {
    use super::*;

    fn sig(inputs: &str) -> ElementwiseSignature {
        ElementwiseSignature::new(inputs, "T w", "").unwrap()
    }

    const fn op(shape: &[usize], contiguous: bool) -> LoopOperand<'_> {
        LoopOperand { shape, contiguous }
    }

    #[test]
    fn broadcasting_follows_numpy() {
        assert_eq!(broadcast_shapes(&[3, 1], &[4]).unwrap(), vec![3, 4]);
        assert_eq!(broadcast_shapes(&[], &[2, 2]).unwrap(), vec![2, 2]);
        assert_eq!(
            broadcast_shapes(&[2, 1, 5], &[3, 1]).unwrap(),
            vec![2, 3, 5]
        );
        assert_eq!(
            broadcast_shapes(&[3], &[4]),
            Err(BroadcastError {
                lhs: vec![3],
                rhs: vec![4]
            })
        );
    }

    #[test]
    fn contiguous_inputs_of_the_loop_shape_take_the_contiguous_variant() {
        let plan = LoopPlan::new(
            &sig("T x, T y"),
            &[op(&[2, 3], true), op(&[2, 3], true)],
            None,
        )
        .unwrap();
        assert_eq!(plan.looped, vec![0, 1]);
        assert_eq!(plan.shape, vec![2, 3]);
        assert_eq!(plan.indexing, Indexing::Contiguous);
        assert_eq!(plan.width, IndexWidth::I32);
    }

    #[test]
    fn a_view_or_a_broadcast_input_takes_the_strided_variant() {
        let s = sig("T x, T y");
        let view = LoopPlan::new(&s, &[op(&[2, 3], true), op(&[2, 3], false)], None).unwrap();
        assert_eq!(view.indexing, Indexing::Strided { ndim: 2 });
        let row = LoopPlan::new(&s, &[op(&[2, 3], true), op(&[3], true)], None).unwrap();
        assert_eq!(row.indexing, Indexing::Strided { ndim: 2 });
        assert_eq!(
            LoopPlan::new(&s, &[op(&[2, 3], true), op(&[4], true)], None),
            Err(BroadcastError {
                lhs: vec![2, 3],
                rhs: vec![4]
            })
        );
    }

    #[test]
    fn given_outputs_shape_the_loop_and_pick_the_variant() {
        let s = ElementwiseSignature::new("T v", "T w, raw T r", "").unwrap();
        let scalar = op(&[], true);
        let plan =
            LoopPlan::with_outputs(&s, &[scalar], &[op(&[2, 3], true), op(&[9], true)], None)
                .unwrap();
        assert_eq!(plan.shape, vec![2, 3], "the raw output does not count");
        assert_eq!(plan.indexing, Indexing::Strided { ndim: 2 });
        let same = LoopPlan::with_outputs(
            &s,
            &[op(&[2, 3], true)],
            &[op(&[2, 3], true), op(&[1], false)],
            None,
        )
        .unwrap();
        assert_eq!(same.indexing, Indexing::Contiguous);
        let view = LoopPlan::with_outputs(
            &s,
            &[op(&[2, 3], true)],
            &[op(&[2, 3], false), op(&[1], true)],
            None,
        )
        .unwrap();
        assert_eq!(view.indexing, Indexing::Strided { ndim: 2 });
    }

    /// Walks every loop index through the strides as the strided kernel does (last axis
    /// fastest) and returns each operand's offsets.
    fn offsets(shape: &[usize], strides: &[Vec<i64>]) -> Vec<Vec<i64>> {
        let n: usize = shape.iter().product();
        (0..n)
            .map(|i| {
                let mut rem = i;
                let mut off = vec![0i64; strides.len()];
                for d in (0..shape.len()).rev() {
                    let c = (rem % shape[d]) as i64;
                    rem /= shape[d];
                    for (o, s) in off.iter_mut().zip(strides) {
                        *o += c * s[d];
                    }
                }
                off
            })
            .collect()
    }

    #[test]
    fn collapsing_keeps_every_offset_and_merges_only_what_steps_as_one_axis() {
        let cases: Vec<(Vec<usize>, Vec<Vec<i64>>, usize)> = vec![
            // Contiguous and a broadcast row: [4, 5] merge, the row's axis does not.
            (vec![4, 5, 6], vec![vec![30, 6, 1], vec![0, 0, 1]], 2),
            // Transposed: nothing merges.
            (vec![3, 2], vec![vec![1, 3], vec![2, 1]], 2),
            // Axes of length 1 go; a column broadcast merges with nothing.
            (vec![2, 1, 3], vec![vec![3, 3, 1], vec![1, 1, 0]], 2),
            // A flipped contiguous array merges (negative strides).
            (vec![2, 3], vec![vec![-3, -1], vec![3, 1]], 1),
            // A scalar broadcast everywhere merges with anything contiguous.
            (vec![2, 3, 4], vec![vec![0, 0, 0], vec![12, 4, 1]], 1),
            // Every axis of length 1.
            (vec![1, 1], vec![vec![5, 7]], 0),
        ];
        for (shape, strides, ndim) in cases {
            let (cs, cst) = collapse_dims(&shape, &strides);
            assert_eq!(cs.len(), ndim, "{shape:?} {strides:?} -> {cs:?}");
            assert_eq!(
                cs.iter().product::<usize>(),
                shape.iter().product::<usize>()
            );
            assert_eq!(offsets(&cs, &cst), offsets(&shape, &strides), "{shape:?}");
        }
        // An empty loop is left as it is.
        let (cs, _) = collapse_dims(&[0, 3], &[vec![3, 1]]);
        assert_eq!(cs, vec![0, 3]);
    }

    #[test]
    fn views_that_reach_an_element_twice_are_found() {
        assert!(!overlaps_itself(&[], &[]));
        assert!(
            !overlaps_itself(&[4], &[-2]),
            "every other element, flipped"
        );
        assert!(
            !overlaps_itself(&[2, 1, 3], &[3, 0, 1]),
            "a length-1 axis may have any stride"
        );
        assert!(!overlaps_itself(&[0, 3], &[0, 0]), "no element at all");
        assert!(overlaps_itself(&[3, 2], &[0, 1]));
        assert!(
            overlaps_itself(&[2, 3], &[2, 1]),
            "rows overlapping by one element"
        );
        assert!(!overlaps_itself(&[2, 3], &[4, 1]), "rows with a gap");
    }

    #[test]
    fn raw_inputs_are_not_looped_and_a_given_shape_wins() {
        let s = sig("raw T a, T y");
        let plan = LoopPlan::new(&s, &[op(&[7], false), op(&[2, 2], true)], Some(&[2, 2])).unwrap();
        assert_eq!(plan.looped, vec![1]);
        assert_eq!(plan.shape, vec![2, 2]);
        assert_eq!(plan.indexing, Indexing::Contiguous);
        // Without array inputs the loop has the given shape; 2^31 elements need 64-bit indices.
        let fill = ElementwiseSignature::new("", "float32 w", "T v").unwrap_err();
        assert!(!fill.is_empty(), "a placeholder needs an array to bind it");
        let fill = ElementwiseSignature::new("", "float32 w", "float32 v").unwrap();
        let big = LoopPlan::new(&fill, &[], Some(&[1 << 16, 1 << 15])).unwrap();
        assert_eq!(big.looped, Vec::<usize>::new());
        assert_eq!(big.indexing, Indexing::Contiguous);
        assert_eq!(big.width, IndexWidth::I64);
    }
}
