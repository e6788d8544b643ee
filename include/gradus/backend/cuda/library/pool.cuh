// gradus/backend/cuda/library/pool.cuh — max and average pooling, forward and backward
// (conv.hpp's pool2d_*): forward one thread per output element, backward one per input element. Device code, read only by NVRTC
// (library_source()); uses common.cuh and geometry.hpp.
#pragma once

// The input window of pooling output element i ([n,oh,ow,c]), clipped to the image as on the
// CPU: its image b and channel ci, rows [y0, y1) and columns [x0, x1).
struct GradusPoolWindow {
  long b, ci, y0, y1, x0, x1;
  // the [n,h,w,c] offset of the window's element at row yy, column xx
  __device__ long at(const gradus::backend::cuda::PoolGeometry& p, long yy, long xx) const {
    return ((b * p.h + yy) * p.w + xx) * p.c + ci;
  }
  __device__ long size() const { return (y1 - y0) * (x1 - x0); }
};
__device__ inline GradusPoolWindow gradus_pool_window(const gradus::backend::cuda::PoolGeometry& p, long i) {
  const long ci = i % p.c, ox = (i / p.c) % p.ow, oy = (i / (p.c * p.ow)) % p.oh, b = i / (p.c * p.ow * p.oh);
  const long ys = oy * p.sh - p.ph, xs = ox * p.sw - p.pw;
  return {b, ci, ys > 0 ? ys : 0, ys + p.kh < p.h ? ys + p.kh : p.h, xs > 0 ? xs : 0, xs + p.kw < p.w ? xs + p.kw : p.w};
}

#define GRADUS_LIBRARY_POOL(T, S)                                                                   \
  extern "C" __global__ void gradus_pool_##S(const T* x, T* y, gradus::backend::cuda::PoolGeometry p, int mx) { \
    GRADUS_FOR_EACH(i, p.n * p.oh * p.ow * p.c) {                                                  \
      const GradusPoolWindow win = gradus_pool_window(p, i);                                       \
      T acc = 0;                                                                                   \
      bool first = true;                                                                           \
      for (long yy = win.y0; yy < win.y1; ++yy)                                                    \
        for (long xx = win.x0; xx < win.x1; ++xx) {                                                \
          const T v = x[win.at(p, yy, xx)];                                                        \
          acc = mx ? (first || v > acc ? v : acc) : acc + v;                                       \
          first = false;                                                                           \
        }                                                                                          \
      y[i] = mx || first ? acc : acc / T(win.size());                                              \
    }                                                                                              \
  }                                                                                                \
  /* one thread per input element: the gradients of the windows that hold it, in a fixed order  \
     (window rows, then columns; no atomics, the same bits on every run). max: a window's         \
     gradient goes to its first element equal to its maximum; avg: shared evenly. dx = that sum, \
     or dx += it with `add` */                                                                     \
  extern "C" __global__ void gradus_pool_backward_##S(const T* g, const T* x, const T* y, T* dx,   \
                                                      gradus::backend::cuda::PoolGeometry p, int mx, int add) { \
    GRADUS_FOR_EACH(k, p.n * p.h * p.w * p.c) {                                                    \
      const long ci = k % p.c, xx = (k / p.c) % p.w, yy = (k / (p.c * p.w)) % p.h, b = k / (p.c * p.w * p.h); \
      /* the windows [oy·sh - ph, oy·sh - ph + kh) that hold row yy, and likewise the columns */  \
      const long ty = yy + p.ph, tx = xx + p.pw;                                                  \
      const long oy0 = ty - p.kh + 1 > 0 ? (ty - p.kh + 1 + p.sh - 1) / p.sh : 0;                 \
      const long oy1 = ty / p.sh + 1 < p.oh ? ty / p.sh + 1 : p.oh;                               \
      const long ox0 = tx - p.kw + 1 > 0 ? (tx - p.kw + 1 + p.sw - 1) / p.sw : 0;                 \
      const long ox1 = tx / p.sw + 1 < p.ow ? tx / p.sw + 1 : p.ow;                               \
      T s = 0;                                                                                     \
      for (long oy = oy0; oy < oy1; ++oy)                                                          \
        for (long ox = ox0; ox < ox1; ++ox) {                                                      \
          const long i = ((b * p.oh + oy) * p.ow + ox) * p.c + ci;                                 \
          const GradusPoolWindow win = gradus_pool_window(p, i);                                   \
          if (!mx) {                                                                               \
            s += g[i] / T(win.size());                                                             \
            continue;                                                                              \
          }                                                                                        \
          if (x[k] != y[i]) continue;                                                              \
          bool first = true, reached = false; /* whether an element before this one equals the max */ \
          for (long wy = win.y0; wy < win.y1 && first && !reached; ++wy)                           \
            for (long wx = win.x0; wx < win.x1; ++wx) {                                            \
              if (wy == yy && wx == xx) { reached = true; break; }                                 \
              if (x[win.at(p, wy, wx)] == y[i]) { first = false; break; }                          \
            }                                                                                      \
          if (first) s += g[i];                                                                    \
        }                                                                                          \
      dx[k] = add ? T(dx[k] + s) : s;                                                              \
    }                                                                                              \
  }
GRADUS_LIBRARY_POOL(float, f)
GRADUS_LIBRARY_POOL(double, d)
