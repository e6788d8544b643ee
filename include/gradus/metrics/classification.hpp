// gradus/metrics/classification.hpp — accuracies, top-k, mean IoU and perplexity.
//
// Class ids (labels of the sparse forms, both inputs of MeanIoU) may be int64 or floating point
// holding whole numbers; an id outside [0, num_classes) throws gd::value_error naming the metric,
// the position and, for floating-point ids, the fix ("labels must be Tensor<int64_t>, got
// Tensor<float>: use gd::cast<int64_t>(labels)"); one-hot labels given to a sparse metric get a
// shape_error that says so.
#pragma once
#include <algorithm>
#include <cmath>
#include <vector>

#include "gradus/core/compiled.hpp"
#include "gradus/metrics/metric.hpp"

namespace gradus::metrics {

/// How often predictions equal labels, elementwise (tf.metrics.accuracy); any shapes that match.
///   Accuracy acc;  acc.update(labels, gd::argmax(logits, 1));  acc.result();
class Accuracy : public ElementwiseMeanMetric<Accuracy> {
 public:
  Accuracy() : ElementwiseMeanMetric("accuracy") {}
  /// One element's value: 1 when the prediction equals the label, else 0.
  double value(double label, double prediction) const { return label == prediction ? 1.0 : 0.0; }
  /// The same for a batch on a device.
  static auto device_values(const Tensor<double>& labels, const Tensor<double>& predictions) {
    return labels == predictions;
  }
};

/// How often `predictions > threshold` (as 0/1) equals labels (Keras binary_accuracy).
class BinaryAccuracy : public ElementwiseMeanMetric<BinaryAccuracy> {
 public:
  explicit BinaryAccuracy(double threshold = 0.5) : ElementwiseMeanMetric("binary_accuracy"), threshold_(threshold) {}
  double threshold() const { return threshold_; }
  /// One element's value: 1 when `prediction > threshold` (as 0/1) equals the label, else 0.
  double value(double label, double prediction) const {
    return label == (prediction > threshold_ ? 1.0 : 0.0) ? 1.0 : 0.0;
  }

 private:
  double threshold_;
};

/// How often argmax(labels) equals argmax(predictions) over the last axis (one-hot or soft
/// labels, Keras categorical_accuracy); both [..., C]; weights per row [...].
class CategoricalAccuracy : public MeanMetric {
 public:
  CategoricalAccuracy() : MeanMetric("categorical_accuracy") {}

 protected:
  GRADUS_INLINE_DECL void update_batch(const Tensor<double>& labels, const Tensor<double>& predictions,
                    const Tensor<double>* weights) override;
};

/// How often the class-id label equals argmax(predictions): labels [...] (or [..., 1]),
/// predictions [..., C] (Keras sparse_categorical_accuracy).
class SparseCategoricalAccuracy : public MeanMetric {
 public:
  SparseCategoricalAccuracy() : MeanMetric("sparse_categorical_accuracy") {}

 protected:
  GRADUS_INLINE_DECL void update_batch(const Tensor<double>& labels, const Tensor<double>& predictions,
                    const Tensor<double>* weights) override;
  /// On a device, for int64 labels: argmax there, the labels range-checked there (a bad one is
  /// reported at the device's next synchronisation), the hits summed there.
  GRADUS_INLINE_DECL bool update_on_device(const Tensor<double>& labels, const Tensor<double>& predictions,
                                           bool integer_labels, bool integer_predictions) override;
};

/// How often the class-id label is among the k highest predictions (tf.nn.in_top_k): classes
/// tied with the label's score at the boundary all count as in the top k; a row with a
/// non-finite score counts as a miss. Labels [...] (or [..., 1]), predictions [..., C].
class TopKAccuracy : public MeanMetric {
 public:
  explicit TopKAccuracy(int64_t k = 5);
  int64_t k() const { return k_; }

 protected:
  GRADUS_INLINE_DECL void update_batch(const Tensor<double>& labels, const Tensor<double>& predictions,
                    const Tensor<double>* weights) override;

 private:
  int64_t k_;
};

/// Mean intersection-over-union (tf.metrics.mean_iou): labels and predictions are class ids of
/// the same shape, accumulated into a weighted confusion matrix; IoU_c = cm[c][c] / (row_c +
/// col_c - cm[c][c]) averaged over classes whose denominator is non-zero (0 when none is).
/// Int64 labels and predictions on a GPU are counted there (a matrix on the device, read back
/// once by result() or confusion_matrix(); ids out of range are reported then).
class MeanIoU : public Metric {
 public:
  explicit MeanIoU(int64_t num_classes);
  int64_t num_classes() const { return c_; }
  /// The accumulated confusion matrix [C, C]: rows are labels, columns predictions (a copy).
  Tensor<double> confusion_matrix() const {
    gather_device();
    return Tensor<double>::from(cm_, Shape{c_, c_});
  }

