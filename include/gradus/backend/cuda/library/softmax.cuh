// gradus/backend/cuda/library/softmax.cuh — softmax and log_softmax along the middle axis of
// [outer, n, inner], forward and backward, and one_hot (softmax.hpp). Along the last axis
// (inner 1: a line's elements are neighbours) a block of threads takes each line, reading it
// together and combining the max and the sum in a fixed tree (the _lines kernels, launched by
// launch_lines); along another axis one thread takes each line, and neighbouring threads read
// neighbouring lines. Device code, read only by NVRTC (library_source()); uses common.cuh and
// reduce.cuh's block reduction.
#pragma once

#define GRADUS_LIBRARY_SOFTMAX(T, S)                                                                \
  extern "C" __global__ void gradus_softmax_##S(const T* x, T* y, long outer, long n, long inner, int lg) { \
    GRADUS_FOR_EACH(line, outer * inner) {                                                         \
      const long b = (line / inner) * n * inner + line % inner; /* the line's first element */      \
      T m = x[b];                                                                                  \
      for (long j = 1; j < n; ++j) m = x[b + j * inner] > m ? x[b + j * inner] : m;               \
      T s = 0;                                                                                     \
      for (long j = 0; j < n; ++j) s += gradus_exp(x[b + j * inner] - m);                         \
      if (lg) {                                                                                    \
        const T ls = gradus_log(s); /* (x - m) - log s: exact where x - m is, unlike x - (m + log s) */ \
        for (long j = 0; j < n; ++j) y[b + j * inner] = (x[b + j * inner] - m) - ls;               \
      } else {                                                                                     \
        for (long j = 0; j < n; ++j) y[b + j * inner] = gradus_exp(x[b + j * inner] - m) / s;      \
      }                                                                                            \
    }                                                                                              \
  }                                                                                                \
  extern "C" __global__ void gradus_softmax_backward_##S(const T* y, const T* g, T* dx, long outer, long n, \
                                                         long inner, int lg) {                     \
    GRADUS_FOR_EACH(line, outer * inner) {                                                         \
      const long b = (line / inner) * n * inner + line % inner;                                    \
      T s = 0;                                                                                     \
      for (long j = 0; j < n; ++j) s += lg ? g[b + j * inner] : g[b + j * inner] * y[b + j * inner]; \
      for (long j = 0; j < n; ++j) {                                                               \
        const long k = b + j * inner;                                                              \
        dx[k] = lg ? g[k] - gradus_exp(y[k]) * s : y[k] * (g[k] - s);                              \
      }                                                                                            \
    }                                                                                              \
  }                                                                                                \
  extern "C" __global__ void gradus_softmax_lines_##S(const T* x, T* y, long outer, long n, long inner, int lg) { \
    __shared__ T buf[256];                                                                         \
    GRADUS_FOR_EACH_LINE(line, b, outer, n, inner) {                                               \
      T m = x[b];                                                                                  \
      for (long j = threadIdx.x; j < n; j += blockDim.x) m = GradusMax{}(m, x[b + j * inner]);     \
      m = gradus_block_reduce(m, buf, GradusMax{});                                                \
      T s = 0;                                                                                     \
      for (long j = threadIdx.x; j < n; j += blockDim.x) s += gradus_exp(x[b + j * inner] - m);    \
      s = gradus_block_reduce(s, buf, GradusPlus{});                                               \
      const T ls = gradus_log(s);                                                                  \
      for (long j = threadIdx.x; j < n; j += blockDim.x) {                                         \
        const long k = b + j * inner;                                                              \
        y[k] = lg ? (x[k] - m) - ls : gradus_exp(x[k] - m) / s;                                    \
      }                                                                                            \
    }                                                                                              \
  }                                                                                                \
  extern "C" __global__ void gradus_softmax_lines_backward_##S(const T* y, const T* g, T* dx, long outer, long n, \
                                                               long inner, int lg) {               \
    __shared__ T buf[256];                                                                         \
    GRADUS_FOR_EACH_LINE(line, b, outer, n, inner) {                                               \
      T s = 0;                                                                                     \
      for (long j = threadIdx.x; j < n; j += blockDim.x)                                           \
        s += lg ? g[b + j * inner] : g[b + j * inner] * y[b + j * inner];                          \
      s = gradus_block_reduce(s, buf, GradusPlus{});                                               \
      for (long j = threadIdx.x; j < n; j += blockDim.x) {                                         \
        const long k = b + j * inner;                                                              \
        dx[k] = lg ? g[k] - gradus_exp(y[k]) * s : y[k] * (g[k] - s);                              \
      }                                                                                            \
    }                                                                                              \
  }                                                                                                \
  extern "C" __global__ void gradus_one_hot_##S(const long long* labels, long count, long depth, T on, T off, \
                                                T* out) {                                          \
    GRADUS_FOR_EACH(i, count * depth) out[i] = labels[i / depth] == i % depth ? on : off;          \
  }
GRADUS_LIBRARY_SOFTMAX(float, f)
GRADUS_LIBRARY_SOFTMAX(double, d)
