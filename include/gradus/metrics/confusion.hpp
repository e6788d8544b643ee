// gradus/metrics/confusion.hpp — metrics built on confusion counts at thresholds: true/false
// positives/negatives, precision, recall, AUC, sensitivity at specificity and back.
//
// As in TF: a label is positive when non-zero; a prediction is positive at threshold t when
// float(prediction) > float(t) — TF compares in float32, and so do these, so the counts agree
// with TF's even for predictions within float rounding of a threshold.
#pragma once
#include <algorithm>
#include <cmath>
#include <numeric>
#include <vector>

#include "gradus/core/compiled.hpp"
#include "gradus/metrics/metric.hpp"

namespace gradus::metrics {

/// Weighted confusion counts at each of a list of thresholds (TF's _confusion_matrix_at_thresholds).
/// Counting is O(log T) per element: each prediction is bucketed among the sorted thresholds.
class ThresholdConfusion {
 public:
  ThresholdConfusion() = default;
  explicit ThresholdConfusion(std::vector<double> thresholds);

  /// The thresholds, in the order given.
  const std::vector<double>& thresholds() const { return thresholds_; }
  size_t size() const { return thresholds_.size(); }
  /// Weight of positive labels predicted above thresholds()[i].
  double tp(size_t i) const { return tp_[rank_[i]]; }
  /// Weight of negative labels predicted above thresholds()[i].
  double fp(size_t i) const { return fp_[rank_[i]]; }
  /// Weight of negative labels predicted at or below thresholds()[i].
  double tn(size_t i) const { return tn_[rank_[i]]; }
  /// Weight of positive labels predicted at or below thresholds()[i].
  double fn(size_t i) const { return fn_[rank_[i]]; }

  /// Adds a batch: labels, predictions and weights (undefined: all ones) of one shape.
  void add(const Tensor<double>& labels, const Tensor<double>& predictions, const Tensor<double>& weights);
  /// Adds a batch already bucketed: pos[k] (neg[k]) is the weight of the positive (negative)
  /// labels whose prediction is above exactly k of the sorted thresholds, k in [0, size()].
  void add_buckets(const double* pos, const double* neg);
  /// The thresholds in increasing order, as the float they are compared in.
  const std::vector<float>& sorted() const { return sorted_; }
  void clear();

 private:
  std::vector<double> thresholds_;
  std::vector<float> sorted_;
  std::vector<size_t> rank_;  // rank_[i]: position of thresholds_[i] in sorted_
  std::vector<double> tp_, fp_, tn_, fn_;
  std::vector<double> pos_, neg_;
};

/// A metric read from confusion counts at thresholds; labels and predictions of matching shapes.
/// Unweighted batches on a GPU are counted there: each prediction's bucket among the thresholds,
/// and one histogram per label class on the device, read back once by result().
class ConfusionMetric : public Metric {
 public:
  /// The accumulated counts.
  const ThresholdConfusion& confusion() const {
    gather_device();
    return counts_;
  }

 protected:
  /// `unit_interval`: predictions must lie in [0, 1] (TF asserts so for the curve metrics).
  ConfusionMetric(std::string name, std::vector<double> thresholds, bool unit_interval);
  GRADUS_INLINE_DECL void update_batch(const Tensor<double>& labels, const Tensor<double>& predictions,
                    const Tensor<double>* weights) override;
  GRADUS_INLINE_DECL bool update_on_device(const Tensor<double>& labels, const Tensor<double>& predictions,
                                           bool integer_labels, bool integer_predictions) override;
  GRADUS_INLINE_DECL void gather_device() const override;
  void clear() override {
    counts_.clear();
    device_ = {};
  }

  mutable ThresholdConfusion counts_;

