// gradus/backend/cpu/pool.hpp — max and average pooling over NHWC windows on the CPU.
//
// Forward and backward run over the N*OH output rows in parallel, vectorised over channels;
// 2x2 max pooling with stride 2 and no padding (LeNet's) has one-pass kernels of its own.
// In the backward pass each chunk of output rows owns the input rows they read (whole images when
// windows overlap vertically), so the scatter never races.
#pragma once
#include "gradus/core/eigen.hpp"
#include <algorithm>
#include <cstdint>

#include "gradus/backend/cpu/conv.hpp"
#include "gradus/backend/cpu/isa.hpp"
#include "gradus/backend/cpu/vecmath.hpp"
#include "gradus/backend/cpu/parallel.hpp"
#include "gradus/backend/plans.hpp"

GRADUS_SIMD_HINTS_BEGIN
namespace gradus::backend::cpu {

template <class T>
using ChanMap = Eigen::Map<Eigen::Array<T, Eigen::Dynamic, 1>>;
template <class T>
using CChanMap = Eigen::Map<const Eigen::Array<T, Eigen::Dynamic, 1>>;

/// Whether `p` is the common 2x2, stride-2 window without padding, which max_pool2x2_* run in
/// one pass over plain loops over the channels.
inline bool is_pool2x2(const PoolPlan& p) {
  return p.kh == 2 && p.kw == 2 && p.sh == 2 && p.sw == 2 && p.ph == 0 && p.pw == 0 && 2 * p.oh <= p.h &&
         2 * p.ow <= p.w;
}

/// y[c] = the max of t[c], t[C + c], b[c], b[C + c] for c < C, in std::max's order (as the
/// general kernel's).
template <class T>
inline void max_pool2x2_max(const T* __restrict t, const T* __restrict b, T* __restrict y, int64_t C) {
  GRADUS_SIMD
  for (int64_t c = 0; c < C; ++c) y[c] = std::max(std::max(std::max(t[c], t[C + c]), b[c]), b[C + c]);
}

/// Max pooling over 2x2 windows with stride 2, no padding.
template <class T>
void max_pool2x2_forward(const PoolPlan& p, const T* x, T* y) {
  const int64_t C = p.c, rows = p.n * p.oh, row = p.w * C;
  parallel_chunks(rows, 1, [&](int, int64_t r0, int64_t r1) {
    with_isa([&] {
      for (int64_t r = r0; r < r1; ++r) {
        const T* top = x + ((r / p.oh) * p.h + 2 * (r % p.oh)) * row;
        const T* bottom = top + row;
        T* out = y + r * p.ow * C;
        for (int64_t ox = 0; ox < p.ow; ++ox, top += 2 * C, bottom += 2 * C, out += C)
          max_pool2x2_max(top, bottom, out, C);
      }
    });
  }, parallel_threshold(rows, double(p.ow * C * 4)));
}

/// One 2x2 window's adjoint over C channels: the gradient g goes to the first of t[c], t[C + c],
/// b[c], b[C + c] equal to y[c] (rows t and b of the input; dt and db the same rows of dx).
template <bool Add, class T>
inline void max_pool2x2_window(const T* __restrict t, const T* __restrict b, const T* __restrict y,
                               const T* __restrict g, T* __restrict dt, T* __restrict db, int64_t C) {
  GRADUS_SIMD
  for (int64_t c = 0; c < C; ++c) {
    const T m = y[c];
    T left = g[c];
    const T v0 = t[c] == m ? left : T(0);
    left = t[c] == m ? T(0) : left;
    const T v1 = t[C + c] == m ? left : T(0);
    left = t[C + c] == m ? T(0) : left;
    const T v2 = b[c] == m ? left : T(0);
    left = b[c] == m ? T(0) : left;
    const T v3 = b[C + c] == m ? left : T(0);
    if constexpr (Add) {
      dt[c] += v0, dt[C + c] += v1, db[c] += v2, db[C + c] += v3;
    } else {
      dt[c] = v0, dt[C + c] = v1, db[c] = v2, db[C + c] = v3;
    }
  }
}

/// dx (+)= the adjoint of max_pool2x2_forward: each window's gradient goes to its first element
/// (row-major) equal to the output; every element of dx is written once.
template <class T>
void max_pool2x2_backward(const PoolPlan& p, const T* g, const T* x, const T* y, T* dx, bool add) {
  const int64_t C = p.c, rows = p.n * p.oh, row = p.w * C;
  parallel_chunks(rows, 1, [&](int, int64_t r0, int64_t r1) {
    with_isa([&] {
      for (int64_t r = r0; r < r1; ++r) {
        const int64_t n = r / p.oh, oy = r % p.oh, at = (n * p.h + 2 * oy) * row;
        for (int64_t ox = 0; ox < p.ow; ++ox) {
          const int64_t i = at + 2 * ox * C, o = (r * p.ow + ox) * C;
          if (add)
            max_pool2x2_window<true>(x + i, x + i + row, y + o, g + o, dx + i, dx + i + row, C);
          else
            max_pool2x2_window<false>(x + i, x + i + row, y + o, g + o, dx + i, dx + i + row, C);
        }
        if (!add) {  // columns no window reads; the rows below the last window row
          for (const int64_t iy : {2 * oy, 2 * oy + 1})
            std::fill(dx + (n * p.h + iy) * row + 2 * p.ow * C, dx + (n * p.h + iy + 1) * row, T(0));
          if (oy == p.oh - 1) std::fill(dx + (n * p.h + 2 * p.oh) * row, dx + (n + 1) * p.h * row, T(0));
        }
      }
    });
  }, parallel_threshold(rows, double(p.ow * C * 4)));
}

template <class T>
void pool2d_forward(const PoolPlan& p, const T* x, T* y, bool max) {
  if (max && is_pool2x2(p)) return max_pool2x2_forward(p, x, y);
  const int64_t C = p.c, rows = p.n * p.oh;
  parallel_chunks(rows, 1, [&](int, int64_t r0, int64_t r1) {
    with_isa([&] {
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
    });
  }, parallel_threshold(rows, double(p.ow * C * p.kh * p.kw)));
}

/// dx (+)= the adjoint of the pool given its input x, output y and output adjoint g.
template <class T>
void pool2d_backward(const PoolPlan& p, const T* g, const T* x, const T* y, T* dx, bool add, bool max) {
  if (max && is_pool2x2(p)) return max_pool2x2_backward(p, g, x, y, dx, add);
  const int64_t C = p.c, rows = p.n * p.oh, row = p.w * C, image = p.h * row;
  // windows of different output rows read disjoint input rows unless they overlap vertically
  const bool disjoint = p.kh <= p.sh;
  parallel_chunks(rows, disjoint ? 1 : p.oh, [&](int, int64_t r0, int64_t r1) {
    // made outside with_isa, whose copies inline everything they call
    Tensor<T> pending(Shape{max ? C : 0});  // gradient of each channel not yet handed out
    with_isa([&] {
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
    });
  }, parallel_threshold(rows, double(p.ow * C * p.kh * p.kw)));
}

}  // namespace gradus::backend::cpu
GRADUS_SIMD_HINTS_END
