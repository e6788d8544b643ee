// gradus/ops/bias_activation.hpp — activation(h + b) as one kernel op, for the layers' bias +
// activation step; the activation is chosen at run time (`Activation`, the layers' option).
#pragma once
#include <cstdint>
#include <ostream>
#include <string_view>

#include "gradus/autodiff/materialize.hpp"
#include "gradus/backend/backend.hpp"
#include "gradus/ops/elementwise.hpp"
#include "gradus/ops/softmax.hpp"

namespace gradus {

/// Which function an `Activation` applies.
enum class ActivationKind { linear, relu, leaky_relu, elu, selu, gelu, tanh, sigmoid, softplus, softsign, softmax };
static_assert(int(ActivationKind::relu) == 1 && int(ActivationKind::softsign) == 9,
              "THE_GPU_KERNELS_NUMBER_THE_ACTIVATIONS_IN_THIS_ORDER: backend/cuda/library.hpp");

/// An activation chosen at run time, for a layer's `.activation` option: one of the constants
/// of gd::nn (nn/activations.hpp); `leaky_relu` and `elu` take their alpha by call:
/// `gd::nn::leaky_relu(0.1)`.
struct Activation {
  ActivationKind kind = ActivationKind::linear;
  double alpha = 0;  ///< leaky_relu's slope for x < 0, elu's scale; unused by the others

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
  throw value_error(str("Activation: ", a.name(), " is not elementwise"));
}

/// Calls GRADUS_X(op struct) for each op struct visit_elementwise can pass.
#define GRADUS_FOR_EACH_ELEMENTWISE_ACTIVATION(GRADUS_X)                                                \
  GRADUS_X(::gradus::detail::Identity) GRADUS_X(::gradus::ops::Relu) GRADUS_X(::gradus::ops::LeakyRelu) \
  GRADUS_X(::gradus::ops::Elu) GRADUS_X(::gradus::ops::Selu) GRADUS_X(::gradus::ops::Gelu)             \
  GRADUS_X(::gradus::ops::Tanh) GRADUS_X(::gradus::ops::Sigmoid) GRADUS_X(::gradus::ops::Softplus)    \
  GRADUS_X(::gradus::ops::Softsign)

}  // namespace detail

/// The explicit instantiation declarations (EXTERN = extern) or definitions (EXTERN empty,
/// src/kernels.cpp) of the CPU bias + activation kernels for element type T and op struct Op.
#define GRADUS_BIAS_ACTIVATION_KERNELS(EXTERN, T, Op)                                                     \
  EXTERN template void backend::cpu::bias_activation_forward<T, Op>(const Op&, const T*, const T*, int64_t, \
                                                                    int64_t, T*);                           \
  EXTERN template void backend::cpu::bias_activation_backward<T, Op>(const Op&, const T*, const T*, const T*, \
                                                                     const T*, int64_t, int64_t, T*);

#if defined(GRADUS_COMPILED_KERNELS)
// Linked with gradus::kernels: the CPU bias + activation kernels of every activation are
// compiled there (src/kernels.cpp), not in each translation unit that builds a layer.
#define GRADUS_EXTERN_FLOAT(Op) GRADUS_BIAS_ACTIVATION_KERNELS(extern, float, Op)
#define GRADUS_EXTERN_DOUBLE(Op) GRADUS_BIAS_ACTIVATION_KERNELS(extern, double, Op)
GRADUS_FOR_EACH_ELEMENTWISE_ACTIVATION(GRADUS_EXTERN_FLOAT)
GRADUS_FOR_EACH_ELEMENTWISE_ACTIVATION(GRADUS_EXTERN_DOUBLE)
#undef GRADUS_EXTERN_FLOAT
#undef GRADUS_EXTERN_DOUBLE
#endif

namespace detail {

/// bias_activation on a GPU: the activation is chosen inside the kernel from its kind, with the
/// op structs the CPU runs (backend/cuda/layers.hpp).
template <Real T>
Var<T> bias_activation_on_device(const Var<T>& h, const Var<T>& b, const Activation& a, int64_t rows, int64_t n,
                                 Device dev) {
  Tensor<T> out = Tensor<T>::empty(h.shape(), dev);
  backend::bias_activation_forward(int(a.kind), a.alpha, h.value().device_data(), b.value().device_data(), rows, n,
                                   out.device_data(), dev);
  return make_result("bias_activation", std::move(out),
                     [a, n, rows, dev](const Tensor<T>& g, const Tensor<T>& y, const Var<T>& h, const Var<T>& b) {
    Tensor<T> dz = Tensor<T>::empty(g.shape(), dev);
    backend::bias_activation_backward(int(a.kind), a.alpha, h.value().device_data(), b.value().device_data(),
                                      y.device_data(), g.device_data(), rows, n, dz.device_data(), dev);
    if (b.requires_grad()) {
      Tensor<T> db = Tensor<T>::empty(b.shape(), dev);
      backend::sum_rows(dz.device_data(), rows, n, db.device_data(), dev);
      add_grad(b, db);
    }
    if (h.requires_grad()) add_grad(h, dz);
  }, h, b);
}

/// activation(h + b): h [..., n], bias b [n] -> [..., n] (softmax over the last axis). One kernel
/// node whatever the activation: the forward is one pass over h, the backward one pass giving
/// dh, with db summed from it — the work of a hand-written Dense layer, without compiling a
/// fused expression per activation kind. Kernels: backend::bias_activation_forward/_backward.
template <Real T>
Var<T> bias_activation(const Var<T>& h, const Var<T>& b, const Activation& a) {
  if (a.kind == ActivationKind::softmax) return gradus::softmax(bias_activation(h, b, Activation{}), -1);
  gradus::detail::OpScope prof;
  const int64_t n = b.size();
  GRADUS_CHECK(shape_error, b.rank() == 1 && h.rank() >= 1 && h.shape().back() == n, "bias_activation: bias ",
               b.shape(), " does not match the last axis of ", h.shape());
  const int64_t rows = n ? h.size() / n : 0;
  if (const Device dev = h.value().device(); !dev.is_cpu()) {
    GRADUS_CHECK(device_error, b.value().device() == dev, "bias_activation: operands on ", dev, " and ",
                 b.value().device(), "; move them to one device with .to(device)");
    return bias_activation_on_device(h, b, a, rows, n, dev);
  }
  Tensor<T> out(h.shape());
  visit_elementwise(a, [&](const auto& op) {
    backend::bias_activation_forward(op, h.value().data(), b.value().data(), rows, n, out.data());
  });
  return make_result("bias_activation", std::move(out),
                     [a, n, rows](const Tensor<T>& g, const Tensor<T>& y, const Var<T>& h, const Var<T>& b) {
    Tensor<T> dz = g;  // linear: the gradient passes as it is
    if (a.kind != ActivationKind::linear) {
      dz = Tensor<T>(g.shape());
      visit_elementwise(a, [&](const auto& op) {
        backend::bias_activation_backward(op, h.value().data(), b.value().data(), y.data(), g.data(), rows, n,
                                          dz.data());
      });
    }
    if (b.requires_grad()) {
      Tensor<T> db(b.shape());
      backend::sum_rows(dz.data(), rows, n, db.data());
      add_grad(b, db);
    }
    if (h.requires_grad()) add_grad(h, dz);
  }, h, b);
}

}  // namespace detail
}  // namespace gradus
