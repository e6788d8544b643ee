// gradus/ops/conv.hpp — 2-D convolution (NHWC, TensorFlow semantics): options, shape checks,
// the tape node and the gradient rule. The kernels are backend::conv2d_forward/_backward
// (backend/cpu/conv.hpp: im2col + GEMM, tile by tile).
#pragma once
#include <algorithm>
#include <array>
#include <cstdint>

#include "gradus/core/compiled.hpp"
#include "gradus/autodiff/materialize.hpp"
#include "gradus/backend/backend.hpp"

namespace gradus {

/// How windows meet the border (TensorFlow): `valid` keeps only windows inside the input;
/// `same` pads so that out = ceil(in / stride) — zeros for conv2d, ignored by the pools.
enum class Padding { valid, same };

/// The arguments of the `conv2d` op: strides and dilations as {height, width} (tf.nn.conv2d's).
/// Not to be confused with `gd::nn::Conv2dOptions`, the options of the Conv2d layer (filters,
/// kernel size, activation, initializers), which builds a Conv2dArgs from its own.
struct Conv2dArgs {
  std::array<int64_t, 2> strides{1, 1};
  Padding padding = Padding::valid;
  std::array<int64_t, 2> dilations{1, 1};
};

/// The widest window a convolution or pooling takes along an axis, dilation included
/// ((kernel - 1) * dilation + 1): larger is a value_error, so that no window position overflows.
inline constexpr int64_t kMaxWindowSpan = int64_t(1) << 62;

namespace detail {

/// One spatial axis of a window op: output size and padding before the input (TF rules).
struct WindowAxis {
  int64_t out = 0, pad = 0;
};

/// The span (k - 1) * dilation + 1 must be at most kMaxWindowSpan (the plans check it); the
/// stride may be any positive int64.
inline WindowAxis window_axis(int64_t in, int64_t k, int64_t stride, int64_t dilation, Padding p) {
  const int64_t span = (k - 1) * dilation + 1;
  if (p == Padding::same) {
    const int64_t out = in / stride + (in % stride != 0);  // ceil(in / stride); in + stride - 1 may overflow
    const int64_t total = std::max<int64_t>((out - 1) * stride + span - in, 0);
    return {out, total / 2};
  }
  return {in >= span ? (in - span) / stride + 1 : 0, 0};
}

inline const char* padding_name(Padding p) { return p == Padding::same ? "same" : "valid"; }

using backend::ConvPlan;

ConvPlan plan_conv2d(const Shape& x, const Shape& w, const Conv2dArgs& o);

template <class XE, class WE, class... BE>
auto conv2d_impl(const XE& x_expr, const WE& w_expr, const Conv2dArgs& opts, const BE&... b_expr) {
  gradus::detail::OpScope prof;
  using T = value_type_t<XE>;
  auto x = materialize(x_expr);
  auto w = materialize(w_expr);
  const Tensor<T>& xv = value_of(x);
  const Tensor<T>& wv = value_of(w);
  const ConvPlan p = plan_conv2d(xv.shape(), wv.shape(), opts);
  const Device dev = xv.device();
  GRADUS_CHECK(device_error, wv.device() == dev, "conv2d: operands on ", dev, " and ", wv.device(),
               "; move them to one device with .to(device)");
  Tensor<T> out = Tensor<T>::empty(p.out_shape(), dev);
  // settings for a graph rebuilt from the ops (gd::onnx): strides, padding (0 valid, 1 same), dilations
  set_op_attrs({opts.strides[0], opts.strides[1], int64_t(opts.padding), opts.dilations[0], opts.dilations[1]});
  if constexpr (sizeof...(BE) == 0) {
    backend::conv2d_forward<T>(p, xv.device_data(), wv.device_data(), nullptr, out.device_data(), dev);
    return make_result("conv2d", std::move(out), [p](const Tensor<T>& g, const Tensor<T>&, const auto& x, const auto& w) {
      bool ax = false, aw = false;
      T* dx = needs_grad(x) ? adjoint_buffer(x, &ax) : nullptr;
      T* dw = needs_grad(w) ? adjoint_buffer(w, &aw) : nullptr;
      backend::conv2d_backward<T>(p, g.device_data(), value_of(x).device_data(), value_of(w).device_data(), dx, ax,
                                  dw, aw, nullptr, false, g.device());
    }, x, w);
  } else {
    auto b = materialize(b_expr...);
    const Tensor<T>& bv = value_of(b);
    GRADUS_CHECK(shape_error, bv.rank() == 1 && bv.size() == p.f, "conv2d: bias must have shape [", p.f,
                 "] (the filter's out_channels), got ", bv.shape(), " for filter ", wv.shape());
    GRADUS_CHECK(device_error, bv.device() == dev, "conv2d: bias on ", bv.device(), ", input on ", dev);
    backend::conv2d_forward<T>(p, xv.device_data(), wv.device_data(), bv.device_data(), out.device_data(), dev);
    return make_result("conv2d", std::move(out),
                       [p](const Tensor<T>& g, const Tensor<T>&, const auto& x, const auto& w, const auto& b) {
      bool ax = false, aw = false, ab = false;
      T* dx = needs_grad(x) ? adjoint_buffer(x, &ax) : nullptr;
      T* dw = needs_grad(w) ? adjoint_buffer(w, &aw) : nullptr;
      T* db = needs_grad(b) ? adjoint_buffer(b, &ab) : nullptr;
      backend::conv2d_backward<T>(p, g.device_data(), value_of(x).device_data(), value_of(w).device_data(), dx, ax,
                                  dw, aw, db, ab, g.device());
    }, x, w, b);
  }
}

/// max(conv2d(x, w, opts) + b, 0) as one node, for a ReLU convolution layer: bias and ReLU run
/// in the convolution's output pass, and the backward masks the output adjoint tile by tile
/// inside the convolution's own backward pass (backend::conv2d_relu_forward/_backward), so
/// neither direction makes an extra pass over the output. On a backend that has these kernels
/// (`backend::implements<backend::kernel::Conv2dRelu, T>(device)`; the CPU's).
template <class XE, class WE, class BE>
auto conv2d_bias_relu(const XE& x_expr, const WE& w_expr, const BE& b_expr, const Conv2dArgs& opts) {
  gradus::detail::OpScope prof;
  using T = value_type_t<XE>;
  auto x = materialize(x_expr);
  auto w = materialize(w_expr);
  auto b = materialize(b_expr);
  const Tensor<T>& xv = value_of(x);
  const Tensor<T>& wv = value_of(w);
  const Tensor<T>& bv = value_of(b);
  const ConvPlan p = plan_conv2d(xv.shape(), wv.shape(), opts);
  GRADUS_CHECK(shape_error, bv.rank() == 1 && bv.size() == p.f, "conv2d: bias must have shape [", p.f,
               "] (the filter's out_channels), got ", bv.shape(), " for filter ", wv.shape());
  const Device dev = xv.device();
  GRADUS_CHECK(device_error, wv.device() == dev && bv.device() == dev, "conv2d_bias_relu: operands on ", dev, ", ",
               wv.device(), " and ", bv.device(), "; move them to one device with .to(device)");
  Tensor<T> out = Tensor<T>::empty(p.out_shape(), dev);
  backend::conv2d_relu_forward<T>(p, xv.device_data(), wv.device_data(), bv.device_data(), out.device_data(), dev);
  set_op_attrs({opts.strides[0], opts.strides[1], int64_t(opts.padding), opts.dilations[0], opts.dilations[1]});
  return make_result("conv2d_bias_relu", std::move(out),
                     [p](const Tensor<T>& g, const Tensor<T>& y, const auto& x, const auto& w, const auto& b) {
    bool ax = false, aw = false, ab = false;
    T* dx = needs_grad(x) ? adjoint_buffer(x, &ax) : nullptr;
    T* dw = needs_grad(w) ? adjoint_buffer(w, &aw) : nullptr;
    T* db = needs_grad(b) ? adjoint_buffer(b, &ab) : nullptr;
    backend::conv2d_relu_backward<T>(p, g.device_data(), y.device_data(), value_of(x).device_data(),
                                     value_of(w).device_data(), dx, ax, dw, aw, db, ab, g.device());
  }, x, w, b);
}

}  // namespace detail

/// 2-D convolution (cross-correlation, as tf.nn.conv2d) of input [N,H,W,C] with filter
/// [KH,KW,C,F] -> [N,OH,OW,F]; differentiable in both. On the CPU: multi-threaded im2col + GEMM.
///   auto y = gd::conv2d(x, w, {.strides = {2, 2}, .padding = gd::Padding::same});
template <Expression X, Expression W>
auto conv2d(const X& input, const W& filter, const Conv2dArgs& opts = {}) {
  static_assert(detail::same_element_v<X, W>, "YOU_MIXED_ELEMENT_TYPES_IN_ONE_EXPRESSION: conv2d — cast one operand first (gd::cast<T>(x))");
  static_assert(Real<value_type_t<X>>, "THE_ELEMENT_TYPE_MUST_BE_FLOAT_OR_DOUBLE: conv2d");
  return detail::conv2d_impl(input, filter, opts);
}
/// conv2d plus a per-channel bias [F], added in the same output pass.
///   auto y = gd::relu(gd::conv2d(x, w, b, {.padding = gd::Padding::same}));
template <Expression X, Expression W, Expression B>
auto conv2d(const X& input, const W& filter, const B& bias, const Conv2dArgs& opts = {}) {
  static_assert(detail::same_element_v<X, W> && detail::same_element_v<X, B>,
                "YOU_MIXED_ELEMENT_TYPES_IN_ONE_EXPRESSION: conv2d — cast one operand first (gd::cast<T>(x))");
  static_assert(Real<value_type_t<X>>, "THE_ELEMENT_TYPE_MUST_BE_FLOAT_OR_DOUBLE: conv2d");
  return detail::conv2d_impl(input, filter, opts, bias);
}

}  // namespace gradus

