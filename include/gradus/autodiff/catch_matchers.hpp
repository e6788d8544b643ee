// gradus/autodiff/catch_matchers.hpp — a Catch2 matcher that makes a gradient check one line.
//   #include <catch2/catch.hpp>
//   #include <gradus/autodiff/catch_matchers.hpp>
//   CHECK_THAT(f, gd::testing::GradientIsCorrect(x0));            // default tolerance 1e-6
//   CHECK_THAT(f, gd::testing::GradientIsCorrect({a0, b0}, 1e-4, {.delta = 1e-4}));
//   CHECK_THAT(g, gd::testing::GradientIsCorrect(inputs));        // g(const std::vector<Var>&)
// The error is gd::gradient_error (absolute up to 1, relative beyond), the same measure as
// compute_gradient_error. On failure it reports the largest error and where it is (input,
// x index, y index).
#pragma once
#include <catch2/catch.hpp>
#include <sstream>
#include <type_traits>

#include "gradus/autodiff/gradient_check.hpp"

namespace gradus::testing {

template <Real T>
class GradientMatcher : public Catch::Matchers::Impl::MatcherUntypedBase {
 public:
  GradientMatcher(std::vector<Tensor<T>> x0, double tol, GradientCheckOptions opt) : x0_(std::move(x0)), tol_(tol), opt_(opt) {}

  template <class F>
  bool match(const F& f) const {
    const std::vector<Jacobians<T>> js = jacobians(f);
    worst_ = -1;
    for (size_t k = 0; k < js.size(); ++k) {
      const int64_t ny = js[k].theoretical.dim(1);
      for (int64_t e = 0; e < js[k].theoretical.size(); ++e) {
        const double t = double(js[k].theoretical.data()[e]), n = double(js[k].numerical.data()[e]);
        const double d = gradient_error(t, n);
        if (d > worst_) worst_ = d, where_ = {k, e / std::max<int64_t>(ny, 1), e % std::max<int64_t>(ny, 1), t, n};
      }
    }
    return worst_ <= tol_;
  }

 protected:
  template <class F, size_t N>
  static constexpr bool takes() {
    return []<size_t... I>(std::index_sequence<I...>) {
      return std::is_invocable_v<const F&, decltype((void)I, std::declval<const Var<T>&>())...>;
    }(std::make_index_sequence<N>{});
  }
  template <class F, size_t N = 1>
  std::vector<Jacobians<T>> jacobians(const F& f) const {
    if constexpr (std::is_invocable_v<const F&, const std::vector<Var<T>>&>) {
      return detail::compute_jacobians_list(f, x0_, opt_);
    } else if constexpr (N > 8) {
      throw value_error("GradientIsCorrect: f must take between 1 and 8 Vars");
    } else if constexpr (takes<F, N>()) {
      GRADUS_CHECK(value_error, x0_.size() == N, "GradientIsCorrect: f takes ", N, " Vars but ", x0_.size(),
                   " input tensors were given");
      return detail::compute_jacobians<N>(f, x0_, opt_);
    } else {
      return jacobians<F, N + 1>(f);
    }
  }
  std::string describe() const override {
    std::ostringstream os;
    os << "has a gradient within " << tol_ << " of central differences (delta " << opt_.delta << ")";
    if (worst_ >= 0)
      os << "; largest error " << worst_ << " at input " << where_.input << ", x[" << where_.i << "] -> y["
         << where_.j << "]: theoretical " << where_.t << ", numerical " << where_.n;
    return os.str();
  }

 private:
  struct Where {
    size_t input = 0;
    int64_t i = 0, j = 0;
    double t = 0, n = 0;
  };
  std::vector<Tensor<T>> x0_;
  double tol_;
  GradientCheckOptions opt_;
  mutable double worst_ = -1;
  mutable Where where_;
};

/// Matches a function of Vars whose backward pass agrees with central differences at x0.
template <Real T>
GradientMatcher<T> GradientIsCorrect(const Tensor<T>& x0, double tol = 1e-6, GradientCheckOptions opt = {}) {
  return GradientMatcher<T>({x0}, tol, opt);
}
template <Real T, size_t N>
GradientMatcher<T> GradientIsCorrect(const Tensor<T> (&x0)[N], double tol = 1e-6, GradientCheckOptions opt = {}) {
  return GradientMatcher<T>(std::vector<Tensor<T>>(x0, x0 + N), tol, opt);
}
/// For a function of `const std::vector<Var<T>>&` (or of as many Vars as there are tensors).
template <Real T>
GradientMatcher<T> GradientIsCorrect(const std::vector<Tensor<T>>& x0, double tol = 1e-6, GradientCheckOptions opt = {}) {
  return GradientMatcher<T>(x0, tol, opt);
}

}  // namespace gradus::testing
