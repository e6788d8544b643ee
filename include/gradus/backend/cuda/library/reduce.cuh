// gradus/backend/cuda/library/reduce.cuh — reductions along the middle axis of [outer, n, inner]:
// max/min, argmax/argmin, prod and logsumexp, forward and backward (reduce.hpp), and sums over
// broadcast axes (sum_to, at the end). One block per
// line (a power of two of threads, 32 to 256, launched by launch_lines): each thread folds the
// elements j = t, t + blockDim, ... of its line, then the block combines the partials through
// shared memory. The results are the CPU's (backend/cpu/reduce.hpp): a line whose first element
// is NaN has NaN as its max, min and arg 0, later NaNs are skipped; ties in argmax go to the first
// index; any NaN makes logsumexp NaN. Device code, read only by NVRTC (library_source()); uses common.cuh.
#pragma once

// `line` runs over the block's lines; `b` is the offset of the line's first element (its elements
// are b + j * inner) and `line` its index in the reduced output.
#define GRADUS_FOR_EACH_LINE(line, b, outer, n, inner)                          \
  for (long line = blockIdx.x; line < (outer) * (inner); line += gridDim.x)     \
    if (const long b = (line / (inner)) * (n) * (inner) + line % (inner); true)

template <class T>
__device__ inline bool gradus_is_nan(T x) {
  return x != x;
}
template <class T>
__device__ inline bool gradus_is_finite(T x) {
  return x == x && x - x == T(0);
}
template <class T>
__device__ inline T gradus_extremum(T m, T e, int is_max) {
  return is_max ? (e > m ? e : m) : (e < m ? e : m);
}

struct GradusMax {
  template <class T>
  __device__ T operator()(T a, T b) const { return b > a ? b : a; }
};
struct GradusMaxOrNan {  // NaN when either is (logsumexp: a NaN in a line makes it NaN)
  template <class T>
  __device__ T operator()(T a, T b) const { return b > a || b != b ? b : a; }
};
struct GradusMin {
  template <class T>
  __device__ T operator()(T a, T b) const { return b < a ? b : a; }
};
struct GradusPlus {
  template <class T>
  __device__ T operator()(T a, T b) const { return a + b; }
};
struct GradusTimes {
  template <class T>
  __device__ T operator()(T a, T b) const { return a * b; }
};

/// The block's `v`s combined (tree order, lower threads on the left), returned to every thread.
/// `buf` holds blockDim.x values; every thread of the block must call it.
template <class T, class F>
__device__ T gradus_block_reduce(T v, T* buf, F combine) {
  const unsigned t = threadIdx.x;
  buf[t] = v;
  __syncthreads();
  for (unsigned s = blockDim.x / 2; s > 0; s >>= 1) {
    if (t < s) buf[t] = combine(buf[t], buf[t + s]);
    __syncthreads();
  }
  const T r = buf[0];
  __syncthreads();  // buf is free for the next call
  return r;
}

/// The largest element of the line at b (NaN when it holds one), to every thread of the block.
template <class T>
__device__ T gradus_line_max_or_nan(const T* x, long b, long n, long inner, T* buf) {
  T m = x[b];  // the host launches no empty line
  for (long j = threadIdx.x; j < n; j += blockDim.x) m = GradusMaxOrNan{}(m, x[b + j * inner]);
  return gradus_block_reduce(m, buf, GradusMaxOrNan{});
}

