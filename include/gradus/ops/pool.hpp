// gradus/ops/pool.hpp — max and average pooling over NHWC windows (TensorFlow semantics).
//
// Forward and backward run over the N*OH output rows in parallel, vectorised over channels.
// The max-pool gradient goes to the first maximal element of each window (row-major window
// order), as in TF and cuDNN; `same` average pooling divides by the number of real (unpadded)
// elements. In the backward pass each thread owns the input rows its output rows read (whole
// images when windows overlap vertically), so the scatter never races.
#pragma once
#include <algorithm>
#include <array>
#include <cstdint>

#include "gradus/ops/conv.hpp"

namespace gradus {

/// Options of `max_pool2d` / `avg_pool2d`: window and strides as {height, width}.
/// The strides do not follow `ksize`: `{.ksize = {3, 3}}` keeps stride 2 (overlapping windows).
struct Pool2dOptions {
  std::array<int64_t, 2> ksize{2, 2};
  std::array<int64_t, 2> strides{2, 2};
  Padding padding = Padding::valid;
};

namespace detail {

struct PoolPlan {
  int64_t n, h, w, c, kh, kw, sh, sw, oh, ow, ph, pw;
  Shape out_shape() const { return Shape{n, oh, ow, c}; }
  /// The clipped window of output (oy, ox): input rows [y0, y1), columns [x0, x1).
  void window(int64_t oy, int64_t ox, int64_t& y0, int64_t& y1, int64_t& x0, int64_t& x1) const {
    const int64_t ys = oy * sh - ph, xs = ox * sw - pw;
    y0 = std::max<int64_t>(ys, 0), y1 = std::min(ys + kh, h);
    x0 = std::max<int64_t>(xs, 0), x1 = std::min(xs + kw, w);
  }
};

inline PoolPlan plan_pool2d(const Shape& x, const Pool2dOptions& o, const char* op) {
  GRADUS_CHECK(shape_error, x.rank() == 4, op, ": input must have rank 4 [N,H,W,C], got ", x);
  GRADUS_CHECK(value_error, o.ksize[0] > 0 && o.ksize[1] > 0, op, ": ksize must be positive, got [", o.ksize[0], ",",
               o.ksize[1], "]");
  GRADUS_CHECK(value_error, o.strides[0] > 0 && o.strides[1] > 0, op, ": strides must be positive, got [",
               o.strides[0], ",", o.strides[1], "]");
  if (o.padding == Padding::valid)
    GRADUS_CHECK(shape_error, o.ksize[0] <= x[1] && o.ksize[1] <= x[2], op, ": window ", o.ksize[0], "x", o.ksize[1],
                 " is larger than the input ", x[1], "x", x[2], " with valid padding: ", x);
  const WindowAxis ah = window_axis(x[1], o.ksize[0], o.strides[0], 1, o.padding);
  const WindowAxis aw = window_axis(x[2], o.ksize[1], o.strides[1], 1, o.padding);
  return {x[0], x[1], x[2], x[3], o.ksize[0], o.ksize[1], o.strides[0], o.strides[1], ah.out, aw.out, ah.pad, aw.pad};
}

template <class T>
using ChanMap = Eigen::Map<Eigen::Array<T, Eigen::Dynamic, 1>>;
template <class T>
using CChanMap = Eigen::Map<const Eigen::Array<T, Eigen::Dynamic, 1>>;

template <class T>
void pool2d_forward(const PoolPlan& p, const T* x, T* y, bool max) {
  const int64_t C = p.c, rows = p.n * p.oh;
  cpu::parallel_chunks(rows, 1, [&](int, int64_t r0, int64_t r1) {
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
  cpu::parallel_chunks(rows, disjoint ? 1 : p.oh, [&](int, int64_t r0, int64_t r1) {
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

template <class E>
auto pool2d_impl(const E& e, const Pool2dOptions& opts, bool max) {
  using T = value_type_t<E>;
  const char* op = max ? "max_pool2d" : "avg_pool2d";
  auto x = materialize(e);
  const Tensor<T>& xv = value_of(x);
  const PoolPlan p = plan_pool2d(xv.shape(), opts, op);
  Tensor<T> out(p.out_shape());
  pool2d_forward<T>(p, xv.data(), out.data(), max);
  return make_result(op, std::move(out), [p, max](const Tensor<T>& g, const Tensor<T>& y, const auto& x) {
    if (!needs_grad(x)) return;
    bool add = false;
    T* dx = adjoint_buffer(x, &add);
    pool2d_backward<T>(p, g.data(), value_of(x).data(), y.data(), dx, add, max);
  }, x);
}

}  // namespace detail

/// Max over [KH,KW] windows of x [N,H,W,C] -> [N,OH,OW,C] (tf.nn.max_pool2d); the gradient
/// goes to the first maximal element of each window.
///   auto y = gd::max_pool2d(x, {.ksize = {2, 2}, .strides = {2, 2}});
template <Expression E>
auto max_pool2d(const E& x, const Pool2dOptions& opts = {}) {
  static_assert(Real<value_type_t<E>>, "max_pool2d: element type must be float or double");
  return detail::pool2d_impl(x, opts, true);
}
/// Mean over [KH,KW] windows of x [N,H,W,C] -> [N,OH,OW,C] (tf.nn.avg_pool2d); with `same`
/// padding each window averages only its real elements.
///   auto y = gd::avg_pool2d(x, {.ksize = {3, 3}, .strides = {1, 1}, .padding = gd::Padding::same});
template <Expression E>
auto avg_pool2d(const E& x, const Pool2dOptions& opts = {}) {
  static_assert(Real<value_type_t<E>>, "avg_pool2d: element type must be float or double");
  return detail::pool2d_impl(x, opts, false);
}

}  // namespace gradus
