// gradus/testing/catch_matchers.hpp — a Catch2 (v2) matcher that makes a gradient check one line.
// Test-only: include it from a test file (no gradus header includes gradus/testing/).
//   #include <catch2/catch.hpp>
//   #include <gradus/testing/catch_matchers.hpp>
//   CHECK_THAT(f, gd::testing::GradientIsCorrect(x0));                      // rtol 1e-5, atol 1e-8, automatic step
//   CHECK_THAT(f, gd::testing::GradientIsCorrect({a0, b0}, {.rtol = 1e-4}));  // two inputs: f(a, b)
//   CHECK_THAT(g, gd::testing::GradientIsCorrect(inputs));                  // g(const std::vector<Var>&)
//   CHECK_THAT(wrong, !gd::testing::GradientIsCorrect(x0));                 // negated: the gradient is wrong
// The rule is gd::check_gradient's: |theoretical - numerical| <= atol + rtol * |numerical|. The
// older form GradientIsCorrect(x0, tol, opt) accepts gd::gradient_error <= tol instead
// (absolute up to 1, relative beyond), the measure of compute_gradient_error. On failure the
// description reads "gradient mismatch at x[1,2] -> y[0]: theoretical .., numerical .." and the
// function itself prints as "f" (not as Catch's "1" for a lambda that converts to a pointer).
#pragma once
#include <catch2/catch.hpp>
#include <sstream>
#include <string>
#include <type_traits>

#include "gradus/autodiff/gradient_check.hpp"

namespace gradus::testing {

namespace detail {

template <class F, class T, size_t N>
constexpr bool takes_vars() {
  return gradus::detail::invocable_with_vars<F, T, N>();
}

/// A function the matcher checks: a closure with one (non-template) call operator taking 1-4
/// Vars or a vector of them. Only such functions print as "f".
template <class F, class T>
constexpr bool checks_vars() {
  return takes_vars<F, T, 1>() || takes_vars<F, T, 2>() || takes_vars<F, T, 3>() || takes_vars<F, T, 4>() ||
         std::is_invocable_v<const F&, const std::vector<Var<T>>&>;
}
template <class F>
concept GradientFunction = std::is_class_v<F> && requires { &F::operator(); } &&
                           (checks_vars<F, float>() || checks_vars<F, double>());

}  // namespace detail

template <Real T>
class GradientMatcher : public Catch::Matchers::Impl::MatcherUntypedBase {
 public:
  /// The rtol/atol rule of `opt`.
  GradientMatcher(std::vector<Tensor<T>> x0, GradientCheckOptions opt) : x0_(std::move(x0)), opt_(opt) {}
  /// gradient_error <= tol (the measure of compute_gradient_error).
  GradientMatcher(std::vector<Tensor<T>> x0, double tol, GradientCheckOptions opt)
      : x0_(std::move(x0)), tol_(tol), opt_(opt) {}

  template <class F>
  bool match(const F& f) const {
    Shape y_shape;
    const std::vector<Jacobians<T>> js = jacobians(f, &y_shape);
    if (tol_ < 0) {
      result_ = gradus::detail::judge_tolerances(js, x0_, y_shape, opt_);
    } else {
      std::ostringstream bound;
      bound << tol_ << " * max(1, |numerical|)";
      result_ = gradus::detail::judge_jacobians(js, x0_, y_shape, bound.str(),
                                                [&](double n) { return tol_ * std::max(1.0, std::abs(n)); });
    }
    checked_ = true;
    return result_.ok != negated_;
  }

  /// The matcher that passes when the gradient is wrong: CHECK_THAT(f, !GradientIsCorrect(x0)).
  GradientMatcher operator!() const {
    GradientMatcher m = *this;
    m.negated_ = !negated_;
    m.checked_ = false;
    return m;
  }
  /// What the last `match` found.
  const GradientCheckResult& result() const { return result_; }

 protected:
  template <class F, size_t N = 1>
  std::vector<Jacobians<T>> jacobians(const F& f, Shape* y_shape) const {
    if constexpr (std::is_invocable_v<const F&, const std::vector<Var<T>>&>) {
      return gradus::detail::compute_jacobians_list(f, x0_, opt_, y_shape);
    } else if constexpr (N > 8) {
      throw value_error("GradientIsCorrect: f must take between 1 and 8 Vars");
    } else if constexpr (detail::takes_vars<F, T, N>()) {
      GRADUS_CHECK(value_error, x0_.size() == N, "GradientIsCorrect: f takes ", N, " Vars but ", x0_.size(),
                   " input tensors were given");
      return gradus::detail::compute_jacobians<N>(f, x0_, opt_, y_shape);
    } else {
      return jacobians<F, N + 1>(f, y_shape);
    }
  }
  std::string describe() const override {
    std::ostringstream os;
    os << (negated_ ? "has a wrong gradient" : "has a correct gradient") << " (central differences, step ";
    if (opt_.delta > 0)
      os << opt_.delta;
    else
      os << "automatic";
    os << ")";
    if (checked_) os << "; " << result_;
    return os.str();
  }

 private:
  std::vector<Tensor<T>> x0_;
  double tol_ = -1;  ///< negative: the rtol/atol rule
  GradientCheckOptions opt_;
  bool negated_ = false;
  mutable bool checked_ = false;
  mutable GradientCheckResult result_;
};

/// Matches a function of Vars whose backward pass agrees with central differences at x0:
/// every Jacobian entry within opt.atol + opt.rtol * |numerical| (defaults for double).
template <Real T>
GradientMatcher<T> GradientIsCorrect(const Tensor<T>& x0, GradientCheckOptions opt = {}) {
  return GradientMatcher<T>({x0}, opt);
}
template <Real T, size_t N>
GradientMatcher<T> GradientIsCorrect(const Tensor<T> (&x0)[N], GradientCheckOptions opt = {}) {
  return GradientMatcher<T>(std::vector<Tensor<T>>(x0, x0 + N), opt);
}
/// For a function of `const std::vector<Var<T>>&` (or of as many Vars as there are tensors).
template <Real T>
GradientMatcher<T> GradientIsCorrect(const std::vector<Tensor<T>>& x0, GradientCheckOptions opt = {}) {
  return GradientMatcher<T>(x0, opt);
}

/// The same with one tolerance on gd::gradient_error (absolute up to 1, relative beyond).
template <Real T>
GradientMatcher<T> GradientIsCorrect(const Tensor<T>& x0, double tol, GradientCheckOptions opt = {}) {
  return GradientMatcher<T>({x0}, tol, opt);
}
template <Real T, size_t N>
GradientMatcher<T> GradientIsCorrect(const Tensor<T> (&x0)[N], double tol, GradientCheckOptions opt = {}) {
  return GradientMatcher<T>(std::vector<Tensor<T>>(x0, x0 + N), tol, opt);
}
template <Real T>
GradientMatcher<T> GradientIsCorrect(const std::vector<Tensor<T>>& x0, double tol, GradientCheckOptions opt = {}) {
  return GradientMatcher<T>(x0, tol, opt);
}

}  // namespace gradus::testing

/// A checked function prints as "f" in Catch's report (a captureless lambda would otherwise
/// print as "1", through its conversion to a function pointer and then to bool).
template <gradus::testing::detail::GradientFunction F>
struct Catch::StringMaker<F> {
  static std::string convert(const F&) { return "f"; }
};
