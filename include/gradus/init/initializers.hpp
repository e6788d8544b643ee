// gradus/init/initializers.hpp — weight initializers with TensorFlow's semantics (tf.keras.initializers).
#pragma once

#include <algorithm>
#include <cmath>
#include <concepts>
#include <cstdint>
#include <functional>
#include <limits>
#include <type_traits>
#include <utility>
#include <vector>

#include "gradus/core/error.hpp"
#include "gradus/core/rng.hpp"
#include "gradus/core/shape.hpp"
#include "gradus/core/tensor.hpp"

// Every initializer is a value: an aggregate of options with TensorFlow 2's defaults, called as
// `init(shape, rng)` to give a Tensor<float> (or `init.operator()<double>(shape, rng)`, or
// `gd::init::make<double>(init, shape, rng)`). Each takes an explicit `gd::Rng&`, also the
// deterministic ones, so all are interchangeable; `gd::init::Initializer` holds any of them.
//   gd::Rng rng(42);
//   auto w = gd::init::glorot_uniform{}({784, 500}, rng);                       // Tensor<float>
//   auto k = gd::init::make<double>(gd::init::he_normal{}, {5, 5, 1, 32}, rng);  // Tensor<double>
namespace gradus::init {

/// Fan-in and fan-out of a weight of `shape`, as TF: [in, out] for a 2-D kernel; for a conv
/// kernel [kh, kw, ..., in, out] (NHWC) both are multiplied by the receptive field kh*kw*...;
/// rank 1: both the dimension; rank 0: both 1.
struct Fans {
  int64_t fan_in = 1;
  int64_t fan_out = 1;
};

/// The fans of `shape` (see `Fans`): compute_fans({5, 5, 3, 32}) == {75, 800}.
inline Fans compute_fans(const Shape& shape) {
  const int r = shape.rank();
  if (r == 0) return {1, 1};
  if (r == 1) return {shape[0], shape[0]};
  int64_t receptive_field = 1;
  for (int i = 0; i < r - 2; ++i) receptive_field *= shape[i];
  return {shape[r - 2] * receptive_field, shape[r - 1] * receptive_field};
}

/// Which fan `variance_scaling` divides its scale by.
enum class FanMode { fan_in, fan_out, fan_avg };

/// The distribution `variance_scaling` draws from. `truncated_normal` (TF's default, also
/// spelled `normal`) cuts at 2 standard deviations and widens the stddev so that the result
/// still has variance scale/n; `untruncated_normal` is a plain normal; `uniform` is
/// U(-limit, limit) with limit = sqrt(3 * scale / n).
enum class Distribution { truncated_normal, normal = truncated_normal, untruncated_normal, uniform };

/// The standard deviation of a unit normal truncated to [-2, 2] (TF's correction constant).
inline constexpr double kTruncatedNormalStddev = 0.87962566103423978;

namespace detail {

template <Real T, class F>
Tensor<T> generate(const Shape& shape, F&& draw) {
  Tensor<T> t(shape);
  T* p = t.data();
  for (int64_t i = 0, n = t.size(); i < n; ++i) p[i] = T(draw());
  return t;
}

// A unit normal redrawn until it lies in [-2, 2] (TF's truncated_normal).
inline double truncated_unit_normal(Rng& rng) {
  double z;
  do z = rng.normal(); while (std::abs(z) > 2.0);
  return z;
}

}  // namespace detail

/// All zeros.
struct zeros {
  template <Real T = float>
  Tensor<T> operator()(const Shape& shape, Rng& /*rng*/) const { return Tensor<T>::zeros(shape); }
};

/// All ones.
struct ones {
  template <Real T = float>
  Tensor<T> operator()(const Shape& shape, Rng& /*rng*/) const { return Tensor<T>::ones(shape); }
};

/// Every element `value`: gd::init::constant{.value = 0.1}.
struct constant {
  double value = 0;
  template <Real T = float>
  Tensor<T> operator()(const Shape& shape, Rng& /*rng*/) const { return Tensor<T>::full(shape, T(value)); }
};

/// `gain` times the 2-D identity; a non-square [r, c] gets ones on its main diagonal (tf.eye(r, c)).
/// Any other rank throws value_error.
struct identity {
  double gain = 1;
  template <Real T = float>
  Tensor<T> operator()(const Shape& shape, Rng& /*rng*/) const {
    GRADUS_CHECK(value_error, shape.rank() == 2, "identity: expected a 2-D shape, got ", shape);
    auto t = Tensor<T>::zeros(shape);
    for (int64_t i = 0, n = std::min(shape[0], shape[1]); i < n; ++i) t.data()[i * shape[1] + i] = T(gain);
    return t;
  }
};

/// Normal(mean, stddev) samples; stddev >= 0 (TF 2 default 0.05).
struct random_normal {
  double mean = 0;
  double stddev = 0.05;
  template <Real T = float>
  Tensor<T> operator()(const Shape& shape, Rng& rng) const {
    GRADUS_CHECK(value_error, stddev >= 0, "random_normal: stddev must be >= 0, got ", stddev);
    return detail::generate<T>(shape, [&] { return rng.normal(mean, stddev); });
  }
};

/// Normal(mean, stddev) samples, any beyond 2 stddev from the mean redrawn; stddev >= 0 (default
/// 0.05). The result's own stddev is 0.8796 * stddev (`kTruncatedNormalStddev`).
struct truncated_normal {
  double mean = 0;
  double stddev = 0.05;
  template <Real T = float>
  Tensor<T> operator()(const Shape& shape, Rng& rng) const {
    GRADUS_CHECK(value_error, stddev >= 0, "truncated_normal: stddev must be >= 0, got ", stddev);
    return detail::generate<T>(shape, [&] { return mean + stddev * detail::truncated_unit_normal(rng); });
  }
};

/// Uniform samples in [minval, maxval); minval <= maxval (TF 2 defaults -0.05, 0.05).
struct random_uniform {
  double minval = -0.05;
  double maxval = 0.05;
  template <Real T = float>
  Tensor<T> operator()(const Shape& shape, Rng& rng) const {
    GRADUS_CHECK(value_error, minval <= maxval, "random_uniform: minval must be <= maxval, got minval ", minval,
                 " > maxval ", maxval);
    return detail::generate<T>(shape, [&] { return rng.uniform(minval, maxval); });
  }
};

/// Samples with variance scale / n, n the fan of `mode` (at least 1) from `compute_fans`, drawn
/// from `distribution` (see `Distribution`); scale > 0. As tf.keras.initializers.VarianceScaling:
///   gd::init::variance_scaling{.scale = 2.0, .mode = gd::init::FanMode::fan_out}({3, 3, 64, 128}, rng)
struct variance_scaling {
  double scale = 1;
  FanMode mode = FanMode::fan_in;
  Distribution distribution = Distribution::truncated_normal;

