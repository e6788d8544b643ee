// gradus/nn/normalization.hpp — LayerNorm and BatchNorm (channels last), as Keras defines them.
//
// Both are composed from differentiable primitives — mean, square, rsqrt — so their gradient
// (through the batch statistics too) comes from the tape, and both return the lazy expression
// (x - mean) * rsqrt(var + epsilon) * gamma + beta, which fuses with what follows (an activation,
// a residual add) into the next materialisation. Materialise it once (`gd::Var<float> y = ...`)
// when the output is used twice.
#pragma once
#include <cstdint>

#include "gradus/nn/module.hpp"
#include "gradus/nn/regularizers.hpp"
#include "gradus/ops/reduce.hpp"
#include "gradus/ops/shape.hpp"

namespace gradus::nn {
namespace detail {

/// (x - mean) * rsqrt(var + eps) * gamma + beta, lazily; mean/var/gamma/beta broadcast.
template <Real T>
auto normalize(const Var<T>& x, const Var<T>& mean, const Var<T>& var, const Var<T>& gamma, const Var<T>& beta,
               T eps) {
  return (x - mean) * gradus::rsqrt(var + eps) * gamma + beta;
}

}  // namespace detail

/// Options of `LayerNorm`.
struct LayerNormOptions {
  int64_t features = 0;   ///< size of the last axis, which is normalised
  double epsilon = 1e-3;  ///< added to the variance (Keras' default)
  bool center = true;     ///< learn beta (else 0)
  bool scale = true;      ///< learn gamma (else 1)
  Regularizer beta_regularizer{};
  Regularizer gamma_regularizer{};
};

/// Layer normalisation over the last axis (tf.keras.layers.LayerNormalization): each row is
/// shifted to mean 0 and scaled to variance 1 (biased variance), then gamma * . + beta, with
/// gamma, beta of shape [features]. x [..., features] -> a lazy expression of the same shape.
///   gd::nn::LayerNorm<float> ln({.features = 512});
template <Real T = float>
class LayerNorm : public Module<T, LayerNorm<T>> {
 public:
  explicit LayerNorm(const LayerNormOptions& o) : features_(o.features), epsilon_(o.epsilon) {
    GRADUS_CHECK(value_error, o.features > 0, "LayerNorm: features must be positive, got ", o.features);
    GRADUS_CHECK(value_error, o.epsilon >= 0, "LayerNorm: epsilon must be >= 0, got ", o.epsilon);
    gamma_ = o.scale ? this->register_parameter("gamma", Tensor<T>::ones({o.features}), o.gamma_regularizer)
                     : Var<T>::constant(Tensor<T>::ones({o.features}));
    beta_ = o.center ? this->register_parameter("beta", Tensor<T>::zeros({o.features}), o.beta_regularizer)
                     : Var<T>::constant(Tensor<T>::zeros({o.features}));
  }

  template <Expression X>
  auto forward(const X& x) const {
    const Var<T> xv = detail::to_var(x);
    detail::check_last_dim(xv.shape(), features_, "LayerNorm", "features");
    const Var<T> mean = gradus::mean(xv, -1, true);
    const Var<T> var = gradus::mean(gradus::square(xv - mean), -1, true);
    return detail::normalize(xv, mean, var, gamma_, beta_, T(epsilon_));
  }

  Var<T> gamma() const { return gamma_; }
  Var<T> beta() const { return beta_; }

 private:
  int64_t features_;
  double epsilon_;
  Var<T> gamma_, beta_;
};

/// Options of `BatchNorm`.
struct BatchNormOptions {
  int64_t features = 0;    ///< size of the last (channel) axis
  double momentum = 0.99;  ///< moving = moving * momentum + batch * (1 - momentum)
  double epsilon = 1e-3;   ///< added to the variance
  bool center = true;      ///< learn beta (else 0)
  bool scale = true;       ///< learn gamma (else 1)
  Regularizer beta_regularizer{};
  Regularizer gamma_regularizer{};
};

/// Batch normalisation over the last (channel) axis (tf.keras.layers.BatchNormalization with
/// axis=-1): x [..., features]. In training mode it normalises with the batch's mean and biased
/// variance over all other axes, and moves the buffers "moving_mean" (zeros at first) and
/// "moving_variance" (ones) towards them; in eval mode it normalises with the moving statistics.
/// The moving variance follows the biased batch variance, as Keras' non-fused path does.
/// Returns a lazy expression of x's shape.
///   gd::nn::BatchNorm<float> bn({.features = 64});
template <Real T = float>
class BatchNorm : public Module<T, BatchNorm<T>> {
 public:
  explicit BatchNorm(const BatchNormOptions& o) : features_(o.features), momentum_(o.momentum), epsilon_(o.epsilon) {
    GRADUS_CHECK(value_error, o.features > 0, "BatchNorm: features must be positive, got ", o.features);
    GRADUS_CHECK(value_error, o.momentum >= 0 && o.momentum <= 1, "BatchNorm: momentum must be in [0, 1], got ",
                 o.momentum);
    GRADUS_CHECK(value_error, o.epsilon >= 0, "BatchNorm: epsilon must be >= 0, got ", o.epsilon);
    gamma_ = o.scale ? this->register_parameter("gamma", Tensor<T>::ones({o.features}), o.gamma_regularizer)
                     : Var<T>::constant(Tensor<T>::ones({o.features}));
    beta_ = o.center ? this->register_parameter("beta", Tensor<T>::zeros({o.features}), o.beta_regularizer)
                     : Var<T>::constant(Tensor<T>::zeros({o.features}));
    moving_mean_ = this->register_buffer("moving_mean", Tensor<T>::zeros({o.features}));
    moving_variance_ = this->register_buffer("moving_variance", Tensor<T>::ones({o.features}));
  }

  /// Training mode: batch statistics (and one update of the moving ones); eval, or frozen
  /// (Module::freeze): moving statistics, unchanged.
  template <Expression X>
  auto forward(const X& x) {
    const Var<T> xv = detail::to_var(x);
    detail::check_last_dim(xv.shape(), features_, "BatchNorm", "features");
    if (!this->is_training() || this->frozen())
      return detail::normalize(xv, Var<T>::constant(moving_mean_), Var<T>::constant(moving_variance_), gamma_, beta_,
                               T(epsilon_));
    GRADUS_CHECK(value_error, xv.size() > 0, "BatchNorm: empty batch, input of shape ", xv.shape());
    const Var<T> rows = gradus::reshape(xv, {-1, features_});  // [batch * spatial, features]
    const Var<T> mean = gradus::mean(rows, 0);
    const Var<T> var = gradus::mean(gradus::square(rows - mean), 0);
    const T m = T(momentum_);
    moving_mean_.assign(moving_mean_ * m + mean.value() * (T(1) - m));
    moving_variance_.assign(moving_variance_ * m + var.value() * (T(1) - m));
    return detail::normalize(xv, mean, var, gamma_, beta_, T(epsilon_));
  }

  Var<T> gamma() const { return gamma_; }
  Var<T> beta() const { return beta_; }
  /// The moving statistics [features] (handles to the buffers).
  Tensor<T> moving_mean() const { return moving_mean_; }
  Tensor<T> moving_variance() const { return moving_variance_; }
  /// After `to(device)`: the handles follow the moved buffers.
  void buffers_moved() override {
    moving_mean_ = this->buffer("moving_mean");
    moving_variance_ = this->buffer("moving_variance");
  }

 private:
  int64_t features_;
  double momentum_, epsilon_;
  Var<T> gamma_, beta_;
  Tensor<T> moving_mean_, moving_variance_;
};

}  // namespace gradus::nn
