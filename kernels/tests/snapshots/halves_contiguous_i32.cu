// kusari elementwise kernel `halves` (halves__contiguous_i32)
#ifndef KUSARI_FLOAT16_DEFINED
#define KUSARI_FLOAT16_DEFINED
#ifndef KUSARI_F64_TO_F32_ODD_DEFINED
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
#ifndef __CUDA_ARCH__
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
#ifndef KUSARI_BFLOAT16_DEFINED
#define KUSARI_BFLOAT16_DEFINED
#ifndef KUSARI_F64_TO_F32_ODD_DEFINED
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
// bfloat16 (the top half of a float) in 2 bytes; arithmetic goes through float (no cuda_bf16.h).
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
typedef float16 T;
extern "C" __global__ void halves__contiguous_i32(
    const T* __restrict__ _in_x,
    const T* __restrict__ _in_y,
    const bfloat16* __restrict__ _in_b,
    T* __restrict__ _out_w,
    float* __restrict__ _out_f,
    const T alpha,
    const unsigned int n) {
  for (unsigned int i = (unsigned int)blockIdx.x * blockDim.x + threadIdx.x; i < n; i += (unsigned int)blockDim.x * gridDim.x) {
    const T x = _in_x[i];
    const T y = _in_y[i];
    const bfloat16 b = _in_b[i];
    T& w = _out_w[i];
    float& f = _out_f[i];
#line 1 "halves"
    w = x * y + alpha;
    f = (float)b;
  }
}
