// gradus/nn/conv.hpp — Conv2d, MaxPool2d, AvgPool2d and GlobalAvgPool (NHWC, as Keras).
#pragma once
#include <array>
#include <cstdint>

#include "gradus/core/compiled.hpp"
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
  int64_t in = 0;                         ///< input channels (the last axis of the input); 0: from the first input
  int64_t filters = 0;                    ///< output channels
  std::array<int64_t, 2> kernel_size{};   ///< required, e.g. {3, 3}
  std::array<int64_t, 2> strides{1, 1};
  Padding padding = Padding::valid;
  std::array<int64_t, 2> dilations{1, 1};  ///< as the op's gd::Conv2dArgs::dilations (formerly `dilation`)
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
/// Without `.in` the layer is lazy as Dense is: the kernel [KH, KW, 0, filters] is drawn at the
/// first forward, with the same values as `.in` set to the input's channels; a checkpoint restored
/// before then builds it from its kernel's shape.
template <Real T = float>
class Conv2d : public Module<T, Conv2d<T>> {
 public:
  Conv2d(const Conv2dOptions& o, Rng& rng)
      : in_(o.in), filters_(o.filters), kernel_size_(o.kernel_size), use_bias_(o.use_bias), activation_(o.activation),
        conv_{.strides = o.strides, .padding = o.padding, .dilations = o.dilations},
        kernel_init_(detail::or_default(o.kernel_initializer, detail::default_kernel_initializer(o.activation))),
        bias_init_(o.bias_initializer) {
    GRADUS_CHECK(value_error, o.in >= 0 && o.filters > 0, "Conv2d: filters must be positive and in positive (or 0, to "
                 "take it from the first input), got in ", o.in, ", filters ", o.filters);
    GRADUS_CHECK(value_error, o.kernel_size[0] > 0 && o.kernel_size[1] > 0,
                 "Conv2d: kernel_size must be positive (set .kernel_size = {kh, kw}), got [", o.kernel_size[0], ",",
                 o.kernel_size[1], "]");
    GRADUS_CHECK(value_error, o.strides[0] > 0 && o.strides[1] > 0 && o.dilations[0] > 0 && o.dilations[1] > 0,
                 "Conv2d: strides and dilations must be positive, got strides [", o.strides[0], ",", o.strides[1],
                 "], dilations [", o.dilations[0], ",", o.dilations[1], "]");
    kernel_ = this->register_parameter("kernel", Tensor<T>::zeros({o.kernel_size[0], o.kernel_size[1], 0, o.filters}),
                                       o.kernel_regularizer);
    if (o.use_bias)
      bias_ = this->register_parameter("bias", Tensor<T>::zeros({o.filters}), o.bias_regularizer);
    else
      bias_ = Var<T>::constant(Tensor<T>::zeros({o.filters}));
    rng_ = &rng;
    if (o.in > 0) build(o.in);
  }

  /// x [N, H, W, in] -> [N, OH, OW, filters], a Var. Without an activation, or with ReLU on the
  /// CPU, bias (and ReLU) are applied inside the convolution's output pass; with another
  /// activation, bias and activation run as one pass after it.
  template <Expression X>
  Var<T> forward(const X& x) {
    return forward_var(detail::to_var(x));
  }
  /// forward on a Var: compiled once in libgradus with GRADUS_COMPILED.
  Var<T> forward_var(const Var<T>& xv);

  /// Input channels; 0 while a lazy layer has seen no input.
  int64_t in() const { return in_; }
  /// False while a lazy layer (no `.in`) waits for its first input.
  bool built() const { return built_; }
  /// A lazy layer not yet built: `saved` [KH, KW, in, filters] for "kernel" gives in (see Module).
  int64_t lazy_input_size(std::string_view name, const Shape& saved) const override {
    const bool fits = !built_ && name == "kernel" && saved.rank() == 4 && saved[0] == kernel_size_[0] &&
                      saved[1] == kernel_size_[1] && saved[2] > 0 && saved[3] == filters_;
    return fits ? saved[2] : 0;
  }
  void build_unfilled(int64_t in) override { set_kernel_shape(in, true); }
  void unbuild() override { set_kernel_shape(0, false); }
  /// The kernel [KH, KW, in, filters].
  Var<T> kernel() const { return kernel_; }
  /// The bias [filters] (a constant of zeros when use_bias is false).
  Var<T> bias() const { return bias_; }

 private:
  /// Draws the kernel [KH, KW, in, filters] and then the bias, as an eager layer's constructor does.
  void build(int64_t in) {
    kernel_.value() = kernel_init_.template operator()<T>({kernel_size_[0], kernel_size_[1], in, filters_}, *rng_);
    if (use_bias_ && bias_init_) bias_.value() = bias_init_.template operator()<T>({filters_}, *rng_);
    in_ = in;
    built_ = true;
  }
  void set_kernel_shape(int64_t in, bool built) {
    kernel_.value() =
        Tensor<T>::zeros({kernel_size_[0], kernel_size_[1], in, filters_}).to(kernel_.value().device());
    in_ = in;
    built_ = built;
  }

  int64_t in_, filters_;
  std::array<int64_t, 2> kernel_size_;
  bool use_bias_;
  Activation activation_;
  gradus::Conv2dArgs conv_;
  init::Initializer kernel_init_, bias_init_;
  Rng* rng_ = nullptr;  ///< draws the kernel when a lazy layer is built
  bool built_ = false;
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
  template <Expression X>
  auto operator()(const X& x) const { return forward(x); }
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
  template <Expression X>
  auto operator()(const X& x) const { return forward(x); }
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
  template <Expression X>
  auto operator()(const X& x) const { return forward(x); }
};

// Out of the class, so that a program built with GRADUS_COMPILED compiles no copy of it.
template <Real T>
Var<T> Conv2d<T>::forward_var(const Var<T>& xv) {
  GRADUS_CHECK(shape_error, xv.rank() == 4, "Conv2d: expected input [N, H, W, ", in_, "], got ", xv.shape());
  if (!built()) {
    GRADUS_CHECK(shape_error, xv.shape().back() > 0, "Conv2d: cannot take in from an input of shape ", xv.shape());
    build(xv.shape().back());
  }
  detail::check_last_dim(xv.shape(), in_, "Conv2d", "in");
  if (activation_.kind == ActivationKind::linear)
    return use_bias_ ? gradus::conv2d(xv, kernel_, bias_, conv_) : gradus::conv2d(xv, kernel_, conv_);
  if (activation_.kind == ActivationKind::relu &&  // one node: bias and ReLU inside the convolution's passes
      backend::implements<backend::kernel::Conv2dRelu, T>(xv.value().device()))
    return gradus::detail::conv2d_bias_relu(xv, kernel_, bias_, conv_);
  return detail::bias_activation(gradus::conv2d(xv, kernel_, conv_), bias_, activation_);
}
}  // namespace gradus::nn

#if GRADUS_INSTANCES  // compiled once in libgradus with GRADUS_COMPILED (core/compiled.hpp)
namespace gradus::nn {
GRADUS_INSTANCE class Conv2d<float>;
GRADUS_INSTANCE_DOUBLE class Conv2d<double>;
}  // namespace gradus::nn
#endif
