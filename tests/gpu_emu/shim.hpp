// tests/gpu_emu/shim.hpp — the CUDA built-ins the generated and library kernels use, for the host
// compiler: the emulated NVRTC (emu.cpp) force-includes this header before the exact kernel
// source NVRTC would compile. The built-in variables read the running thread's indices from the
// emulator's Context; __syncthreads suspends the thread (the emulator runs a block's threads as
// fibers); __shfl_down_sync exchanges through the Context's slots between two barriers; atomics
// are plain read-modify-writes, as the emulator runs one thread at a time.
#pragma once
#include <cmath>
#include <cstring>
#include <math.h>

#include "context.hpp"

#define GRADUS_CUDA_EMULATION 1

extern "C" gradus_emu::Context* gradus_emu_context;

#ifndef __global__  // the emulated NVRTC's first pass defines it as a marker, to find the kernels
#define __global__
#endif
#define __device__
#define __host__
#define __forceinline__ inline
#define __shared__ static
#define __launch_bounds__(...)

#define threadIdx (gradus_emu_context->thread_idx)
#define blockIdx (gradus_emu_context->block_idx)
#define blockDim (gradus_emu_context->block_dim)
#define gridDim (gradus_emu_context->grid_dim)

inline void __syncthreads() { gradus_emu_context->sync(); }

template <class T>
T __shfl_down_sync(unsigned /*mask*/, T x, unsigned delta) {
  static_assert(sizeof(T) <= 8, "__shfl_down_sync: at most 8 bytes");
  gradus_emu::Context* c = gradus_emu_context;
  const unsigned t = c->thread_idx.x;
  std::memcpy(&c->shuffle[t], &x, sizeof(T));
  c->sync();
  T y = x;
  if ((t & 31u) + delta < 32u && t + delta < c->block_dim.x) std::memcpy(&y, &c->shuffle[t + delta], sizeof(T));
  c->sync();
  return y;
}

inline float atomicAdd(float* p, float v) {
  const float old = *p;
  *p = old + v;
  return old;
}
inline double atomicAdd(double* p, double v) {
  const double old = *p;
  *p = old + v;
  return old;
}
inline int atomicAdd(int* p, int v) {
  const int old = *p;
  *p = old + v;
  return old;
}
inline unsigned long long atomicMin(unsigned long long* p, unsigned long long v) {
  const unsigned long long old = *p;
  *p = v < old ? v : old;
  return old;
}
inline unsigned long long atomicAdd(unsigned long long* p, unsigned long long v) {
  const unsigned long long old = *p;
  *p = old + v;
  return old;
}