 protected:
  GRADUS_INLINE_DECL void update_batch(const Tensor<double>& labels, const Tensor<double>& predictions,
                    const Tensor<double>* weights) override;
  GRADUS_INLINE_DECL bool update_on_device(const Tensor<double>& labels, const Tensor<double>& predictions,
                                           bool integer_labels, bool integer_predictions) override;
  GRADUS_INLINE_DECL void gather_device() const override;
  GRADUS_INLINE_DECL double compute() const override;
  void clear() override {
    std::fill(cm_.begin(), cm_.end(), 0.0);
    device_cm_ = {};
  }

 private:
  int64_t c_;
  mutable std::vector<double> cm_;
  mutable Tensor<double> device_cm_;  // [C·C] on the device the batches counted there came from
};

/// exp of the weighted mean cross-entropy. `update(labels, logits[, weights])`: class-id labels
/// [...] (or [..., 1]) and unnormalised logits [..., C], cross-entropy = logsumexp(row) -
/// row[label]. Or `update_log_likelihoods(ll[, weights])`: per-example log-likelihoods
/// (log p of the observed token), cross-entropy = -ll. Both feed the same mean; 1 when all
/// weights are 0.
class Perplexity : public MeanMetric {
 public:
  Perplexity() : MeanMetric("perplexity") {}

  /// Adds per-example log-likelihoods (any shape).
  template <Expression L>
  void update_log_likelihoods(const L& log_likelihoods) {
    update_log_likelihood_tensors(detail::to_double(log_likelihoods), nullptr);
  }
  /// Adds per-example log-likelihoods with (broadcast) weights.
  template <Expression L, Expression W>
  void update_log_likelihoods(const L& log_likelihoods, const W& weights) {
    const Tensor<double> w = detail::to_double(weights);
    update_log_likelihood_tensors(detail::to_double(log_likelihoods), &w);
  }
  /// The non-template form of `update_log_likelihoods`; `weights` may be null.
  void update_log_likelihood_tensors(const Tensor<double>& log_likelihoods, const Tensor<double>* weights);

 protected:
  GRADUS_INLINE_DECL void update_batch(const Tensor<double>& labels, const Tensor<double>& logits,
                    const Tensor<double>* weights) override;
  double compute() const override { return std::exp(mean()); }
};

}  // namespace gradus::metrics