#define GRADUS_LIBRARY_REDUCE(T, S)                                                                     \
  extern "C" __global__ void gradus_reduce_extremum_##S(const T* x, T* y, int is_max, long outer, long n, \
                                                        long inner) {                                   \
    __shared__ T buf[256];                                                                              \
    GRADUS_FOR_EACH_LINE(line, b, outer, n, inner) {                                                   \
      const T first = x[b];                                                                             \
      T m = first;                                                                                      \
      if (!gradus_is_nan(first))                                                                        \
        for (long j = threadIdx.x; j < n; j += blockDim.x) m = gradus_extremum(m, x[b + j * inner], is_max); \
      m = is_max ? gradus_block_reduce(m, buf, GradusMax{}) : gradus_block_reduce(m, buf, GradusMin{}); \
      if (threadIdx.x == 0) y[line] = gradus_is_nan(first) ? first : m;                                 \
    }                                                                                                   \
  }                                                                                                     \
  extern "C" __global__ void gradus_reduce_extremum_backward_##S(const T* x, const T* y, const T* g, T* dx, \
                                                                 long outer, long n, long inner) {     \
    __shared__ T buf[256];                                                                              \
    GRADUS_FOR_EACH_LINE(line, b, outer, n, inner) {                                                   \
      T ties = 0;                                                                                       \
      for (long j = threadIdx.x; j < n; j += blockDim.x) ties += x[b + j * inner] == y[line] ? T(1) : T(0); \
      ties = gradus_block_reduce(ties, buf, GradusPlus{});                                              \
      const T share = g[line] / ties;                                                                   \
      for (long j = threadIdx.x; j < n; j += blockDim.x)                                                \
        dx[b + j * inner] = x[b + j * inner] == y[line] ? share : T(0);                                \
    }                                                                                                   \
  }                                                                                                     \
  extern "C" __global__ void gradus_reduce_arg_##S(const T* x, long long* out, int is_max, long outer, long n, \
                                                   long inner) {                                        \
    __shared__ T vbuf[256];                                                                             \
    __shared__ long ibuf[256];                                                                          \
    GRADUS_FOR_EACH_LINE(line, b, outer, n, inner) {                                                   \
      const T first = x[b];                                                                             \
      T m = first;                                                                                      \
      long best = 0;                                                                                    \
      if (!gradus_is_nan(first))                                                                        \
        for (long j = threadIdx.x; j < n; j += blockDim.x) {                                           \
          const T e = x[b + j * inner];                                                                 \
          if (is_max ? e > m : e < m) m = e, best = j;                                                  \
        }                                                                                               \
      const unsigned t = threadIdx.x;                                                                   \
      vbuf[t] = m, ibuf[t] = best;                                                                      \
      __syncthreads();                                                                                  \
      for (unsigned s = blockDim.x / 2; s > 0; s >>= 1) {                                              \
        if (t < s) {                                                                                    \
          const T a = vbuf[t], c = vbuf[t + s];                                                         \
          if ((is_max ? c > a : c < a) || (c == a && ibuf[t + s] < ibuf[t])) vbuf[t] = c, ibuf[t] = ibuf[t + s]; \
        }                                                                                               \
        __syncthreads();                                                                                \
      }                                                                                                 \
      if (t == 0) out[line] = ibuf[0];                                                                  \
      __syncthreads();                                                                                  \
    }                                                                                                   \
  }                                                                                                     \
  extern "C" __global__ void gradus_reduce_prod_##S(const T* x, T* y, long outer, long n, long inner) {   \
    __shared__ T buf[256];                                                                              \
    GRADUS_FOR_EACH_LINE(line, b, outer, n, inner) {                                                   \
      T p = 1;                                                                                          \
      for (long j = threadIdx.x; j < n; j += blockDim.x) p *= x[b + j * inner];                         \
      p = gradus_block_reduce(p, buf, GradusTimes{});                                                   \
      if (threadIdx.x == 0) y[line] = p;                                                                \
    }                                                                                                   \
  }                                                                                                     \
  /* dx = g * (the product of the line's other elements), as prefix times suffix products (exact */  \
  /* with zeros, infinities and NaNs, as on the CPU): each thread takes a contiguous chunk of the */    \
  /* line; thread 0 scans the chunks' products */                                                      \
  extern "C" __global__ void gradus_reduce_prod_backward_##S(const T* x, const T* g, T* dx, long outer,  \
                                                             long n, long inner) {                     \
    __shared__ T chunk_prod[256], before[256], after[256];                                              \
    GRADUS_FOR_EACH_LINE(line, b, outer, n, inner) {                                                   \
      const unsigned t = threadIdx.x;                                                                   \
      const long size = (n + blockDim.x - 1) / blockDim.x;                                              \
      const long j0 = t * size < n ? t * size : n, j1 = j0 + size < n ? j0 + size : n;                 \
      T p = 1;                                                                                          \
      for (long j = j0; j < j1; ++j) p *= x[b + j * inner];                                             \
      chunk_prod[t] = p;                                                                                \
      __syncthreads();                                                                                  \
      if (t == 0) {                                                                                     \
        T acc = 1;                                                                                      \
        for (unsigned c = 0; c < blockDim.x; ++c) before[c] = acc, acc *= chunk_prod[c];                \
        acc = 1;                                                                                        \
        for (unsigned c = blockDim.x; c-- > 0;) after[c] = acc, acc *= chunk_prod[c];                   \
      }                                                                                                 \
      __syncthreads();                                                                                  \
      const T go = g[line];                                                                             \
      T left = before[t];                                                                               \
      for (long j = j0; j < j1; ++j) {                                                                  \
        dx[b + j * inner] = left;                                                                       \
        left *= x[b + j * inner];                                                                       \
      }                                                                                                 \
      T right = after[t];                                                                               \
      for (long j = j1; j-- > j0;) {                                                                    \
        dx[b + j * inner] *= right * go;                                                                \
        right *= x[b + j * inner];                                                                      \
      }                                                                                                 \
      __syncthreads(); /* the shared arrays are free for the next line */                               \
    }                                                                                                   \
  }                                                                                                     \
  extern "C" __global__ void gradus_reduce_logsumexp_##S(const T* x, T* y, long outer, long n, long inner) { \
    __shared__ T buf[256];                                                                              \
    GRADUS_FOR_EACH_LINE(line, b, outer, n, inner) {                                                   \
      const T m = gradus_line_max_or_nan(x, b, n, inner, buf);                                          \
      T s = 0;                                                                                          \
      if (gradus_is_finite(m))                                                                          \
        for (long j = threadIdx.x; j < n; j += blockDim.x) s += gradus_exp(x[b + j * inner] - m);       \
      s = gradus_block_reduce(s, buf, GradusPlus{});                                                    \
      if (threadIdx.x == 0) y[line] = gradus_is_finite(m) ? m + gradus_log(s) : m;                      \
    }                                                                                                   \
  }                                                                                                     \
  /* dx = g * exp(x - m) / sum(exp(x - m)) from the line's maximum m (as the CPU: exp(x - y) would */  \
  /* carry y's rounding at the magnitude of m) */                                                      \
  extern "C" __global__ void gradus_reduce_logsumexp_backward_##S(const T* x, const T* y, const T* g, T* dx, \
                                                                  long outer, long n, long inner) {    \
    __shared__ T buf[256];                                                                              \
    GRADUS_FOR_EACH_LINE(line, b, outer, n, inner) {                                                   \
      const T m = gradus_line_max_or_nan(x, b, n, inner, buf);                                          \
      if (!gradus_is_finite(m)) {                                                                       \
        for (long j = threadIdx.x; j < n; j += blockDim.x)                                             \
          dx[b + j * inner] = g[line] * gradus_exp(x[b + j * inner] - y[line]);                        \
        continue;                                                                                       \
      }                                                                                                 \
      T s = 0;                                                                                          \
      for (long j = threadIdx.x; j < n; j += blockDim.x) s += gradus_exp(x[b + j * inner] - m);         \
      s = gradus_block_reduce(s, buf, GradusPlus{});                                                    \
      const T scale = g[line] / s;                                                                      \
      for (long j = threadIdx.x; j < n; j += blockDim.x)                                               \
        dx[b + j * inner] = gradus_exp(x[b + j * inner] - m) * scale;                                   \
    }                                                                                                   \
  }
