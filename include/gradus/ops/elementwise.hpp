// gradus/ops/elementwise.hpp — every elementwise function: `gd::exp(x)`, `a + b`, `gd::where`, ...
// Each builds an expression node over an op struct of ops/elementwise_math.hpp (the math).
#pragma once
#include "gradus/core/eigen.hpp"  // first: Eigen/Core with its warnings handled
#include <unsupported/Eigen/SpecialFunctions>

#include "gradus/backend/backend.hpp"
#include "gradus/expr/expr.hpp"
#include "gradus/ops/elementwise_math.hpp"

namespace gradus {

/// A unary elementwise function object: `gd::exp(x)` builds `UnaryExpr<ops::Exp, X>`.
template <class Op>
struct unary_fn {
  template <Expression A>
  auto operator()(A&& a) const {
    return make_unary(Op{}, std::forward<A>(a));
  }
};

inline constexpr unary_fn<ops::Neg> neg{};
inline constexpr unary_fn<ops::Abs> abs{};
inline constexpr unary_fn<ops::Sign> sign{};
inline constexpr unary_fn<ops::Exp> exp{};
inline constexpr unary_fn<ops::Log> log{};
inline constexpr unary_fn<ops::Log1p> log1p{};
inline constexpr unary_fn<ops::Sqrt> sqrt{};
inline constexpr unary_fn<ops::Rsqrt> rsqrt{};
inline constexpr unary_fn<ops::Square> square{};
inline constexpr unary_fn<ops::Sin> sin{};
inline constexpr unary_fn<ops::Cos> cos{};
inline constexpr unary_fn<ops::Tanh> tanh{};
inline constexpr unary_fn<ops::Sigmoid> sigmoid{};
inline constexpr unary_fn<ops::Relu> relu{};
inline constexpr unary_fn<ops::Selu> selu{};
inline constexpr unary_fn<ops::Gelu> gelu{};
inline constexpr unary_fn<ops::Softplus> softplus{};
inline constexpr unary_fn<ops::Softsign> softsign{};

/// max(x, alpha * x) (TensorFlow's default alpha 0.2).
template <Expression A>
auto leaky_relu(A&& a, double alpha = 0.2) {
  return make_unary(ops::LeakyRelu(alpha), std::forward<A>(a));
}
/// x for x > 0, alpha * (e^x - 1) otherwise.
template <Expression A>
auto elu(A&& a, double alpha = 1.0) {
  return make_unary(ops::Elu(alpha), std::forward<A>(a));
}
/// min(max(x, lo), hi); the gradient passes where lo <= x <= hi.
template <Expression A>
auto clamp(A&& a, double lo, double hi) {
  GRADUS_CHECK(value_error, lo <= hi, "clamp: lo ", lo, " exceeds hi ", hi);
  return make_unary(ops::Clamp(lo, hi), std::forward<A>(a));
}
/// x^p for a number p, or elementwise x^y for two operands.
template <Expression A, Scalar P>
auto pow(A&& a, P p) {
  return make_unary(ops::PowScalar(double(p)), std::forward<A>(a));
}
template <class A, class B>
  requires(BinaryOperands<A, B> && !(Expression<A> && Scalar<B>))
auto pow(A&& a, B&& b) {
  return make_binary(ops::Pow{}, std::forward<A>(a), std::forward<B>(b));
}
template <class A, class B>
  requires BinaryOperands<A, B>
auto minimum(A&& a, B&& b) {
  return make_binary(ops::Minimum{}, std::forward<A>(a), std::forward<B>(b));
}
template <class A, class B>
  requires BinaryOperands<A, B>
auto maximum(A&& a, B&& b) {
  return make_binary(ops::Maximum{}, std::forward<A>(a), std::forward<B>(b));
}

/// `a` where `cond` is non-zero, else `b`; cond, a and b broadcast together. A mask tensor of
/// another element type (int64) is converted to a's once, where it is.
template <Expression C, class A, class B>
  requires BinaryOperands<A, B>
auto where(C&& cond, A&& a, B&& b) {
  auto wrap = [](auto&& x, auto&& other) {
    if constexpr (Expression<decltype(x)>)
      return detail::operand_t<decltype(x)>(std::forward<decltype(x)>(x));
    else
      return detail::as_operand<decltype(other)>(x);
  };
  auto av = wrap(std::forward<A>(a), b);
  auto bv = wrap(std::forward<B>(b), av);
  static_assert(detail::same_element_v<decltype(av), decltype(bv)>, "YOU_MIXED_ELEMENT_TYPES_IN_ONE_EXPRESSION: where — cast one operand first (gd::cast<T>(x))");
  using T = value_type_t<decltype(av)>;
  using M = std::remove_cvref_t<C>;
  if constexpr (!std::is_same_v<value_type_t<M>, T> && std::is_same_v<M, Tensor<value_type_t<M>>>) {
    // a mask tensor of another element type (int64): converted to T once, on its device, so the
    // expression has one element type on every backend, forward and backward
    Tensor<T> mask = Tensor<T>::empty(cond.shape(), cond.device());
    backend::cast(cond.device_data(), cond.size(), mask.device_data(), false, cond.device());
    return WhereExpr<Tensor<T>, decltype(av), decltype(bv)>(std::move(mask), std::move(av), std::move(bv));
  } else {
    return WhereExpr<detail::operand_t<C>, decltype(av), decltype(bv)>(std::forward<C>(cond), std::move(av), std::move(bv));
  }
}

#define GRADUS_BINARY_OPERATOR(OP, Op)                          \
  template <class A, class B>                                   \
    requires BinaryOperands<A, B>                               \
  auto operator OP(A&& a, B&& b) {                              \
    return make_binary(Op{}, std::forward<A>(a), std::forward<B>(b)); \
  }
GRADUS_BINARY_OPERATOR(+, ops::Add)
GRADUS_BINARY_OPERATOR(-, ops::Sub)
GRADUS_BINARY_OPERATOR(*, ops::Mul)
GRADUS_BINARY_OPERATOR(/, ops::Div)
GRADUS_BINARY_OPERATOR(>, ops::Greater)
GRADUS_BINARY_OPERATOR(<, ops::Less)
GRADUS_BINARY_OPERATOR(>=, ops::GreaterEqual)
GRADUS_BINARY_OPERATOR(<=, ops::LessEqual)
GRADUS_BINARY_OPERATOR(==, ops::Equal)
GRADUS_BINARY_OPERATOR(!=, ops::NotEqual)
#undef GRADUS_BINARY_OPERATOR

template <Expression A>
auto operator-(A&& a) {
  return make_unary(ops::Neg{}, std::forward<A>(a));
}

}  // namespace gradus
