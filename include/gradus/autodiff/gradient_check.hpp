// gradus/autodiff/gradient_check.hpp — theoretical vs numerical Jacobians
// (the C++ form of tf.test.compute_gradient and compute_gradient_error).
#pragma once
#include <algorithm>
#include <cmath>
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

namespace detail {

template <Real T, class F, size_t... I>
auto call_with_vars(F& f, const std::vector<Var<T>>& xs, std::index_sequence<I...>) {
  return materialize(f(xs[I]...));
}

template <size_t N, Real T, class F>
std::vector<Jacobians<T>> compute_jacobians(F f, const std::vector<Tensor<T>>& x0, GradientCheckOptions opt) {
  GRADUS_CHECK(value_error, opt.delta > 0, "compute_gradient: delta must be positive, got ", opt.delta);
  std::vector<Var<T>> xs;
  for (const auto& x : x0) xs.emplace_back(x.clone());
  const auto y = call_with_vars<T>(f, xs, std::make_index_sequence<N>{});
  static_assert(is_var_v<decltype(y)>, "compute_gradient: f must return an expression of its Var arguments");
  const int64_t ny = y.size();
  std::vector<Jacobians<T>> out(N);
  for (size_t k = 0; k < N; ++k) {
    out[k].theoretical = Tensor<T>::zeros({x0[k].size(), ny});
    out[k].numerical = Tensor<T>::zeros({x0[k].size(), ny});
  }
  // theoretical: one backward pass per output element, seeded with a unit vector
  if (y.requires_grad()) {
    Tensor<T> seed = Tensor<T>::zeros(y.shape());
    for (int64_t j = 0; j < ny; ++j) {
      seed.data()[j] = T(1);
      const auto g = gradients(y, xs, &seed);
      seed.data()[j] = T(0);
      for (size_t k = 0; k < N; ++k)
        for (int64_t i = 0; i < x0[k].size(); ++i) out[k].theoretical.data()[i * ny + j] = g[k].data()[i];
    }
  }
  // numerical: central differences, one input element at a time
  no_grad guard;
  for (size_t k = 0; k < N; ++k) {
    T* xv = xs[k].value().data();
    for (int64_t i = 0; i < x0[k].size(); ++i) {
      const T keep = xv[i];
      xv[i] = T(keep + opt.delta);
      const Tensor<T> yp = eval(call_with_vars<T>(f, xs, std::make_index_sequence<N>{}));
      xv[i] = T(keep - opt.delta);
      const Tensor<T> ym = eval(call_with_vars<T>(f, xs, std::make_index_sequence<N>{}));
      xv[i] = keep;
      for (int64_t j = 0; j < ny; ++j)
        out[k].numerical.data()[i * ny + j] = T((double(yp.data()[j]) - double(ym.data()[j])) / (2 * opt.delta));
    }
  }
  return out;
}

template <Real T>
double max_abs_difference(const std::vector<Jacobians<T>>& js) {
  double err = 0;
  for (const auto& j : js)
    for (int64_t i = 0; i < j.theoretical.size(); ++i) {
      const double d = std::abs(double(j.theoretical.data()[i]) - double(j.numerical.data()[i]));
      err = std::isnan(d) ? INFINITY : std::max(err, d);
    }
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

/// The largest |theoretical - numerical| over every Jacobian entry (infinity if any is NaN).
///   REQUIRE(gd::compute_gradient_error(f, x0) < 1e-6);
template <Real T, class F>
double compute_gradient_error(F f, const Tensor<T>& x0, GradientCheckOptions opt = {}) {
  return detail::max_abs_difference(detail::compute_jacobians<1>(f, std::vector<Tensor<T>>{x0}, opt));
}
template <Real T, class F, size_t N>
double compute_gradient_error(F f, const Tensor<T> (&x0)[N], GradientCheckOptions opt = {}) {
  return detail::max_abs_difference(detail::compute_jacobians<N>(f, std::vector<Tensor<T>>(x0, x0 + N), opt));
}

}  // namespace gradus
