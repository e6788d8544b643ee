// gradus/ops/elementwise_math.hpp — the math of every elementwise op, written once: forward and
// gradient side by side.
//
// An op is one struct: `forward` and its gradient rule, written over "array-likes": Eigen array
// blocks on the CPU (they run vectorised inside fused loops) and one element on a GPU, where
// this very file is handed to NVRTC with backend/cuda/element.hpp's one-element type. Unary ops
// take `backward(x, y, g)` (input, output, upstream adjoint); binary ops `dx(x, y, z, g)` and
// `dy(x, y, z, g)`. `domain` and `kinks` tell tests where to sample. An op with run-time
// parameters declares `num_params` and `param(i)`, in the order its constructor takes them. The file therefore uses
// nothing but the array-like's methods (`exp()`, `select()`, `max()`, ...) and includes nothing
// NVRTC lacks. Adding an op touches one struct here, one function object in elementwise.hpp and
// one registry entry (tests/ops/registry_*.cpp).
#pragma once
#if !defined(__CUDACC_RTC__)
#include <array>
#include <numbers>
#include <string_view>
#include <tuple>
#include <type_traits>
#endif

#if defined(__CUDACC__) || defined(__CUDACC_RTC__)
#define GRADUS_HOST_DEVICE __host__ __device__
#else
#define GRADUS_HOST_DEVICE
#endif

