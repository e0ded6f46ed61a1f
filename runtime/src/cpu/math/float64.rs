//! The float64 functions, written as the float32 ones are (see `float32.rs`): one element, no
//! branch, conversions through magic constants and integer shifts (AVX2 has no conversion
//! between doubles and 64-bit integers), `FMA` for a fused multiply-add. The polynomials are
//! longer, for 53 bits.

/// `a * b + c`, fused when the build has FMA.
#[inline(always)]
fn fma<const FMA: bool>(a: f64, b: f64, c: f64) -> f64 {
    if FMA { a.mul_add(b, c) } else { a * b + c }
}

/// 1.5 · 2⁵²: adding and subtracting it rounds a double of magnitude below 2⁵¹ to an integer.
const MAGIC: f64 = 6_755_399_441_055_744.0;

/// `x` rounded to the nearest integer (|x| < 2⁵¹).
#[inline(always)]
fn round(x: f64) -> f64 {
    (x + MAGIC) - MAGIC
}

/// 2ⁿ for an integral `n` in [-1022, 1023], built from its exponent bits.
#[inline(always)]
fn pow2(n: f64) -> f64 {
    f64::from_bits((n + (MAGIC + 1023.0)).to_bits() << 52)
}

/// x · 2ⁿ for an integral `n` in [-2044, 2046], in two exact scalings.
#[inline(always)]
fn scale(x: f64, n: f64) -> f64 {
    let n1 = round(n * 0.5 - 0.25);
    x * pow2(n1) * pow2(n - n1)
}

const LOG2E: f64 = std::f64::consts::LOG2_E;
/// ln 2 split so that `n * LN2_HI` is exact for |n| < 2²⁰ (its low 21 bits are zero).
const LN2_HI: f64 = f64::from_bits(0x3fe6_2e42_fee0_0000);
const LN2_LO: f64 = f64::from_bits(0x3dea_39ef_3579_3c76); // ln 2 - LN2_HI, rounded