GRADUS_LIBRARY_REDUCE(float, f)
GRADUS_LIBRARY_REDUCE(double, d)

// Sums over broadcast axes (SumToGeometry): block b takes outputs [group·tx, group·tx + tx) and
// the terms of part `part` of them; thread t the output group·tx + t % tx and every (256/tx)-th of
// those terms from its own, in double. The threads of one output then add up in a fixed tree, and
// the result goes to y (one part) or to partials[j·parts + part], which gradus_sum_parts adds in
// order: no atomics, the same bits on every run.
#define GRADUS_LIBRARY_SUM_TO(T, S)                                                                    \
  extern "C" __global__ void gradus_sum_to_##S(const T* x, gradus::backend::cuda::SumToGeometry g, T* y, \
                                               double* partials, int add) {                           \
    __shared__ double buf[256];                                                                        \
    const long tx = g.tx, ty = 256 / tx, lj = threadIdx.x % tx, lq = threadIdx.x / tx;                \
    const long groups = (g.m + tx - 1) / tx, per = (g.k + g.parts - 1) / g.parts;                      \
    for (long b = blockIdx.x; b < groups * g.parts; b += gridDim.x) {                                  \
      const long part = b / groups, j = (b % groups) * tx + lj;                                        \
      double acc = 0;                                                                                  \
      if (j < g.m) {                                                                                   \
        const long base = g.kept.at(j);                                                                \
        const long end = (part + 1) * per < g.k ? (part + 1) * per : g.k;                              \
        for (long q = part * per + lq; q < end; q += ty)                                               \
          acc += double(x[base + g.summed.at(q)]);                                                     \
      }                                                                                                \
      buf[threadIdx.x] = acc;                                                                          \
      __syncthreads();                                                                                 \
      for (long s = ty / 2; s > 0; s >>= 1) {                                                          \
        if (lq < s) buf[threadIdx.x] += buf[threadIdx.x + s * tx];                                     \
        __syncthreads();                                                                               \
      }                                                                                                \
      if (lq == 0 && j < g.m) {                                                                        \
        if (g.parts > 1)                                                                               \
          partials[j * g.parts + part] = buf[threadIdx.x];                                             \
        else                                                                                           \
          y[j] = add ? T(y[j] + T(buf[threadIdx.x])) : T(buf[threadIdx.x]);                            \
      }                                                                                                \
      __syncthreads(); /* buf is free for the next group */                                            \
    }                                                                                                  \
  }                                                                                                    \
  extern "C" __global__ void gradus_sum_parts_##S(const double* partials, long m, long parts, T* y, int add) { \
    GRADUS_FOR_EACH(j, m) {                                                                            \
      double s = 0;                                                                                    \
      for (long p = 0; p < parts; ++p) s += partials[j * parts + p];                                   \
      y[j] = add ? T(y[j] + T(s)) : T(s);                                                              \
    }                                                                                                  \
  }
GRADUS_LIBRARY_SUM_TO(float, f)
GRADUS_LIBRARY_SUM_TO(double, d)