namespace gradus {
namespace ops {

/// The scalar type of an operand (float for a float block, double for a double one): the type
/// an op's constants take (`ScalarOf<decltype(g)>(0.5)`).
template <class X>
using ScalarOf = typename std::remove_cvref_t<X>::Scalar;

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
/// The identity, for a layer's `linear` activation (expr/activations.hpp); no public op.
struct Identity {
  static constexpr bool ignores_input = true;
  GRADUS_HOST_DEVICE static auto forward(const auto& x) { return x; }
  GRADUS_HOST_DEVICE static auto backward(const auto&, const auto&, const auto& g) { return g; }
};
struct Neg : UnaryOp {
  static constexpr std::string_view name = "neg";
  GRADUS_HOST_DEVICE static auto forward(const auto& x) { return -x; }
  GRADUS_HOST_DEVICE static auto backward(const auto&, const auto&, const auto& g) { return -g; }
};
struct Abs : UnaryOp {
  static constexpr std::string_view name = "abs";
  GRADUS_HOST_DEVICE static auto forward(const auto& x) { return x.abs(); }
  GRADUS_HOST_DEVICE static auto backward(const auto& x, const auto&, const auto& g) { return g * x.sign(); }
};
struct Sign : UnaryOp {
  static constexpr std::string_view name = "sign";
  static constexpr bool differentiable = false;
  GRADUS_HOST_DEVICE static auto forward(const auto& x) { return x.sign(); }
  GRADUS_HOST_DEVICE static auto backward(const auto&, const auto&, const auto& g) { return g * ScalarOf<decltype(g)>(0); }
};
struct Exp : UnaryOp {
  static constexpr std::string_view name = "exp";
  static constexpr bool ignores_input = true;
  GRADUS_HOST_DEVICE static auto forward(const auto& x) { return x.exp(); }
  GRADUS_HOST_DEVICE static auto backward(const auto&, const auto& y, const auto& g) { return g * y; }
};
struct Log : UnaryOp {
  static constexpr std::string_view name = "log";
  static constexpr Domain domain{0.1, 3};
  GRADUS_HOST_DEVICE static auto forward(const auto& x) { return x.log(); }
  GRADUS_HOST_DEVICE static auto backward(const auto& x, const auto&, const auto& g) { return g / x; }
};
struct Log1p : UnaryOp {
  static constexpr std::string_view name = "log1p";
  static constexpr Domain domain{-0.9, 3};
  GRADUS_HOST_DEVICE static auto forward(const auto& x) { return x.log1p(); }
  GRADUS_HOST_DEVICE static auto backward(const auto& x, const auto&, const auto& g) { return g / (ScalarOf<decltype(x)>(1) + x); }
};
struct Sqrt : UnaryOp {
  static constexpr std::string_view name = "sqrt";
  static constexpr bool ignores_input = true;
  static constexpr Domain domain{0.1, 3};
  GRADUS_HOST_DEVICE static auto forward(const auto& x) { return x.sqrt(); }
  GRADUS_HOST_DEVICE static auto backward(const auto&, const auto& y, const auto& g) { return g * ScalarOf<decltype(g)>(0.5) / y; }
};
struct Rsqrt : UnaryOp {
  static constexpr std::string_view name = "rsqrt";
  static constexpr bool ignores_input = true;
  static constexpr Domain domain{0.2, 3};
  GRADUS_HOST_DEVICE static auto forward(const auto& x) { return x.rsqrt(); }
  GRADUS_HOST_DEVICE static auto backward(const auto&, const auto& y, const auto& g) { return g * ScalarOf<decltype(g)>(-0.5) * y.cube(); }
};
struct Square : UnaryOp {
  static constexpr std::string_view name = "square";
  GRADUS_HOST_DEVICE static auto forward(const auto& x) { return x.square(); }
  GRADUS_HOST_DEVICE static auto backward(const auto& x, const auto&, const auto& g) { return g * ScalarOf<decltype(g)>(2) * x; }
};
struct Sin : UnaryOp {
  static constexpr std::string_view name = "sin";
  GRADUS_HOST_DEVICE static auto forward(const auto& x) { return x.sin(); }
  GRADUS_HOST_DEVICE static auto backward(const auto& x, const auto&, const auto& g) { return g * x.cos(); }
};
struct Cos : UnaryOp {
  static constexpr std::string_view name = "cos";
  GRADUS_HOST_DEVICE static auto forward(const auto& x) { return x.cos(); }
  GRADUS_HOST_DEVICE static auto backward(const auto& x, const auto&, const auto& g) { return -g * x.sin(); }
};
struct Tanh : UnaryOp {
  static constexpr std::string_view name = "tanh";
  static constexpr bool ignores_input = true;
  GRADUS_HOST_DEVICE static auto forward(const auto& x) { return x.tanh(); }
  GRADUS_HOST_DEVICE static auto backward(const auto&, const auto& y, const auto& g) { return g * (ScalarOf<decltype(y)>(1) - y.square()); }
};
struct Sigmoid : UnaryOp {
  static constexpr std::string_view name = "sigmoid";
  static constexpr bool ignores_input = true;
  GRADUS_HOST_DEVICE static auto forward(const auto& x) { return x.logistic(); }
  GRADUS_HOST_DEVICE static auto backward(const auto&, const auto& y, const auto& g) { return g * y * (ScalarOf<decltype(y)>(1) - y); }
};
struct Relu : UnaryOp {
  static constexpr std::string_view name = "relu";
  GRADUS_HOST_DEVICE static auto forward(const auto& x) { return x.max(ScalarOf<decltype(x)>(0)); }
  GRADUS_HOST_DEVICE static auto backward(const auto& x, const auto&, const auto& g) { return (x > ScalarOf<decltype(x)>(0)).select(g, ScalarOf<decltype(x)>(0)); }
};
struct LeakyRelu : UnaryOp {
  static constexpr std::string_view name = "leaky_relu";
  static constexpr int num_params = 1;  // the generated CUDA builds LeakyRelu(alpha)
  double alpha = 0.2;
  LeakyRelu() = default;
  explicit LeakyRelu(double a) : alpha(a) {}
  constexpr double param(int) const { return alpha; }
  GRADUS_HOST_DEVICE auto forward(const auto& x) const { using T = ScalarOf<decltype(x)>; return (x > T(0)).select(x, x * T(alpha)); }
  GRADUS_HOST_DEVICE auto backward(const auto& x, const auto&, const auto& g) const { using T = ScalarOf<decltype(x)>; return (x > T(0)).select(g, g * T(alpha)); }
};
struct Elu : UnaryOp {
  static constexpr std::string_view name = "elu";
  static constexpr int num_params = 1;
  double alpha = 1.0;
  Elu() = default;
  explicit Elu(double a) : alpha(a) {}
  constexpr double param(int) const { return alpha; }
  GRADUS_HOST_DEVICE auto forward(const auto& x) const { using T = ScalarOf<decltype(x)>; return (x > T(0)).select(x, T(alpha) * (x.exp() - T(1))); }
  GRADUS_HOST_DEVICE auto backward(const auto& x, const auto& y, const auto& g) const { using T = ScalarOf<decltype(x)>; return (x > T(0)).select(g, g * (y + T(alpha))); }
};
struct Selu : UnaryOp {
  static constexpr std::string_view name = "selu";
  static constexpr double alpha = 1.6732632423543772848170429916717, scale = 1.0507009873554804934193349852946;
  GRADUS_HOST_DEVICE static auto forward(const auto& x) { using T = ScalarOf<decltype(x)>; return (x > T(0)).select(T(scale) * x, T(scale * alpha) * (x.exp() - T(1))); }
  GRADUS_HOST_DEVICE static auto backward(const auto& x, const auto& y, const auto& g) { using T = ScalarOf<decltype(x)>; return (x > T(0)).select(g * T(scale), g * (y + T(scale * alpha))); }
};
struct Gelu : UnaryOp {  // exact form: x * Phi(x)
  static constexpr std::string_view name = "gelu";
  GRADUS_HOST_DEVICE static auto forward(const auto& x) { using T = ScalarOf<decltype(x)>; return T(0.5) * x * (T(1) + (x * T(std::numbers::sqrt2 / 2)).erf()); }
  GRADUS_HOST_DEVICE static auto backward(const auto& x, const auto&, const auto& g) {
    using T = ScalarOf<decltype(x)>;
    return g * (T(0.5) * (T(1) + (x * T(std::numbers::sqrt2 / 2)).erf()) +
                x * (T(-0.5) * x.square()).exp() * T(0.5 * std::numbers::inv_sqrtpi * std::numbers::sqrt2));
  }
};
struct Softplus : UnaryOp {  // log(1 + e^x), stable for any x
  static constexpr std::string_view name = "softplus";
  GRADUS_HOST_DEVICE static auto forward(const auto& x) { using T = ScalarOf<decltype(x)>; return x.max(T(0)) + (-x.abs()).exp().log1p(); }
  GRADUS_HOST_DEVICE static auto backward(const auto& x, const auto&, const auto& g) { return g * x.logistic(); }
};
struct Softsign : UnaryOp {
  static constexpr std::string_view name = "softsign";
  GRADUS_HOST_DEVICE static auto forward(const auto& x) { using T = ScalarOf<decltype(x)>; return x / (T(1) + x.abs()); }
  GRADUS_HOST_DEVICE static auto backward(const auto& x, const auto&, const auto& g) { using T = ScalarOf<decltype(x)>; return g / (T(1) + x.abs()).square(); }
};
struct Clamp : UnaryOp {  // gradient passes where lo <= x <= hi, as tf.clip_by_value
  static constexpr std::string_view name = "clamp";
  static constexpr std::array<double, 2> kinks{-1, 1};
  static constexpr int num_params = 2;
  double lo = -1, hi = 1;
  Clamp() = default;
  Clamp(double l, double h) : lo(l), hi(h) {}
  constexpr double param(int i) const { return i == 0 ? lo : hi; }
  GRADUS_HOST_DEVICE auto forward(const auto& x) const { using T = ScalarOf<decltype(x)>; return x.max(T(lo)).min(T(hi)); }
  GRADUS_HOST_DEVICE auto backward(const auto& x, const auto&, const auto& g) const { using T = ScalarOf<decltype(x)>; return (x >= T(lo) && x <= T(hi)).select(g, T(0)); }
};
struct PowScalar : UnaryOp {
  static constexpr std::string_view name = "pow_scalar";
  static constexpr Domain domain{0.1, 3};
  static constexpr int num_params = 1;
  double p = 3;
  PowScalar() = default;
  explicit PowScalar(double e) : p(e) {}
  constexpr double param(int) const { return p; }
  GRADUS_HOST_DEVICE auto forward(const auto& x) const { return x.pow(ScalarOf<decltype(x)>(p)); }
  GRADUS_HOST_DEVICE auto backward(const auto& x, const auto&, const auto& g) const { using T = ScalarOf<decltype(x)>; return g * T(p) * x.pow(T(p - 1)); }
};

struct BinaryOp {
  static constexpr bool differentiable = true;
  static constexpr Domain domain{};
  static constexpr Domain domain_y{};
};
struct Add : BinaryOp {
  static constexpr std::string_view name = "add";
  static constexpr bool dx_is_identity = true, dy_is_identity = true, ignores_output = true;
  GRADUS_HOST_DEVICE static auto forward(const auto& x, const auto& y) { return x + y; }
  GRADUS_HOST_DEVICE static auto dx(const auto&, const auto&, const auto&, const auto& g) { return g; }
  GRADUS_HOST_DEVICE static auto dy(const auto&, const auto&, const auto&, const auto& g) { return g; }
};
struct Sub : BinaryOp {
  static constexpr std::string_view name = "sub";
  static constexpr bool dx_is_identity = true, ignores_output = true;
  GRADUS_HOST_DEVICE static auto forward(const auto& x, const auto& y) { return x - y; }
  GRADUS_HOST_DEVICE static auto dx(const auto&, const auto&, const auto&, const auto& g) { return g; }
  GRADUS_HOST_DEVICE static auto dy(const auto&, const auto&, const auto&, const auto& g) { return -g; }
};
struct Mul : BinaryOp {
  static constexpr std::string_view name = "mul";
  static constexpr bool ignores_output = true;
  GRADUS_HOST_DEVICE static auto forward(const auto& x, const auto& y) { return x * y; }
  GRADUS_HOST_DEVICE static auto dx(const auto&, const auto& y, const auto&, const auto& g) { return g * y; }
  GRADUS_HOST_DEVICE static auto dy(const auto& x, const auto&, const auto&, const auto& g) { return g * x; }
};
struct Div : BinaryOp {
  static constexpr std::string_view name = "div";
  static constexpr Domain domain_y{0.5, 2};
  GRADUS_HOST_DEVICE static auto forward(const auto& x, const auto& y) { return x / y; }
  GRADUS_HOST_DEVICE static auto dx(const auto&, const auto& y, const auto&, const auto& g) { return g / y; }
  GRADUS_HOST_DEVICE static auto dy(const auto&, const auto& y, const auto& z, const auto& g) { return -g * z / y; }
};
struct Pow : BinaryOp {  // d/dy is taken as 0 where x <= 0, as TensorFlow does
  static constexpr std::string_view name = "pow";
  static constexpr Domain domain{0.2, 2};
  GRADUS_HOST_DEVICE static auto forward(const auto& x, const auto& y) { return x.pow(y); }
  GRADUS_HOST_DEVICE static auto dx(const auto& x, const auto& y, const auto&, const auto& g) { return g * y * x.pow(y - ScalarOf<decltype(x)>(1)); }
  GRADUS_HOST_DEVICE static auto dy(const auto& x, const auto&, const auto& z, const auto& g) { using T = ScalarOf<decltype(x)>; return (x > T(0)).select(g * z * x.log(), T(0)); }
};
struct Minimum : BinaryOp {  // ties send the gradient to x
  static constexpr std::string_view name = "minimum";
  static constexpr bool ignores_output = true;
  GRADUS_HOST_DEVICE static auto forward(const auto& x, const auto& y) { return x.min(y); }
  GRADUS_HOST_DEVICE static auto dx(const auto& x, const auto& y, const auto&, const auto& g) { return (x <= y).select(g, ScalarOf<decltype(x)>(0)); }
  GRADUS_HOST_DEVICE static auto dy(const auto& x, const auto& y, const auto&, const auto& g) { return (x <= y).select(ScalarOf<decltype(x)>(0), g); }
};
struct Maximum : BinaryOp {  // ties send the gradient to x
  static constexpr std::string_view name = "maximum";
  static constexpr bool ignores_output = true;
  GRADUS_HOST_DEVICE static auto forward(const auto& x, const auto& y) { return x.max(y); }
  GRADUS_HOST_DEVICE static auto dx(const auto& x, const auto& y, const auto&, const auto& g) { return (x >= y).select(g, ScalarOf<decltype(x)>(0)); }
  GRADUS_HOST_DEVICE static auto dy(const auto& x, const auto& y, const auto&, const auto& g) { return (x >= y).select(ScalarOf<decltype(x)>(0), g); }
};

/// Comparisons give 0/1 masks of the operands' type and pass no gradient.
#define GRADUS_COMPARISON(Name, str, OP)                                                          \
  struct Name : BinaryOp {                                                                        \
    static constexpr std::string_view name = str;                                                 \
    static constexpr bool ignores_output = true;                                                  \
    static constexpr bool differentiable = false;                                                 \
    GRADUS_HOST_DEVICE static auto forward(const auto& x, const auto& y) { return (x OP y).template cast<ScalarOf<decltype(x)>>(); } \
    GRADUS_HOST_DEVICE static auto dx(const auto&, const auto&, const auto&, const auto& g) { return g; }           \
    GRADUS_HOST_DEVICE static auto dy(const auto&, const auto&, const auto&, const auto& g) { return g; }           \
  };
GRADUS_COMPARISON(Greater, "greater", >)
GRADUS_COMPARISON(Less, "less", <)
GRADUS_COMPARISON(GreaterEqual, "greater_equal", >=)
GRADUS_COMPARISON(LessEqual, "less_equal", <=)
GRADUS_COMPARISON(Equal, "equal", ==)
GRADUS_COMPARISON(NotEqual, "not_equal", !=)
#undef GRADUS_COMPARISON
// clang-format on


#if !defined(__CUDACC_RTC__)
/// Every elementwise op struct, for code that walks them all (the CUDA source tests).
using all_unary_ops = std::tuple<Neg, Abs, Sign, Exp, Log, Log1p, Sqrt, Rsqrt, Square, Sin, Cos, Tanh, Sigmoid, Relu,
                                 LeakyRelu, Elu, Selu, Gelu, Softplus, Softsign, Clamp, PowScalar>;
using all_binary_ops = std::tuple<Add, Sub, Mul, Div, Pow, Minimum, Maximum, Greater, Less, GreaterEqual, LessEqual,
                                  Equal, NotEqual>;
#endif

}  // namespace ops
}  // namespace gradus
