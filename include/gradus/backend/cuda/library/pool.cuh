// gradus/backend/cuda/library/pool.cuh — max and average pooling, forward and backward
// (conv.hpp's pool2d_*), one thread per output element. Device code, read only by NVRTC
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
  /* max: the first element equal to the maximum takes the gradient; avg: shared evenly */          \
  extern "C" __global__ void gradus_pool_backward_##S(const T* g, const T* x, const T* y, T* dx,   \
                                                      gradus::backend::cuda::PoolGeometry p, int mx) { \
    GRADUS_FOR_EACH(i, p.n * p.oh * p.ow * p.c) {                                                  \
      const GradusPoolWindow win = gradus_pool_window(p, i);                                       \
      const T share = mx ? g[i] : g[i] / T(win.size());                                            \
      bool done = false;                                                                           \
      for (long yy = win.y0; yy < win.y1 && !done; ++yy)                                           \
        for (long xx = win.x0; xx < win.x1 && !done; ++xx) {                                       \
          const long k = win.at(p, yy, xx);                                                        \
          if (!mx || x[k] == y[i]) {                                                               \
            atomicAdd(dx + k, share);                                                              \
            done = mx;                                                                             \
          }                                                                                        \
        }                                                                                          \
    }                                                                                              \
  }
GRADUS_LIBRARY_POOL(float, f)
GRADUS_LIBRARY_POOL(double, d)
