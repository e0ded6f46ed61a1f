//! Vectorized math on the host: eˣ, eˣ - 1, ln, ln(1 + x), tanh, the logistic sigmoid, √x and
//! erf, in float32 and float64, over slices (float32's erf computed in float64 lanes).
//!
//! Each function is written once per precision (`float32.rs`, `float64.rs`) for one element, with no
//! branch, so that the compiler's loop vectorizer turns the loops here into SIMD code. The loops
//! are compiled twice on x86-64: with AVX2 and FMA (8 float32 or 4 float64 lanes, fused
//! multiply-adds), chosen at run time when the CPU has both, and for the baseline (SSE2, no FMA).
//! On AArch64, NEON and FMA are the baseline. No build flag is needed.
//!
//! Accuracy, in units in the last place (ulps) of the exact result, as measured and asserted by
//! this module's tests:
//!
//! - float32 against the standard library's float64 function of the same input (far more
//!   precise than a float32 ulp): with AVX2 and FMA over every input where the result depends on
//!   every input bit (2.5 · 10⁹ of them: all but the inputs where the function saturates or
//!   returns its input; those are sampled) in a release-build test that CI runs
//!   (`cargo test --release -p kusari --lib cpu::math::tests::every_float32 -- --ignored`),
//!   and on a sample of 10⁵ inputs for both builds in the ordinary tests;
//! - float64 against exact values (80-digit decimal arithmetic) at 30 inputs per function, the
//!   worst ones included, and against glibc's functions on 10⁶ inputs spread over every exponent.
//!
//! Special values (NaN, ±∞, ±0, subnormals, overflow and underflow) give what the standard library
//! gives.
//!
//! | function | float32, AVX2+FMA (measured) | float32, baseline | float64, exact | float64, glibc |
//! |---|---|---|---|---|
//! | `exp` | 1 (0.95) | 1 | 1.5 | 1 |
//! | `exp_m1` | 1.5 (1.48) | 2 | 1.5 | 1 |
//! | `ln` | 1 (0.95) | 1 | 1.5 | 1 |
//! | `ln_1p` | 1.5 (1.44) | 2 | 1.5 | 1 |
//! | `tanh` | 1.5 (1.50) | 2 | 1.5 | 3 (glibc's tanh is up to 2 off) |
//! | `sigmoid` | 1.5 (1.48) | 2 | 1.5 | 3 (1 / (1 + e⁻ˣ) in glibc, itself up to 2 off) |
//! | `sqrt` | 0.5 (correctly rounded) | 0.5 | 0.5 | 0 |
//! | `erf` (float32 in float64 lanes) | 0.501 (0.500) | 0.501 | 1 (0.96 at 508 exact values; 1.5 without FMA, 1.31) | 2 (against musl's erf, itself within 1) |

#[cfg(test)]
mod erf_exact;
mod float32;
mod float64;
#[cfg(test)]
mod tests;

use std::mem::MaybeUninit;

use crate::op::MathFn;

/// The instruction sets the loops are compiled for.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) enum Isa {
    /// x86-64 with AVX2 and FMA.
    Avx2Fma,
    /// Whatever the target's baseline is (SSE2 on x86-64, NEON with FMA on AArch64).
    Baseline,
}

/// The instruction set this CPU runs the loops with.
pub(crate) fn isa() -> Isa {
    #[cfg(target_arch = "x86_64")]
    if std::arch::is_x86_feature_detected!("avx2") && std::arch::is_x86_feature_detected!("fma") {
        return Isa::Avx2Fma;
    }
    Isa::Baseline
}

/// Whether the baseline build has a fused multiply-add instruction.
const BASELINE_FMA: bool = cfg!(target_arch = "aarch64");

/// Writes `f(src[i])` to `dst[i]` for every `i` (the slices have one length).
pub(crate) fn apply_f32(f: MathFn, src: &[f32], dst: &mut [MaybeUninit<f32>]) {
    apply_f32_on(isa(), f, src, dst);
}

/// [`apply_f32`] for float64.
pub(crate) fn apply_f64(f: MathFn, src: &[f64], dst: &mut [MaybeUninit<f64>]) {
    apply_f64_on(isa(), f, src, dst);
}

/// [`apply_f32`] with the loops of `isa`, which this CPU must support.
fn apply_f32_on(isa: Isa, f: MathFn, src: &[f32], dst: &mut [MaybeUninit<f32>]) {
    assert_eq!(src.len(), dst.len(), "one length");
    match isa {
        #[cfg(target_arch = "x86_64")]
        // SAFETY: `Avx2Fma` is only used where the CPU has AVX2 and FMA (`isa`, or a test that
        // checked it).
        Isa::Avx2Fma => unsafe { x86::f32_avx2_fma(f, src, dst) },
        _ => drive_f32::<BASELINE_FMA>(f, src, dst),
    }
}

/// [`apply_f64`] with the loops of `isa`, which this CPU must support.
fn apply_f64_on(isa: Isa, f: MathFn, src: &[f64], dst: &mut [MaybeUninit<f64>]) {
    assert_eq!(src.len(), dst.len(), "one length");
    match isa {
        #[cfg(target_arch = "x86_64")]
        // SAFETY: as in `apply_f32_on`.
        Isa::Avx2Fma => unsafe { x86::f64_avx2_fma(f, src, dst) },
        _ => drive_f64::<BASELINE_FMA>(f, src, dst),
    }
}

/// One loop per function, so that each is vectorized on its own.
macro_rules! drive {
    ($name:ident, $t:ty, $m:ident) => {
        #[inline(always)]
        fn $name<const FMA: bool>(f: MathFn, src: &[$t], dst: &mut [MaybeUninit<$t>]) {
            let dst = &mut dst[..src.len()];
            macro_rules! each {
                ($g:expr) => {
                    for (o, &x) in dst.iter_mut().zip(src) {
                        o.write($g(x));
                    }
                };
            }
            match f {
                MathFn::Exp => each!($m::exp::<FMA>),
                MathFn::ExpM1 => each!($m::expm1::<FMA>),
                MathFn::Ln => each!($m::ln::<FMA>),
                MathFn::Ln1p => each!($m::ln_1p::<FMA>),
                MathFn::Tanh => each!($m::tanh::<FMA>),
                MathFn::Sigmoid => each!($m::sigmoid::<FMA>),
                MathFn::Sqrt => each!($m::sqrt),
                MathFn::Erf => each!($m::erf::<FMA>),
            }
        }
    };
}

drive!(drive_f32, f32, float32);
drive!(drive_f64, f64, float64);

#[cfg(target_arch = "x86_64")]
mod x86 {
    use std::mem::MaybeUninit;

    use crate::op::MathFn;

    /// The loops compiled with AVX2 and FMA.
    #[target_feature(enable = "avx2,fma")]
    pub(super) fn f32_avx2_fma(f: MathFn, src: &[f32], dst: &mut [MaybeUninit<f32>]) {
        super::drive_f32::<true>(f, src, dst);
    }

    /// The loops compiled with AVX2 and FMA.
    #[target_feature(enable = "avx2,fma")]
    pub(super) fn f64_avx2_fma(f: MathFn, src: &[f64], dst: &mut [MaybeUninit<f64>]) {
        super::drive_f64::<true>(f, src, dst);
    }
}
