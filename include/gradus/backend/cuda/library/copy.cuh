// gradus/backend/cuda/library/copy.cuh — data movement (copy.hpp): N-d strided copies (slice,
// pad, transpose, concat, stack and their gradients), row gathers and their scatter-add
// adjoints (in a fixed order), and casts between float, double and int64, one thread per element. Device code, read
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

// gather's adjoint without atomics: the positions j are sorted by their row idx[j] (stable: a
// row's positions stay in increasing order), then the first position of each row's run adds the
// run's gradients in that order — the CPU's order, the same bits on every run.
//
// The sort: a least-significant-digit radix sort, 8 bits a pass, over tiles of 1,024 positions.
// A pass counts each tile's digits (one thread per tile, in order), turns the counts into
// offsets (digit-major, so a digit's positions from earlier tiles come first), and moves each
// tile's positions to their offsets in order: stable. An index outside [0, n) sorts as n, last,
// and adds nothing.
#define GRADUS_SCATTER_TILE 1024L
__device__ inline long gradus_scatter_row(const long long* idx, long j, long n) {
  const long long r = idx[j];
  return r >= 0 && r < n ? long(r) : n;
}
// hist[d · tiles + t]: positions of tile t (of pos, or 0..k-1 when pos is null) whose row has digit d
extern "C" __global__ void gradus_rank_count_l(const long long* idx, const long long* pos, long k, long n, int shift,
                                               long tiles, long long* hist) {
  GRADUS_FOR_EACH(t, tiles) {
    for (long d = 0; d < 256; ++d) hist[d * tiles + t] = 0;
    const long end = (t + 1) * GRADUS_SCATTER_TILE < k ? (t + 1) * GRADUS_SCATTER_TILE : k;
    for (long q = t * GRADUS_SCATTER_TILE; q < end; ++q)
      ++hist[((gradus_scatter_row(idx, pos ? long(pos[q]) : q, n) >> shift) & 255) * tiles + t];
  }
}
// one block of 256 threads: the counts become exclusive offsets, in digit-major order
extern "C" __global__ void gradus_rank_offsets_l(long long* hist, long tiles) {
  __shared__ long long base[256];
  const long d = threadIdx.x;
  long long run = 0;
  for (long t = 0; t < tiles; ++t) {
    const long long v = hist[d * tiles + t];
    hist[d * tiles + t] = run;
    run += v;
  }
  base[d] = run;
  __syncthreads();
  if (d == 0) {
    long long sum = 0;
    for (int e = 0; e < 256; ++e) {
      const long long v = base[e];
      base[e] = sum;
      sum += v;
    }
  }
  __syncthreads();
  for (long t = 0; t < tiles; ++t) hist[d * tiles + t] += base[d];
}
extern "C" __global__ void gradus_rank_move_l(const long long* idx, const long long* pos, long k, long n, int shift,
                                              long tiles, long long* hist, long long* out) {
  GRADUS_FOR_EACH(t, tiles) {
    const long end = (t + 1) * GRADUS_SCATTER_TILE < k ? (t + 1) * GRADUS_SCATTER_TILE : k;
    for (long q = t * GRADUS_SCATTER_TILE; q < end; ++q) {
      const long j = pos ? long(pos[q]) : q;
      out[hist[((gradus_scatter_row(idx, j, n) >> shift) & 255) * tiles + t]++] = j;
    }
  }
}

#define GRADUS_LIBRARY_SCATTER(T, S)                                                                \
  /* dx [outer, n, inner] += g [outer, k, inner] at rows idx[j], from the positions sorted by row: */ \
  /* the thread of a run's first position adds the run's gradients in order */                      \
  extern "C" __global__ void gradus_scatter_add_sorted_##S(const T* g, long outer, long n, long inner, \
                                                           const long long* idx, const long long* sorted, \
                                                           long k, T* dx) {                          \
    GRADUS_FOR_EACH(i, outer * k * inner) {                                                          \
      const long c = i % inner, p = (i / inner) % k, o = i / (inner * k);                            \
      const long r = gradus_scatter_row(idx, long(sorted[p]), n);                                    \
      if (r == n || (p > 0 && gradus_scatter_row(idx, long(sorted[p - 1]), n) == r)) continue;       \
      T s = dx[(o * n + r) * inner + c];                                                             \
      for (long q = p; q < k && gradus_scatter_row(idx, long(sorted[q]), n) == r; ++q)              \
        s += g[(o * k + long(sorted[q])) * inner + c];                                               \
      dx[(o * n + r) * inner + c] = s;                                                               \
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
