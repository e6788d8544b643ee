// gradus/ops/bias_activation.hpp — activation(h + b) as one kernel op, for the layers' bias +
// activation step; the activation is chosen at run time (`Activation`, the layers' option).
#pragma once
#include <concepts>
#include <cstdint>
#include <ostream>
#include <string_view>
#include <type_traits>

#include "gradus/autodiff/materialize.hpp"
#include "gradus/backend/backend.hpp"
#include "gradus/expr/activations.hpp"
#include "gradus/ops/elementwise.hpp"
#include "gradus/ops/softmax.hpp"

namespace gradus {
namespace detail {

/// What activation `kind` prints as: its row's name.
constexpr std::string_view activation_name(ActivationKind kind) {
  constexpr std::string_view names[] = {
#define GRADUS_X(name, Op, args, form) #name,
      GRADUS_ACTIVATIONS(GRADUS_X)
#undef GRADUS_X
      "softmax"};
  return names[int(kind)];
}

/// True for the ReLU family, whose layers default to He initialization.
constexpr bool relu_like(ActivationKind kind) {
  return kind == ActivationKind::relu || kind == ActivationKind::leaky_relu || kind == ActivationKind::elu ||
         kind == ActivationKind::gelu;
}

/// The float bias + activation passes of one activation (`bias_activation`'s kernel op), reached
/// through the `Activation` values that name it: a float program compiles the CPU and GPU
/// kernels of the activations it names (gd::nn::relu, ...), not those of all ten.
/// `forward(alpha, h, b, rows, n, y, device)`: y = act(h + b) row by row;
/// `backward(alpha, h, b, y, g, rows, n, dz, device)`: dz = act'(h + b) g. Null for softmax,
/// which `bias_activation` composes from the linear passes and `softmax(z)`, gd::softmax over the
/// last axis (null for the others: a float program compiles softmax's node and kernels where
/// it names gd::nn::softmax, or picks the activation at run time). Double layers reach
/// every activation through visit_elementwise() instead: a table of both types would compile the
/// double kernels into every float program.
template <ActivationKind K>
void bias_activation_forward_pass(double alpha, const float* h, const float* b, int64_t rows, int64_t n, float* y,
                                  Device device) {
  backend::bias_activation_forward(ActivationRow<K>::make(alpha), h, b, rows, n, y, device);
}
template <ActivationKind K>
void bias_activation_backward_pass(double alpha, const float* h, const float* b, const float* y, const float* g,
                                   int64_t rows, int64_t n, float* dz, Device device) {
  backend::bias_activation_backward(ActivationRow<K>::make(alpha), h, b, y, g, rows, n, dz, device);
}

template <class T>
Var<T> softmax_last_axis(const Var<T>& z) {
  return gradus::softmax(z, -1);
}

struct ActivationPasses {
  ActivationKind kind;
  void (*forward)(double, const float*, const float*, int64_t, int64_t, float*, Device);
  void (*backward)(double, const float*, const float*, const float*, const float*, int64_t, int64_t, float*, Device);
  Var<float> (*softmax)(const Var<float>&) = nullptr;
};

template <ActivationKind K>
constexpr ActivationPasses passes_of() {
  if constexpr (K == ActivationKind::softmax)
    return {K, nullptr, nullptr, &softmax_last_axis<float>};
  else
    return {K, &bias_activation_forward_pass<K>, &bias_activation_backward_pass<K>};
}
template <ActivationKind K>
inline constexpr ActivationPasses activation_passes = passes_of<K>();

}  // namespace detail

/// An activation chosen at run time, for a layer's `.activation` option: one of the constants
/// of gd::nn (nn/activations.hpp); `leaky_relu` and `elu` take their alpha by call:
/// `gd::nn::leaky_relu(0.1)`. The activations are the rows of expr/activations.hpp.
///
/// A constant carries its activation's kernels, so a program compiles those of the activations
/// it names. `Activation(kind, alpha)` picks one by a value known only at run time (a
/// configuration file, a loop over the kinds), and compiles them all.
struct Activation {
  ActivationKind kind = ActivationKind::linear;
  double alpha = 0;  ///< leaky_relu's slope for x < 0, elu's scale; unused by the others

  /// linear: the identity (a layer with a bias only adds it).
  constexpr Activation() = default;
  /// Activation `kind` chosen at run time, with every activation's kernels (a template, so that
  /// only a program that calls it compiles them; Kind is ActivationKind).
  template <std::same_as<ActivationKind> Kind>
  explicit constexpr Activation(Kind kind, double alpha = 0) : kind(kind), alpha(alpha), passes_(of(kind)) {}
  /// Activation K, known when compiling: gd::nn's constants (with K's kernels only).
  template <ActivationKind K>
  constexpr Activation(std::integral_constant<ActivationKind, K>, double alpha)
      : kind(K), alpha(alpha), passes_(&detail::activation_passes<K>) {}

