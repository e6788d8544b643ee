// gradus/backend/cuda/library/common.cuh — what every family of the GPU library uses: the
// grid-stride loop and exp/log for float and double. Device code, read only by NVRTC: library.hpp's
// library_source() includes it after the gradus headers the kernels need and before the families.
#pragma once

// i runs over [0, n), each thread taking every (blocks × threads)-th value from its own
#define GRADUS_FOR_EACH(i, n) \
  for (long i = blockIdx.x * (long)blockDim.x + threadIdx.x; i < (n); i += (long)gridDim.x * blockDim.x)

__device__ inline float gradus_exp(float x) { return expf(x); }
__device__ inline double gradus_exp(double x) { return exp(x); }
__device__ inline float gradus_log(float x) { return logf(x); }
__device__ inline double gradus_log(double x) { return log(x); }
__device__ inline float gradus_sqrt(float x) { return sqrtf(x); }
__device__ inline double gradus_sqrt(double x) { return sqrt(x); }
