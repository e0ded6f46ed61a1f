// kusari row reduction: max over float32 (kusari_reduce_max_float32)
// launch with 256 threads per block; any number of blocks
typedef float T;
extern "C" __global__ void kusari_reduce_max_float32(const T* __restrict__ in, T* __restrict__ out, const long long rows, const long long len) {
  __shared__ T buf[256];
  const unsigned int t = threadIdx.x;
  for (long long r = blockIdx.x; r < rows; r += gridDim.x) {
    const T* row = in + r * len;
    T acc = row[0];
    for (long long j = t; j < len; j += 256) {
      const T v = row[j];
      acc = (v != v || v > acc) ? v : acc;
    }
    buf[t] = acc;
    __syncthreads();
    for (unsigned int s = 128; s > 0; s >>= 1) {
      if (t < s) {
        const T a = buf[t];
        const T v = buf[t + s];
        buf[t] = (v != v || v > a) ? v : a;
      }
      __syncthreads();
    }
    if (t == 0) out[r] = buf[0];
    __syncthreads();  // buf[0] is read before the next row overwrites buf
  }
}