  /// True for the ReLU family, whose layers default to He initialization.
  constexpr bool relu_like() const { return detail::relu_like(kind); }
  constexpr std::string_view name() const { return detail::activation_name(kind); }
  /// The kernels of `kind` (bias_activation's passes). Throws value_error if `kind` was assigned
  /// after the value was made: the kernels are those of the activation it was made as.
  const detail::ActivationPasses& passes() const {
    GRADUS_CHECK(value_error, passes_->kind == kind, "Activation: kind set to ", name(), " after it was made as ",
                 detail::activation_name(passes_->kind), "; make it as gd::nn::", name(),
                 " or gd::Activation(kind, alpha)");
    return *passes_;
  }
  friend constexpr bool operator==(const Activation& a, const Activation& b) {
    return a.kind == b.kind && a.alpha == b.alpha;
  }
  friend std::ostream& operator<<(std::ostream& os, const Activation& a) { return os << a.name(); }

 private:
  template <class Kind>  // ActivationKind, as a dependent type: naming the tables instantiates them
  static constexpr const detail::ActivationPasses* of(Kind kind) {
    switch (kind) {
#define GRADUS_X(name, Op, args, form) \
  case Kind::name:                     \
    return &detail::activation_passes<Kind::name>;
      GRADUS_ACTIVATIONS(GRADUS_X)
#undef GRADUS_X
      case Kind::softmax:
        break;
    }
    return &detail::activation_passes<Kind::softmax>;
  }

  const detail::ActivationPasses* passes_ = &detail::activation_passes<ActivationKind::linear>;
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
  throw_error<value_error>({"Activation: ", a.name(), " is not elementwise"});
}

/// activation(h + b): h [..., n], bias b [n] -> [..., n] (softmax over the last axis). One kernel
/// node whatever the activation: the forward is one pass over h, the backward one pass giving
/// dh, with db summed from it — the work of a hand-written Dense layer, without compiling a
/// fused expression per activation kind. Kernels: backend::bias_activation_forward/_backward.
template <Real T>
Var<T> bias_activation(const Var<T>& h, const Var<T>& b, const Activation& a) {
  if (a.kind == ActivationKind::softmax) {
    const Var<T> z = bias_activation(h, b, Activation{});
    if constexpr (std::is_same_v<T, float>) return a.passes().softmax(z);
    else return softmax_last_axis(z);
  }
  gradus::detail::OpScope prof;
  const int64_t n = b.size();
  GRADUS_CHECK(shape_error, b.rank() == 1 && h.rank() >= 1 && h.shape().back() == n, "bias_activation: bias ",
               b.shape(), " does not match the last axis of ", h.shape());
  const int64_t rows = n ? h.size() / n : 0;
  const Device dev = h.value().device();
  GRADUS_CHECK(device_error, b.value().device() == dev, "bias_activation: operands on ", dev, " and ",
               b.value().device(), "; move them to one device with .to(device)");
  Tensor<T> out = Tensor<T>::empty(h.shape(), dev);
  if constexpr (std::is_same_v<T, float>) {
    a.passes().forward(a.alpha, h.value().device_data(), b.value().device_data(), rows, n, out.device_data(), dev);
  } else {
    visit_elementwise(a, [&](const auto& op) {
      backend::bias_activation_forward(op, h.value().device_data(), b.value().device_data(), rows, n,
                                       out.device_data(), dev);
    });
  }
  set_op_attrs({}, a.alpha, a.name());  // the activation, for gd::onnx
  return make_result("bias_activation", std::move(out),
                     [a, n, rows](const Tensor<T>& g, const Tensor<T>& y, const Var<T>& h, const Var<T>& b) {
    const Device dev = g.device();
    Tensor<T> dz = g;  // linear: the gradient passes as it is
    if (a.kind != ActivationKind::linear) {
      dz = Tensor<T>::empty(g.shape(), dev);
      if constexpr (std::is_same_v<T, float>) {
        a.passes().backward(a.alpha, h.value().device_data(), b.value().device_data(), y.device_data(),
                            g.device_data(), rows, n, dz.device_data(), dev);
      } else {
        visit_elementwise(a, [&](const auto& op) {
          backend::bias_activation_backward(op, h.value().device_data(), b.value().device_data(), y.device_data(),
                                            g.device_data(), rows, n, dz.device_data(), dev);
        });
      }
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

#if GRADUS_INSTANCES  // compiled once in libgradus with GRADUS_COMPILED (core/compiled.hpp)
namespace gradus::detail {
#define GRADUS_X(name, Op, args, form)                                                                                \
  GRADUS_INSTANCE void bias_activation_forward_pass<ActivationKind::name>(double, const float*, const float*, int64_t, \
                                                                          int64_t, float*, Device);                   \
  GRADUS_INSTANCE void bias_activation_backward_pass<ActivationKind::name>(                                            \
      double, const float*, const float*, const float*, const float*, int64_t, int64_t, float*, Device);
GRADUS_ACTIVATIONS(GRADUS_X)
#undef GRADUS_X
}  // namespace gradus::detail
#endif