 private:
  bool unit_interval_;
  struct OnDevice {
    Tensor<double> thresholds;  // [1, T]: the sorted thresholds as floats
    Tensor<double> pos, neg;    // [T + 1]: bucket histograms of the positive and the negative labels
    Tensor<double> outside;     // with unit_interval: how many predictions were outside [0, 1]
  };
  mutable OnDevice device_;
};

/// Thresholds for the count metrics, precision and recall: a prediction above a threshold is
/// positive. With several thresholds, `results()` gives one value each.
struct ThresholdOptions {
  std::vector<double> thresholds = {0.5};
};

/// A confusion metric with one value per threshold (TF's *_at_thresholds, Keras' thresholds=).
class ThresholdMetric : public ConfusionMetric {
 public:
  /// One value per threshold, in the order given; throws before any update.
  std::vector<double> results() const;

 protected:
  ThresholdMetric(std::string name, ThresholdOptions opts)
      : ConfusionMetric(std::move(name), std::move(opts.thresholds), false) {}
  virtual double value_at(size_t i) const = 0;
  /// result() is the value at the only threshold; with several it throws (use results()).
  GRADUS_INLINE_DECL double compute() const override;
};

namespace detail {

/// A ThresholdMetric whose value at threshold i is Value(counts, i).
template <double (*Value)(const ThresholdConfusion&, size_t)>
class CountsMetric : public ThresholdMetric {
 protected:
  CountsMetric(std::string name, ThresholdOptions opts) : ThresholdMetric(std::move(name), std::move(opts)) {}
  double value_at(size_t i) const override { return Value(counts_, i); }
};

inline double true_positives(const ThresholdConfusion& c, size_t i) { return c.tp(i); }
inline double false_positives(const ThresholdConfusion& c, size_t i) { return c.fp(i); }
inline double true_negatives(const ThresholdConfusion& c, size_t i) { return c.tn(i); }
inline double false_negatives(const ThresholdConfusion& c, size_t i) { return c.fn(i); }
inline double precision(const ThresholdConfusion& c, size_t i) { return div_no_nan(c.tp(i), c.tp(i) + c.fp(i)); }
inline double recall(const ThresholdConfusion& c, size_t i) { return div_no_nan(c.tp(i), c.tp(i) + c.fn(i)); }

}  // namespace detail

/// Weighted count of positive labels predicted positive (tf.metrics.true_positives).
class TruePositives : public detail::CountsMetric<detail::true_positives> {
 public:
  explicit TruePositives(ThresholdOptions opts = {}) : CountsMetric("true_positives", std::move(opts)) {}
};

/// Weighted count of negative labels predicted positive (tf.metrics.false_positives).
class FalsePositives : public detail::CountsMetric<detail::false_positives> {
 public:
  explicit FalsePositives(ThresholdOptions opts = {}) : CountsMetric("false_positives", std::move(opts)) {}
};

/// Weighted count of negative labels predicted negative (tf.metrics.true_negatives).
class TrueNegatives : public detail::CountsMetric<detail::true_negatives> {
 public:
  explicit TrueNegatives(ThresholdOptions opts = {}) : CountsMetric("true_negatives", std::move(opts)) {}
};

/// Weighted count of positive labels predicted negative (tf.metrics.false_negatives).
class FalseNegatives : public detail::CountsMetric<detail::false_negatives> {
 public:
  explicit FalseNegatives(ThresholdOptions opts = {}) : CountsMetric("false_negatives", std::move(opts)) {}
};

/// tp / (tp + fp), 0 when nothing is predicted positive (tf.metrics.precision, Keras Precision).
class Precision : public detail::CountsMetric<detail::precision> {
 public:
  explicit Precision(ThresholdOptions opts = {}) : CountsMetric("precision", std::move(opts)) {}
};

/// tp / (tp + fn), 0 when there are no positive labels (tf.metrics.recall, Keras Recall).
class Recall : public detail::CountsMetric<detail::recall> {
 public:
  explicit Recall(ThresholdOptions opts = {}) : CountsMetric("recall", std::move(opts)) {}
};

namespace detail {
/// TF's curve thresholds: {-1e-7, 1/(n-1), ..., (n-2)/(n-1), top}.
std::vector<double> curve_thresholds(int num_thresholds, double top, std::string_view metric);
/// User thresholds, sorted, between the endpoints {-1e-7, 1 + 1e-7} (tf.metrics.auc thresholds=).
std::vector<double> bracketed_thresholds(std::vector<double> t);
}  // namespace detail

/// Which curve AUC integrates: ROC (recall over false-positive rate) or PR (precision over recall).
enum class Curve { roc, pr };
/// TF's Riemann sums: trapezoidal (TF1's default), careful_interpolation (trapezoidal for ROC,
/// Davis & Goadrich interpolation for PR), minoring / majoring (lower / upper bounds).
enum class Summation { trapezoidal, careful_interpolation, minoring, majoring };

struct AucOptions {
  int num_thresholds = 200;
  Curve curve = Curve::roc;
  Summation summation = Summation::trapezoidal;
  /// When non-empty, these thresholds (in [0, 1]) replace the num_thresholds evenly spaced ones.
  std::vector<double> thresholds = {};
};

/// Area under the ROC or PR curve, exactly as TF1's tf.metrics.auc: predictions in [0, 1]
/// bucketed at thresholds {-1e-7, 1/(n-1), ..., (n-2)/(n-1), 1 + 1e-7}, confusion counts per
/// threshold, then a Riemann sum over the curve's points (with TF's 1e-6 smoothing).
///   AUC roc;  AUC pr({.curve = Curve::pr, .summation = Summation::careful_interpolation});
class AUC : public ConfusionMetric {
 public:
  explicit AUC(AucOptions opts = {});

