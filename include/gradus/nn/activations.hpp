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
#include <algorithm>
#include <cstdint>
#include <ostream>
#include <string_view>

#include "gradus/backend/cpu/parallel.hpp"
#include "gradus/nn/module.hpp"
#include "gradus/ops/elementwise.hpp"
#include "gradus/ops/softmax.hpp"

namespace gradus::nn {

/// Which function an `Activation` applies.
enum class ActivationKind { linear, relu, leaky_relu, elu, selu, gelu, tanh, sigmoid, softplus, softsign, softmax };

/// An activation chosen at run time, for a layer's `.activation` option: one of the constants
/// below; `leaky_relu` and `elu` take their alpha by call: `gd::nn::leaky_relu(0.1)`.
struct Activation {
  ActivationKind kind = ActivationKind::linear;
  double alpha = 0;  ///< leaky_relu's slope for x < 0, elu's scale; unused by the others

  /// The same activation with parameter `a`: `gd::nn::elu(0.5)`.
  constexpr Activation operator()(double a) const { return {kind, a}; }
  /// True for the ReLU family, whose layers default to He initialization.
  constexpr bool relu_like() const {
    return kind == ActivationKind::relu || kind == ActivationKind::leaky_relu || kind == ActivationKind::elu ||
           kind == ActivationKind::gelu;
  }
  constexpr std::string_view name() const {
    constexpr std::string_view names[] = {"linear",  "relu",    "leaky_relu", "elu",      "selu",   "gelu",
                                          "tanh",    "sigmoid", "softplus",   "softsign", "softmax"};
    return names[int(kind)];
  }
  friend constexpr bool operator==(const Activation&, const Activation&) = default;
  friend std::ostream& operator<<(std::ostream& os, const Activation& a) { return os << a.name(); }
};

/// The identity (no activation; every layer's default).
inline constexpr Activation linear{};
inline constexpr Activation relu{ActivationKind::relu};
/// x for x > 0, alpha * x otherwise (alpha 0.2 as tf.nn.leaky_relu; `leaky_relu(0.1)` for another).
inline constexpr Activation leaky_relu{ActivationKind::leaky_relu, 0.2};
/// x for x > 0, alpha * (e^x - 1) otherwise (alpha 1; `elu(0.5)` for another).
inline constexpr Activation elu{ActivationKind::elu, 1.0};
inline constexpr Activation selu{ActivationKind::selu};
/// The exact GELU, x * Phi(x).
inline constexpr Activation gelu{ActivationKind::gelu};
inline constexpr Activation tanh{ActivationKind::tanh};
inline constexpr Activation sigmoid{ActivationKind::sigmoid};
inline constexpr Activation softplus{ActivationKind::softplus};
inline constexpr Activation softsign{ActivationKind::softsign};
/// Softmax over the last axis.
inline constexpr Activation softmax{ActivationKind::softmax};

namespace detail {

/// The identity as an elementwise op (forward and gradient rule), for `linear`.
struct Identity {
  static constexpr bool ignores_input = true;
  static auto forward(const auto& x) { return x; }
  static auto backward(const auto&, const auto&, const auto& g) { return g; }
};

/// Calls `f(op)` with the elementwise op struct of ops/elementwise.hpp that `a` names
/// (every activation but softmax).
template <class F>
void visit_elementwise(const Activation& a, F&& f) {
  switch (a.kind) {
    case ActivationKind::linear: return f(Identity{});
    case ActivationKind::relu: return f(ops::Relu{});
    case ActivationKind::leaky_relu: return f(ops::LeakyRelu(a.alpha));
    case ActivationKind::elu: return f(ops::Elu(a.alpha));
    case ActivationKind::selu: return f(ops::Selu{});
    case ActivationKind::gelu: return f(ops::Gelu{});
    case ActivationKind::tanh: return f(ops::Tanh{});
    case ActivationKind::sigmoid: return f(ops::Sigmoid{});
    case ActivationKind::softplus: return f(ops::Softplus{});
    case ActivationKind::softsign: return f(ops::Softsign{});
    case ActivationKind::softmax: break;
  }
  throw value_error(gradus::detail::str("Activation: ", a.name(), " is not elementwise"));
}

/// activation(h + b): h [..., n], bias b [n] -> [..., n] (softmax over the last axis). One kernel
/// node whatever the activation: the forward is one pass over h, the backward one pass giving
/// dh, with db summed from it — the work of a hand-written Dense layer, without compiling a
/// fused expression per activation kind.
template <Real T>
Var<T> bias_activation(const Var<T>& h, const Var<T>& b, const Activation& a) {
  if (a.kind == ActivationKind::softmax) return to_var(gradus::softmax(bias_activation(h, b, linear), -1));
  using Row = gradus::detail::MapX<T>;
  using CRow = gradus::detail::CMapX<T>;
  const int64_t n = b.size();
  GRADUS_CHECK(shape_error, b.rank() == 1 && h.rank() >= 1 && h.shape().back() == n, "bias_activation: bias ",
               b.shape(), " does not match the last axis of ", h.shape());
  const int64_t rows = n ? h.size() / n : 0;
  const int64_t threshold = std::max<int64_t>(1, cpu::kParallelThreshold / std::max<int64_t>(n, 1));
  Tensor<T> out(h.shape());
  visit_elementwise(a, [&](const auto& op) {
    const T* hv = h.value().data();
    const CRow bias(b.value().data(), n);
    T* y = out.data();
    cpu::parallel_chunks(rows, 1, [&](int, int64_t r0, int64_t r1) {
      for (int64_t r = r0; r < r1; ++r) Row(y + r * n, n) = op.forward(CRow(hv + r * n, n) + bias);
    }, threshold);
  });
  return make_result("bias_activation", std::move(out),
                     [a, n, rows, threshold](const Tensor<T>& g, const Tensor<T>& y, const Var<T>& h, const Var<T>& b) {
    Tensor<T> dz = g;  // linear: the gradient passes as it is
    if (a.kind != ActivationKind::linear) {
      dz = Tensor<T>(g.shape());
      visit_elementwise(a, [&](const auto& op) {
        const T* hv = h.value().data();
        const CRow bias(b.value().data(), n);
        cpu::parallel_chunks(rows, 1, [&](int, int64_t r0, int64_t r1) {
          for (int64_t r = r0; r < r1; ++r) {
            Row d(dz.data() + r * n, n);
            d = CRow(hv + r * n, n) + bias;  // z, read in place by the op's gradient rule
            d = op.backward(d, CRow(y.data() + r * n, n), CRow(g.data() + r * n, n));
          }
        }, threshold);
      });
    }
    if (b.requires_grad()) {
      Tensor<T> db = Tensor<T>::zeros(b.shape());
      Row acc(db.data(), n);
      for (int64_t r = 0; r < rows; ++r) acc += CRow(dz.data() + r * n, n);
      gradus::detail::add_grad(b, db);
    }
    if (h.requires_grad()) gradus::detail::add_grad(h, dz);
  }, h, b);
}

}  // namespace detail

// ------------------------------------------------------------------------------ activation layers

/// max(x, 0), lazily: `forward` returns gd::relu(x).
struct ReLU {
  template <Expression X>
  auto forward(const X& x) const { return gradus::relu(x); }
};
/// x for x > 0, alpha * x otherwise: `gd::nn::LeakyReLU{.alpha = 0.1}`.
struct LeakyReLU {
  double alpha = 0.2;
  template <Expression X>
  auto forward(const X& x) const { return gradus::leaky_relu(x, alpha); }
};
/// x for x > 0, alpha * (e^x - 1) otherwise.
struct ELU {
  double alpha = 1.0;
  template <Expression X>
  auto forward(const X& x) const { return gradus::elu(x, alpha); }
};
/// scale * elu(x, alpha) with the self-normalising constants.
struct SELU {
  template <Expression X>
  auto forward(const X& x) const { return gradus::selu(x); }
};
/// The exact GELU, x * Phi(x).
struct GELU {
  template <Expression X>
  auto forward(const X& x) const { return gradus::gelu(x); }
};
struct Tanh {
  template <Expression X>
  auto forward(const X& x) const { return gradus::tanh(x); }
};
struct Sigmoid {
  template <Expression X>
  auto forward(const X& x) const { return gradus::sigmoid(x); }
};
/// log(1 + e^x), stable for any x.
struct Softplus {
  template <Expression X>
  auto forward(const X& x) const { return gradus::softplus(x); }
};
/// x / (1 + |x|).
struct Softsign {
  template <Expression X>
  auto forward(const X& x) const { return gradus::softsign(x); }
};
/// Softmax along `axis` (a kernel: returns a Var, or a Tensor for a Tensor input).
struct Softmax {
  int64_t axis = -1;
  template <Expression X>
  auto forward(const X& x) const { return gradus::softmax(x, axis); }
};
/// log(softmax(x)) along `axis`, computed stably.
struct LogSoftmax {
  int64_t axis = -1;
  template <Expression X>
  auto forward(const X& x) const { return gradus::log_softmax(x, axis); }
};

}  // namespace gradus::nn
