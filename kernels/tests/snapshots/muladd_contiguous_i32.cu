// kusari elementwise kernel `muladd_fwd` (muladd_fwd__contiguous_i32)
typedef float T;
extern "C" __global__ void muladd_fwd__contiguous_i32(
    const T* __restrict__ _in_x,
    const T* __restrict__ _in_y,
    const T* __restrict__ _in_z,
    T* __restrict__ _out_w,
    const unsigned int n) {
  for (unsigned int i = (unsigned int)blockIdx.x * blockDim.x + threadIdx.x; i < n; i += (unsigned int)blockDim.x * gridDim.x) {
    const T x = _in_x[i];
    const T y = _in_y[i];
    const T z = _in_z[i];
    T& w = _out_w[i];
#line 1 "muladd_fwd"
    w = x * y + z;
  }
}
