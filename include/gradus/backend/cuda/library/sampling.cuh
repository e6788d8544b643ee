// gradus/backend/cuda/library/sampling.cuh — bilinear sampling at arbitrary points (sampling.hpp's
// resample_*), TensorFlow's resampler convention as on the CPU (backend/cpu/sampling.hpp): forward
// one thread per output element, the point gradient one thread per point, and the image gradient
// as each point's four weighted adjoints spread into rows that copy.cuh's sorted scatter adds in
// order (no atomics: the same bits on every run). Device code, read only by NVRTC
// (library_source()); uses common.cuh and geometry.hpp.
#pragma once

__device__ inline float gradus_floor(float x) { return floorf(x); }
__device__ inline double gradus_floor(double x) { return floor(x); }

// The neighbours (fx, fy), (cx, cy), (fx, cy), (cx, fy) of point q and their weights: each one's
// element offset in the data (of its channel 0; -1 outside the image), and `inside` false for a
// point outside (-1, w) x (-1, h), whose output is 0.
template <class T>
struct GradusBilinear {
  long off[4];
  T wt[4];
  T dx, dy;
  bool inside;
  __device__ T value(const T* data, int k, long ch) const { return off[k] < 0 ? T(0) : data[off[k] + ch]; }
};
template <class T>
__device__ inline GradusBilinear<T> gradus_bilinear(const gradus::backend::cuda::ResampleGeometry& g, const T* warp,
                                                    long q) {
  GradusBilinear<T> b;
  const T x = warp[2 * q], y = warp[2 * q + 1];
  b.inside = x > T(-1) && y > T(-1) && x < T(g.w) && y < T(g.h);
  for (int k = 0; k < 4; ++k) b.off[k] = -1, b.wt[k] = T(0);
  b.dx = T(0), b.dy = T(0);
  if (!b.inside) return b;
  const long fx = (long)gradus_floor(x), fy = (long)gradus_floor(y), cx = fx + 1, cy = fy + 1;
  b.dx = T(cx) - x, b.dy = T(cy) - y;
  b.wt[0] = b.dx * b.dy, b.wt[1] = (T(1) - b.dx) * (T(1) - b.dy), b.wt[2] = b.dx * (T(1) - b.dy),
  b.wt[3] = (T(1) - b.dx) * b.dy;
  const long xs[4] = {fx, cx, fx, cx}, ys[4] = {fy, cy, cy, fy};
  const long image = q / g.p;
  for (int k = 0; k < 4; ++k)
    if (xs[k] >= 0 && xs[k] < g.w && ys[k] >= 0 && ys[k] < g.h) b.off[k] = ((image * g.h + ys[k]) * g.w + xs[k]) * g.c;
  return b;
}

#define GRADUS_LIBRARY_SAMPLING(T, S)                                                                \
  /* out [b,p,c]: each channel of each point, its four terms summed in the CPU's order */            \
  extern "C" __global__ void gradus_resample_##S(const T* data, const T* warp, T* out,              \
                                                 gradus::backend::cuda::ResampleGeometry g) {       \
    GRADUS_FOR_EACH(i, g.b * g.p * g.c) {                                                            \
      const long ch = i % g.c, q = i / g.c;                                                          \
      const GradusBilinear<T> pt = gradus_bilinear(g, warp, q);                                     \
      out[i] = pt.inside ? pt.wt[0] * pt.value(data, 0, ch) + pt.wt[1] * pt.value(data, 1, ch) +     \
                               pt.wt[2] * pt.value(data, 2, ch) + pt.wt[3] * pt.value(data, 3, ch)   \
                         : T(0);                                                                     \
    }                                                                                                \
  }                                                                                                  \
  /* dwarp [b,p,2] = (or += with `add`) the point gradient, summed over the channels in order */    \
  extern "C" __global__ void gradus_resample_warp_grad_##S(const T* g, const T* data, const T* warp, \
                                                           T* dwarp,                                 \
                                                           gradus::backend::cuda::ResampleGeometry geo, \
                                                           int add) {                                \
    GRADUS_FOR_EACH(q, geo.b * geo.p) {                                                              \
      const GradusBilinear<T> pt = gradus_bilinear(geo, warp, q);                                    \
      T gx = T(0), gy = T(0);                                                                        \
      if (pt.inside)                                                                                 \
        for (long ch = 0; ch < geo.c; ++ch) {                                                        \
          const T v00 = pt.value(data, 0, ch), v11 = pt.value(data, 1, ch);                         \
          const T v01 = pt.value(data, 2, ch), v10 = pt.value(data, 3, ch);                         \
          const T gq = g[q * geo.c + ch];                                                            \
          gx += gq * (pt.dy * (v10 - v00) + (T(1) - pt.dy) * (v11 - v01));                           \
          gy += gq * (pt.dx * (v01 - v00) + (T(1) - pt.dx) * (v11 - v10));                           \
        }                                                                                            \
      if (add) {                                                                                     \
        dwarp[2 * q] += gx;                                                                          \
        dwarp[2 * q + 1] += gy;                                                                      \
      } else {                                                                                       \
        dwarp[2 * q] = gx;                                                                           \
        dwarp[2 * q + 1] = gy;                                                                       \
      }                                                                                              \
    }                                                                                                \
  }                                                                                                  \
  /* the image gradient's terms: contrib [b·p·4, c] = neighbour k's weight · g, rows [b·p·4] the    \
     neighbour's pixel (b·h·w for none: the scatter skips it) */                                     \
  extern "C" __global__ void gradus_resample_spread_##S(const T* g, const T* warp, T* contrib,       \
                                                        long long* rows,                             \
                                                        gradus::backend::cuda::ResampleGeometry geo) { \
    GRADUS_FOR_EACH(i, geo.b * geo.p * 4 * geo.c) {                                                  \
      const long ch = i % geo.c, k = (i / geo.c) % 4, q = i / (4 * geo.c);                           \
      const GradusBilinear<T> pt = gradus_bilinear(geo, warp, q);                                    \
      const bool hit = pt.inside && pt.off[k] >= 0;                                                  \
      contrib[i] = hit ? pt.wt[k] * g[q * geo.c + ch] : T(0);                                        \
      if (ch == 0) rows[q * 4 + k] = hit ? (long long)(pt.off[k] / geo.c) : (long long)(geo.b * geo.h * geo.w); \
    }                                                                                                \
  }

GRADUS_LIBRARY_SAMPLING(float, f)
GRADUS_LIBRARY_SAMPLING(double, d)
