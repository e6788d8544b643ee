// gradus/metrics/regression.hpp — streaming errors between real-valued labels and predictions.
#pragma once
#include <algorithm>
#include <cmath>
#include <string>
#include <utility>

#include "gradus/core/compiled.hpp"
#include "gradus/metrics/metric.hpp"

namespace gradus::metrics {

/// Weighted mean of |predictions - labels| (tf.metrics.mean_absolute_error).
class MeanAbsoluteError : public ElementwiseMeanMetric<MeanAbsoluteError> {
 public:
  MeanAbsoluteError() : ElementwiseMeanMetric("mean_absolute_error") {}
  /// One element's value: |prediction - label|.
  double value(double label, double prediction) const { return std::abs(prediction - label); }
};

/// Weighted mean of (predictions - labels)² (tf.metrics.mean_squared_error).
class MeanSquaredError : public ElementwiseMeanMetric<MeanSquaredError> {
 public:
  MeanSquaredError() : ElementwiseMeanMetric("mean_squared_error") {}
  /// One element's value: (prediction - label)².
  double value(double label, double prediction) const { return (prediction - label) * (prediction - label); }

 protected:
  explicit MeanSquaredError(std::string name) : ElementwiseMeanMetric(std::move(name)) {}
};

/// sqrt of the weighted mean squared error over every batch so far — not the mean of per-batch
/// RMSEs (tf.metrics.root_mean_squared_error).
class RootMeanSquaredError : public MeanSquaredError {
 public:
  RootMeanSquaredError() : MeanSquaredError("root_mean_squared_error") {}

 protected:
  double compute() const override { return std::sqrt(mean()); }
};

/// Weighted mean of |labels - predictions| / normalizer, 0 where the normalizer is 0
/// (tf.metrics.mean_relative_error). The normalizer is fixed at construction, or given per batch
/// with update_normalized; either way it broadcasts to the predictions by NumPy rules.
///   MeanRelativeError mre;  mre.update_normalized(y, p, gd::abs(y));
class MeanRelativeError : public MeanMetric {
 public:
  /// No fixed normalizer: update(labels, predictions) throws; use update_normalized.
  MeanRelativeError() : MeanMetric("mean_relative_error") {}
  /// A fixed normalizer (copied): a scalar, per-feature scales [C] for predictions [N, C], ...
  template <Expression N>
  explicit MeanRelativeError(const N& normalizer)
      : MeanMetric("mean_relative_error"), normalizer_(detail::to_double(normalizer).clone()) {}

  /// Adds a batch normalised by `normalizer` (the predictions' shape, or broadcastable to it).
  template <Expression L, Expression P, Expression N>
  void update_normalized(const L& labels, const P& predictions, const N& normalizer) {
    update_normalized_tensors(detail::to_double(labels), detail::to_double(predictions),
                              detail::to_double(normalizer), nullptr);
  }
  /// The same with (broadcast) weights.
  template <Expression L, Expression P, Expression N, Expression W>
  void update_normalized(const L& labels, const P& predictions, const N& normalizer, const W& weights) {
    const Tensor<double> w = detail::to_double(weights);
    update_normalized_tensors(detail::to_double(labels), detail::to_double(predictions),
                              detail::to_double(normalizer), &w);
  }
  /// The non-template form of update_normalized; `weights` may be null.
  void update_normalized_tensors(const Tensor<double>& labels, const Tensor<double>& predictions,
                                 const Tensor<double>& normalizer, const Tensor<double>* weights);

 protected:
  GRADUS_INLINE_DECL void update_batch(const Tensor<double>& labels, const Tensor<double>& predictions,
                    const Tensor<double>* weights) override;

 private:
  void add(const Tensor<double>& labels, const Tensor<double>& predictions, const Tensor<double>& normalizer,
           const Tensor<double>* weights);