  template <Real T = float>
  Tensor<T> operator()(const Shape& shape, Rng& rng) const {
    GRADUS_CHECK(value_error, scale > 0, "variance_scaling: scale must be > 0, got ", scale);
    const auto [fan_in, fan_out] = compute_fans(shape);
    double n = 0;
    switch (mode) {
      case FanMode::fan_in: n = double(fan_in); break;
      case FanMode::fan_out: n = double(fan_out); break;
      case FanMode::fan_avg: n = (double(fan_in) + double(fan_out)) / 2; break;
      default: gradus::detail::throw_error<value_error>({"variance_scaling: unknown mode ", int(mode)});
    }
    const double variance = scale / std::max(1.0, n);
    switch (distribution) {
      case Distribution::truncated_normal: {
        const double stddev = std::sqrt(variance) / kTruncatedNormalStddev;
        return detail::generate<T>(shape, [&] { return stddev * detail::truncated_unit_normal(rng); });
      }
      case Distribution::untruncated_normal: {
        const double stddev = std::sqrt(variance);
        return detail::generate<T>(shape, [&] { return stddev * rng.normal(); });
      }
      case Distribution::uniform: {
        const double limit = std::sqrt(3 * variance);
        return detail::generate<T>(shape, [&] { return rng.uniform(-limit, limit); });
      }
    }
    gradus::detail::throw_error<value_error>({"variance_scaling: unknown distribution ", int(distribution)});
  }
};

/// Glorot (Xavier) normal: variance_scaling{1, fan_avg, truncated_normal}, stddev sqrt(2 / (in + out)).
struct glorot_normal {
  template <Real T = float>
  Tensor<T> operator()(const Shape& shape, Rng& rng) const {
    return variance_scaling{1.0, FanMode::fan_avg, Distribution::truncated_normal}.operator()<T>(shape, rng);
  }
};
/// Glorot (Xavier) uniform: variance_scaling{1, fan_avg, uniform}, limit sqrt(6 / (in + out)).
struct glorot_uniform {
  template <Real T = float>
  Tensor<T> operator()(const Shape& shape, Rng& rng) const {
    return variance_scaling{1.0, FanMode::fan_avg, Distribution::uniform}.operator()<T>(shape, rng);
  }
};
/// He normal: variance_scaling{2, fan_in, truncated_normal}, stddev sqrt(2 / fan_in).
struct he_normal {
  template <Real T = float>
  Tensor<T> operator()(const Shape& shape, Rng& rng) const {
    return variance_scaling{2.0, FanMode::fan_in, Distribution::truncated_normal}.operator()<T>(shape, rng);
  }
};
/// He uniform: variance_scaling{2, fan_in, uniform}, limit sqrt(6 / fan_in).
struct he_uniform {
  template <Real T = float>
  Tensor<T> operator()(const Shape& shape, Rng& rng) const {
    return variance_scaling{2.0, FanMode::fan_in, Distribution::uniform}.operator()<T>(shape, rng);
  }
};
/// LeCun normal: variance_scaling{1, fan_in, truncated_normal}, stddev sqrt(1 / fan_in).
struct lecun_normal {
  template <Real T = float>
  Tensor<T> operator()(const Shape& shape, Rng& rng) const {
    return variance_scaling{1.0, FanMode::fan_in, Distribution::truncated_normal}.operator()<T>(shape, rng);
  }
};
/// LeCun uniform: variance_scaling{1, fan_in, uniform}, limit sqrt(3 / fan_in).
struct lecun_uniform {
  template <Real T = float>
  Tensor<T> operator()(const Shape& shape, Rng& rng) const {
    return variance_scaling{1.0, FanMode::fan_in, Distribution::uniform}.operator()<T>(shape, rng);
  }
};

namespace detail {

/// Replaces `a` (m x n, row-major, m >= n) by the Q of its QR decomposition with R's diagonal
/// made positive: orthonormal columns, unique for a full-rank a. Householder reflections with
/// LAPACK's (and Eigen's HouseholderQR's) conventions; written out here so that the umbrella
/// header does not parse Eigen/QR, and compiled once rather than per element type.
inline void orthonormalize_columns(std::vector<double>& a, int64_t m, int64_t n) {
  const auto at = [n](std::vector<double>& x, int64_t i, int64_t j) -> double& { return x[size_t(i * n + j)]; };
  std::vector<double> tau(static_cast<size_t>(n)), diag(static_cast<size_t>(n));
  for (int64_t j = 0; j < n; ++j) {  // reflection j zeroes column j below the diagonal
    double tail = 0;
    for (int64_t i = j + 1; i < m; ++i) tail += at(a, i, j) * at(a, i, j);
    const double c0 = at(a, j, j);
    if (tail <= std::numeric_limits<double>::min()) {  // nothing to zero: no reflection
      tau[size_t(j)] = 0;
      diag[size_t(j)] = c0;
      for (int64_t i = j + 1; i < m; ++i) at(a, i, j) = 0;
      continue;
    }
    const double norm = std::sqrt(c0 * c0 + tail), beta = c0 >= 0 ? -norm : norm;
    for (int64_t i = j + 1; i < m; ++i) at(a, i, j) /= c0 - beta;  // v = [1, a(j+1:, j)]
    tau[size_t(j)] = (beta - c0) / beta;
    diag[size_t(j)] = beta;
    for (int64_t k = j + 1; k < n; ++k) {  // a(j:, k) -= tau v (vᵀ a(j:, k))
      double s = at(a, j, k);
      for (int64_t i = j + 1; i < m; ++i) s += at(a, i, j) * at(a, i, k);
      s *= tau[size_t(j)];
      at(a, j, k) -= s;
      for (int64_t i = j + 1; i < m; ++i) at(a, i, k) -= s * at(a, i, j);
    }
  }
  // Q = H_0 ... H_{n-1} times the first n columns of the identity, the last reflection first;
  // H_j leaves columns k < j alone (still e_k there).
  std::vector<double> q(static_cast<size_t>(m * n), 0.0);
  for (int64_t j = 0; j < n; ++j) at(q, j, j) = 1;
  for (int64_t j = n - 1; j >= 0; --j) {
    for (int64_t k = j; k < n; ++k) {
      double s = at(q, j, k);
      for (int64_t i = j + 1; i < m; ++i) s += at(a, i, j) * at(q, i, k);
      s *= tau[size_t(j)];
      at(q, j, k) -= s;
      for (int64_t i = j + 1; i < m; ++i) at(q, i, k) -= s * at(a, i, j);
    }
  }
  for (int64_t j = 0; j < n; ++j)
    if (diag[size_t(j)] < 0)  // R's diagonal made positive, as TF
      for (int64_t i = 0; i < m; ++i) at(q, i, j) = -at(q, i, j);
  a = std::move(q);
}

}  // namespace detail

/// A random orthogonal matrix times `gain`, as tf.keras.initializers.Orthogonal: a shape
/// [..., cols] (rank >= 2) is viewed as rows = prod(other dims) x cols; the rows are orthonormal
/// (W Wᵀ = gain² I) when rows <= cols, else the columns are (Wᵀ W = gain² I). Drawn as the
/// sign-corrected Q of the QR of a normal max(rows, cols) x min(rows, cols) matrix (Haar measure).
struct orthogonal {
  double gain = 1;
  template <Real T = float>
  Tensor<T> operator()(const Shape& shape, Rng& rng) const {
    GRADUS_CHECK(value_error, shape.rank() >= 2, "orthogonal: expected a shape of rank >= 2, got ", shape);
    const int64_t cols = shape.back(), rows = cols ? shape.numel() / cols : 0;
    Tensor<T> t(shape);
    if (rows == 0 || cols == 0) return t;
    const int64_t m = std::max(rows, cols), n = std::min(rows, cols);
    std::vector<double> q(static_cast<size_t>(m * n));
    for (double& x : q) x = rng.normal();  // drawn in row-major order, as TF
    detail::orthonormalize_columns(q, m, n);
    T* w = t.data();  // [rows, cols]: Q [m, n] itself, or its transpose when rows < cols
    for (int64_t i = 0; i < rows; ++i)
      for (int64_t j = 0; j < cols; ++j)
        w[i * cols + j] = T(gain * (rows < cols ? q[size_t(j * n + i)] : q[size_t(i * n + j)]));
    return t;
  }
};

/// An initializer that makes both float and double tensors: `i.operator()<T>(shape, rng)` for
/// T = float and double (every initializer of this header, and `Initializer`).
template <class I>
concept GenericInitializer = requires(const I& i, const Shape& s, Rng& r) {
  { i.template operator()<float>(s, r) } -> std::same_as<Tensor<float>>;
  { i.template operator()<double>(s, r) } -> std::same_as<Tensor<double>>;
};

/// A plain callable `(const Shape&, Rng&) -> Tensor<T>` for one element type T.
template <class F, class T>
concept InitializerFunction = std::copy_constructible<F> && std::invocable<const F&, const Shape&, Rng&> &&
                              std::same_as<std::invoke_result_t<const F&, const Shape&, Rng&>, Tensor<T>>;

/// Any initializer, type-erased, for options that take "any initializer" (a layer's
/// `.kernel_initializer = gd::init::he_normal{}`). Holds a `GenericInitializer` or a plain
/// callable returning Tensor<float> or Tensor<double> (converted when asked for the other type).
/// Calling an empty one, or a callable that returns the wrong shape, throws value_error.
class Initializer {
 public:
  Initializer() = default;
  template <class I>
    requires(GenericInitializer<I> && !std::same_as<I, Initializer>)
  Initializer(I init)
      : f_([init](const Shape& s, Rng& r) { return init.template operator()<float>(s, r); }),
        d_([init](const Shape& s, Rng& r) { return init.template operator()<double>(s, r); }) {}
  template <class F>
    requires(!GenericInitializer<F> && (InitializerFunction<F, float> || InitializerFunction<F, double>))
  Initializer(F fn) {
    if constexpr (InitializerFunction<F, float>)
      f_ = std::move(fn);
    else
      d_ = std::move(fn);
  }

