// gradus/ops/bias_activation.hpp — activation(h + b) as one kernel op, for the layers' bias +
// activation step; the activation is chosen at run time (`Activation`, the layers' option).
#pragma once
#include <cstdint>
#include <ostream>
#include <string_view>

#include "gradus/autodiff/materialize.hpp"
#include "gradus/backend/backend.hpp"
#include "gradus/expr/activations.hpp"
#include "gradus/ops/elementwise.hpp"
#include "gradus/ops/softmax.hpp"

namespace gradus {

/// An activation chosen at run time, for a layer's `.activation` option: one of the constants
/// of gd::nn (nn/activations.hpp); `leaky_relu` and `elu` take their alpha by call:
/// `gd::nn::leaky_relu(0.1)`. The activations are the rows of expr/activations.hpp.
struct Activation {
  ActivationKind kind = ActivationKind::linear;
  double alpha = 0;  ///< leaky_relu's slope for x < 0, elu's scale; unused by the others

  /// True for the ReLU family, whose layers default to He initialization.
  constexpr bool relu_like() const {
    return kind == ActivationKind::relu || kind == ActivationKind::leaky_relu || kind == ActivationKind::elu ||
           kind == ActivationKind::gelu;
  }
  constexpr std::string_view name() const {
    constexpr std::string_view names[] = {
#define GRADUS_X(name, Op, args, form) #name,
        GRADUS_ACTIVATIONS(GRADUS_X)
#undef GRADUS_X
        "softmax"};
    return names[int(kind)];
  }
  friend constexpr bool operator==(const Activation&, const Activation&) = default;
  friend std::ostream& operator<<(std::ostream& os, const Activation& a) { return os << a.name(); }
};

namespace detail {

/// Calls `f(op)` with the op struct of ops/elementwise_math.hpp that `a` names (every
/// activation but softmax).
template <class F>
void visit_elementwise(const Activation& a, F&& f) {
  [[maybe_unused]] const double alpha = a.alpha;
  switch (a.kind) {
#define GRADUS_X(name, Op, args, form) \
  case ActivationKind::name:           \
    return f(ops::Op args);
    GRADUS_ACTIVATIONS(GRADUS_X)
#undef GRADUS_X
    case ActivationKind::softmax:
      break;
  }
  throw value_error(str("Activation: ", a.name(), " is not elementwise"));
}

}  // namespace detail

namespace detail {

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
  const Device dev = h.value().device();
  GRADUS_CHECK(device_error, b.value().device() == dev, "bias_activation: operands on ", dev, " and ",
               b.value().device(), "; move them to one device with .to(device)");
  Tensor<T> out = Tensor<T>::empty(h.shape(), dev);
  visit_elementwise(a, [&](const auto& op) {
    backend::bias_activation_forward(op, h.value().device_data(), b.value().device_data(), rows, n, out.device_data(),
                                     dev);
  });
  set_op_attrs({}, a.alpha, a.name());  // the activation, for gd::onnx
  return make_result("bias_activation", std::move(out),
                     [a, n, rows](const Tensor<T>& g, const Tensor<T>& y, const Var<T>& h, const Var<T>& b) {
    const Device dev = g.device();
    Tensor<T> dz = g;  // linear: the gradient passes as it is
    if (a.kind != ActivationKind::linear) {
      dz = Tensor<T>::empty(g.shape(), dev);
      visit_elementwise(a, [&](const auto& op) {
        backend::bias_activation_backward(op, h.value().device_data(), b.value().device_data(), y.device_data(),
                                          g.device_data(), rows, n, dz.device_data(), dev);
      });
    }
    if (b.requires_grad()) {
      Tensor<T> db = Tensor<T>::empty(b.shape(), dev);
      backend::sum_rows(dz.device_data(), rows, n, db.device_data(), dev);
      add_grad(b, db);
    }
    if (h.requires_grad()) add_grad(h, dz);
  }, h, b);
}

}  // namespace detail
}  // namespace gradus