  Tensor<double> normalizer_;
};

struct CosineOptions {
  /// false (TF): labels and predictions are taken as already unit-normalised along the axis, and
  /// the distance is 1 - Σ l·p. true: both are l2-normalised first (tf.nn.l2_normalize, ε = 1e-12),
  /// so the distance is 1 - cos for any vectors.
  bool normalize = false;
};

/// 1 - weighted mean over vectors along `axis` of Σ labels·predictions, i.e. 1 - cos for unit
/// vectors (tf.metrics.mean_cosine_distance). Weights broadcast to the reduced shape (`axis`
/// kept as 1); weights with `axis` left out, e.g. [N] for [N, D], are accepted too.
class MeanCosineDistance : public MeanMetric {
 public:
  explicit MeanCosineDistance(int64_t axis, CosineOptions opts = {})
      : MeanMetric("mean_cosine_distance"), axis_(axis), normalize_(opts.normalize) {}
  int64_t axis() const { return axis_; }

 protected:
  GRADUS_INLINE_DECL void update_batch(const Tensor<double>& labels, const Tensor<double>& predictions,
                    const Tensor<double>* weights) override;
  double compute() const override { return 1.0 - mean(); }

 private:
  int64_t axis_;
  bool normalize_;
};

}  // namespace gradus::metrics

#if GRADUS_DEFINE_COMPILED  // libgradus holds these with GRADUS_COMPILED (core/compiled.hpp)
namespace gradus::metrics {
GRADUS_INLINE void MeanRelativeError::update_normalized_tensors(const Tensor<double>& labels,
                                                                const Tensor<double>& predictions,
                                                                const Tensor<double>& normalizer,
                                                                const Tensor<double>* weights) {
  require_defined(labels, "labels");
  require_defined(predictions, "predictions");
  require_defined(normalizer, "normalizer");
  if (weights) require_defined(*weights, "weights");
  add(labels, predictions, normalizer, weights);
  mark_updated();
}

GRADUS_INLINE void MeanRelativeError::update_batch(const Tensor<double>& labels, const Tensor<double>& predictions,
                                                   const Tensor<double>* weights) {
  GRADUS_CHECK(value_error, normalizer_.defined(), name(),
               ": no normalizer; construct with one or call update_normalized(labels, predictions, normalizer)");
  add(labels, predictions, normalizer_, weights);
}

GRADUS_INLINE void MeanRelativeError::add(const Tensor<double>& labels, const Tensor<double>& predictions,
                                          const Tensor<double>& normalizer, const Tensor<double>* weights) {
  Tensor<double> l = labels, p = predictions;
  detail::match_shapes(l, p, name());
  const Tensor<double> n = detail::expand_to(normalizer, p.shape(), "normalizer", name());
  const double *a = l.data(), *b = p.data(), *c = n.data();
  accumulate(p.shape(), weights, [&](int64_t i) { return c[i] == 0 ? 0.0 : std::abs(a[i] - b[i]) / c[i]; });
}

GRADUS_INLINE void MeanCosineDistance::update_batch(const Tensor<double>& labels, const Tensor<double>& predictions,
                                                    const Tensor<double>* weights) {
  Tensor<double> l = labels, p = predictions;
  detail::match_shapes(l, p, name());
  const int r = p.rank();
  GRADUS_CHECK(value_error, axis_ >= -r && axis_ < r, name(), ": axis ", axis_, " out of range for shape ", p.shape());
  const int ax = int(axis_ < 0 ? axis_ + r : axis_);
  int64_t inner = 1;
  for (int i = ax + 1; i < r; ++i) inner *= p.shape()[i];
  const int64_t n = p.shape()[ax];
  Shape reduced = p.shape();
  reduced[ax] = 1;

  Tensor<double> w;
  if (weights) {
    w = *weights;
    if (w.rank() == r - 1 && r > 1) {
      Shape s = w.shape();
      s.insert(ax, 1);
      w = w.reshape(s);
    }
  }
  const double *a = l.data(), *b = p.data();
  const bool unit = normalize_;
  accumulate(reduced, weights ? &w : nullptr, [&](int64_t k) {
    const int64_t o = k / inner, in = k % inner;
    double dot = 0, ll = 0, pp = 0;
    for (int64_t j = 0; j < n; ++j) {
      const int64_t at = (o * n + j) * inner + in;
      dot += a[at] * b[at];
      ll += a[at] * a[at];
      pp += b[at] * b[at];
    }
    return unit ? dot / (std::sqrt(std::max(ll, 1e-12)) * std::sqrt(std::max(pp, 1e-12))) : dot;
  });
}
}  // namespace gradus::metrics
#endif  // GRADUS_DEFINE_COMPILED
