// gradus/testing/module_check.hpp — check_module_gradient: one numerical gradient test for any module
// (dlib's test_layer). It differentiates sum(w * module.forward(x)), w a fixed random tensor,
// with respect to the input and every parameter, by backward pass and by central differences
// (the one loop and error measure of autodiff/gradient_check.hpp).
#pragma once
#include <algorithm>
#include <cmath>
#include <cstdint>
#include <iomanip>
#include <ostream>
#include <string>
#include <type_traits>
#include <utility>
#include <vector>

#include "gradus/autodiff/backward.hpp"
#include "gradus/autodiff/gradient_check.hpp"
#include "gradus/nn/module.hpp"
#include "gradus/ops/reduce.hpp"

namespace gradus::nn {

/// Options of `check_module_gradient`.
struct CheckGradientOptions {
  double delta = 1e-6;      ///< central-difference step
  double tolerance = 1e-6;  ///< largest accepted error (absolute; relative where |gradient| > 1)
  uint64_t seed = 1;        ///< seed of the random output weights w
};

/// What `check_module_gradient` found: one entry for the input (when it is differentiable) and
/// one per parameter. Printable; `ok()` when every error is within the tolerance.
struct GradientReport {
  struct Entry {
    std::string name;  ///< "input" or the parameter's path
    Shape shape;
    double max_error = 0;  ///< max over elements of gd::gradient_error(theoretical, numerical)
    int64_t worst = -1;    ///< the element where it occurs
    double theoretical = 0, numerical = 0;  ///< the two gradients there
  };
  std::vector<Entry> entries;
  double tolerance = 0;
  double delta = 0;

  /// True when every entry's error is within the tolerance (false if any is NaN).
  bool ok() const {
    return std::all_of(entries.begin(), entries.end(), [&](const Entry& e) { return e.max_error <= tolerance; });
  }
  /// The largest error of all entries.
  double max_error() const {
    double m = 0;
    for (const Entry& e : entries) m = std::isnan(e.max_error) ? INFINITY : std::max(m, e.max_error);
    return m;
  }

  friend std::ostream& operator<<(std::ostream& os, const GradientReport& r) {
    os << "check_module_gradient: " << (r.ok() ? "ok" : "FAILED") << " (tolerance " << r.tolerance << ", delta "
       << r.delta << ")";
    for (const Entry& e : r.entries) {
      os << "\n  " << (e.max_error <= r.tolerance ? "  " : "! ") << e.name << ' ' << e.shape << ": max error "
         << e.max_error;
      if (e.worst >= 0)
        os << " at element " << e.worst << " (theoretical " << e.theoretical << ", numerical " << e.numerical << ')';
    }
    return os;
  }
};

namespace detail {

template <class M, class X>
struct check_value {
  using type = value_type_t<X>;
};
template <ModuleType M, class X>
struct check_value<M, X> {
  using type = typename M::value_type;
};

}  // namespace detail

/// Numerical check of the gradient of `module` with respect to `input` (a Tensor<T>; a
/// Tensor<int64_t> of ids is not differentiated) and every parameter: L = sum(w * forward(x))
/// with w ~ N(0, 1) fixed by `seed`, its backward-pass gradient against central differences.
/// The module runs in its current mode (train/eval); buffers it updates (BatchNorm's moving
/// statistics) are restored afterwards. A module with randomness (Dropout in training mode) must
/// draw the same values at every call — reseed its Rng inside a wrapper's forward.
/// Use double precision:
///   auto report = gd::nn::check_module_gradient(layer, x, {.delta = 1e-6, .tolerance = 1e-6});
///   CHECK(report.ok());   // INFO(report) prints each parameter's largest error
template <class M, class X>
  requires(std::same_as<X, Tensor<typename detail::check_value<M, X>::type>> || std::same_as<X, Tensor<int64_t>>)
GradientReport check_module_gradient(M& module, const X& input, CheckGradientOptions opt = {}) {
  using T = typename detail::check_value<M, X>::type;
  static_assert(Real<T>, "THE_ELEMENT_TYPE_MUST_BE_FLOAT_OR_DOUBLE: check_module_gradient");
  constexpr bool diff_input = std::same_as<X, Tensor<T>>;
  GRADUS_CHECK(value_error, opt.delta > 0, "check_module_gradient: delta must be positive, got ", opt.delta);

  std::vector<std::string> names;
  std::vector<Var<T>> targets;
  Var<T> x;
  if constexpr (diff_input) {
    x = Var<T>(input.clone());
    names.emplace_back("input");
    targets.push_back(x);
  }
  std::vector<std::pair<std::string, Tensor<T>>> saved;
  if constexpr (ModuleType<M>) {
    for (auto& [name, p] : module.named_parameters()) {
      names.push_back(name);
      targets.push_back(p);
    }
    for (auto& [name, b] : module.named_buffers()) saved.emplace_back(name, b.clone());
  }
  GRADUS_CHECK(value_error, !targets.empty(),
               "check_module_gradient: nothing to check (integer input and no parameters)");

  auto run = [&]() -> Var<T> {
    if constexpr (diff_input)
      return detail::to_var(module.forward(x));
    else
      return detail::to_var(module.forward(input));
  };
  const Var<T> y = run();
  Rng rng(opt.seed);
  const Tensor<T> w = Tensor<T>::random_normal(y.shape(), rng);
  auto loss = [&](const Var<T>& out) { return Var<T>(gradus::sum(w * out)); };

  std::vector<Tensor<T>> theoretical;
  const Var<T> l = loss(y);
  if (l.requires_grad())
    theoretical = gradients(l, targets);
  else
    for (const Var<T>& t : targets) theoretical.push_back(Tensor<T>::zeros(t.shape()));

  GradientReport report;
  report.tolerance = opt.tolerance;
  report.delta = opt.delta;
  for (size_t k = 0; k < targets.size(); ++k) report.entries.push_back({names[k], targets[k].shape()});
  gradus::detail::central_differences<T>(targets, opt.delta, [&] { return loss(run()); },
                                         [&](size_t k, int64_t i, int64_t, double num) {
                                           GradientReport::Entry& e = report.entries[k];
                                           const double th = double(theoretical[k].data()[i]);
                                           const double err = gradient_error(th, num);
                                           if (e.worst < 0 || err > e.max_error) {
                                             e.max_error = err;
                                             e.worst = i;
                                             e.theoretical = th;
                                             e.numerical = num;
                                           }
                                         });
  if constexpr (ModuleType<M>) {
    auto buffers = module.named_buffers();
    for (size_t i = 0; i < buffers.size() && i < saved.size(); ++i) buffers[i].second.copy_(saved[i].second);
  }
  return report;
}

}  // namespace gradus::nn
