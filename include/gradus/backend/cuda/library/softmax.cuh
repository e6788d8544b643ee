// gradus/backend/cuda/library/softmax.cuh — softmax and log_softmax along the middle axis of
// [outer, n, inner], forward and backward, and one_hot (softmax.hpp). Device code, read only by
// NVRTC (library_source()); uses common.cuh.
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
  extern "C" __global__ void gradus_one_hot_##S(const long long* labels, long count, long depth, T on, T off, \
                                                T* out) {                                          \
    GRADUS_FOR_EACH(i, count * depth) out[i] = labels[i / depth] == i % depth ? on : off;          \
  }
GRADUS_LIBRARY_SOFTMAX(float, f)
GRADUS_LIBRARY_SOFTMAX(double, d)
