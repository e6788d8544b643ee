// gradus/autodiff/gradient_check.hpp — theoretical vs numerical Jacobians
// (the C++ form of tf.test.compute_gradient and compute_gradient_error).
//
// The one numerical gradient checker of gradus: `detail::central_differences` is the only
// central-difference loop and `gradient_error` the only error measure; the Catch2 matcher
// (autodiff/catch_matchers.hpp), `nn::check_module_gradient` and the op registry test use them.
#pragma once
#include <algorithm>
#include <cmath>
#include <type_traits>
#include <utility>
#include <vector>

#include "gradus/autodiff/backward.hpp"

namespace gradus {

struct GradientCheckOptions {
  double delta = 1e-3;  ///< central-difference step
};

/// The two Jacobians of one input: element [i, j] is d y[j] / d x[i], shape [x.size(), y.size()].
template <Real T>
struct Jacobians {
  Tensor<T> theoretical, numerical;
};

/// The error of one gradient entry: |theoretical - numerical| / max(1, |numerical|), i.e. absolute
/// for gradients up to 1 in magnitude and relative beyond; infinity if either is NaN.
inline double gradient_error(double theoretical, double numerical) {
  const double d = std::abs(theoretical - numerical) / std::max(1.0, std::abs(numerical));
  return std::isnan(d) ? INFINITY : d;
}

namespace detail {

/// The central-difference loop: for each target k and element i, y+ = eval() with x_k[i] + delta
/// and y- = eval() with x_k[i] - delta (values changed in place and restored, nothing recorded),
/// then `emit(k, i, j, (y+[j] - y-[j]) / (2 delta))` for every output element j.
/// `eval()` returns the output as a Tensor<T> (or anything `eval` turns into one), which may
/// share x's storage.
template <Real T, class Eval, class Emit>
void central_differences(const std::vector<Var<T>>& targets, double delta, Eval&& eval_f, Emit&& emit) {
  GRADUS_CHECK(value_error, delta > 0, "gradient check: delta must be positive, got ", delta);
  no_grad guard;
  std::vector<T> plus;
  for (size_t k = 0; k < targets.size(); ++k) {
    Var<T> target = targets[k];
    T* xv = target.value().data();
    for (int64_t i = 0, n = target.size(); i < n; ++i) {
      const T keep = xv[i];
      xv[i] = T(keep + delta);
      {
        const Tensor<T> yp = eval(eval_f());  // may be a view of x (reshape): read it before x changes again
        plus.assign(yp.data(), yp.data() + yp.size());
      }
      xv[i] = T(keep - delta);
      const Tensor<T> ym = eval(eval_f());
      for (int64_t j = 0; j < ym.size(); ++j) emit(k, i, j, (double(plus[size_t(j)]) - double(ym.data()[j])) / (2 * delta));
      xv[i] = keep;
    }
  }
}

/// Both Jacobians of `call()` (which returns y as an expression of `xs`) with respect to each x.
template <Real T, class Call>
std::vector<Jacobians<T>> jacobians_of(Call&& call, const std::vector<Var<T>>& xs, GradientCheckOptions opt) {
  GRADUS_CHECK(value_error, opt.delta > 0, "compute_gradient: delta must be positive, got ", opt.delta);
  const auto y = materialize(call());
  static_assert(is_var_v<decltype(y)>, "F_MUST_RETURN_AN_EXPRESSION_OF_ITS_VAR_ARGUMENTS: compute_gradient");
  const int64_t ny = y.size();
  std::vector<Jacobians<T>> out(xs.size());
  for (size_t k = 0; k < xs.size(); ++k) {
    out[k].theoretical = Tensor<T>::zeros({xs[k].size(), ny});
    out[k].numerical = Tensor<T>::zeros({xs[k].size(), ny});
  }
  // theoretical: one backward pass per output element, seeded with a unit vector
  if (y.requires_grad()) {
    Tensor<T> seed = Tensor<T>::zeros(y.shape());
    for (int64_t j = 0; j < ny; ++j) {
      seed.data()[j] = T(1);
      const auto g = gradients(y, xs, &seed);
      seed.data()[j] = T(0);
      for (size_t k = 0; k < xs.size(); ++k)
        for (int64_t i = 0; i < xs[k].size(); ++i) out[k].theoretical.data()[i * ny + j] = g[k].data()[i];
    }
  }
  central_differences<T>(xs, opt.delta, [&] { return materialize(call()); },
                         [&](size_t k, int64_t i, int64_t j, double d) { out[k].numerical.data()[i * ny + j] = T(d); });
  return out;
}

template <Real T>
std::vector<Var<T>> leaves_of(const std::vector<Tensor<T>>& x0) {
  std::vector<Var<T>> xs;
  for (const auto& x : x0) xs.emplace_back(x.clone());
  return xs;
}

template <size_t N, Real T, class F>
std::vector<Jacobians<T>> compute_jacobians(F f, const std::vector<Tensor<T>>& x0, GradientCheckOptions opt) {
  const std::vector<Var<T>> xs = leaves_of(x0);
  return jacobians_of<T>([&] { return [&]<size_t... I>(std::index_sequence<I...>) { return f(xs[I]...); }(
                                   std::make_index_sequence<N>{}); },
                         xs, opt);
}

/// f(const std::vector<Var<T>>&): any number of inputs, chosen at run time.
template <Real T, class F>
std::vector<Jacobians<T>> compute_jacobians_list(F f, const std::vector<Tensor<T>>& x0, GradientCheckOptions opt) {
  const std::vector<Var<T>> xs = leaves_of(x0);
  return jacobians_of<T>([&] { return f(xs); }, xs, opt);
}

/// The largest `gradient_error` over every Jacobian entry.
template <Real T>
double max_gradient_error(const std::vector<Jacobians<T>>& js) {
  double err = 0;
  for (const auto& j : js)
    for (int64_t i = 0; i < j.theoretical.size(); ++i)
      err = std::max(err, gradient_error(double(j.theoretical.data()[i]), double(j.numerical.data()[i])));
  return err;
}

}  // namespace detail

/// Theoretical (by backward passes) and numerical (central differences) Jacobians of y = f(x),
/// each of shape [x.size(), y.size()]. f takes `const Var<T>&` and returns any expression.
///   auto [theoretical, numerical] = gd::compute_gradient(f, x0, {.delta = 1e-3});
template <Real T, class F>
Jacobians<T> compute_gradient(F f, const Tensor<T>& x0, GradientCheckOptions opt = {}) {
  return detail::compute_jacobians<1>(f, std::vector<Tensor<T>>{x0}, opt)[0];
}
/// For functions of several Vars: f(x0, x1, ...), one pair of Jacobians per input.
///   auto js = gd::compute_gradient(f, {a0, b0});
template <Real T, class F, size_t N>
std::vector<Jacobians<T>> compute_gradient(F f, const Tensor<T> (&x0)[N], GradientCheckOptions opt = {}) {
  return detail::compute_jacobians<N>(f, std::vector<Tensor<T>>(x0, x0 + N), opt);
}
/// For a number of inputs known at run time: f takes `const std::vector<Var<T>>&`.
///   auto js = gd::compute_gradient([](const auto& v) { return gd::concat(v, 0); }, inputs);
template <Real T, class F>
  requires std::is_invocable_v<const F&, const std::vector<Var<T>>&>
std::vector<Jacobians<T>> compute_gradient(F f, const std::vector<Tensor<T>>& x0, GradientCheckOptions opt = {}) {
  return detail::compute_jacobians_list(f, x0, opt);
}

/// The largest `gradient_error` (|theoretical - numerical| / max(1, |numerical|)) over every
/// Jacobian entry; infinity if any is NaN.
///   REQUIRE(gd::compute_gradient_error(f, x0) < 1e-6);
template <Real T, class F>
double compute_gradient_error(F f, const Tensor<T>& x0, GradientCheckOptions opt = {}) {
  return detail::max_gradient_error(detail::compute_jacobians<1>(f, std::vector<Tensor<T>>{x0}, opt));
}
template <Real T, class F, size_t N>
double compute_gradient_error(F f, const Tensor<T> (&x0)[N], GradientCheckOptions opt = {}) {
  return detail::max_gradient_error(detail::compute_jacobians<N>(f, std::vector<Tensor<T>>(x0, x0 + N), opt));
}
template <Real T, class F>
  requires std::is_invocable_v<const F&, const std::vector<Var<T>>&>
double compute_gradient_error(F f, const std::vector<Tensor<T>>& x0, GradientCheckOptions opt = {}) {
  return detail::max_gradient_error(detail::compute_jacobians_list(f, x0, opt));
}

}  // namespace gradus
