//! kusari's own half types for generated CUDA: `float16` and `bfloat16` as 2-byte structs that
//! convert through `float`, so that no CUDA header is needed (pip's NVRTC ships none). The same
//! source compiles for the emulated device, where `__CUDA_ARCH__` is not defined and the
//! conversions are portable C with the same rounding.

use crate::signature::ScalarType;

// `kusari_f64_to_f32_odd`, which both half types' preludes carry (an include guard keeps one).
macro_rules! f64_to_f32_odd_prelude {
    () => {
        r#"#ifndef KUSARI_F64_TO_F32_ODD_DEFINED
#define KUSARI_F64_TO_F32_ODD_DEFINED
// double to float rounding to odd (an inexact result gets its last bit set): rounding that to a
// half type then rounds the double once, as the host does (no double rounding).
__device__ inline float kusari_f64_to_f32_odd(double a) {
  if (a != a) {  // NaN: quiet, keeping its sign and top payload bits, as the host's cast does
    const unsigned long long u = (unsigned long long)__double_as_longlong(a);
    return __uint_as_float((unsigned int)((u >> 32) & 0x80000000ull) | 0x7fc00000u |
                           (unsigned int)((u >> 29) & 0x7fffffull));
  }
  float f = (float)a;
  if (f == f && (double)f != a) {
    unsigned int u = __float_as_uint(f);
    if (fabs((double)f) > fabs(a)) u -= 1u;  // the truncated value: one step toward zero
    f = __uint_as_float(u | 1u);
  }
  return f;
}
#endif
"#
    };
}

macro_rules! float16_prelude {
    () => {
        concat!(
            "#ifndef KUSARI_FLOAT16_DEFINED\n#define KUSARI_FLOAT16_DEFINED\n",
            f64_to_f32_odd_prelude!(),
            r#"#ifndef __CUDA_ARCH__
// Host forms of the conversions (the emulated device compiles this source for the host): IEEE
// binary16, rounding to nearest even, as the PTX `cvt.rn` instructions below do.
static inline unsigned short kusari_f32_to_f16(float f) {
  const unsigned int x = __float_as_uint(f);
  const unsigned int sign = (x >> 16) & 0x8000u;
  const unsigned int exp = (x >> 23) & 0xffu;
  const unsigned int man = x & 0x7fffffu;
  if (exp == 0xffu) return (unsigned short)(sign | 0x7c00u | (man ? 0x200u | (man >> 13) : 0u));
  const int e = (int)exp - 112;  // the binary16 exponent field
  if (e >= 0x1f) return (unsigned short)(sign | 0x7c00u);
  unsigned int q, rem, half;
  if (e <= 0) {
    if (e < -10) return (unsigned short)sign;
    const unsigned int m = man | 0x800000u;
    const unsigned int shift = (unsigned int)(14 - e);
    q = m >> shift;
    rem = m & ((1u << shift) - 1u);
    half = 1u << (shift - 1u);
  } else {
    q = ((unsigned int)e << 10) | (man >> 13);
    rem = man & 0x1fffu;
    half = 0x1000u;
  }
  if (rem > half || (rem == half && (q & 1u))) ++q;
  return (unsigned short)(sign | q);
}
static inline float kusari_f16_to_f32(unsigned short h) {
  const unsigned int sign = ((unsigned int)h & 0x8000u) << 16;
  const unsigned int exp = ((unsigned int)h >> 10) & 0x1fu;
  unsigned int man = (unsigned int)h & 0x3ffu;
  if (exp == 0x1fu) return __uint_as_float(sign | 0x7f800000u | (man << 13));
  if (exp != 0u) return __uint_as_float(sign | ((exp + 112u) << 23) | (man << 13));
  if (man == 0u) return __uint_as_float(sign);
  unsigned int s = 0;
  while (!(man & 0x400u)) { man <<= 1; ++s; }
  return __uint_as_float(sign | ((113u - s) << 23) | ((man & 0x3ffu) << 13));
}
#endif
// IEEE binary16 in 2 bytes; arithmetic goes through float (no cuda_fp16.h needed).
struct float16 {
  unsigned short bits;
  __device__ float16() : bits(0) {}
#ifdef __CUDA_ARCH__
  // A NaN keeps its sign and payload bits both ways, as on the host: the `cvt` instructions
  // give the canonical (positive) NaN instead.
  __device__ float16(float f) {
    const unsigned int x = __float_as_uint(f);
    if ((x & 0x7fffffffu) > 0x7f800000u) {
      bits = (unsigned short)(((x >> 16) & 0x8000u) | 0x7e00u | ((x >> 13) & 0x3ffu));
    } else {
      asm("cvt.rn.f16.f32 %0, %1;" : "=h"(bits) : "f"(f));
    }
  }
  __device__ operator float() const {
    if ((bits & 0x7fffu) > 0x7c00u) {
      return __uint_as_float((((unsigned int)bits & 0x8000u) << 16) | 0x7f800000u |
                             (((unsigned int)bits & 0x3ffu) << 13));
    }
    float f;
    asm("cvt.f32.f16 %0, %1;" : "=f"(f) : "h"(bits));
    return f;
  }
#else
  float16(float f) : bits(kusari_f32_to_f16(f)) {}
  operator float() const { return kusari_f16_to_f32(bits); }
#endif
  __device__ float16& operator+=(float v) { return *this = float16(float(*this) + v); }
  __device__ float16& operator-=(float v) { return *this = float16(float(*this) - v); }
  __device__ float16& operator*=(float v) { return *this = float16(float(*this) * v); }
  __device__ float16& operator/=(float v) { return *this = float16(float(*this) / v); }
};
#endif
"#
        )
    };
}

