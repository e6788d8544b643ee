// gradus/metrics/mean.hpp — metrics over one tensor of values: update(values[, weights]).
#pragma once
#include "gradus/core/compiled.hpp"
#include "gradus/metrics/metric.hpp"

namespace gradus::metrics {

/// Weighted mean of every value seen (tf.metrics.mean); e.g. a running mean of per-batch losses.
///   Mean loss;  loss.update(batch_loss);  loss.result();
class Mean : public ValueMetric {
 public:
  Mean() : ValueMetric("mean") {}

 protected:
  GRADUS_INLINE_DECL void add_values(const Tensor<double>& values, const Tensor<double>* weights) override;
};

/// Weighted fraction of values strictly below `threshold` (tf.metrics.percentage_below).
class PercentageBelow : public ValueMetric {
 public:
  explicit PercentageBelow(double threshold) : ValueMetric("percentage_below"), threshold_(threshold) {}
  double threshold() const { return threshold_; }

 protected:
  GRADUS_INLINE_DECL void add_values(const Tensor<double>& values, const Tensor<double>* weights) override;

 private:
  double threshold_;
};

}  // namespace gradus::metrics

#if GRADUS_DEFINE_COMPILED  // libgradus holds these with GRADUS_COMPILED (core/compiled.hpp)
namespace gradus::metrics {
GRADUS_INLINE void Mean::add_values(const Tensor<double>& values, const Tensor<double>* weights) {
  const double* v = values.data();
  accumulate(values.shape(), weights, [&](int64_t i) { return v[i]; });
}

GRADUS_INLINE void PercentageBelow::add_values(const Tensor<double>& values, const Tensor<double>* weights) {
  const double* v = values.data();
  const double t = threshold_;
  accumulate(values.shape(), weights, [&](int64_t i) { return v[i] < t ? 1.0 : 0.0; });
}
}  // namespace gradus::metrics
#endif  // GRADUS_DEFINE_COMPILED
