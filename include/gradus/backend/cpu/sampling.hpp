// gradus/backend/cpu/sampling.hpp — bilinear sampling of images at arbitrary points (the loops
// behind gd::resampler), on the CPU thread pool.
//
// The convention is TensorFlow's resampler's: a point (x, y) in pixel units (x the column, y the
// row; pixel (i, j) sits at integer coordinates) reads its four neighbours floor(x) and
// floor(x) + 1 by floor(y) and floor(y) + 1, with weights dx = floor(x) + 1 - x and dy likewise:
//
//   out = dx·dy·I(fx, fy) + (1-dx)(1-dy)·I(cx, cy) + dx(1-dy)·I(fx, cy) + (1-dx)dy·I(cx, fy)
//
// A neighbour outside the image reads 0, so the image is padded with zeros and the output fades
// to 0 over the pixel beyond each border; a point outside (-1, w) x (-1, h) (or not a number)
// gives 0 and no gradient. The terms are summed in that order, by this loop and by the GPU's.
//
// The gradients: with respect to the point, d out/dx = dy (I(cx, fy) - I(fx, fy)) +
// (1 - dy)(I(cx, cy) - I(fx, cy)) and d out/dy = dx (I(fx, cy) - I(fx, fy)) + (1 - dx)(I(cx, cy) -
// I(cx, fy)), summed over channels with the output's adjoint; with respect to the image, each
// neighbour gets its weight times the adjoint, added point after point in order (each batch
// element's image is one task of the pool, so the sums do not depend on the thread count).
#pragma once
#include <algorithm>
#include <cmath>
#include <cstdint>

#include "gradus/backend/cpu/parallel.hpp"
#include "gradus/backend/plans.hpp"

namespace gradus::backend::cpu {

/// The four neighbours of one sampling point and their weights (TensorFlow's resampler).
template <class T>
struct BilinearPoint {
  const T* at[4] = {};  // the neighbours (fx, fy), (cx, cy), (fx, cy), (cx, fy); null: outside the image
  int64_t offset[4] = {-1, -1, -1, -1};  // their element offsets in the batch element's image
  T weight[4] = {};
  T dx = 0, dy = 0;
  bool inside = false;  // the point is in (-1, w) x (-1, h): false means an output of 0

  BilinearPoint(const T* image, const ResamplePlan& p, T x, T y) {
    if (!(x > T(-1) && y > T(-1) && x < T(p.w) && y < T(p.h))) return;
    inside = true;
    const int64_t fx = int64_t(std::floor(x)), fy = int64_t(std::floor(y)), cx = fx + 1, cy = fy + 1;
    dx = T(cx) - x, dy = T(cy) - y;
    const int64_t xs[4] = {fx, cx, fx, cx}, ys[4] = {fy, cy, cy, fy};
    weight[0] = dx * dy, weight[1] = (T(1) - dx) * (T(1) - dy), weight[2] = dx * (T(1) - dy),
    weight[3] = (T(1) - dx) * dy;
    for (int k = 0; k < 4; ++k)
      if (xs[k] >= 0 && xs[k] < p.w && ys[k] >= 0 && ys[k] < p.h) {
        offset[k] = (ys[k] * p.w + xs[k]) * p.c;
        at[k] = image + offset[k];
      }
  }
  /// Neighbour k's channel ch (0 outside the image).
  T value(int k, int64_t ch) const { return at[k] ? at[k][ch] : T(0); }
};

/// out [b, p, c] = data [b, h, w, c] sampled at warp [b, p, 2] (see the file comment).
template <class T>
void resample_forward(const ResamplePlan& p, const T* data, const T* warp, T* out) {
  const int64_t image = p.h * p.w * p.c;
  parallel_chunks(p.b * p.p, 1, [&](int, int64_t q0, int64_t q1) {
    for (int64_t q = q0; q < q1; ++q) {
      const BilinearPoint<T> pt(data + (q / p.p) * image, p, warp[2 * q], warp[2 * q + 1]);
      T* o = out + q * p.c;
      if (!pt.inside) {
        std::fill_n(o, p.c, T(0));
        continue;
      }
      for (int64_t ch = 0; ch < p.c; ++ch)
        o[ch] = pt.weight[0] * pt.value(0, ch) + pt.weight[1] * pt.value(1, ch) + pt.weight[2] * pt.value(2, ch) +
                pt.weight[3] * pt.value(3, ch);
    }
  }, std::max<int64_t>(1, kParallelThreshold / std::max<int64_t>(4 * p.c, 1)));
}

/// The gradients of resample_forward from g [b, p, c]: ddata [b, h, w, c] and dwarp [b, p, 2]
/// (null: not wanted), written, or added with `add_data` / `add_warp`.
template <class T>
void resample_backward(const ResamplePlan& p, const T* g, const T* data, const T* warp, T* ddata, bool add_data,
                       T* dwarp, bool add_warp) {
  const int64_t image = p.h * p.w * p.c;
  if (dwarp)
    parallel_chunks(p.b * p.p, 1, [&](int, int64_t q0, int64_t q1) {
      for (int64_t q = q0; q < q1; ++q) {
        const BilinearPoint<T> pt(data + (q / p.p) * image, p, warp[2 * q], warp[2 * q + 1]);
        T gx = 0, gy = 0;
        if (pt.inside) {
          const T* gq = g + q * p.c;
          for (int64_t ch = 0; ch < p.c; ++ch) {
            const T v00 = pt.value(0, ch), v11 = pt.value(1, ch), v01 = pt.value(2, ch), v10 = pt.value(3, ch);
            gx += gq[ch] * (pt.dy * (v10 - v00) + (T(1) - pt.dy) * (v11 - v01));
            gy += gq[ch] * (pt.dx * (v01 - v00) + (T(1) - pt.dx) * (v11 - v10));
          }
        }
        if (add_warp) {
          dwarp[2 * q] += gx, dwarp[2 * q + 1] += gy;
        } else {
          dwarp[2 * q] = gx, dwarp[2 * q + 1] = gy;
        }
      }
    }, std::max<int64_t>(1, kParallelThreshold / std::max<int64_t>(8 * p.c, 1)));
  if (!ddata) return;
  // one batch element's image per task: its points add into it in order
  parallel_chunks(p.b, 1, [&](int, int64_t b0, int64_t b1) {
    for (int64_t b = b0; b < b1; ++b) {
      T* dimg = ddata + b * image;
      if (!add_data) std::fill_n(dimg, image, T(0));
      for (int64_t j = 0; j < p.p; ++j) {
        const int64_t q = b * p.p + j;
        const BilinearPoint<T> pt(data + b * image, p, warp[2 * q], warp[2 * q + 1]);
        if (!pt.inside) continue;
        const T* gq = g + q * p.c;
        for (int k = 0; k < 4; ++k) {
          if (!pt.at[k]) continue;
          T* d = dimg + pt.offset[k];
          const T wk = pt.weight[k];
          for (int64_t ch = 0; ch < p.c; ++ch) d[ch] += wk * gq[ch];
        }
      }
    }
  }, std::max<int64_t>(1, kParallelThreshold / std::max<int64_t>(4 * p.p * p.c, 1)));
}

}  // namespace gradus::backend::cpu