 protected:
  GRADUS_INLINE_DECL double compute() const override;

 private:
  // TF's interpolate_pr_auc: TP and P = TP + FP vary linearly between thresholds, so precision
  // integrates in closed form over each interval.
  static double interpolate_pr(const std::vector<double>& tp, const std::vector<double>& fp,
                               const std::vector<double>& fn);

  Curve curve_;
  Summation summation_;
};

/// Sensitivity (recall) at the threshold whose specificity tn / (tn + fp) is closest to
/// `specificity` (first such threshold), as tf.metrics.sensitivity_at_specificity; predictions in [0, 1].
class SensitivityAtSpecificity : public ConfusionMetric {
 public:
  explicit SensitivityAtSpecificity(double specificity, int num_thresholds = 200);

 protected:
  GRADUS_INLINE_DECL double compute() const override;

 private:
  double target_;
};

/// Specificity tn / (tn + fp) at the threshold whose sensitivity is closest to `sensitivity`
/// (last such threshold), as tf.metrics.specificity_at_sensitivity — including TF's top
/// threshold of 1 - 1e-7; predictions in [0, 1].
class SpecificityAtSensitivity : public ConfusionMetric {
 public:
  explicit SpecificityAtSensitivity(double sensitivity, int num_thresholds = 200);

 protected:
  GRADUS_INLINE_DECL double compute() const override;

 private:
  double target_;
};

}  // namespace gradus::metrics

