// gradus/backend/cpu/pool.hpp — max and average pooling over NHWC windows on the CPU.
//
// Forward and backward run over the N*OH output rows in parallel, vectorised over channels.
// In the backward pass each chunk of output rows owns the input rows they read (whole images when
// windows overlap vertically), so the scatter never races.
#pragma once
#include "gradus/core/eigen.hpp"
#include <algorithm>
#include <cstdint>

#include "gradus/backend/cpu/conv.hpp"
#include "gradus/backend/cpu/parallel.hpp"
#include "gradus/backend/plans.hpp"

namespace gradus::backend::cpu {

template <class T>
using ChanMap = Eigen::Map<Eigen::Array<T, Eigen::Dynamic, 1>>;
template <class T>
using CChanMap = Eigen::Map<const Eigen::Array<T, Eigen::Dynamic, 1>>;

template <class T>
void pool2d_forward(const PoolPlan& p, const T* x, T* y, bool max) {
  const int64_t C = p.c, rows = p.n * p.oh;
  parallel_chunks(rows, 1, [&](int, int64_t r0, int64_t r1) {
    for (int64_t r = r0; r < r1; ++r) {
      const int64_t n = r / p.oh, oy = r % p.oh;
      const T* img = x + n * p.h * p.w * C;
      for (int64_t ox = 0; ox < p.ow; ++ox) {
        int64_t y0, y1, x0, x1;
        p.window(oy, ox, y0, y1, x0, x1);
        ChanMap<T> out(y + (r * p.ow + ox) * C, C);
        if (y1 <= y0 || x1 <= x0) {  // cannot happen with TF's padding rules; kept well-defined
          out.setZero();
          continue;
        }
        out = CChanMap<T>(img + (y0 * p.w + x0) * C, C);
        for (int64_t i = y0; i < y1; ++i)
          for (int64_t j = (i == y0 ? x0 + 1 : x0); j < x1; ++j) {
            const CChanMap<T> v(img + (i * p.w + j) * C, C);
            if (max)
              out = out.max(v);
            else
              out += v;
          }
        if (!max) out *= T(1) / T((y1 - y0) * (x1 - x0));
      }
    }
  }, parallel_threshold(rows, double(p.ow * C * p.kh * p.kw)));
}

/// dx (+)= the adjoint of the pool given its input x, output y and output adjoint g.
template <class T>
void pool2d_backward(const PoolPlan& p, const T* g, const T* x, const T* y, T* dx, bool add, bool max) {
  const int64_t C = p.c, rows = p.n * p.oh, row = p.w * C, image = p.h * row;
  // windows of different output rows read disjoint input rows unless they overlap vertically
  const bool disjoint = p.kh <= p.sh;
  parallel_chunks(rows, disjoint ? 1 : p.oh, [&](int, int64_t r0, int64_t r1) {
    Tensor<T> pending(Shape{max ? C : 0});  // gradient of each channel not yet handed out
    if (!add && !disjoint) std::fill(dx + (r0 / p.oh) * image, dx + (r1 / p.oh) * image, T(0));
    for (int64_t r = r0; r < r1; ++r) {
      const int64_t n = r / p.oh, oy = r % p.oh;
      const T* img = x + n * image;
      T* dimg = dx + n * image;
      if (!add && disjoint) {  // this output row owns input rows [lo, hi)
        const int64_t lo = oy == 0 ? 0 : std::clamp<int64_t>(oy * p.sh - p.ph, 0, p.h);
        const int64_t hi = oy == p.oh - 1 ? p.h : std::clamp<int64_t>((oy + 1) * p.sh - p.ph, lo, p.h);
        std::fill(dimg + lo * row, dimg + hi * row, T(0));
      }
      for (int64_t ox = 0; ox < p.ow; ++ox) {
        int64_t y0, y1, x0, x1;
        p.window(oy, ox, y0, y1, x0, x1);
        const int64_t o = (r * p.ow + ox) * C;
        if (max) {  // the first element equal to the max takes the whole gradient
          ChanMap<T> left(pending.data(), C);
          left = CChanMap<T>(g + o, C);
          const CChanMap<T> top(y + o, C);
          for (int64_t i = y0; i < y1; ++i)
            for (int64_t j = x0; j < x1; ++j) {
              const auto hit = CChanMap<T>(img + (i * p.w + j) * C, C) == top;
              ChanMap<T>(dimg + (i * p.w + j) * C, C) += hit.select(left, T(0));
              left = hit.select(T(0), left);
            }
        } else if (y1 > y0 && x1 > x0) {
          const auto share = CChanMap<T>(g + o, C) * (T(1) / T((y1 - y0) * (x1 - x0)));
          for (int64_t i = y0; i < y1; ++i)
            for (int64_t j = x0; j < x1; ++j) ChanMap<T>(dimg + (i * p.w + j) * C, C) += share;
        }
      }
    }
  }, parallel_threshold(rows, double(p.ow * C * p.kh * p.kw)));
}

}  // namespace gradus::backend::cpu
