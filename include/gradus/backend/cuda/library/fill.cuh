// gradus/backend/cuda/library/fill.cuh — the small kernels of library.hpp: filling, accumulating
// a gradient, finishing a reduction, checking labels. Device code, read only by NVRTC (library_source()); uses
// common.cuh.
#pragma once

#define GRADUS_LIBRARY_FILL(T, S)                                                                    \
  extern "C" __global__ void gradus_fill_##S(T* d, T v, long n) { GRADUS_FOR_EACH(i, n) d[i] = v; } \
  extern "C" __global__ void gradus_add_into_##S(T* d, const T* s, long n) {                         \
    GRADUS_FOR_EACH(i, n) d[i] += s[i];                                                             \
  }                                                                                                 \
  extern "C" __global__ void gradus_finish_sum_##S(T* d, const double* acc, double scale) {         \
    if (blockIdx.x == 0 && threadIdx.x == 0) d[0] = (T)(acc[0] * scale);                           \
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