#if GRADUS_DEFINE_COMPILED  // libgradus holds these with GRADUS_COMPILED (core/compiled.hpp)
namespace gradus::detail {
GRADUS_INLINE ConvPlan plan_conv2d(const Shape& x, const Shape& w, const Conv2dArgs& o) {
  GRADUS_CHECK(shape_error, x.rank() == 4, "conv2d: input must have rank 4 [N,H,W,C], got ", x);
  GRADUS_CHECK(shape_error, w.rank() == 4, "conv2d: filter must have rank 4 [KH,KW,C,F], got ", w);
  GRADUS_CHECK(shape_error, x[3] == w[2], "conv2d: input channels ", x[3], " differ from filter in_channels ", w[2],
               ": ", x, " vs ", w);
  GRADUS_CHECK(shape_error, w[0] > 0 && w[1] > 0, "conv2d: filter window must be non-empty, got ", w);
  GRADUS_CHECK(value_error, o.strides[0] > 0 && o.strides[1] > 0, "conv2d: strides must be positive, got [",
               o.strides[0], ",", o.strides[1], "]");
  GRADUS_CHECK(value_error, o.dilations[0] > 0 && o.dilations[1] > 0, "conv2d: dilations must be positive, got [",
               o.dilations[0], ",", o.dilations[1], "]");
  for (int a = 0; a < 2; ++a)
    GRADUS_CHECK(value_error, w[a] - 1 <= (kMaxWindowSpan - 1) / o.dilations[size_t(a)], "conv2d: the dilated window ",
                 "(", w[a], " - 1) x dilation ", o.dilations[size_t(a)], " + 1 exceeds ", kMaxWindowSpan,
                 " (gd::kMaxWindowSpan) along axis ", a + 1);
  ConvPlan p{x[0], x[1], x[2], x[3], w[0], w[1], w[3], 0, 0, o.strides[0], o.strides[1], o.dilations[0],
             o.dilations[1], 0, 0};
  if (o.padding == Padding::valid) {
    const int64_t eh = (p.kh - 1) * p.dh + 1, ew = (p.kw - 1) * p.dw + 1;
    GRADUS_CHECK(shape_error, eh <= p.h && ew <= p.w, "conv2d: filter window ", eh, "x", ew,
                 " (dilated) is larger than the input ", p.h, "x", p.w, " with valid padding: ", x, " vs ", w);
  }
  const WindowAxis ah = window_axis(p.h, p.kh, p.sh, p.dh, o.padding);
  const WindowAxis aw = window_axis(p.w, p.kw, p.sw, p.dw, o.padding);
  p.oh = ah.out, p.ph = ah.pad, p.ow = aw.out, p.pw = aw.pad;
  return p;
}
}  // namespace gradus::detail
#endif  // GRADUS_DEFINE_COMPILED
