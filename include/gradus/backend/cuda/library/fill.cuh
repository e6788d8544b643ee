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

// A sparse loss's label check (deferred.hpp): slot[0] becomes the first position whose label is
// outside [0, classes) (it starts at ~0), then slot[1] the label there.
extern "C" __global__ void gradus_check_labels_l(const long long* labels, long n, long long classes,
                                                 unsigned long long* slot) {
  GRADUS_FOR_EACH(i, n) {
    if (labels[i] < 0 || labels[i] >= classes) atomicMin(slot, (unsigned long long)i);
  }
}
extern "C" __global__ void gradus_label_at_l(const long long* labels, unsigned long long* slot) {
  if (blockIdx.x == 0 && threadIdx.x == 0 && slot[0] != ~0ull) slot[1] = (unsigned long long)labels[slot[0]];
}
