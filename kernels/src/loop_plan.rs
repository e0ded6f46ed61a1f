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
                .try_fold(Vec::new(), |s, &i| broadcast_shapes(&s, inputs[i].shape))?,
        };
        let contiguous = looped
            .iter()
            .all(|&i| inputs[i].shape == shape.as_slice() && inputs[i].contiguous);
        let indexing = if contiguous {
            Indexing::Contiguous
        } else {
            Indexing::Strided { ndim: shape.len() }
        };
        let width = IndexWidth::for_len(shape.iter().product());
        Ok(LoopPlan {
            looped,
            shape,
            indexing,
            width,
        })
    }
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
    fn raw_inputs_are_not_looped_and_a_given_shape_wins() {
        let s = sig("raw T a, T y");
        let plan = LoopPlan::new(&s, &[op(&[7], false), op(&[2, 2], true)], Some(&[2, 2])).unwrap();
        assert_eq!(plan.looped, vec![1]);
        assert_eq!(plan.shape, vec![2, 2]);
        assert_eq!(plan.indexing, Indexing::Contiguous);
        // Without array inputs the loop has the given shape; 2^31 elements need 64-bit indices.
        let fill = ElementwiseSignature::new("", "T w", "T v").unwrap_err();
        assert!(!fill.is_empty(), "a placeholder needs an array input");
        let fill = ElementwiseSignature::new("", "float32 w", "float32 v").unwrap();
        let big = LoopPlan::new(&fill, &[], Some(&[1 << 16, 1 << 15])).unwrap();
        assert_eq!(big.looped, Vec::<usize>::new());
        assert_eq!(big.indexing, Indexing::Contiguous);
        assert_eq!(big.width, IndexWidth::I64);
    }
}
