// gradus/ops/pool.hpp — max and average pooling over NHWC windows (TensorFlow semantics).
//
// The max-pool gradient goes to the first maximal element of each window (row-major window
// order), as in TF and cuDNN; `same` average pooling divides by the number of real (unpadded)
// elements. Kernels: backend::pool2d_forward/_backward (backend/cpu/pool.hpp).
#pragma once
#include <algorithm>
#include <array>
#include <cstdint>

#include "gradus/core/compiled.hpp"
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

using backend::PoolPlan;

PoolPlan plan_pool2d(const Shape& x, const Pool2dOptions& o, const char* op);

template <class E>
auto pool2d_impl(const E& e, const Pool2dOptions& opts, bool max) {
  gradus::detail::OpScope prof;
  using T = value_type_t<E>;
  const char* op = max ? "max_pool2d" : "avg_pool2d";
  auto x = materialize(e);
  const Tensor<T>& xv = value_of(x);
  const PoolPlan p = plan_pool2d(xv.shape(), opts, op);
  const Device dev = xv.device();
  Tensor<T> out = Tensor<T>::empty(p.out_shape(), dev);
  backend::pool2d_forward<T>(p, xv.device_data(), out.device_data(), max, dev);
  // settings for a graph rebuilt from the ops (gd::onnx): window, strides, padding (0 valid, 1 same)
  set_op_attrs({opts.ksize[0], opts.ksize[1], opts.strides[0], opts.strides[1], int64_t(opts.padding)});
  return make_result(op, std::move(out), [p, max](const Tensor<T>& g, const Tensor<T>& y, const auto& x) {
    if (!needs_grad(x)) return;
    bool add = false;
    T* dx = adjoint_buffer(x, &add);
    backend::pool2d_backward<T>(p, g.device_data(), value_of(x).device_data(), y.device_data(), dx, add, max,
                                y.device());
  }, x);
}

}  // namespace detail

/// Max over [KH,KW] windows of x [N,H,W,C] -> [N,OH,OW,C] (tf.nn.max_pool2d); the gradient
/// goes to the first maximal element of each window.
///   auto y = gd::max_pool2d(x, {.ksize = {2, 2}, .strides = {2, 2}});
template <Expression E>
auto max_pool2d(const E& x, const Pool2dOptions& opts = {}) {
  static_assert(Real<value_type_t<E>>, "THE_ELEMENT_TYPE_MUST_BE_FLOAT_OR_DOUBLE: max_pool2d");
  return detail::pool2d_impl(x, opts, true);
}
/// Mean over [KH,KW] windows of x [N,H,W,C] -> [N,OH,OW,C] (tf.nn.avg_pool2d); with `same`
/// padding each window averages only its real elements.
///   auto y = gd::avg_pool2d(x, {.ksize = {3, 3}, .strides = {1, 1}, .padding = gd::Padding::same});
template <Expression E>
auto avg_pool2d(const E& x, const Pool2dOptions& opts = {}) {
  static_assert(Real<value_type_t<E>>, "THE_ELEMENT_TYPE_MUST_BE_FLOAT_OR_DOUBLE: avg_pool2d");
  return detail::pool2d_impl(x, opts, false);
}

}  // namespace gradus

#if GRADUS_DEFINE_COMPILED  // libgradus holds these with GRADUS_COMPILED (core/compiled.hpp)
namespace gradus::detail {
GRADUS_INLINE PoolPlan plan_pool2d(const Shape& x, const Pool2dOptions& o, const char* op) {
  GRADUS_CHECK(shape_error, x.rank() == 4, op, ": input must have rank 4 [N,H,W,C], got ", x);
  GRADUS_CHECK(value_error, o.ksize[0] > 0 && o.ksize[1] > 0, op, ": ksize must be positive, got [", o.ksize[0], ",",
               o.ksize[1], "]");
  GRADUS_CHECK(value_error, o.strides[0] > 0 && o.strides[1] > 0, op, ": strides must be positive, got [",
               o.strides[0], ",", o.strides[1], "]");
  GRADUS_CHECK(value_error, o.ksize[0] <= kMaxWindowSpan && o.ksize[1] <= kMaxWindowSpan, op, ": ksize [", o.ksize[0],
               ",", o.ksize[1], "] exceeds ", kMaxWindowSpan, " (gd::kMaxWindowSpan)");
  if (o.padding == Padding::valid)
    GRADUS_CHECK(shape_error, o.ksize[0] <= x[1] && o.ksize[1] <= x[2], op, ": window ", o.ksize[0], "x", o.ksize[1],
                 " is larger than the input ", x[1], "x", x[2], " with valid padding: ", x);
  const WindowAxis ah = window_axis(x[1], o.ksize[0], o.strides[0], 1, o.padding);
  const WindowAxis aw = window_axis(x[2], o.ksize[1], o.strides[1], 1, o.padding);
  return {x[0], x[1], x[2], x[3], o.ksize[0], o.ksize[1], o.strides[0], o.strides[1], ah.out, aw.out, ah.pad, aw.pad};
}
}  // namespace gradus::detail
#endif  // GRADUS_DEFINE_COMPILED
