// kusari elementwise kernel `mixed` (mixed__strided3_i64)
typedef double T;
struct _Layout { long long shape[3]; long long strides[4][3]; };
extern "C" __global__ void mixed__strided3_i64(
    const T* __restrict__ _in_x,
    const long long* __restrict__ table,
    const float* __restrict__ _in_s,
    T* __restrict__ _out_gx,
    T* __restrict__ _out_gy,
    const T alpha,
    const long long n,
    const _Layout _layout) {
  for (long long i = (long long)blockIdx.x * blockDim.x + threadIdx.x; i < n; i += (long long)blockDim.x * gridDim.x) {
    long long _off[4] = {0};
    long long _rem = (long long)i;
    for (int _d = 3 - 1; _d >= 0; --_d) {
      const long long _c = _rem % _layout.shape[_d];
      _rem /= _layout.shape[_d];
      for (int _a = 0; _a < 4; ++_a) _off[_a] += _c * _layout.strides[_a][_d];
    }
    const T x = _in_x[_off[0]];
    const float s = _in_s[_off[1]];
    T& gx = _out_gx[_off[2]];
    T& gy = _out_gy[_off[3]];
#line 1 "mixed"
    gx = alpha * x;
    gy = (T)table[i % n] * s;
  }
}
