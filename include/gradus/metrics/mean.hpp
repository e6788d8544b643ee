// gradus/metrics/mean.hpp — metrics over one tensor of values: update(values[, weights]).
#pragma once
#include "gradus/metrics/metric.hpp"

namespace gradus::metrics {

/// Weighted mean of every value seen (tf.metrics.mean); e.g. a running mean of per-batch losses.
///   Mean loss;  loss.update(batch_loss);  loss.result();
class Mean : public ValueMetric {
 public:
  Mean() : ValueMetric("mean") {}

 protected:
  void add_values(const Tensor<double>& values, const Tensor<double>* weights) override {
    const double* v = values.data();
    accumulate(values.shape(), weights, [&](int64_t i) { return v[i]; });
  }
};

/// Weighted fraction of values strictly below `threshold` (tf.metrics.percentage_below).
class PercentageBelow : public ValueMetric {
 public:
  explicit PercentageBelow(double threshold) : ValueMetric("percentage_below"), threshold_(threshold) {}
  double threshold() const { return threshold_; }

 protected:
  void add_values(const Tensor<double>& values, const Tensor<double>* weights) override {
    const double* v = values.data();
    const double t = threshold_;
    accumulate(values.shape(), weights, [&](int64_t i) { return v[i] < t ? 1.0 : 0.0; });
  }

 private:
  double threshold_;
};

}  // namespace gradus::metrics
