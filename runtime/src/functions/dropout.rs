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
/// loop keeps in registers. The draws of a block go to a stack buffer first, and a second loop
/// compares and multiplies `keep` by 1 or 0: a choice between two values compiled to branches,
/// which mispredict at the rate `ratio` (one loop doing both, a table, masked bits, and a
/// `select` after the draws all did), while the product is vectorized without one: less than
/// half the time per element.
fn mask(shape: &[usize], ratio: f64, dtype: DType, rng: &mut Rng) -> Result<Array> {
    const OP: &str = "dropout";
    const DRAWS: usize = 64;
    let threshold = (ratio * (1u64 << 53) as f64).ceil() as u64;
    let size = crate::layout::checked_size(OP, shape, dtype)?;
    let mut local = rng.clone();
    let mask = crate::dtype::with_float_dtype!(dtype, T => {
        let keep = <T as crate::Element>::from_f64(1.0 / (1.0 - ratio));
        let mut data = crate::cpu::pool::alloc::<T>(OP, size)?;
        crate::cpu::wide(|| {
            let mut draws = [0u64; DRAWS];
            while data.len() < size {
                let n = (size - data.len()).min(DRAWS);
                for d in &mut draws[..n] {
                    *d = local.next_u64();
                }
                // `keep` times 1 or 0: `keep` or +0 exactly, chosen without a branch.
                data.extend(draws[..n].iter().map(|&d| {
                    keep * <T as crate::Element>::from_f64(f64::from(u32::from(d >> 11 >= threshold)))
                }));
            }
        });
        Ok(Array::from_cpu_vec(data, shape))
    }, other => Err(Error::UnsupportedDType {
        op: OP,
        dtype,
        shape: shape.to_vec(),
        expected: "a floating-point dtype",
    }));
    *rng = local;
    mask
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
            // float64 from the same stream: the same choices, the scale in float64, and the
            // generator left where the float32 mask left it.
            let mut c = Rng::seed(7);
            let got = mask(&[5000], ratio, DType::F64, &mut c).unwrap();
            let want64: Vec<f64> = want
                .iter()
                .map(|&m| if m != 0.0 { scale } else { 0.0 })
                .collect();
            assert_eq!(got.to_vec::<f64>().unwrap(), want64, "ratio {ratio}");
            assert_eq!(c.next_u64(), b.next_u64());
            // Zeros are +0, as the comparison's 0.0.
            assert!(
                got.to_vec::<f64>()
                    .unwrap()
                    .iter()
                    .all(|m| m.is_sign_positive())
            );
        }
        let err = mask(&[3], 0.5, DType::I32, &mut Rng::seed(1)).unwrap_err();
        assert!(err.to_string().contains("dropout"), "{err}");
    }
}
