// gradus/autodiff/gradient_check.hpp — theoretical vs numerical Jacobians
// (the C++ form of tf.test.compute_gradient and compute_gradient_error).
//
// The one numerical gradient checker of gradus: `detail::central_differences` is the only
// central-difference loop; `gradient_error` (compute_gradient_error) and the rtol/atol rule of
// `check_gradient` (and the Catch2 matcher, testing/catch_matchers.hpp) judge its results;
// `nn::check_module_gradient` and the op registry test use the same loop.
#pragma once
#include <algorithm>
#include <cmath>
#include <memory>
#include <ostream>
#include <sstream>
#include <string>
#include <type_traits>
#include <utility>
#include <vector>

#include "gradus/autodiff/backward.hpp"
#include "gradus/core/compiled.hpp"

namespace gradus {

/// Options of the gradient checker. The defaults pass correct double-precision code:
///   delta: the central-difference step. 0 (the default) picks it per element, scaled to the
///          input: 1e-6 * max(1, |x[i]|) for double, 1e-3 * max(1, |x[i]|) for float; a positive
///          value is used as given for every element.
///   rtol, atol: `check_gradient` and the Catch2 matcher accept an entry when
///          |theoretical - numerical| <= atol + rtol * |numerical| (numpy.isclose's rule). These
///          defaults suit double; float needs looser ones, e.g. {.rtol = 1e-2, .atol = 1e-3}.
struct GradientCheckOptions {
  double delta = 0;
  double rtol = 1e-5;
  double atol = 1e-8;
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

/// The step of the central difference at x: `delta` if positive, else the automatic one
/// (1e-6 for double, 1e-3 for float, times max(1, |x|)).
template <Real T>
double difference_step(double delta, T x) {
  if (delta > 0) return delta;
  const double base = std::is_same_v<T, float> ? 1e-3 : 1e-6;
  return base * std::max(1.0, std::abs(double(x)));
}

/// The central-difference loop: for each target k and element i, y+ = eval() with x_k[i] + h
/// and y- = eval() with x_k[i] - h (h = difference_step(delta, x_k[i]); values changed in place
/// and restored, nothing recorded), then `emit(k, i, j, (y+[j] - y-[j]) / (x+ - x-))` for every
/// output element j, where x+ and x- are the perturbed values as stored in T (so rounding of
/// the step itself does not bias the quotient). `delta` 0 picks the step automatically.
/// `eval()` returns the output as a Tensor<T> (or anything `eval` turns into one), which may
/// share x's storage.
template <Real T, class Eval, class Emit>
void central_differences(const std::vector<Var<T>>& targets, double delta, Eval&& eval_f, Emit&& emit) {
  GRADUS_CHECK(value_error, delta >= 0, "gradient check: delta must be positive (or 0 for automatic), got ", delta);
  no_grad guard;
  std::vector<T> plus;
  for (size_t k = 0; k < targets.size(); ++k) {
    Var<T> target = targets[k];
    T* xv = target.value().data();
    for (int64_t i = 0, n = target.size(); i < n; ++i) {
      const T keep = xv[i];
      const double h = difference_step(delta, keep);
      const T xp = T(double(keep) + h), xm = T(double(keep) - h);
      xv[i] = xp;
      {
        const Tensor<T> yp = eval(eval_f());  // may be a view of x (reshape): read it before x changes again
        plus.assign(yp.data(), yp.data() + yp.size());
      }
      xv[i] = xm;
      const Tensor<T> ym = eval(eval_f());
      const double width = double(xp) - double(xm);
      for (int64_t j = 0; j < ym.size(); ++j) emit(k, i, j, (double(plus[size_t(j)]) - double(ym.data()[j])) / width);
      xv[i] = keep;
    }
  }
}

/// Both Jacobians of y = `eval(ctx)` (a Var computed from `xs`) with respect to each x: the work
/// of jacobians_of, compiled once per element type.
template <Real T>
std::vector<Jacobians<T>> jacobians_of_function(Var<T> (*eval)(void* ctx), void* ctx, const std::vector<Var<T>>& xs,
                                                GradientCheckOptions opt, Shape* y_shape);

/// Both Jacobians of `call()` (which returns y as an expression of `xs`) with respect to each x.
/// `y_shape`, when given, receives the shape of y.
template <Real T, class Call>
std::vector<Jacobians<T>> jacobians_of(Call&& call, const std::vector<Var<T>>& xs, GradientCheckOptions opt,
                                       Shape* y_shape = nullptr) {
  using C = std::remove_reference_t<Call>;
  static_assert(is_var_v<decltype(materialize(call()))>,
                "F_MUST_RETURN_AN_EXPRESSION_OF_ITS_VAR_ARGUMENTS: compute_gradient");
  return jacobians_of_function<T>([](void* c) -> Var<T> { return materialize((*static_cast<C*>(c))()); },
                                  const_cast<void*>(static_cast<const void*>(std::addressof(call))), xs, opt,
                                  y_shape);
}

template <Real T>
std::vector<Jacobians<T>> jacobians_of_function(Var<T> (*eval)(void* ctx), void* ctx, const std::vector<Var<T>>& xs,
                                                GradientCheckOptions opt, Shape* y_shape) {
  GRADUS_CHECK(value_error, opt.delta >= 0, "compute_gradient: delta must be positive (or 0 for automatic), got ",
               opt.delta);
  const Var<T> y = eval(ctx);
  const int64_t ny = y.size();
  if (y_shape) *y_shape = y.shape();
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
  central_differences<T>(xs, opt.delta, [&] { return eval(ctx); },
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
std::vector<Jacobians<T>> compute_jacobians(F f, const std::vector<Tensor<T>>& x0, GradientCheckOptions opt,
                                            Shape* y_shape = nullptr) {
  const std::vector<Var<T>> xs = leaves_of(x0);
  return jacobians_of<T>([&] { return [&]<size_t... I>(std::index_sequence<I...>) { return f(xs[I]...); }(
                                   std::make_index_sequence<N>{}); },
                         xs, opt, y_shape);
}

/// f(const std::vector<Var<T>>&): any number of inputs, chosen at run time.
template <Real T, class F>
std::vector<Jacobians<T>> compute_jacobians_list(F f, const std::vector<Tensor<T>>& x0, GradientCheckOptions opt,
                                                 Shape* y_shape = nullptr) {
  const std::vector<Var<T>> xs = leaves_of(x0);
  return jacobians_of<T>([&] { return f(xs); }, xs, opt, y_shape);
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

/// Whether F is callable with N `const Var<T>&` arguments.
template <class F, class T, size_t N>
constexpr bool invocable_with_vars() {
  return []<size_t... I>(std::index_sequence<I...>) {
    return std::is_invocable_v<const F&, decltype((void)I, std::declval<const Var<T>&>())...>;
  }(std::make_index_sequence<N>{});
}

/// "[1,2]": the coordinates of flat (row-major) index `flat` in `shape`; "[]" for a scalar.
inline std::string coordinates(const Shape& shape, int64_t flat) {
  std::vector<int64_t> c(size_t(shape.rank()));
  for (int64_t d = shape.rank() - 1; d >= 0; --d) {
    const int64_t n = std::max<int64_t>(shape[d], 1);
    c[size_t(d)] = flat % n;
    flat /= n;
  }
  std::string out = "[";
  for (size_t d = 0; d < c.size(); ++d) out += (d ? "," : "") + std::to_string(c[d]);
  return out + "]";
}

}  // namespace detail

/// What `check_gradient` (and the Catch2 matcher) found: whether every Jacobian entry is within
/// its bound, and the entry furthest beyond it (or, when all pass, closest to it). Printable:
///   gradient mismatch at x[1,2] -> y[0]: theoretical 1.5, numerical 2.5 (|difference| 1 > 1e-08 + 1e-05 * |numerical|)
struct GradientCheckResult {
  bool ok = true;
  size_t inputs = 0;                   ///< how many inputs f has
  size_t input = 0;                    ///< the worst entry: which input,
  Shape x_shape, y_shape;              ///< the shapes of that input and of y,
  int64_t x_index = -1, y_index = -1;  ///< flat indices into them (-1: no entries at all),
  double theoretical = 0, numerical = 0;
  double excess = 0;  ///< |theoretical - numerical| / bound: at most 1 passes; infinity for NaN
  std::string bound;  ///< the rule, e.g. "1e-08 + 1e-05 * |numerical|"

  /// "x[1,2] -> y[0]" (with "input 1, " in front when f has several inputs).
  std::string where() const {
    std::string w = inputs > 1 ? "input " + std::to_string(input) + ", " : std::string();
    return w + "x" + detail::coordinates(x_shape, x_index) + " -> y" + detail::coordinates(y_shape, y_index);
  }
  friend std::ostream& operator<<(std::ostream& os, const GradientCheckResult& r) {
    if (r.x_index < 0) return os << "gradient check: no Jacobian entries (an empty input or output)";
    os << (r.ok ? "gradient ok, closest to its bound at " : "gradient mismatch at ") << r.where() << ": theoretical "
       << r.theoretical << ", numerical " << r.numerical << " (|difference| " << std::abs(r.theoretical - r.numerical)
       << (r.ok ? " <= " : " > ") << r.bound << ")";
    return os;
  }
};

namespace detail {

/// Judges every entry of `js` against `allowed(numerical)`, the largest accepted |difference|.
template <Real T, class Allowed>
GradientCheckResult judge_jacobians(const std::vector<Jacobians<T>>& js, const std::vector<Tensor<T>>& x0,
                                    const Shape& y_shape, std::string bound, Allowed&& allowed) {
  GradientCheckResult r;
  r.inputs = js.size();
  r.y_shape = y_shape;
  r.bound = std::move(bound);
  r.excess = -1;
  for (size_t k = 0; k < js.size(); ++k) {
    const int64_t ny = std::max<int64_t>(js[k].theoretical.dim(1), 1);
    for (int64_t e = 0; e < js[k].theoretical.size(); ++e) {
      const double t = double(js[k].theoretical.data()[e]), n = double(js[k].numerical.data()[e]);
      const double diff = std::abs(t - n), limit = allowed(n);
      double excess = limit > 0 ? diff / limit : (diff == 0 ? 0 : INFINITY);
      if (std::isnan(excess)) excess = INFINITY;
      if (excess > r.excess) {
        r.excess = excess;
        r.input = k;
        r.x_shape = x0[k].shape();
        r.x_index = e / ny;
        r.y_index = e % ny;
        r.theoretical = t;
        r.numerical = n;
      }
    }
  }
  if (r.excess < 0) r.excess = 0;
  r.ok = r.excess <= 1;
  return r;
}

/// The rtol/atol rule of GradientCheckOptions.
template <Real T>
GradientCheckResult judge_tolerances(const std::vector<Jacobians<T>>& js, const std::vector<Tensor<T>>& x0,
                                     const Shape& y_shape, const GradientCheckOptions& opt) {
  GRADUS_CHECK(value_error, opt.rtol >= 0 && opt.atol >= 0, "check_gradient: rtol and atol must not be negative, got rtol ",
               opt.rtol, ", atol ", opt.atol);
  std::ostringstream bound;
  bound << opt.atol << " + " << opt.rtol << " * |numerical|";
  return judge_jacobians(js, x0, y_shape, bound.str(),
                         [&](double n) { return opt.atol + opt.rtol * std::abs(n); });
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
/// Jacobian entry; infinity if any is NaN. (`check_gradient` judges with rtol/atol and says where.)
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

/// Checks the gradient of y = f(x0...) against central differences entry by entry with the rule
/// |theoretical - numerical| <= opt.atol + opt.rtol * |numerical|; the result says where the
/// worst entry is, in coordinates (`x[1,2] -> y[0]`). f takes `const Var<T>&` (one input),
/// several Vars (`{a0, b0}`) or `const std::vector<Var<T>>&` (constrained so that a user's own
/// `check_gradient(module, x)` found next to it by argument-dependent lookup is not shadowed).
///   const gd::GradientCheckResult r = gd::check_gradient(f, x0);   // defaults for double
///   if (!r.ok) std::cerr << r << '\n';
template <Real T, class F>
  requires std::is_invocable_v<const F&, const Var<T>&>
GradientCheckResult check_gradient(const F& f, const Tensor<T>& x0, GradientCheckOptions opt = {}) {
  const std::vector<Tensor<T>> xs{x0};
  Shape y_shape;
  return detail::judge_tolerances(detail::compute_jacobians<1>(f, xs, opt, &y_shape), xs, y_shape, opt);
}
template <Real T, class F, size_t N>
  requires(detail::invocable_with_vars<F, T, N>())
GradientCheckResult check_gradient(const F& f, const Tensor<T> (&x0)[N], GradientCheckOptions opt = {}) {
  const std::vector<Tensor<T>> xs(x0, x0 + N);
  Shape y_shape;
  return detail::judge_tolerances(detail::compute_jacobians<N>(f, xs, opt, &y_shape), xs, y_shape, opt);
}
template <Real T, class F>
  requires std::is_invocable_v<const F&, const std::vector<Var<T>>&>
GradientCheckResult check_gradient(const F& f, const std::vector<Tensor<T>>& x0, GradientCheckOptions opt = {}) {
  Shape y_shape;
  return detail::judge_tolerances(detail::compute_jacobians_list(f, x0, opt, &y_shape), x0, y_shape, opt);
}

}  // namespace gradus

#if GRADUS_INSTANCES  // compiled once in libgradus with GRADUS_COMPILED (core/compiled.hpp)
namespace gradus::detail {
#define GRADUS_GRADIENT_CHECK(INSTANCE, T)                                                                          \
  INSTANCE std::vector<Jacobians<T>> jacobians_of_function(Var<T> (*)(void*), void*, const std::vector<Var<T>>&, \
                                                           GradientCheckOptions, Shape*);                         \
  INSTANCE double max_gradient_error(const std::vector<Jacobians<T>>&);                                           \
  INSTANCE GradientCheckResult judge_tolerances(const std::vector<Jacobians<T>>&, const std::vector<Tensor<T>>&,  \
                                                const Shape&, const GradientCheckOptions&);
GRADUS_GRADIENT_CHECK(GRADUS_INSTANCE, float)
GRADUS_GRADIENT_CHECK(GRADUS_INSTANCE_DOUBLE, double)
#undef GRADUS_GRADIENT_CHECK
}  // namespace gradus::detail
#endif