#if GRADUS_DEFINE_COMPILED  // libgradus holds these with GRADUS_COMPILED (core/compiled.hpp)
namespace gradus::metrics {
GRADUS_INLINE ThresholdConfusion::ThresholdConfusion(std::vector<double> thresholds)
    : thresholds_(std::move(thresholds)) {
  const size_t t = thresholds_.size();
  std::vector<size_t> order(t);
  std::iota(order.begin(), order.end(), size_t(0));
  std::stable_sort(order.begin(), order.end(),
                   [&](size_t a, size_t b) { return float(thresholds_[a]) < float(thresholds_[b]); });
  sorted_.resize(t);
  rank_.resize(t);
  for (size_t j = 0; j < t; ++j) {
    sorted_[j] = float(thresholds_[order[j]]);
    rank_[order[j]] = j;
  }
  clear();
}

GRADUS_INLINE void ThresholdConfusion::add(const Tensor<double>& labels, const Tensor<double>& predictions,
                                           const Tensor<double>& weights) {
  const size_t t = sorted_.size();
  pos_.assign(t + 1, 0.0);
  neg_.assign(t + 1, 0.0);
  const double *l = labels.data(), *p = predictions.data();
  const double* w = weights.defined() ? weights.data() : nullptr;
  for (int64_t i = 0, n = predictions.size(); i < n; ++i) {
    const double wi = w ? w[i] : 1.0;
    if (wi == 0) continue;
    // Number of thresholds below the prediction: it is positive at exactly those.
    const auto k = size_t(std::lower_bound(sorted_.begin(), sorted_.end(), float(p[i])) - sorted_.begin());
    (l[i] != 0 ? pos_ : neg_)[k] += wi;
  }
  add_buckets(pos_.data(), neg_.data());
}

GRADUS_INLINE void ThresholdConfusion::add_buckets(const double* positive, const double* negative) {
  const size_t t = sorted_.size();
  // above threshold j: the buckets k > j; at or below it: the buckets k <= j
  double pos = 0, neg = 0;
  for (size_t j = t; j-- > 0;) {
    pos += positive[j + 1];
    neg += negative[j + 1];
    tp_[j] += pos;
    fp_[j] += neg;
  }
  pos = neg = 0;
  for (size_t j = 0; j < t; ++j) {
    pos += positive[j];
    neg += negative[j];
    fn_[j] += pos;
    tn_[j] += neg;
  }
}

GRADUS_INLINE void ThresholdConfusion::clear() {
  for (auto* v : {&tp_, &fp_, &tn_, &fn_}) v->assign(thresholds_.size(), 0.0);
}

GRADUS_INLINE ConfusionMetric::ConfusionMetric(std::string name, std::vector<double> thresholds, bool unit_interval)
    : Metric(std::move(name)), counts_(std::move(thresholds)), unit_interval_(unit_interval) {
  GRADUS_CHECK(value_error, counts_.size() > 0, this->name(), ": needs at least one threshold");
}

GRADUS_INLINE void ConfusionMetric::update_batch(const Tensor<double>& labels, const Tensor<double>& predictions,
                                                 const Tensor<double>* weights) {
  Tensor<double> l = labels, p = predictions;
  detail::match_shapes(l, p, name());
  const Tensor<double> w = detail::weights_for(weights, p.shape(), name());
  if (unit_interval_) {
    const double* wp = w.defined() ? w.data() : nullptr;
    const double* pp = p.data();
    for (int64_t i = 0, n = p.size(); i < n; ++i)
      GRADUS_CHECK(value_error, (wp && wp[i] == 0) || (pp[i] >= 0 && pp[i] <= 1), name(),
                   ": predictions must be in [0, 1], got ", pp[i]);
  }
  counts_.add(l, p, w);
}

GRADUS_INLINE bool ConfusionMetric::update_on_device(const Tensor<double>& labels, const Tensor<double>& predictions,
                                                     bool, bool) {
  Tensor<double> l = labels, p = predictions;
  detail::match_shapes(l, p, name());
  const Device d = p.device();
  const int64_t n = p.size(), t = int64_t(counts_.size());
  if (device_.pos.defined() && device_.pos.device() != d) gather_device();
  if (!device_.thresholds.defined() || device_.thresholds.device() != d) {  // once per device, not per evaluation
    std::vector<double> sorted(counts_.sorted().begin(), counts_.sorted().end());
    device_.thresholds = Tensor<double>::from(sorted, Shape{1, t}).to(d);
  }
  if (!device_.pos.defined()) {
    device_.pos = Tensor<double>::empty({t + 1}, d).fill_(0.0);
    device_.neg = Tensor<double>::empty({t + 1}, d).fill_(0.0);
    device_.outside = Tensor<double>::empty({}, d).fill_(0.0);
  }
  // each prediction rounded to float, as the host compares, then its bucket: the number of
  // thresholds below it
  Tensor<float> narrow = Tensor<float>::empty({n}, d);
  backend::cast(p.device_data(), n, narrow.device_data(), false, d);
  Tensor<double> pf = Tensor<double>::empty({n, 1}, d);
  backend::cast(narrow.device_data(), n, pf.device_data(), false, d);
  const Tensor<double> above = gradus::eval(gradus::sum(pf > device_.thresholds, 1));
  Tensor<int64_t> bucket = Tensor<int64_t>::empty({n}, d);
  backend::cast(above.device_data(), n, bucket.device_data(), false, d);
  if (unit_interval_)  // NaN counts as outside too
    device_.outside = gradus::eval(device_.outside + gradus::sum(1.0 - (p >= 0.0) * (p <= 1.0)));
  const Tensor<double> positive = gradus::eval(l != 0.0), negative = gradus::eval(l == 0.0);
  backend::scatter_add_rows(positive.device_data(), 1, t + 1, 1, bucket.device_data(), n, device_.pos.device_data(),
                            true, d);
  backend::scatter_add_rows(negative.device_data(), 1, t + 1, 1, bucket.device_data(), n, device_.neg.device_data(),
                            true, d);
  return true;
}

GRADUS_INLINE void ConfusionMetric::gather_device() const {
  if (!device_.pos.defined()) return;
  const Device d = device_.pos.device();
  if (unit_interval_) {
    const double outside = device_.outside.item();
    GRADUS_CHECK(value_error, outside == 0, name(), ": predictions must be in [0, 1]; ", outside,
                 " of those counted on ", d, " were not");
  }
  const Tensor<double> pos = device_.pos.to(gradus::cpu), neg = device_.neg.to(gradus::cpu);
  counts_.add_buckets(pos.data(), neg.data());
  device_.pos = device_.neg = device_.outside = Tensor<double>{};  // the thresholds stay for the next batch
}

GRADUS_INLINE std::vector<double> ThresholdMetric::results() const {
  require_result();
  gather_device();
  std::vector<double> r(counts_.size());
  for (size_t i = 0; i < r.size(); ++i) r[i] = value_at(i);
  return r;
}

GRADUS_INLINE double ThresholdMetric::compute() const {
  GRADUS_CHECK(value_error, counts_.size() == 1, name(), ": result() needs exactly one threshold, this metric has ",
               counts_.size(), "; use results()");
  return value_at(0);
}
}  // namespace gradus::metrics

