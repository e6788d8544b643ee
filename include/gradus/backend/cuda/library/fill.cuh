// gradus/backend/cuda/library/fill.cuh — the small kernels of library.hpp: filling, accumulating
// a gradient, finishing a reduction, checking labels. Device code, read only by NVRTC (library_source()); uses
// common.cuh.
#pragma once

#define GRADUS_LIBRARY_FILL(T, S)                                                                    \
  extern "C" __global__ void gradus_fill_##S(T* d, T v, long n) { GRADUS_FOR_EACH(i, n) d[i] = v; } \
  extern "C" __global__ void gradus_add_into_##S(T* d, const T* s, long n) {                         \
    GRADUS_FOR_EACH(i, n) d[i] += s[i];                                                             \
  }                                                                                                 \
  /* one block of 256: the blocks' partial sums added in a fixed order (each thread a fixed      \
     stride of them, then a tree), so the result does not depend on which block finished first */ \
  extern "C" __global__ void gradus_finish_sum_##S(T* d, const double* partials, long count,         \
                                                   double scale) {                                  \
    __shared__ double s[256];                                                                       \
    double x = 0;                                                                                   \
    for (long i = threadIdx.x; i < count; i += blockDim.x) x += partials[i];                        \
    s[threadIdx.x] = x;                                                                             \
    __syncthreads();                                                                                \
    for (unsigned w = blockDim.x / 2; w > 0; w >>= 1) {                                             \
      if (threadIdx.x < w) s[threadIdx.x] += s[threadIdx.x + w];                                    \
      __syncthreads();                                                                              \
    }                                                                                               \
    if (threadIdx.x == 0) d[0] = (T)(s[0] * scale);                                                 \
  }
GRADUS_LIBRARY_FILL(float, f)
GRADUS_LIBRARY_FILL(double, d)
GRADUS_LIBRARY_FILL(long long, l)

// A range check (deferred.hpp: a sparse loss's labels, gather's indices): slot[0] becomes the first
// position whose value is outside [0, end) (it starts at ~0), then slot[1] the value there.
extern "C" __global__ void gradus_check_range_l(const long long* values, long n, long long end,
                                                unsigned long long* slot) {
  GRADUS_FOR_EACH(i, n) {
    if (values[i] < 0 || values[i] >= end) atomicMin(slot, (unsigned long long)i);
  }
}
extern "C" __global__ void gradus_value_at_l(const long long* values, unsigned long long* slot) {
  if (blockIdx.x == 0 && threadIdx.x == 0 && slot[0] != ~0ull) slot[1] = (unsigned long long)values[slot[0]];
}
