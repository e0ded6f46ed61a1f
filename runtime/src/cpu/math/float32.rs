//! The float32 functions, one element at a time and without a branch, so that the loops of
//! [`super`] vectorize them: every condition is a select, every conversion between floats and
//! integers goes through a magic constant and integer shifts (available on every SIMD
//! instruction set), and `FMA` says whether `fma` is one fused instruction (the AVX2 + FMA
//! build) or a multiply and an add (the baseline build, whose `mul_add` would be a library call
//! per element). The bounds in [`super`]'s table hold for both.

/// `a * b + c`, fused when the build has FMA.
#[inline(always)]
fn fma<const FMA: bool>(a: f32, b: f32, c: f32) -> f32 {
    if FMA { a.mul_add(b, c) } else { a * b + c }
}

/// Adding and subtracting 1.5 · 2²³ rounds a float of magnitude below 2²² to an integer (ties
/// to even), and leaves that integer in the low mantissa bits of the sum.
const MAGIC: f32 = 12_582_912.0;

/// `x` rounded to the nearest integer (|x| < 2²²).
#[inline(always)]
fn round(x: f32) -> f32 {
    (x + MAGIC) - MAGIC
}

/// 2ⁿ for an integral `n` in [-126, 127] (a normal float), built from its exponent bits.
#[inline(always)]
fn pow2(n: f32) -> f32 {
    // The low 9 bits of the sum's mantissa hold `n + 127`; shifting them into the exponent
    // field drops the rest.
    f32::from_bits((n + (MAGIC + 127.0)).to_bits() << 23)
}

/// x · 2ⁿ for an integral `n` in [-252, 254]: two exact scalings by normal powers of two, so
/// that a subnormal or overflowing result is rounded once, at the end.
#[inline(always)]
fn scale(x: f32, n: f32) -> f32 {
    // floor(n / 2) = round(n/2 - 1/4) for an integer n.
    let n1 = round(n * 0.5 - 0.25);
    x * pow2(n1) * pow2(n - n1)
}

const LOG2E: f32 = std::f32::consts::LOG2_E;
/// ln 2 split so that `n * LN2_HI` is exact for |n| < 2⁸ (its low 12 bits are zero).
const LN2_HI: f32 = f32::from_bits(0x3f31_7200);
const LN2_LO: f32 = f32::from_bits(0x35bf_be8e); // ln 2 - LN2_HI, rounded

/// eʳ - 1 - r for |r| ≤ ln 2 / 2: the Taylor terms r²/2! … r⁸/8! (the first left out is below
/// 6·10⁻¹⁰ relative), evaluated from the smallest.
#[inline(always)]
fn expm1_tail<const FMA: bool>(r: f32) -> f32 {
    let mut p = 1.0 / 40_320.0;
    for c in [
        1.0 / 5040.0,
        1.0 / 720.0,
        1.0 / 120.0,
        1.0 / 24.0,
        1.0 / 6.0,
        0.5,
    ] {
        p = fma::<FMA>(p, r, c);
    }
    r * r * p
}

/// (n, r) with x = n ln 2 + r, |r| ≤ ln 2 / 2 (Cody and Waite's two-step reduction).
#[inline(always)]
fn reduce<const FMA: bool>(x: f32) -> (f32, f32) {
    let n = round(x * LOG2E);
    let r = fma::<FMA>(n, -LN2_HI, x);
    (n, fma::<FMA>(n, -LN2_LO, r))
}

/// eʳ - 1 - r for |r| < ln 2 (the range [`reduce_toward_zero`] leaves): the Taylor terms to
/// r⁹/9! (the first left out is below 10⁻⁸ relative to eʳ - 1).
#[inline(always)]
fn expm1_tail_wide<const FMA: bool>(r: f32) -> f32 {
    let mut p = 1.0 / 362_880.0;
    for c in [
        1.0 / 40_320.0,
        1.0 / 5040.0,
        1.0 / 720.0,
        1.0 / 120.0,
        1.0 / 24.0,
        1.0 / 6.0,
        0.5,
    ] {
        p = fma::<FMA>(p, r, c);
    }
    r * r * p
}

/// (n, r) with x = n ln 2 + r and r of x's sign, |r| < ln 2: n rounded toward zero, so that in
/// eˣ - 1 = 2ⁿ (eʳ - 1) + (2ⁿ - 1) both terms have one sign and nothing cancels.
#[inline(always)]
fn reduce_toward_zero<const FMA: bool>(x: f32) -> (f32, f32) {
    let v = x * LOG2E;
    let n = round(v);
    let n = if n > v && v > 0.0 { n - 1.0 } else { n };
    let n = if n < v && v < 0.0 { n + 1.0 } else { n };
    let r = fma::<FMA>(n, -LN2_HI, x);
    (n, fma::<FMA>(n, -LN2_LO, r))
}

/// eˣ.
#[inline(always)]
pub(super) fn exp<const FMA: bool>(x: f32) -> f32 {
    // Below -104 the result rounds to 0, above 89 to infinity; the clamp keeps n in range.
    let xc = x.clamp(-104.0, 89.0);
    let (n, r) = reduce::<FMA>(xc);
    let y = scale(1.0 + (r + expm1_tail::<FMA>(r)), n);
    if x.is_nan() { x } else { y }
}

