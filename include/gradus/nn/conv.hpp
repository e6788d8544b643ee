// gradus/nn/conv.hpp — Conv2d, MaxPool2d, AvgPool2d and GlobalAvgPool (NHWC, as Keras).
#pragma once
#include <array>
#include <cstdint>

#include "gradus/nn/dense.hpp"
#include "gradus/ops/conv.hpp"
#include "gradus/ops/pool.hpp"
#include "gradus/ops/reduce.hpp"

namespace gradus::nn {
namespace detail {
/// A pooling layer's strides: `strides`, or `pool_size` when they are {0, 0} (Keras' None).
inline std::array<int64_t, 2> pool_strides(std::array<int64_t, 2> strides, std::array<int64_t, 2> pool_size) {
  return strides[0] == 0 && strides[1] == 0 ? pool_size : strides;
}
}  // namespace detail

/// Options of `Conv2d`; pairs are {height, width}. Empty initializers mean the defaults:
/// kernel He uniform for ReLU-like activations, else Glorot uniform (fans include the
/// receptive field); bias zeros.
struct Conv2dOptions {
  int64_t in = 0;                         ///< input channels (the last axis of the input)
  int64_t filters = 0;                    ///< output channels
  std::array<int64_t, 2> kernel_size{};   ///< required, e.g. {3, 3}
  std::array<int64_t, 2> strides{1, 1};
  Padding padding = Padding::valid;
  std::array<int64_t, 2> dilation{1, 1};
  Activation activation = linear;
  bool use_bias = true;
  init::Initializer kernel_initializer{};
  init::Initializer bias_initializer{};
  Regularizer kernel_regularizer{};
  Regularizer bias_regularizer{};
};

/// activation(conv2d(x, kernel) + bias) (tf.keras.layers.Conv2D): x [N, H, W, in] ->
/// [N, OH, OW, filters]; kernel [KH, KW, in, filters], bias [filters].
///   gd::nn::Conv2d<float> conv({.in = 1, .filters = 32, .kernel_size = {5, 5}, .activation = gd::nn::relu}, rng);
template <Real T = float>
class Conv2d : public Module<T> {
 public:
  Conv2d(const Conv2dOptions& o, Rng& rng)
      : in_(o.in), use_bias_(o.use_bias), activation_(o.activation),
        conv_{.strides = o.strides, .padding = o.padding, .dilations = o.dilation} {
    GRADUS_CHECK(value_error, o.in > 0 && o.filters > 0, "Conv2d: in and filters must be positive, got in ", o.in,
                 ", filters ", o.filters);
    GRADUS_CHECK(value_error, o.kernel_size[0] > 0 && o.kernel_size[1] > 0,
                 "Conv2d: kernel_size must be positive (set .kernel_size = {kh, kw}), got [", o.kernel_size[0], ",",
                 o.kernel_size[1], "]");
    GRADUS_CHECK(value_error, o.strides[0] > 0 && o.strides[1] > 0 && o.dilation[0] > 0 && o.dilation[1] > 0,
                 "Conv2d: strides and dilation must be positive, got strides [", o.strides[0], ",", o.strides[1],
                 "], dilation [", o.dilation[0], ",", o.dilation[1], "]");
    const init::Initializer fallback = detail::default_kernel_initializer(o.activation);
    kernel_ = this->register_parameter("kernel",
                                       detail::or_default(o.kernel_initializer, fallback)
                                           .template operator()<T>({o.kernel_size[0], o.kernel_size[1], o.in, o.filters}, rng),
                                       o.kernel_regularizer);
    if (o.use_bias)
      bias_ = this->register_parameter(
          "bias", o.bias_initializer ? o.bias_initializer.template operator()<T>({o.filters}, rng)
                                     : Tensor<T>::zeros({o.filters}),
          o.bias_regularizer);
    else
      bias_ = Var<T>::constant(Tensor<T>::zeros({o.filters}));
  }

  /// x [N, H, W, in] -> [N, OH, OW, filters], a Var. Without an activation the bias is added
  /// inside the convolution's output pass; with one, bias and activation run as one pass.
  template <Expression X>
  Var<T> forward(const X& x) {
    const Var<T> xv = detail::to_var(x);
    GRADUS_CHECK(shape_error, xv.rank() == 4, "Conv2d: expected input [N, H, W, ", in_, "], got ", xv.shape());
    detail::check_last_dim(xv.shape(), in_, "Conv2d", "in");
    if (activation_.kind == ActivationKind::linear)
      return use_bias_ ? gradus::conv2d(xv, kernel_, bias_, conv_) : gradus::conv2d(xv, kernel_, conv_);
    return detail::bias_activation(gradus::conv2d(xv, kernel_, conv_), bias_, activation_);
  }

  /// The kernel [KH, KW, in, filters].
  Var<T> kernel() const { return kernel_; }
  /// The bias [filters] (a constant of zeros when use_bias is false).
  Var<T> bias() const { return bias_; }

 private:
  int64_t in_;
  bool use_bias_;
  Activation activation_;
  gradus::Conv2dArgs conv_;
  Var<T> kernel_, bias_;
};

/// Max over windows (tf.keras.layers.MaxPool2D): x [N, H, W, C] -> [N, OH, OW, C]. Strides
/// {0, 0} (the default) mean strides = pool_size, as Keras.
///   gd::nn::MaxPool2d{.pool_size = {3, 3}, .strides = {1, 1}, .padding = gd::Padding::same}
struct MaxPool2d {
  std::array<int64_t, 2> pool_size{2, 2};
  std::array<int64_t, 2> strides{0, 0};
  Padding padding = Padding::valid;

  template <Expression X>
  auto forward(const X& x) const {
    return gradus::max_pool2d(x, {.ksize = pool_size, .strides = detail::pool_strides(strides, pool_size), .padding = padding});
  }
};

/// Mean over windows (tf.keras.layers.AveragePooling2D); `same` padding averages only real
/// elements. Strides {0, 0} mean strides = pool_size.
struct AvgPool2d {
  std::array<int64_t, 2> pool_size{2, 2};
  std::array<int64_t, 2> strides{0, 0};
  Padding padding = Padding::valid;

  template <Expression X>
  auto forward(const X& x) const {
    return gradus::avg_pool2d(x, {.ksize = pool_size, .strides = detail::pool_strides(strides, pool_size), .padding = padding});
  }
};

/// Mean over the spatial axes (tf.keras.layers.GlobalAveragePooling2D): x [N, H, W, C] ->
/// [N, C] ([N, 1, 1, C] with keepdims).
struct GlobalAvgPool {
  bool keepdims = false;

  template <Expression X>
  auto forward(const X& x) const {
    GRADUS_CHECK(shape_error, x.shape().rank() == 4, "GlobalAvgPool: expected input [N, H, W, C], got ", x.shape());
    return gradus::mean(x, {1, 2}, keepdims);
  }
};

}  // namespace gradus::nn