  /// True when it holds an initializer.
  explicit operator bool() const { return f_ || d_; }

  /// A tensor of `shape` drawn from `rng` by the held initializer.
  template <Real T = float>
  Tensor<T> operator()(const Shape& shape, Rng& rng) const {
    GRADUS_CHECK(value_error, bool(*this), "Initializer: empty (no initializer set), asked for shape ", shape);
    const auto& own = own_fn<T>();
    Tensor<T> t;
    if (own) {
      t = own(shape, rng);
    } else {
      const auto other = other_fn<T>()(shape, rng);
      t = Tensor<T>(other.shape());
      std::transform(other.data(), other.data() + other.size(), t.data(), [](auto v) { return T(v); });
    }
    GRADUS_CHECK(value_error, t.shape() == shape, "Initializer: asked for shape ", shape, ", got ", t.shape());
    return t;
  }

 private:
  template <class T>
  const auto& own_fn() const {
    if constexpr (std::same_as<T, float>) return f_; else return d_;
  }
  template <class T>
  const auto& other_fn() const {
    if constexpr (std::same_as<T, float>) return d_; else return f_;
  }
  std::function<Tensor<float>(const Shape&, Rng&)> f_;
  std::function<Tensor<double>(const Shape&, Rng&)> d_;
};

/// `init.operator()<T>(shape, rng)`, spelled readably: gd::init::make<double>(gd::init::orthogonal{}, {64, 64}, rng).
template <Real T, GenericInitializer I>
Tensor<T> make(const I& init, const Shape& shape, Rng& rng) {
  return init.template operator()<T>(shape, rng);
}

}  // namespace gradus::init
