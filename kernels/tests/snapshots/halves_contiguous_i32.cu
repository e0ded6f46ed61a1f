// kusari elementwise kernel `halves` (halves__contiguous_i32)
#ifndef KUSARI_FLOAT16_DEFINED
#define KUSARI_FLOAT16_DEFINED
// IEEE binary16 in 2 bytes; arithmetic goes through float (no cuda_fp16.h needed).
struct float16 {
  unsigned short bits;
  __device__ float16() : bits(0) {}
  __device__ float16(float f) { asm("cvt.rn.f16.f32 %0, %1;" : "=h"(bits) : "f"(f)); }
  __device__ operator float() const { float f; asm("cvt.f32.f16 %0, %1;" : "=f"(f) : "h"(bits)); return f; }
  __device__ float16& operator+=(float v) { return *this = float16(float(*this) + v); }
  __device__ float16& operator-=(float v) { return *this = float16(float(*this) - v); }
  __device__ float16& operator*=(float v) { return *this = float16(float(*this) * v); }
  __device__ float16& operator/=(float v) { return *this = float16(float(*this) / v); }
};
#endif
#ifndef KUSARI_BFLOAT16_DEFINED
#define KUSARI_BFLOAT16_DEFINED
// bfloat16 (the top half of a float) in 2 bytes; arithmetic goes through float (no cuda_bf16.h).
struct bfloat16 {
  unsigned short bits;
  __device__ bfloat16() : bits(0) {}
  __device__ bfloat16(float f) {
    const unsigned int u = __float_as_uint(f);
    if ((u & 0x7fffffffu) > 0x7f800000u) {
      bits = 0x7fc0;  // NaN: a quiet NaN
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