macro_rules! bfloat16_prelude {
    () => {
        concat!(
            "#ifndef KUSARI_BFLOAT16_DEFINED\n#define KUSARI_BFLOAT16_DEFINED\n",
            f64_to_f32_odd_prelude!(),
            r#"// bfloat16 (the top half of a float) in 2 bytes; arithmetic goes through float (no cuda_bf16.h).
struct bfloat16 {
  unsigned short bits;
  __device__ bfloat16() : bits(0) {}
  __device__ bfloat16(float f) {
    const unsigned int u = __float_as_uint(f);
    if ((u & 0x7fffffffu) > 0x7f800000u) {
      bits = (unsigned short)((u >> 16) | 0x0040u);  // NaN: quiet, keeping its sign
    } else {
      bits = (unsigned short)((u + 0x7fffu + ((u >> 16) & 1u)) >> 16);  // round to nearest even
    }
  }
  __device__ operator float() const { return __uint_as_float(((unsigned int)bits) << 16); }
  __device__ bfloat16& operator+=(float v) { return *this = bfloat16(float(*this) + v); }
  __device__ bfloat16& operator-=(float v) { return *this = bfloat16(float(*this) - v); }
  __device__ bfloat16& operator*=(float v) { return *this = bfloat16(float(*this) * v); }
  __device__ bfloat16& operator/=(float v) { return *this = bfloat16(float(*this) / v); }
};
#endif
"#
        )
    };
}

/// CUDA source defining `float16`: IEEE binary16 as a 2-byte struct (`unsigned short bits`)
/// converting to and from `float` with PTX `cvt` instructions, so the generated code needs no
/// `cuda_fp16.h` (which pip's NVRTC wheel does not ship). Where `__CUDA_ARCH__` is not defined
/// (the emulated device compiles the same source for the host), the conversions are portable C
/// with the same rounding (to nearest even). Arithmetic and comparisons go through
/// the implicit conversion to `float`; assigning a `float` (or anything convertible to one)
/// rounds to nearest even. `+=`, `-=`, `*=` and `/=` are defined too. An include guard makes it
/// safe to paste into a translation unit more than once.
pub const FLOAT16_PRELUDE: &str = float16_prelude!();

/// CUDA source defining `bfloat16` like [`FLOAT16_PRELUDE`] defines `float16`: the conversion
/// from `float` rounds to nearest even by bit manipulation (`__float_as_uint`), any NaN becomes
/// a quiet NaN of the same sign (the top bits of the float, with the quiet bit set, as the
/// `half` crate does on the host), and the conversion to `float` is exact (`bits << 16`).
pub const BFLOAT16_PRELUDE: &str = bfloat16_prelude!();

/// [`FLOAT16_PRELUDE`] followed by [`BFLOAT16_PRELUDE`], for generators that want both.
///
/// ```
/// use kusari_kernels::codegen::HALF_PRELUDE;
/// assert!(HALF_PRELUDE.contains("struct float16 {"));
/// assert!(HALF_PRELUDE.contains("struct bfloat16 {"));
/// assert!(!HALF_PRELUDE.contains("#include"));
/// ```
pub const HALF_PRELUDE: &str = concat!(float16_prelude!(), bfloat16_prelude!());

/// The preludes the types in `types` need: [`FLOAT16_PRELUDE`] if `float16` is among them,
/// then [`BFLOAT16_PRELUDE`] if `bfloat16` is; empty otherwise.
///
/// ```
/// use kusari_kernels::codegen::{half_prelude, BFLOAT16_PRELUDE};
/// use kusari_kernels::ScalarType;
/// assert_eq!(half_prelude(&[ScalarType::Float32]), "");
/// assert_eq!(half_prelude(&[ScalarType::BFloat16, ScalarType::Int32]), BFLOAT16_PRELUDE);
/// ```
pub fn half_prelude(types: &[ScalarType]) -> String {
    let mut out = String::new();
    if types.contains(&ScalarType::Float16) {
        out.push_str(FLOAT16_PRELUDE);
    }
    if types.contains(&ScalarType::BFloat16) {
        out.push_str(BFLOAT16_PRELUDE);
    }
    out
}