#if GRADUS_DEFINE_COMPILED  // libgradus holds these with GRADUS_COMPILED (core/compiled.hpp)
namespace gradus::metrics {
GRADUS_INLINE void CategoricalAccuracy::update_batch(const Tensor<double>& labels, const Tensor<double>& predictions,
                                                     const Tensor<double>* weights) {
  GRADUS_CHECK(shape_error, labels.shape() == predictions.shape(), name(), ": labels shape ", labels.shape(),
               " does not match predictions shape ", predictions.shape());
  GRADUS_CHECK(shape_error, predictions.rank() >= 1 && predictions.shape().back() > 0, name(),
               ": predictions need a non-empty last (class) dimension, got shape ", predictions.shape());
  const int64_t c = predictions.shape().back();
  const double *a = labels.data(), *b = predictions.data();
  accumulate(detail::drop_last(predictions.shape()), weights, [&](int64_t i) {
    return detail::argmax_row(a + i * c, c) == detail::argmax_row(b + i * c, c) ? 1.0 : 0.0;
  });
}

GRADUS_INLINE void SparseCategoricalAccuracy::update_batch(const Tensor<double>& labels,
                                                           const Tensor<double>& predictions,
                                                           const Tensor<double>* weights) {
  accumulate_rows(labels, predictions, weights, [](const double* row, int64_t c, int64_t label) {
    return label == detail::argmax_row(row, c) ? 1.0 : 0.0;
  });
}

GRADUS_INLINE bool SparseCategoricalAccuracy::update_on_device(const Tensor<double>& labels,
                                                               const Tensor<double>& predictions, bool integer_labels,
                                                               bool) {
  if (!integer_labels) return false;  // the host's path explains what is wrong with other labels
  const Tensor<double> l = detail::sparse_labels(labels, predictions, name());  // shapes only
  const Device d = predictions.device();
  detail::check_ids_on_device(l, predictions.shape().back(),
                              backend::RangeCheck{name_c_str(), "label", "predictions", predictions.shape()});
  const Tensor<double> best = detail::widen_on(gradus::argmax(predictions, -1), d);
  accumulate_on_device(gradus::eval(gradus::sum(best == l)), double(l.size()));
  return true;
}

GRADUS_INLINE TopKAccuracy::TopKAccuracy(int64_t k) : MeanMetric("top_k_accuracy"), k_(k) {
  GRADUS_CHECK(value_error, k >= 1, "top_k_accuracy: k must be at least 1, got ", k);
}

GRADUS_INLINE void TopKAccuracy::update_batch(const Tensor<double>& labels, const Tensor<double>& predictions,
                                              const Tensor<double>* weights) {
  accumulate_rows(labels, predictions, weights, [&](const double* row, int64_t c, int64_t label) {
    const double target = row[label];
    if (!std::isfinite(target)) return 0.0;
    int64_t above = 0;
    for (int64_t j = 0; j < c; ++j) {
      if (!std::isfinite(row[j])) return 0.0;
      above += row[j] > target;
    }
    return above < k_ ? 1.0 : 0.0;
  });
}

GRADUS_INLINE MeanIoU::MeanIoU(int64_t num_classes) : Metric("mean_iou"), c_(num_classes) {
  GRADUS_CHECK(value_error, num_classes >= 1, "mean_iou: num_classes must be at least 1, got ", num_classes);
  cm_.assign(size_t(c_ * c_), 0.0);
}

GRADUS_INLINE void MeanIoU::update_batch(const Tensor<double>& labels, const Tensor<double>& predictions,
                                         const Tensor<double>* weights) {
  Tensor<double> l = labels, p = predictions;
  detail::match_shapes(l, p, name());
  const Tensor<double> w = detail::weights_for(weights, p.shape(), name());
  const double *a = l.data(), *b = p.data(), *wp = w.defined() ? w.data() : nullptr;
  const int64_t n = p.size();
  for (int64_t i = 0; i < n; ++i) {
    if (wp && wp[i] == 0) continue;
    class_index(a[i], c_, "label", i);
    class_index(b[i], c_, "prediction", i);
  }
  for (int64_t i = 0; i < n; ++i) {
    if (wp && wp[i] == 0) continue;
    cm_[size_t(int64_t(a[i]) * c_ + int64_t(b[i]))] += wp ? wp[i] : 1.0;
  }
}

GRADUS_INLINE bool MeanIoU::update_on_device(const Tensor<double>& labels, const Tensor<double>& predictions,
                                             bool integer_labels, bool integer_predictions) {
  if (!integer_labels || !integer_predictions) return false;  // the host checks that other ids are whole
  Tensor<double> l = labels, p = predictions;
  detail::match_shapes(l, p, name());
  const Device d = p.device();
  const int64_t n = p.size();
  const std::pair<const Tensor<double>*, const char*> ids[] = {{&l, "label"}, {&p, "prediction"}};
  for (const auto& [t, what] : ids)  // checked there, reported at the next read
    detail::check_ids_on_device(*t, c_, backend::RangeCheck{name_c_str(), what, t == &l ? "labels" : "predictions",
                                                            t->shape()});
  // cell label·C + prediction (exact in double); a pair out of range goes to -1, which adds nowhere
  const double c = double(c_);
  const Tensor<double> cell =
      gradus::eval((l >= 0.0) * (l < c) * (p >= 0.0) * (p < c) * (l * c + p + 1.0) - 1.0);
  Tensor<int64_t> at = Tensor<int64_t>::empty({n}, d);
  backend::cast(cell.device_data(), n, at.device_data(), false, d);
  if (device_cm_.defined() && device_cm_.device() != d) gather_device();
  if (!device_cm_.defined()) device_cm_ = Tensor<double>::empty({c_ * c_}, d).fill_(0.0);
  const Tensor<double> ones = Tensor<double>::empty({n}, d).fill_(1.0);
  backend::scatter_add_rows(ones.device_data(), 1, c_ * c_, 1, at.device_data(), n, device_cm_.device_data(), true, d);
  return true;
}

GRADUS_INLINE void MeanIoU::gather_device() const {
  if (!device_cm_.defined()) return;
  const Tensor<double> counts = device_cm_.to(gradus::cpu);  // reports the device's range checks
  for (size_t i = 0; i < cm_.size(); ++i) cm_[i] += counts.data()[i];
  device_cm_ = {};
}

GRADUS_INLINE double MeanIoU::compute() const {
  double sum = 0;
  int64_t valid = 0;
  for (int64_t k = 0; k < c_; ++k) {
    double row = 0, col = 0;
    for (int64_t j = 0; j < c_; ++j) {
      row += cm_[size_t(k * c_ + j)];
      col += cm_[size_t(j * c_ + k)];
    }
    const double diag = cm_[size_t(k * c_ + k)];
    const double denom = row + col - diag;
    if (denom != 0) ++valid;
    sum += diag / (denom > 0 ? denom : 1.0);
  }
  return valid > 0 ? sum / double(valid) : 0.0;
}

GRADUS_INLINE void Perplexity::update_log_likelihood_tensors(const Tensor<double>& log_likelihoods,
                                                             const Tensor<double>* weights) {
  require_defined(log_likelihoods, "log_likelihoods");
  if (weights) require_defined(*weights, "weights");
  const double* ll = log_likelihoods.data();
  accumulate(log_likelihoods.shape(), weights, [&](int64_t i) { return -ll[i]; });
  mark_updated();
}

GRADUS_INLINE void Perplexity::update_batch(const Tensor<double>& labels, const Tensor<double>& logits,
                                            const Tensor<double>* weights) {
  accumulate_rows(labels, logits, weights, [](const double* row, int64_t c, int64_t label) {
    const double m = *std::max_element(row, row + c);
    double s = 0;
    for (int64_t j = 0; j < c; ++j) s += std::exp(row[j] - m);
    return m + std::log(s) - row[label];
  });
}
}  // namespace gradus::metrics
#endif  // GRADUS_DEFINE_COMPILED
