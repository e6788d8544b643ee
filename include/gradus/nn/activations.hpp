// gradus/nn/activations.hpp — activations: as options of Dense/Conv2d, and as layers.
//
//   gd::nn::Dense<float> d({.in = 784, .out = 500, .activation = gd::nn::relu}, rng);   // an option
//   gd::nn::Sequential net(gd::nn::Dense<float>({.in = 784, .out = 500}, rng), gd::nn::ReLU{}, ...);
//
// The layers are stateless aggregates whose `forward` returns the lazy elementwise expression
// (gd::relu(x), ...), so the activation fuses into whatever materialises it next: the next
// layer's matmul, a loss, or an assignment to a Var. Softmax and LogSoftmax are kernels and
// return a Var.
#pragma once
#include <cstdint>
#include <ostream>
#include <string_view>
#include <type_traits>

#include "gradus/nn/module.hpp"
#include "gradus/ops/bias_activation.hpp"
#include "gradus/ops/elementwise.hpp"
#include "gradus/ops/softmax.hpp"

namespace gradus::nn {

using gradus::Activation;
using gradus::ActivationKind;

/// An activation constant that is also the function it names: `.activation = gd::nn::tanh`
/// chooses it for a layer, and `gd::nn::tanh(x)` applies it (lazily, as `gd::tanh(x)`; softmax
/// over the last axis). So inside `gradus::nn` an unqualified `tanh(x)` still means the
/// function, not an option object. As an option it converts to `Activation` carrying K's
/// kernels: the conversion is instantiated where a program uses the constant, not where this
/// header defines it, so a program compiles the kernels of the activations it names.
template <ActivationKind K>
struct ActivationFn {
  static constexpr ActivationKind kind = K;
  double alpha = 0;  ///< leaky_relu's slope for x < 0, elu's scale; unused by the others

  constexpr explicit ActivationFn(double a = 0) : alpha(a) {}
  /// The same activation with parameter `a` (leaky_relu's slope, elu's scale): `gd::nn::elu(0.5)`.
  constexpr ActivationFn operator()(double a) const { return ActivationFn(a); }
  constexpr operator Activation() const { return Activation(std::integral_constant<ActivationKind, K>{}, alpha); }
  constexpr std::string_view name() const { return gradus::detail::activation_name(K); }
  constexpr bool relu_like() const { return gradus::detail::relu_like(K); }
  friend std::ostream& operator<<(std::ostream& os, const ActivationFn& a) { return os << a.name(); }
  template <Expression X>
  auto operator()(const X& x) const {
    if constexpr (K == ActivationKind::linear) return x;
    else if constexpr (K == ActivationKind::softmax) return gradus::softmax(x, -1);
    else return make_unary(ActivationRow<K>::make(alpha), x);  // the op struct of the table's row
  }
};

/// The identity (no activation; every layer's default).
inline constexpr ActivationFn<ActivationKind::linear> linear{};
inline constexpr ActivationFn<ActivationKind::relu> relu{};
/// x for x > 0, alpha * x otherwise (alpha 0.2 as tf.nn.leaky_relu; `leaky_relu(0.1)` for another).
inline constexpr ActivationFn<ActivationKind::leaky_relu> leaky_relu{0.2};
/// x for x > 0, alpha * (e^x - 1) otherwise (alpha 1; `elu(0.5)` for another).
inline constexpr ActivationFn<ActivationKind::elu> elu{1.0};
inline constexpr ActivationFn<ActivationKind::selu> selu{};
/// The exact GELU, x * Phi(x).
inline constexpr ActivationFn<ActivationKind::gelu> gelu{};
inline constexpr ActivationFn<ActivationKind::tanh> tanh{};
inline constexpr ActivationFn<ActivationKind::sigmoid> sigmoid{};
inline constexpr ActivationFn<ActivationKind::softplus> softplus{};
inline constexpr ActivationFn<ActivationKind::softsign> softsign{};
/// Softmax over the last axis.
inline constexpr ActivationFn<ActivationKind::softmax> softmax{};

namespace detail {
using gradus::detail::bias_activation;
}  // namespace detail

// ------------------------------------------------------------------------------ activation layers

/// max(x, 0), lazily: `forward` returns gd::relu(x).
struct ReLU {
  template <Expression X>
  auto forward(const X& x) const { return gradus::relu(x); }
  template <Expression X>
  auto operator()(const X& x) const { return forward(x); }
};
/// x for x > 0, alpha * x otherwise: `gd::nn::LeakyReLU{.alpha = 0.1}`.
struct LeakyReLU {
  double alpha = 0.2;
  template <Expression X>
  auto forward(const X& x) const { return gradus::leaky_relu(x, alpha); }
  template <Expression X>
  auto operator()(const X& x) const { return forward(x); }
};
/// x for x > 0, alpha * (e^x - 1) otherwise.
struct ELU {
  double alpha = 1.0;
  template <Expression X>
  auto forward(const X& x) const { return gradus::elu(x, alpha); }
  template <Expression X>
  auto operator()(const X& x) const { return forward(x); }
};
/// scale * elu(x, alpha) with the self-normalising constants.
struct SELU {
  template <Expression X>
  auto forward(const X& x) const { return gradus::selu(x); }
  template <Expression X>
  auto operator()(const X& x) const { return forward(x); }
};
/// The exact GELU, x * Phi(x).
struct GELU {
  template <Expression X>
  auto forward(const X& x) const { return gradus::gelu(x); }
  template <Expression X>
  auto operator()(const X& x) const { return forward(x); }
};
struct Tanh {
  template <Expression X>
  auto forward(const X& x) const { return gradus::tanh(x); }
  template <Expression X>
  auto operator()(const X& x) const { return forward(x); }
};
struct Sigmoid {
  template <Expression X>
  auto forward(const X& x) const { return gradus::sigmoid(x); }
  template <Expression X>
  auto operator()(const X& x) const { return forward(x); }
};
/// log(1 + e^x), stable for any x.
struct Softplus {
  template <Expression X>
  auto forward(const X& x) const { return gradus::softplus(x); }
  template <Expression X>
  auto operator()(const X& x) const { return forward(x); }
};
/// x / (1 + |x|).
struct Softsign {
  template <Expression X>
  auto forward(const X& x) const { return gradus::softsign(x); }
  template <Expression X>
  auto operator()(const X& x) const { return forward(x); }
};
/// Softmax along `axis` (a kernel: returns a Var, or a Tensor for a Tensor input).
struct Softmax {
  int64_t axis = -1;
  template <Expression X>
  auto forward(const X& x) const { return gradus::softmax(x, axis); }
  template <Expression X>
  auto operator()(const X& x) const { return forward(x); }
};
/// log(softmax(x)) along `axis`, computed stably.
struct LogSoftmax {
  int64_t axis = -1;
  template <Expression X>
  auto forward(const X& x) const { return gradus::log_softmax(x, axis); }
  template <Expression X>
  auto operator()(const X& x) const { return forward(x); }
};

}  // namespace gradus::nn
