// gradus/autodiff/custom_op.hpp — user ops with user gradients (tf.py_func + RegisterGradient).
#pragma once
#include <array>
#include <string>

#include "gradus/autodiff/materialize.hpp"

namespace gradus {

/// An op built from a user's forward and backward functions over tensors. Call it on any
/// expressions like a built-in op; it records one node whose backward calls `backward`.
///  1 input : forward(const Tensor& x) -> Tensor;
///            backward(const Tensor& x, const Tensor& y, const Tensor& grad) -> Tensor (x's shape)
///  N inputs: forward(const Tensor&... xs) -> Tensor;
///            backward(const std::array<Tensor, N>& xs, const Tensor& y, const Tensor& grad)
///              -> std::array<Tensor, N>
/// A backward may return an undefined Tensor for an input that gets no gradient; an N-input
/// backward may take a fourth argument, `const std::array<bool, N>& needs_grad`, to skip the
/// gradients nobody asked for (the data operand of a matmul, say).
///   auto my_relu = gd::custom_op(
///       [](const gd::Tensor<float>& x) { return gd::eval(gd::maximum(x, 0.f)); },
///       [](const gd::Tensor<float>& x, const gd::Tensor<float>&, const gd::Tensor<float>& g) {
///         return gd::eval(g * (x > 0.f)); });
///   gd::Var<float> y = my_relu(x * x);
template <class Forward, class Backward>
class CustomOp {
 public:
  CustomOp(Forward f, Backward b, std::string name) : forward_(std::move(f)), backward_(std::move(b)), name_(std::move(name)) {}

  template <Expression... Es>
    requires(sizeof...(Es) >= 1)
  auto operator()(const Es&... es) const {
    using T = value_type_t<std::tuple_element_t<0, std::tuple<Es...>>>;
    static_assert((std::same_as<value_type_t<Es>, T> && ...), "YOU_MIXED_ELEMENT_TYPES_IN_ONE_EXPRESSION: custom_op — cast one input first (gd::cast<T>(x))");
    return call<T>(materialize(es)...);
  }
  const std::string& name() const { return name_; }

 private:
  template <class T, class... Xs>
  auto call(const Xs&... xs) const {
    gradus::detail::OpScope prof;
    constexpr size_t N = sizeof...(Xs);
    static_assert(std::is_invocable_v<const Forward&, decltype(detail::value_of(xs))...>,
                  "THE_FORWARD_MUST_TAKE_ONE_TENSOR_PER_INPUT: custom_op — forward(const Tensor<T>&...)");
    Tensor<T> out = forward_(detail::value_of(xs)...);
    GRADUS_CHECK(value_error, out.defined(), "custom_op '", name_, "': forward returned an undefined tensor");
    const char* label = name_.c_str();
    return make_result(label, std::move(out),
                       [bwd = backward_, name = name_](const Tensor<T>& g, const Tensor<T>& y, const Xs&... in) {
                         if constexpr (N == 1) {
                           const Tensor<T> gx = bwd(detail::value_of(in)..., y, g);
                           (check_and_add(name, 0, in, gx), ...);
                         } else {
                           const std::array<Tensor<T>, N> xs_v{detail::value_of(in)...};
                           const std::array<bool, N> needs{detail::needs_grad(in)...};
                           std::array<Tensor<T>, N> gs;
                           if constexpr (std::is_invocable_v<const Backward&, decltype(xs_v), decltype(y),
                                                             decltype(g), decltype(needs)>)
                             gs = bwd(xs_v, y, g, needs);
                           else
                             gs = bwd(xs_v, y, g);
                           const std::tuple<const Xs&...> ins(in...);
                           [&]<size_t... I>(std::index_sequence<I...>) {
                             (check_and_add(name, I, std::get<I>(ins), gs[I]), ...);
                           }(std::make_index_sequence<N>{});
                         }
                       },
                       xs...);
  }
  template <class X, class T>
  static void check_and_add(const std::string& name, size_t i, const X& x, const Tensor<T>& g) {
    if (!detail::needs_grad(x) || !g.defined()) return;
    const Shape& want = detail::value_of(x).shape();
    GRADUS_CHECK(shape_error, g.shape() == want, "custom_op '", name, "': backward returned a gradient of shape ",
                 g.shape(), " for input ", i, " of shape ", want);
    detail::add_grad(x, g);
  }

  Forward forward_;
  Backward backward_;
  std::string name_;
};

/// Builds a CustomOp; `name` appears in error messages and profiles.
template <class Forward, class Backward>
auto custom_op(Forward forward, Backward backward, std::string name = "custom_op") {
  return CustomOp<Forward, Backward>(std::move(forward), std::move(backward), std::move(name));
}

}  // namespace gradus
