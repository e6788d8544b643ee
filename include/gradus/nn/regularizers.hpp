// gradus/nn/regularizers.hpp — weight penalties (tf.keras.regularizers) attached to layers.
//
// A regularizer is a value, given to a layer through its options
// (`{.kernel_regularizer = gd::nn::l2(1e-4)}`); the layer registers it with the parameter, and
// `module.regularization_loss()` sums every penalty of a model into one differentiable scalar
// that the training loop adds to the loss:
//   gd::Var<float> loss = data_loss + net.regularization_loss();
#pragma once
#include <ostream>
#include <type_traits>

#include "gradus/autodiff/var.hpp"
#include "gradus/core/compiled.hpp"
#include "gradus/ops/elementwise.hpp"
#include "gradus/ops/reduce.hpp"

namespace gradus::nn {

/// The penalty l1 * sum(|w|) + l2 * sum(w²) (Keras' L1L2: no factor 1/2 on the l2 term).
/// Both factors zero (the default) means "no regularizer".
///
/// The penalty's expressions, and the sum that adds it to a loss, are compiled where a
/// regularizer with factors is made (the constructor below, which l1(), l2() and l1_l2() call),
/// and reached through pointers from there: a layer holds a Regularizer whether or not it has
/// one, and a header-only program whose layers have none does not compile the penalty's CPU
/// loops, GPU launchers and backward pass (about 18 KB of code) for every Module it makes, nor
/// the sum's (12 KB).
struct Regularizer {
  /// No penalty.
  constexpr Regularizer() = default;
  /// l1 * sum(|w|) + l2 * sum(w²). A template (F and D are always float and double) so that the
  /// penalties are instantiated where it is called, not in every file that includes this header.
  template <class F = float, class D = double>
  Regularizer(double l1, double l2) : l1_(l1), l2_(l2), float_(&penalty<F>), double_(&penalty<D>) {}

  double l1() const { return l1_; }
  double l2() const { return l2_; }
  /// True when the penalty is not identically zero.
  explicit operator bool() const { return l1_ != 0 || l2_ != 0; }

  /// The penalty of `w`, a rank-0 Var (differentiable in w), computed in one fused pass; a
  /// constant zero for no penalty.
  template <Real T>
  Var<T> operator()(const Var<T>& w) const;
  /// `total = total + (the penalty of w)`; nothing for no penalty.
  template <Real T>
  void add_to(Var<T>& total, const Var<T>& w) const;

  friend std::ostream& operator<<(std::ostream& os, const Regularizer& r) {
    return os << "Regularizer(l1=" << r.l1_ << ", l2=" << r.l2_ << ')';
  }

 private:
  /// The penalty of w, or with `total`, total + the penalty.
  template <Real T>
  static Var<T> penalty(double l1, double l2, const Var<T>& w, const Var<T>* total) {
    Var<T> p = gradus::sum(T(l1) * gradus::abs(w) + T(l2) * gradus::square(w));
    if (!total) return p;
    return *total + p;
  }
  template <Real T>
  auto penalty_of() const {
    if constexpr (std::is_same_v<T, float>) return float_;
    else return double_;
  }

  double l1_ = 0, l2_ = 0;
  // penalty<float> and penalty<double>; null exactly when both factors are zero
  Var<float> (*float_)(double, double, const Var<float>&, const Var<float>*) = nullptr;
  Var<double> (*double_)(double, double, const Var<double>&, const Var<double>*) = nullptr;
};

// Out of the class, so that a program linking libgradus uses the float and double copies there.
template <Real T>
Var<T> Regularizer::operator()(const Var<T>& w) const {
  if (const auto penalty = penalty_of<T>()) return penalty(l1_, l2_, w, nullptr);
  return Var<T>::constant(Tensor<T>::empty({}, w.value().device()).fill_(T(0)));
}

template <Real T>
void Regularizer::add_to(Var<T>& total, const Var<T>& w) const {
  if (const auto penalty = penalty_of<T>()) total = penalty(l1_, l2_, w, &total);
}

/// l * sum(|w|) (tf.keras.regularizers.l1; Keras' default l = 0.01).
template <class = void>  // instantiated where called (the constructor)
Regularizer l1(double l = 0.01) {
  GRADUS_CHECK(value_error, l >= 0, "l1: the factor must be >= 0, got ", l);
  return {l, 0};
}
/// l * sum(w²) (tf.keras.regularizers.l2; Keras' default l = 0.01). TF 1's
/// `tf.contrib.layers.l2_regularizer(scale)` is scale * sum(w²) / 2 (scale * tf.nn.l2_loss(w)):
/// the same penalty is `gd::nn::l2(scale / 2)`.
template <class = void>
Regularizer l2(double l = 0.01) {
  GRADUS_CHECK(value_error, l >= 0, "l2: the factor must be >= 0, got ", l);
  return {0, l};
}
/// l1 * sum(|w|) + l2 * sum(w²) (tf.keras.regularizers.l1_l2).
template <class = void>
Regularizer l1_l2(double l1 = 0.01, double l2 = 0.01) {
  GRADUS_CHECK(value_error, l1 >= 0 && l2 >= 0, "l1_l2: the factors must be >= 0, got l1 ", l1, ", l2 ", l2);
  return {l1, l2};
}

}  // namespace gradus::nn

#if GRADUS_INSTANCES  // compiled once in libgradus with GRADUS_COMPILED (core/compiled.hpp)
namespace gradus::nn {
GRADUS_INSTANCE Var<float> Regularizer::operator()(const Var<float>&) const;
GRADUS_INSTANCE_DOUBLE Var<double> Regularizer::operator()(const Var<double>&) const;
GRADUS_INSTANCE void Regularizer::add_to(Var<float>&, const Var<float>&) const;
GRADUS_INSTANCE_DOUBLE void Regularizer::add_to(Var<double>&, const Var<double>&) const;
GRADUS_INSTANCE Var<float> Regularizer::penalty(double, double, const Var<float>&, const Var<float>*);
GRADUS_INSTANCE_DOUBLE Var<double> Regularizer::penalty(double, double, const Var<double>&, const Var<double>*);
}  // namespace gradus::nn
#endif
