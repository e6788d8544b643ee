// tests/gpu_emu/shim.hpp — the CUDA built-ins the generated and library kernels use, for the host
// compiler: the emulated NVRTC (emu.cpp) force-includes this header before the exact kernel
// source NVRTC would compile. The built-in variables read the running thread's indices from the
// emulator's Context; __syncthreads suspends the thread (the emulator runs a block's threads as
// fibers); __shfl_down_sync exchanges through the Context's slots between two barriers; atomics
// are plain read-modify-writes, as the emulator runs one thread at a time.
//
// The kernels compile as NVRTC compiles them: with __CUDACC_RTC__ defined (on the command line)
// and no C++ standard library, so gradus' device headers take the branches a GPU build takes
// (backend/cuda/nvrtc_prelude.hpp's few std names, the global math functions). What NVRTC has of
// the C math library comes from the C library's math.h, and CUDA's float overloads of its
// functions from below.
#pragma once
#define _GLIBCXX_INCLUDE_NEXT_C_HEADERS  // the C library's math.h, not libstdc++'s <cmath> behind it
#include <math.h>
#undef _GLIBCXX_INCLUDE_NEXT_C_HEADERS

#include "context.hpp"

// CUDA's math API overloads the C functions for float in the global namespace.
#define GRADUS_EMU_FLOAT1(name) \
  inline float name(float x) { return name##f(x); }
GRADUS_EMU_FLOAT1(fabs)
GRADUS_EMU_FLOAT1(exp)
GRADUS_EMU_FLOAT1(expm1)
GRADUS_EMU_FLOAT1(log)
GRADUS_EMU_FLOAT1(log1p)
GRADUS_EMU_FLOAT1(sqrt)
GRADUS_EMU_FLOAT1(sin)
GRADUS_EMU_FLOAT1(cos)
GRADUS_EMU_FLOAT1(tanh)
GRADUS_EMU_FLOAT1(erf)
GRADUS_EMU_FLOAT1(floor)
GRADUS_EMU_FLOAT1(ceil)
#undef GRADUS_EMU_FLOAT1
inline float pow(float x, float y) { return powf(x, y); }
inline float fmax(float x, float y) { return fmaxf(x, y); }
inline float fmin(float x, float y) { return fminf(x, y); }

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
  __builtin_memcpy(&c->shuffle[t], &x, sizeof(T));
  c->sync();
  T y = x;
  if ((t & 31u) + delta < 32u && t + delta < c->block_dim.x) __builtin_memcpy(&y, &c->shuffle[t + delta], sizeof(T));
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
