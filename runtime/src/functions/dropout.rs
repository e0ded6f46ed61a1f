//! Dropout, active in training mode only.

use super::mul;
use crate::error::{Error, Result};
use crate::random::{Rng, with_default_rng};
use crate::{Array, DType, Variable, config, function_node};

/// Multiplies by a fixed mask (already scaled by `1 / (1 - ratio)`).
struct Dropout {
    mask: Array,
}

#[function_node(crate = "crate", name = "apply_mask")]
impl Dropout {
    fn new(mask: Array) -> Self {
        Dropout { mask }
    }

    fn forward(&self, x: &Array) -> Result<Array> {
        x.mul(&self.mask)
    }

    fn backward(&self, gy: &Variable) -> Result<Variable> {
        mul(gy, &Variable::constant(self.mask.clone()))
    }
}

/// Zeroes each element with probability `ratio` and scales the rest by `1 / (1 - ratio)`, in
/// training mode ([`config::train`]); in test mode returns `x` itself. The mask comes from this
/// thread's default generator ([`crate::random::seed`]).
pub fn dropout(x: &Variable, ratio: f64) -> Result<Variable> {
    if !(0.0..1.0).contains(&ratio) {
        return Err(Error::InvalidArgument {
            op: "dropout".to_string(),
            msg: format!("ratio must be in [0, 1), got {ratio}"),
        });
    }
    if !config::train() {
        return Ok(x.clone());
    }
    super::array_ops::expect_float("dropout", x)?;
    // Drawn on the host from one generator, so a seed gives the same mask on every device.
    let mask = with_default_rng(|rng| mask(x.shape(), ratio, x.dtype(), rng))?;
    apply_mask(x, mask.to_device(x.device())?)
}

/// The mask of [`dropout`] on the host, in `dtype`: `1 / (1 - ratio)` where a uniform draw
/// `u` in `[0, 1)` has `u >= ratio`, else 0, in one pass over one buffer. `u` is
/// [`Rng::next_f64`](crate::random::Rng::next_f64)'s `k / 2^53` for the 53 high bits `k` of a
/// draw, so `u >= ratio` is `k >= ceil(ratio * 2^53)` (the product is exact), compared without
/// converting: the masks of the uniform floats, bit for bit. The generator's state is a copy the
/// loop keeps in registers. (LLVM compiles the choice to a branch, which mispredicts at the
/// rate `ratio`; a table or masked bits compiled to the same branch.)
fn mask(shape: &[usize], ratio: f64, dtype: DType, rng: &mut Rng) -> Result<Array> {
    const OP: &str = "dropout";
    let threshold = (ratio * (1u64 << 53) as f64).ceil() as u64;
    let size = crate::layout::checked_size(OP, shape, dtype)?;
    let mut local = rng.clone();
    let mask = crate::dtype::with_dtype!(dtype, T => {
        let keep = <T as crate::Element>::from_f64(1.0 / (1.0 - ratio));
        let drop = <T as crate::Element>::from_f64(0.0);
        let mut data = crate::cpu::pool::alloc::<T>(OP, size)?;
        data.extend((0..size).map(|_| {
            if local.next_u64() >> 11 >= threshold { keep } else { drop }
        }));
        Array::from_cpu_vec(data, shape)
    });
    *rng = local;
    Ok(mask)
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::random::Rng;

    #[test]
    fn the_mask_is_that_of_uniform_draws_compared_with_the_ratio() {
        for ratio in [0.0, 0.2, 0.5, 1.0 / 3.0, 0.9] {
            let scale = 1.0 / (1.0 - ratio);
            let (mut a, mut b) = (Rng::seed(7), Rng::seed(7));
            let want: Vec<f32> = (0..5000)
                .map(|_| {
                    if a.next_f64() >= ratio {
                        scale as f32
                    } else {
                        0.0
                    }
                })
                .collect();
            let got = mask(&[50, 100], ratio, DType::F32, &mut b).unwrap();
            assert_eq!(got.shape(), &[50, 100]);
            assert_eq!(got.to_vec::<f32>().unwrap(), want, "ratio {ratio}");
            let kept = want.iter().filter(|&&m| m != 0.0).count() as f64 / 5000.0;
            assert!(
                (kept - (1.0 - ratio)).abs() < 0.03,
                "ratio {ratio}: kept {kept}"
            );
        }
    }
}
