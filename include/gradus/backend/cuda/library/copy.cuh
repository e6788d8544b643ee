// gradus/backend/cuda/library/copy.cuh — data movement (copy.hpp): N-d strided copies (slice,
// pad, transpose, concat, stack and their gradients), row gathers and their scatter-add
// adjoints, and casts between float, double and int64, one thread per element. Device code, read
// only by NVRTC (library_source()); uses common.cuh and geometry.hpp.
#pragma once

#define GRADUS_LIBRARY_COPY(T, S)                                                                   \
  extern "C" __global__ void gradus_copy_strided_##S(const T* s, T* d, gradus::backend::cuda::CopyGeometry g, \
                                                     long total, int add) {                          \
    GRADUS_FOR_EACH(i, total) {                                                                      \
      long r = i, so = 0, dof = 0;                                                                   \
      for (long k = g.rank - 1; k >= 0; --k) {                                                       \
        const long q = r % g.n[k];                                                                   \
        r /= g.n[k];                                                                                 \
        so += q * g.src[k], dof += q * g.dst[k];                                                     \
      }                                                                                              \
      if (add) d[dof] += s[so];                                                                      \
      else d[dof] = s[so];                                                                           \
    }                                                                                                \
  }                                                                                                  \
  /* out [outer, k, inner] = rows idx[j] of x [outer, n, inner]; an index outside [0, n) reads */   \
  /* nothing (0; gather's range check reports it at the next synchronisation) */                    \
  extern "C" __global__ void gradus_gather_rows_##S(const T* x, long outer, long n, long inner,       \
                                                    const long long* idx, long k, T* out) {          \
    GRADUS_FOR_EACH(i, outer * k * inner) {                                                          \
      const long c = i % inner, j = (i / inner) % k, o = i / (inner * k);                            \
      const long long r = idx[j];                                                                    \
      out[i] = r >= 0 && r < n ? x[(o * n + r) * inner + c] : (T)0;                                  \
    }                                                                                                \
  }

#define GRADUS_LIBRARY_SCATTER(T, S)                                                                \
  /* dx [outer, n, inner] += g [outer, k, inner] at rows idx[j]; repeated rows meet in atomics */    \
  extern "C" __global__ void gradus_scatter_add_rows_##S(const T* g, long outer, long n, long inner, \
                                                         const long long* idx, long k, T* dx) {      \
    GRADUS_FOR_EACH(i, outer * k * inner) {                                                          \
      const long c = i % inner, j = (i / inner) % k, o = i / (inner * k);                            \
      const long long r = idx[j];                                                                    \
      if (r >= 0 && r < n) atomicAdd(dx + (o * n + r) * inner + c, g[i]);                            \
    }                                                                                                \
  }

#define GRADUS_LIBRARY_CAST(T, S, U, V)                                                             \
  extern "C" __global__ void gradus_cast_to_##V##_##S(const T* s, long n, U* d, int add) {           \
    GRADUS_FOR_EACH(i, n) {                                                                          \
      if (add) d[i] += (U)s[i];                                                                      \
      else d[i] = (U)s[i];                                                                           \
    }                                                                                                \
  }
#define GRADUS_LIBRARY_CASTS(T, S)             \
  GRADUS_LIBRARY_CAST(T, S, float, f)          \
  GRADUS_LIBRARY_CAST(T, S, double, d)         \
  GRADUS_LIBRARY_CAST(T, S, long long, l)

GRADUS_LIBRARY_COPY(float, f)
GRADUS_LIBRARY_COPY(double, d)
GRADUS_LIBRARY_COPY(long long, l)
GRADUS_LIBRARY_SCATTER(float, f)
GRADUS_LIBRARY_SCATTER(double, d)
GRADUS_LIBRARY_CASTS(float, f)
GRADUS_LIBRARY_CASTS(double, d)
GRADUS_LIBRARY_CASTS(long long, l)