namespace gradus::metrics::detail {
GRADUS_INLINE std::vector<double> curve_thresholds(int num_thresholds, double top, std::string_view metric) {
  GRADUS_CHECK(value_error, num_thresholds >= 2, metric, ": num_thresholds must be at least 2, got ", num_thresholds);
  std::vector<double> t{-1e-7};
  for (int i = 0; i < num_thresholds - 2; ++i) t.push_back((i + 1) * 1.0 / (num_thresholds - 1));
  t.push_back(top);
  return t;
}

GRADUS_INLINE std::vector<double> bracketed_thresholds(std::vector<double> t) {
  std::sort(t.begin(), t.end());
  t.insert(t.begin(), -1e-7);
  t.push_back(1.0 + 1e-7);
  return t;
}
}  // namespace gradus::metrics::detail

namespace gradus::metrics {
GRADUS_INLINE AUC::AUC(AucOptions opts)
    : ConfusionMetric("auc",
                      opts.thresholds.empty() ? detail::curve_thresholds(opts.num_thresholds, 1.0 + 1e-7, "auc")
                                              : detail::bracketed_thresholds(opts.thresholds),
                      true),
      curve_(opts.curve), summation_(opts.summation) {}

GRADUS_INLINE double AUC::compute() const {
  const size_t t = counts_.size();
  std::vector<double> tp(t), fp(t), tn(t), fn(t);
  for (size_t i = 0; i < t; ++i) tp[i] = counts_.tp(i), fp[i] = counts_.fp(i), tn[i] = counts_.tn(i), fn[i] = counts_.fn(i);
  if (curve_ == Curve::pr && summation_ == Summation::careful_interpolation) return interpolate_pr(tp, fp, fn);
  constexpr double eps = 1e-6;
  std::vector<double> x(t), y(t);
  for (size_t i = 0; i < t; ++i) {
    const double rec = (tp[i] + eps) / (tp[i] + fn[i] + eps);
    if (curve_ == Curve::roc) {
      x[i] = fp[i] / (fp[i] + tn[i] + eps);
      y[i] = rec;
    } else {
      x[i] = rec;
      y[i] = (tp[i] + eps) / (tp[i] + fp[i] + eps);
    }
  }
  double area = 0;
  for (size_t i = 0; i + 1 < t; ++i) {
    const double h = summation_ == Summation::minoring   ? std::min(y[i], y[i + 1])
                     : summation_ == Summation::majoring ? std::max(y[i], y[i + 1])
                                                         : (y[i] + y[i + 1]) / 2.0;
    area += (x[i] - x[i + 1]) * h;
  }
  return area;
}

GRADUS_INLINE double AUC::interpolate_pr(const std::vector<double>& tp, const std::vector<double>& fp,
                                         const std::vector<double>& fn) {
  double area = 0;
  for (size_t i = 0; i + 1 < tp.size(); ++i) {
    const double dtp = tp[i] - tp[i + 1];
    const double p0 = tp[i] + fp[i], p1 = tp[i + 1] + fp[i + 1];
    const double slope = detail::div_no_nan(dtp, std::max(p0 - p1, 0.0));
    const double intercept = tp[i + 1] - slope * p1;
    const double ratio = p0 > 0 && p1 > 0 ? detail::div_no_nan(p0, std::max(p1, 0.0)) : 1.0;
    area += detail::div_no_nan(slope * (dtp + intercept * std::log(ratio)), std::max(tp[i + 1] + fn[i + 1], 0.0));
  }
  return area;
}

GRADUS_INLINE SensitivityAtSpecificity::SensitivityAtSpecificity(double specificity, int num_thresholds)
    : ConfusionMetric("sensitivity_at_specificity",
                      detail::curve_thresholds(num_thresholds, 1.0 + 1e-7, "sensitivity_at_specificity"), true),
      target_(specificity) {
  GRADUS_CHECK(value_error, specificity >= 0 && specificity <= 1,
               "sensitivity_at_specificity: specificity must be in [0, 1], got ", specificity);
}

GRADUS_INLINE double SensitivityAtSpecificity::compute() const {
  constexpr double eps = 1e-7;
  size_t best = 0;
  double best_gap = INFINITY;
  for (size_t i = 0; i < counts_.size(); ++i) {
    const double gap = std::abs(counts_.tn(i) / (counts_.tn(i) + counts_.fp(i) + eps) - target_);
    if (gap < best_gap) best_gap = gap, best = i;
  }
  return counts_.tp(best) / (counts_.tp(best) + counts_.fn(best) + eps);
}

GRADUS_INLINE SpecificityAtSensitivity::SpecificityAtSensitivity(double sensitivity, int num_thresholds)
    : ConfusionMetric("specificity_at_sensitivity",
                      detail::curve_thresholds(num_thresholds, 1.0 - 1e-7, "specificity_at_sensitivity"), true),
      target_(sensitivity) {
  GRADUS_CHECK(value_error, sensitivity >= 0 && sensitivity <= 1,
               "specificity_at_sensitivity: sensitivity must be in [0, 1], got ", sensitivity);
}

GRADUS_INLINE double SpecificityAtSensitivity::compute() const {
  constexpr double eps = 1e-7;
  size_t best = 0;
  double best_gap = INFINITY;
  for (size_t i = 0; i < counts_.size(); ++i) {
    const double gap = std::abs(counts_.tp(i) / (counts_.tp(i) + counts_.fn(i) + eps) - target_);
    if (gap <= best_gap) best_gap = gap, best = i;
  }
  return counts_.tn(best) / (counts_.tn(best) + counts_.fp(best) + eps);
}
}  // namespace gradus::metrics
#endif  // GRADUS_DEFINE_COMPILED
