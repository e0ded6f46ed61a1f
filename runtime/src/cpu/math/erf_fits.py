"""The coefficients of erf's polynomials (`float64.rs`) and the exact values its tests compare
against (`erf_exact.rs`), with mpmath: `python3 erf_fits.py fits` prints the constants,
`python3 erf_fits.py exact` the table. Chebyshev fits (near-minimax) at 40-50 digits, rounded to
float64 coefficients, highest power first.
"""

import random
import struct
import sys

from mpmath import chebyfit, erf, erfc, exp, mp, mpf, pi, sqrt


def erf_over_x(u):
    """erf(x)/x as a function of u = x²."""
    if u == 0:
        return 2 / sqrt(pi)
    x = sqrt(u)
    return erf(x) / x


def erfcx_at(center):
    """erfc(x)·e^(x²) as a function of s = x - center."""
    return lambda s: erfc(s + center) * exp((s + center) ** 2)


def emit(name, coefficients):
    print("const %s: [f64; %d] = [" % (name, len(coefficients)))
    for c in coefficients:
        print("    %r," % float(c))
    print("];")


def fits():
    mp.dps = 40
    # float32 erf in float64 lanes (`erf_of_f32`).
    emit("ERF_SMALL", chebyfit(erf_over_x, [0, 1], 11))
    emit("ERFC_SCALED", chebyfit(erfcx_at(mpf(5) / 2), [-1.5, 1.5], 15))
    mp.dps = 50
    # float64 erf: errors in float64 ulps of erf at each fit's low end.
    small, e_small = chebyfit(erf_over_x, [0, 1], 13, error=True)
    near, e_near = chebyfit(erfcx_at(mpf("1.5")), [-0.5, 0.5], 16, error=True)
    far, e_far = chebyfit(erfcx_at(mpf(4)), [-2, 2], 22, error=True)
    print("// small %.2g, near %.3g ulp, far %.3g ulp" % (
        e_small, exp(-1) * e_near / mpf(2) ** -53, exp(-4) * e_far / mpf(2) ** -53))
    emit("ERF64_SMALL", small)
    print("const ERF64_C0_LO: f64 = %r;" % float(small[-1] - mpf(float(small[-1]))))
    emit("ERFCX64_NEAR", near)
    emit("ERFCX64_FAR", far)


def neighbour(v, k):
    bits = struct.unpack("<q", struct.pack("<d", v))[0]
    return struct.unpack("<d", struct.pack("<q", bits + k))[0]


def exact():
    mp.dps = 60
    random.seed(20261126)
    xs = [random.uniform(0, 6.5) for _ in range(360)]
    xs += [random.uniform(0.9, 1.1) for _ in range(60)]
    xs += [random.uniform(1.9, 2.1) for _ in range(60)]
    xs += [neighbour(edge, k) for edge in (1.0, 2.0, 6.0) for k in (-2, -1, 0, 1, 2)]
    for e in (-1074, -1060, -1022, -600, -300, -60, -30, -27, -20, -10, -5, -3, -2):
        xs.append(random.uniform(1, 2) * 2.0**e)
    xs = [x if i % 3 else -x for i, x in enumerate(xs)]
    print("pub(super) const ERF_EXACT: &[(f64, f64, f64)] = &[")
    for x in xs:
        v = erf(mpf(x))
        hi = float(v)
        print("    (%r, %r, %r)," % (x, hi, float(v - mpf(hi))))
    print("];")


if __name__ == "__main__":
    {"fits": fits, "exact": exact}[sys.argv[1] if len(sys.argv) > 1 else "fits"]()
