// gradus/ops/elementwise.hpp — every elementwise op: forward and gradient side by side.
//
// An op is one struct: `forward` and its gradient rule, written once over Eigen array blocks
// (they run vectorised inside fused loops). Unary ops take `backward(x, y, g)` (input, output,
// upstream adjoint); binary ops `dx(x, y, z, g)` and `dy(x, y, z, g)`. `domain` and `kinks` tell
// the registry test where to sample when it gradient-checks the op. Adding an op touches one
// struct here, one function object and one line of the registry (ops/registry.hpp).
#pragma once
#include <unsupported/Eigen/SpecialFunctions>
#include <numbers>
#include <string_view>

#include "gradus/expr/expr.hpp"

namespace gradus {
namespace ops {

template <class X>
using S = typename std::remove_cvref_t<X>::Scalar;

/// Interval the registry test samples an op's inputs from, and points it keeps away from.
struct Domain {
  double lo = -2, hi = 2;
};

struct UnaryOp {
  static constexpr bool differentiable = true;
  static constexpr Domain domain{};
  static constexpr std::array<double, 2> kinks{0, 0};
};

// clang-format off
struct Neg : UnaryOp {
  static constexpr std::string_view name = "neg";
  static auto forward(const auto& x) { return -x; }
  static auto backward(const auto&, const auto&, const auto& g) { return -g; }
};
struct Abs : UnaryOp {
  static constexpr std::string_view name = "abs";
  static auto forward(const auto& x) { return x.abs(); }
  static auto backward(const auto& x, const auto&, const auto& g) { return g * x.sign(); }
};
struct Sign : UnaryOp {
  static constexpr std::string_view name = "sign";
  static constexpr bool differentiable = false;
  static auto forward(const auto& x) { return x.sign(); }
  static auto backward(const auto&, const auto&, const auto& g) { return g * S<decltype(g)>(0); }
};
struct Exp : UnaryOp {
  static constexpr std::string_view name = "exp";
  static constexpr bool ignores_input = true;
  static auto forward(const auto& x) { return x.exp(); }
  static auto backward(const auto&, const auto& y, const auto& g) { return g * y; }
};
struct Log : UnaryOp {
  static constexpr std::string_view name = "log";
  static constexpr Domain domain{0.1, 3};
  static auto forward(const auto& x) { return x.log(); }
  static auto backward(const auto& x, const auto&, const auto& g) { return g / x; }
};
struct Log1p : UnaryOp {
  static constexpr std::string_view name = "log1p";
  static constexpr Domain domain{-0.9, 3};
  static auto forward(const auto& x) { return x.log1p(); }
  static auto backward(const auto& x, const auto&, const auto& g) { return g / (S<decltype(x)>(1) + x); }
};
struct Sqrt : UnaryOp {
  static constexpr std::string_view name = "sqrt";
  static constexpr bool ignores_input = true;
  static constexpr Domain domain{0.1, 3};
  static auto forward(const auto& x) { return x.sqrt(); }
  static auto backward(const auto&, const auto& y, const auto& g) { return g * S<decltype(g)>(0.5) / y; }
};
struct Rsqrt : UnaryOp {
  static constexpr std::string_view name = "rsqrt";
  static constexpr bool ignores_input = true;
  static constexpr Domain domain{0.2, 3};
  static auto forward(const auto& x) { return x.rsqrt(); }
  static auto backward(const auto&, const auto& y, const auto& g) { return g * S<decltype(g)>(-0.5) * y.cube(); }
};
struct Square : UnaryOp {
  static constexpr std::string_view name = "square";
  static auto forward(const auto& x) { return x.square(); }
  static auto backward(const auto& x, const auto&, const auto& g) { return g * S<decltype(g)>(2) * x; }
};
struct Sin : UnaryOp {
  static constexpr std::string_view name = "sin";
  static auto forward(const auto& x) { return x.sin(); }
  static auto backward(const auto& x, const auto&, const auto& g) { return g * x.cos(); }
};
struct Cos : UnaryOp {
  static constexpr std::string_view name = "cos";
  static auto forward(const auto& x) { return x.cos(); }
  static auto backward(const auto& x, const auto&, const auto& g) { return -g * x.sin(); }
};
struct Tanh : UnaryOp {
  static constexpr std::string_view name = "tanh";
  static constexpr bool ignores_input = true;
  static auto forward(const auto& x) { return x.tanh(); }
  static auto backward(const auto&, const auto& y, const auto& g) { return g * (S<decltype(y)>(1) - y.square()); }
};
struct Sigmoid : UnaryOp {
  static constexpr std::string_view name = "sigmoid";
  static constexpr bool ignores_input = true;
  static auto forward(const auto& x) { return x.logistic(); }
  static auto backward(const auto&, const auto& y, const auto& g) { return g * y * (S<decltype(y)>(1) - y); }
};
struct Relu : UnaryOp {
  static constexpr std::string_view name = "relu";
  static auto forward(const auto& x) { return x.max(S<decltype(x)>(0)); }
  static auto backward(const auto& x, const auto&, const auto& g) { return (x > S<decltype(x)>(0)).select(g, S<decltype(x)>(0)); }
};
struct LeakyRelu : UnaryOp {
  static constexpr std::string_view name = "leaky_relu";
  double alpha = 0.2;
  LeakyRelu() = default;
  explicit LeakyRelu(double a) : alpha(a) {}
  auto forward(const auto& x) const { using T = S<decltype(x)>; return (x > T(0)).select(x, x * T(alpha)); }
  auto backward(const auto& x, const auto&, const auto& g) const { using T = S<decltype(x)>; return (x > T(0)).select(g, g * T(alpha)); }
};
struct Elu : UnaryOp {
  static constexpr std::string_view name = "elu";
  double alpha = 1.0;
  Elu() = default;
  explicit Elu(double a) : alpha(a) {}
  auto forward(const auto& x) const { using T = S<decltype(x)>; return (x > T(0)).select(x, T(alpha) * (x.exp() - T(1))); }
  auto backward(const auto& x, const auto& y, const auto& g) const { using T = S<decltype(x)>; return (x > T(0)).select(g, g * (y + T(alpha))); }
};
struct Selu : UnaryOp {
  static constexpr std::string_view name = "selu";
  static constexpr double alpha = 1.6732632423543772848170429916717, scale = 1.0507009873554804934193349852946;
  static auto forward(const auto& x) { using T = S<decltype(x)>; return (x > T(0)).select(T(scale) * x, T(scale * alpha) * (x.exp() - T(1))); }
  static auto backward(const auto& x, const auto& y, const auto& g) { using T = S<decltype(x)>; return (x > T(0)).select(g * T(scale), g * (y + T(scale * alpha))); }
};
struct Gelu : UnaryOp {  // exact form: x * Phi(x)
  static constexpr std::string_view name = "gelu";
  static auto forward(const auto& x) { using T = S<decltype(x)>; return T(0.5) * x * (T(1) + (x * T(std::numbers::sqrt2 / 2)).erf()); }
  static auto backward(const auto& x, const auto&, const auto& g) {
    using T = S<decltype(x)>;
    return g * (T(0.5) * (T(1) + (x * T(std::numbers::sqrt2 / 2)).erf()) +
                x * (T(-0.5) * x.square()).exp() * T(0.5 * std::numbers::inv_sqrtpi * std::numbers::sqrt2));
  }
};
struct Softplus : UnaryOp {  // log(1 + e^x), stable for any x
  static constexpr std::string_view name = "softplus";
  static auto forward(const auto& x) { using T = S<decltype(x)>; return x.max(T(0)) + (-x.abs()).exp().log1p(); }
  static auto backward(const auto& x, const auto&, const auto& g) { return g * x.logistic(); }
};
struct Softsign : UnaryOp {
  static constexpr std::string_view name = "softsign";
  static auto forward(const auto& x) { using T = S<decltype(x)>; return x / (T(1) + x.abs()); }
  static auto backward(const auto& x, const auto&, const auto& g) { using T = S<decltype(x)>; return g / (T(1) + x.abs()).square(); }
};
struct Clamp : UnaryOp {  // gradient passes where lo <= x <= hi, as tf.clip_by_value
  static constexpr std::string_view name = "clamp";
  static constexpr std::array<double, 2> kinks{-1, 1};
  double lo = -1, hi = 1;
  Clamp() = default;
  Clamp(double l, double h) : lo(l), hi(h) {}
  auto forward(const auto& x) const { using T = S<decltype(x)>; return x.max(T(lo)).min(T(hi)); }
  auto backward(const auto& x, const auto&, const auto& g) const { using T = S<decltype(x)>; return (x >= T(lo) && x <= T(hi)).select(g, T(0)); }
};
struct PowScalar : UnaryOp {
  static constexpr std::string_view name = "pow_scalar";
  static constexpr Domain domain{0.1, 3};
  double p = 3;
  PowScalar() = default;
  explicit PowScalar(double e) : p(e) {}
  auto forward(const auto& x) const { return x.pow(S<decltype(x)>(p)); }
  auto backward(const auto& x, const auto&, const auto& g) const { using T = S<decltype(x)>; return g * T(p) * x.pow(T(p - 1)); }
};

struct BinaryOp {
  static constexpr bool differentiable = true;
  static constexpr Domain domain{};
  static constexpr Domain domain_y{};
};
struct Add : BinaryOp {
  static constexpr std::string_view name = "add";
  static constexpr bool dx_is_identity = true, dy_is_identity = true, ignores_output = true;
  static auto forward(const auto& x, const auto& y) { return x + y; }
  static auto dx(const auto&, const auto&, const auto&, const auto& g) { return g; }
  static auto dy(const auto&, const auto&, const auto&, const auto& g) { return g; }
};
struct Sub : BinaryOp {
  static constexpr std::string_view name = "sub";
  static constexpr bool dx_is_identity = true, ignores_output = true;
  static auto forward(const auto& x, const auto& y) { return x - y; }
  static auto dx(const auto&, const auto&, const auto&, const auto& g) { return g; }
  static auto dy(const auto&, const auto&, const auto&, const auto& g) { return -g; }
};
struct Mul : BinaryOp {
  static constexpr std::string_view name = "mul";
  static constexpr bool ignores_output = true;
  static auto forward(const auto& x, const auto& y) { return x * y; }
  static auto dx(const auto&, const auto& y, const auto&, const auto& g) { return g * y; }
  static auto dy(const auto& x, const auto&, const auto&, const auto& g) { return g * x; }
};
struct Div : BinaryOp {
  static constexpr std::string_view name = "div";
  static constexpr Domain domain_y{0.5, 2};
  static auto forward(const auto& x, const auto& y) { return x / y; }
  static auto dx(const auto&, const auto& y, const auto&, const auto& g) { return g / y; }
  static auto dy(const auto&, const auto& y, const auto& z, const auto& g) { return -g * z / y; }
};
struct Pow : BinaryOp {  // d/dy is taken as 0 where x <= 0, as TensorFlow does
  static constexpr std::string_view name = "pow";
  static constexpr Domain domain{0.2, 2};
  static auto forward(const auto& x, const auto& y) { return x.pow(y); }
  static auto dx(const auto& x, const auto& y, const auto&, const auto& g) { return g * y * x.pow(y - S<decltype(x)>(1)); }
  static auto dy(const auto& x, const auto&, const auto& z, const auto& g) { using T = S<decltype(x)>; return (x > T(0)).select(g * z * x.log(), T(0)); }
};
struct Minimum : BinaryOp {  // ties send the gradient to x
  static constexpr std::string_view name = "minimum";
  static constexpr bool ignores_output = true;
  static auto forward(const auto& x, const auto& y) { return x.min(y); }
  static auto dx(const auto& x, const auto& y, const auto&, const auto& g) { return (x <= y).select(g, S<decltype(x)>(0)); }
  static auto dy(const auto& x, const auto& y, const auto&, const auto& g) { return (x <= y).select(S<decltype(x)>(0), g); }
};
struct Maximum : BinaryOp {  // ties send the gradient to x
  static constexpr std::string_view name = "maximum";
  static constexpr bool ignores_output = true;
  static auto forward(const auto& x, const auto& y) { return x.max(y); }
  static auto dx(const auto& x, const auto& y, const auto&, const auto& g) { return (x >= y).select(g, S<decltype(x)>(0)); }
  static auto dy(const auto& x, const auto& y, const auto&, const auto& g) { return (x >= y).select(S<decltype(x)>(0), g); }
};

/// Comparisons give 0/1 masks of the operands' type and pass no gradient.
#define GRADUS_COMPARISON(Name, str, OP)                                                          \
  struct Name : BinaryOp {                                                                        \
    static constexpr std::string_view name = str;                                                 \
    static constexpr bool ignores_output = true;                                                  \
    static constexpr bool differentiable = false;                                                 \
    static auto forward(const auto& x, const auto& y) { return (x OP y).template cast<S<decltype(x)>>(); } \
    static auto dx(const auto&, const auto&, const auto&, const auto& g) { return g; }           \
    static auto dy(const auto&, const auto&, const auto&, const auto& g) { return g; }           \
  };
GRADUS_COMPARISON(Greater, "greater", >)
GRADUS_COMPARISON(Less, "less", <)
GRADUS_COMPARISON(GreaterEqual, "greater_equal", >=)
GRADUS_COMPARISON(LessEqual, "less_equal", <=)
GRADUS_COMPARISON(Equal, "equal", ==)
GRADUS_COMPARISON(NotEqual, "not_equal", !=)
#undef GRADUS_COMPARISON
// clang-format on

}  // namespace ops

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

/// `a` where `cond` is non-zero, else `b`; cond, a and b broadcast together.
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
  return WhereExpr<detail::operand_t<C>, decltype(av), decltype(bv)>(std::forward<C>(cond), std::move(av), std::move(bv));
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