/// eˣ - 1, accurate near 0.
#[inline(always)]
pub(super) fn expm1<const FMA: bool>(x: f32) -> f32 {
    // Below -18 the result rounds to -1; above 89 it overflows.
    let xc = x.clamp(-18.0, 89.0);
    let (n, r) = reduce_toward_zero::<FMA>(xc);
    let u = r + expm1_tail_wide::<FMA>(r); // eʳ - 1
    // eˣ - 1 = 2ⁿ (eʳ - 1) + (2ⁿ - 1): both terms of one sign, 2ⁿ - 1 exact for n ≥ -24.
    let small = fma::<FMA>(pow2(n.min(100.0)), u, pow2(n.min(100.0)) - 1.0);
    // From n = 100 on, the -1 is far below half an ulp: 2ⁿ eʳ, scaled in two steps.
    let big = scale(1.0 + u, n);
    let y = if n > 100.0 { big } else { small };
    if x.is_nan() { x } else { y }
}

const SQRT2: f32 = std::f32::consts::SQRT_2;

/// ln x.
#[inline(always)]
pub(super) fn ln<const FMA: bool>(x: f32) -> f32 {
    // A subnormal x is scaled into the normal range first.
    let sub = x < f32::MIN_POSITIVE;
    let xs = if sub { x * 33_554_432.0 } else { x }; // 2²⁵
    let bits = xs.to_bits();
    // The exponent field as a float, and the mantissa as m in [1, 2).
    let k = ((bits >> 23) & 0xff) as i32 as f32;
    let m = f32::from_bits((bits & 0x007f_ffff) | 0x3f80_0000);
    // m in [√½, √2), so that f = m - 1 is small either side of 1 (exact by Sterbenz).
    let big = m > SQRT2;
    let m = if big { m * 0.5 } else { m };
    let e = k - 127.0 + if big { 1.0 } else { 0.0 } - if sub { 25.0 } else { 0.0 };
    let f = m - 1.0;
    // ln(1 + f) = 2 atanh(s) with s = f / (2 + f) = f - s (f - R), R = 2s²/3 + 2s⁴/5 + …
    // (to s⁸; the first term left out is below 2·10⁻⁹ of the result, |s| ≤ 0.172).
    let s = f / (2.0 + f);
    let z = s * s;
    let mut p = 2.0 / 9.0;
    for c in [2.0 / 7.0, 2.0 / 5.0, 2.0 / 3.0] {
        p = fma::<FMA>(p, z, c);
    }
    let log1pf = f - s * (f - z * p);
    let y = fma::<FMA>(e, LN2_HI, fma::<FMA>(e, LN2_LO, log1pf));
    // ln 0 = -∞, ln of a negative number or NaN is NaN, ln ∞ = ∞.
    let y = if x == 0.0 { f32::NEG_INFINITY } else { y };
    let y = if x < 0.0 || x.is_nan() { f32::NAN } else { y };
    if x == f32::INFINITY { x } else { y }
}

/// ln(1 + x), accurate near 0.
#[inline(always)]
pub(super) fn ln_1p<const FMA: bool>(x: f32) -> f32 {
    // u = 1 + x rounded, and c its rounding error (Knuth's two-sum): ln(1 + x) = ln(u + c)
    // ≈ ln u + c / u.
    let u = 1.0 + x;
    let v = u - 1.0;
    let c = (1.0 - (u - v)) + (x - v);
    let y = ln::<FMA>(u) + c / u;
    // Beyond 2²⁴, u = x and c is below an ulp of it; at -1, ln 0; an infinite u leaves c / u NaN.
    let y = if u == f32::INFINITY { u } else { y };
    if x == -1.0 { f32::NEG_INFINITY } else { y }
}

/// tanh x = (e²ˣ - 1) / (e²ˣ + 1), with e²ˣ - 1 from [`expm1`] so that it stays exact near 0.
#[inline(always)]
pub(super) fn tanh<const FMA: bool>(x: f32) -> f32 {
    // From |x| = 9.1 on, tanh rounds to ±1 (and e²ˣ stays finite).
    let a = x.abs().min(9.1);
    let e = expm1::<FMA>(2.0 * a);
    // e / (e + 2) with the sum's rounding error (two-sum) and the quotient's residual taken
    // back, so that the result carries little more than e's own error.
    let d = e + 2.0;
    let bb = d - e;
    let derr = (e - (d - bb)) + (2.0 - bb);
    let q = e / d;
    let res = fma::<FMA>(-q, d, e) - q * derr;
    let t = q + res / d;
    let t = if x.is_nan() { x } else { t };
    t.copysign(x)
}

/// 1 / (1 + e⁻ˣ), from e^(-|x|) so that nothing overflows.
#[inline(always)]
pub(super) fn sigmoid<const FMA: bool>(x: f32) -> f32 {
    let t = exp::<FMA>(-x.abs());
    let num = if x >= 0.0 { 1.0 } else { t };
    // num / (1 + t) with the sum's rounding error and the quotient's residual taken back (as in
    // `tanh`), so that the result carries little more than t's own error.
    let d = 1.0 + t;
    let bb = d - t;
    let derr = (t - (d - bb)) + (1.0 - bb);
    let q = num / d;
    let res = fma::<FMA>(-q, d, num) - q * derr;
    let y = q + res / d;
    if x.is_nan() { x } else { y }
}

/// √x (IEEE's, correctly rounded).
#[inline(always)]
pub(super) fn sqrt(x: f32) -> f32 {
    x.sqrt()
}

/// The error function, computed in float64 (`float64::erf_of_f32`).
#[inline(always)]
pub(super) fn erf<const FMA: bool>(x: f32) -> f32 {
    super::float64::erf_of_f32::<FMA>(x)
}