/// eʳ - 1 - r for |r| ≤ ln 2 / 2: the Taylor terms r²/2! … r¹³/13! (the first left out is
/// below 2·10⁻¹⁷ relative to eʳ - 1).
#[inline(always)]
fn expm1_tail<const FMA: bool>(r: f64) -> f64 {
    let mut p = 1.0 / 6_227_020_800.0;
    for c in [
        1.0 / 479_001_600.0,
        1.0 / 39_916_800.0,
        1.0 / 3_628_800.0,
        1.0 / 362_880.0,
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

/// (n, r) with x = n ln 2 + r, |r| ≤ ln 2 / 2.
#[inline(always)]
fn reduce<const FMA: bool>(x: f64) -> (f64, f64) {
    let n = round(x * LOG2E);
    let r = fma::<FMA>(n, -LN2_HI, x);
    (n, fma::<FMA>(n, -LN2_LO, r))
}

/// eʳ - 1 - r for |r| < ln 2 (the range [`reduce_toward_zero`] leaves): the Taylor terms to
/// r¹⁶/16! (the first left out is below 10⁻¹⁷ relative to eʳ - 1).
#[inline(always)]
fn expm1_tail_wide<const FMA: bool>(r: f64) -> f64 {
    let mut p = 1.0 / 20_922_789_888_000.0;
    for c in [
        1.0 / 1_307_674_368_000.0,
        1.0 / 87_178_291_200.0,
        1.0 / 6_227_020_800.0,
        1.0 / 479_001_600.0,
        1.0 / 39_916_800.0,
        1.0 / 3_628_800.0,
        1.0 / 362_880.0,
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
fn reduce_toward_zero<const FMA: bool>(x: f64) -> (f64, f64) {
    let v = x * LOG2E;
    let n = round(v);
    let n = if n > v && v > 0.0 { n - 1.0 } else { n };
    let n = if n < v && v < 0.0 { n + 1.0 } else { n };
    let r = fma::<FMA>(n, -LN2_HI, x);
    (n, fma::<FMA>(n, -LN2_LO, r))
}

/// eˣ.
#[inline(always)]
pub(super) fn exp<const FMA: bool>(x: f64) -> f64 {
    // Below -746 the result rounds to 0, above 710 to infinity.
    let xc = x.clamp(-746.0, 710.0);
    let (n, r) = reduce::<FMA>(xc);
    let y = scale(1.0 + (r + expm1_tail::<FMA>(r)), n);
    if x.is_nan() { x } else { y }
}

/// eˣ - 1, accurate near 0.
#[inline(always)]
pub(super) fn expm1<const FMA: bool>(x: f64) -> f64 {
    // Below -38 the result rounds to -1; above 710 it overflows.
    let xc = x.clamp(-38.0, 710.0);
    let (n, r) = reduce_toward_zero::<FMA>(xc);
    let u = r + expm1_tail_wide::<FMA>(r);
    let t = pow2(n.min(1000.0));
    let small = fma::<FMA>(t, u, t - 1.0);
    let big = scale(1.0 + u, n);
    let y = if n > 1000.0 { big } else { small };
    if x.is_nan() { x } else { y }
}

const SQRT2: f64 = std::f64::consts::SQRT_2;
/// 2⁵² as bits: OR-ing an integer below 2⁵² into its mantissa and subtracting 2⁵² converts it.
const TWO52_BITS: u64 = 0x4330_0000_0000_0000;
const TWO52: f64 = 4_503_599_627_370_496.0;

/// ln x.
#[inline(always)]
pub(super) fn ln<const FMA: bool>(x: f64) -> f64 {
    let sub = x < f64::MIN_POSITIVE;
    let xs = if sub { x * 18_014_398_509_481_984.0 } else { x }; // 2⁵⁴
    let bits = xs.to_bits();
    let k = f64::from_bits(TWO52_BITS | ((bits >> 52) & 0x7ff)) - TWO52;
    let m = f64::from_bits((bits & 0x000f_ffff_ffff_ffff) | 0x3ff0_0000_0000_0000);
    let big = m > SQRT2;
    let m = if big { m * 0.5 } else { m };
    let e = k - 1023.0 + if big { 1.0 } else { 0.0 } - if sub { 54.0 } else { 0.0 };
    let f = m - 1.0;
    // ln(1 + f) = f - s (f - R), R = 2s²/3 + … + 2s²⁰/21 (the first term left out is below
    // 10⁻¹⁸ of the result).
    let s = f / (2.0 + f);
    let z = s * s;
    let mut p = 2.0 / 21.0;
    for c in [
        2.0 / 19.0,
        2.0 / 17.0,
        2.0 / 15.0,
        2.0 / 13.0,
        2.0 / 11.0,
        2.0 / 9.0,
        2.0 / 7.0,
        2.0 / 5.0,
        2.0 / 3.0,
    ] {
        p = fma::<FMA>(p, z, c);
    }
    let log1pf = f - s * (f - z * p);
    let y = fma::<FMA>(e, LN2_HI, fma::<FMA>(e, LN2_LO, log1pf));
    let y = if x == 0.0 { f64::NEG_INFINITY } else { y };
    let y = if x < 0.0 || x.is_nan() { f64::NAN } else { y };
    if x == f64::INFINITY { x } else { y }
}

/// ln(1 + x), accurate near 0.
#[inline(always)]
pub(super) fn ln_1p<const FMA: bool>(x: f64) -> f64 {
    let u = 1.0 + x;
    let v = u - 1.0;
    let c = (1.0 - (u - v)) + (x - v);
    let y = ln::<FMA>(u) + c / u;
    let y = if u == f64::INFINITY { u } else { y };
    if x == -1.0 { f64::NEG_INFINITY } else { y }
}

/// tanh x = (e²ˣ - 1) / (e²ˣ + 1).
#[inline(always)]
pub(super) fn tanh<const FMA: bool>(x: f64) -> f64 {
    // From |x| = 19.5 on, tanh rounds to ±1.
    let a = x.abs().min(19.5);
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

/// 1 / (1 + e⁻ˣ).
#[inline(always)]
pub(super) fn sigmoid<const FMA: bool>(x: f64) -> f64 {
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
pub(super) fn sqrt(x: f64) -> f64 {
    x.sqrt()
}

/// The error function: x·P(x²) for |x| < 1, ±(1 - e^(-x²)·Q(|x|)) up to 6 with Q one of two
/// fits of erfc·e^(x²) (on [1, 2] and [2, 6]), ±1 beyond (where 1 - erf is below half an ulp).
/// e^(-x²) is taken of the exact square (its rounding error `lo` as a first-order factor), so
/// the only errors are the polynomials' (below 0.031 ulp), the roundings of the arithmetic and
/// [`exp`]'s, which the factor erfc(x) ≤ 0.16 shrinks: within 1 ulp with FMA (0.96 measured
/// at 508 exact values), 1.5 without (1.31). Branchless: every form is computed and one kept,
/// so that the loops vectorize (2.5× musl's scalar `erf` on one core). NaN propagates through
/// the clamp.
#[inline(always)]
pub(super) fn erf<const FMA: bool>(x: f64) -> f64 {
    let a = x.abs();
    // x·P(t) = x·c₀ + x·(t·R(t)), c₀ in two parts so that the leading product is exact in one
    // fused multiply-add and only the smaller term (below 0.26 x) carries rounding error.
    let t = x * x;
    let (c0, rest) = ERF64_SMALL.split_last().expect("coefficients");
    let tail = fma::<FMA>(t, horner::<FMA>(t, rest), ERF64_C0_LO);
    let small = fma::<FMA>(x, *c0, x * tail);
    let c = a.clamp(1.0, 6.0);
    let hi = c * c;
    let lo = square_error::<FMA>(c, hi);
    let e = exp::<FMA>(-hi) * (1.0 - lo);
    let near = horner::<FMA>(c - 1.5, &ERFCX64_NEAR);
    let far = horner::<FMA>(c - 4.0, &ERFCX64_FAR);
    let q = if c < 2.0 { near } else { far };
    let big = (1.0 - e * q).copysign(x);
    if a < 1.0 { small } else { big }
}

/// `c·c - hi` exactly, for `hi` = `c·c` rounded: one fused multiply-add, or Veltkamp's split
/// of `c` into halves whose products are exact where there is no FMA.
#[inline(always)]
fn square_error<const FMA: bool>(c: f64, hi: f64) -> f64 {
    if FMA {
        c.mul_add(c, -hi)
    } else {
        let t = c * 134_217_729.0; // 2²⁷ + 1
        let ch = t - (t - c);
        let cl = c - ch;
        ((ch * ch - hi) + 2.0 * ch * cl) + cl * cl
    }
}

/// erf(x)/x as a polynomial in x² on [0, 1], highest power first: a Chebyshev fit (mpmath, 50
/// digits, `erf_fits.py`) within 1.3·10⁻¹⁹.
const ERF64_SMALL: [f64; 13] = [
    5.957176147748911e-11,
    -1.1372848856791674e-09,
    1.4659775274047436e-08,
    -1.6350312701054695e-07,
    1.6461000484121368e-06,
    -1.4925595266831182e-05,
    0.0001205533111164271,
    -0.000854832698083379,
    0.0052239776248180145,
    -0.026866170645076792,
    0.11283791670954879,
    -0.3761263890318375,
    std::f64::consts::FRAC_2_SQRT_PI, // the fit's constant term, rounded to float64
];
/// What `ERF64_SMALL`'s constant term (the fit's 2/√π) leaves over in float64.
const ERF64_C0_LO: f64 = 1.5205085734379166e-17;

/// erfc(x)·e^(x²) as a polynomial in x - 1.5 on [1, 2], highest power first: a Chebyshev fit
/// (mpmath, 50 digits) whose error, times e^(-x²), is below 0.024 ulp of erf(x).
const ERFCX64_NEAR: [f64; 16] = [
    -4.932844202000261e-08,
    1.8038197652346406e-07,
    -5.946998373950516e-07,
    2.061689065129881e-06,
    -6.975285854904505e-06,
    2.286543658874603e-05,
    -7.265888759557882e-05,
    0.00022330981211640024,
    -0.0006619300686179933,
    0.0018861348854630824,
    -0.005145957547915988,
    0.013377340952802835,
    -0.03293090529956347,
    0.07615103985548055,
    -0.16362291773256007,
    0.3215854164543175,
];
/// erfc(x)·e^(x²) as a polynomial in x - 4 on [2, 6], highest power first: as [`ERFCX64_NEAR`],
/// below 0.031 ulp of erf(x).
const ERFCX64_FAR: [f64; 22] = [
    -3.7842971593622216e-16,
    2.2479363404030715e-15,
    -4.888517782654395e-15,
    2.7390758602657407e-14,
    -2.303771047664337e-13,
    1.2928274441862257e-12,
    -6.742853010581974e-12,
    3.672055963012881e-11,
    -1.9870066401993326e-10,
    1.0535707925250182e-09,
    -5.503256553608544e-09,
    2.8331300381636343e-08,
    -1.435965394366318e-07,
    7.160462517869643e-07,
    -3.510366601079271e-06,
    1.6905648962254023e-05,
    -7.990888031811031e-05,
    0.00037035246907165224,
    -0.0016811820767448562,
    0.007465433244967944,
    -0.032383506095021476,
    0.13699945762506152,
];

/// erf(x)/x as a polynomial in x² on [0, 1], highest power first: a Chebyshev fit (mpmath, 40
/// digits) within 4·10⁻¹⁶.
const ERF_SMALL: [f64; 11] = [
    9.428596956834164e-09,
    -1.5188281247335167e-07,
    1.631035651387174e-06,
    -1.4913300906316395e-05,
    0.00012054681918310599,
    -0.0008548304871782741,
    0.005223977154105304,
    -0.026866170586496874,
    0.11283791670580423,
    -0.376126389031744,
    1.1283791670955121,
];

/// erfc(x)·e^(x²) as a polynomial in x - 2.5 on [1, 4], highest power first: a Chebyshev fit
/// (mpmath, 40 digits) within 6·10⁻¹¹ (10⁻¹⁰ relative).
const ERFC_SCALED: [f64; 15] = [
    6.022400096725965e-09,
    -2.596622245663571e-08,
    5.907913041839617e-08,
    -2.370553427909225e-07,
    1.099614832860862e-06,
    -4.27846750939574e-06,
    1.5948319525046637e-05,
    -5.880857870391218e-05,
    0.000211026300232033,
    -0.0007336198444256739,
    0.0024670354569468404,
    -0.008001563315479809,
    0.024937997168782502,
    -0.07434734715650725,
    0.2108063640611436,
];

/// `c[0] xⁿ + … + c[n]`.
#[inline(always)]
fn horner<const FMA: bool>(x: f64, c: &[f64]) -> f64 {
    c[1..].iter().fold(c[0], |p, &k| fma::<FMA>(p, x, k))
}

/// float32's erf, in float64 (where a float32's square is exact): x·P(x²) for |x| ≤ 1, and
/// ±(1 - e^(-x²)·Q(|x| - 2.5)) beyond, |x| clamped to 4 (past 3.92 erf rounds to ±1 in float32).
/// The float64 value is within 2·10⁻¹⁰ of erf(x) relative, so the result is the correctly
/// rounded one but for inputs within that distance of a rounding boundary: below 0.51 ulp.
/// Branchless; NaN propagates through the first form.
#[inline(always)]
pub(super) fn erf_of_f32<const FMA: bool>(x: f32) -> f32 {
    let x = f64::from(x);
    let a = x.abs();
    let small = x * horner::<FMA>(x * x, &ERF_SMALL);
    let c = a.min(4.0);
    let big = 1.0 - exp::<FMA>(-(c * c)) * horner::<FMA>(c - 2.5, &ERFC_SCALED);
    let r = if a > 1.0 { big.copysign(x) } else { small };
    r as f32
}
