// gradus/metrics/metric.hpp — the streaming-metric interface, and the weighted mean most metrics are.
//
// A metric accumulates state across batches: `update(labels, predictions[, weights])` adds one
// batch, `result()` reads the value over every batch since construction or `reset()`. Semantics
// follow TensorFlow 1.x `tf.metrics`; inputs may be any expression of any element type and are
// evaluated, never recorded; state is accumulated in double. Metrics are not differentiable.
//
// Weights follow TF's rules: a scalar, or the rank of the per-example values (one less is
// expanded at the end, one more with a trailing 1 is squeezed) with every dimension 1 or equal.
// They multiply each element's contribution; an element of weight 0 is skipped entirely, so a
// masked NaN or a masked padding label does not reach the result.
//
// Predictions in a GPU's memory: the accuracies (Accuracy, SparseCategoricalAccuracy with int64
// labels, no weights) count on the device, into a running total that stays there until result()
// reads it; the other metrics, and weighted updates, copy the batch to the host.
#pragma once
#include <array>
#include <cmath>
#include <cstdint>
#include <sstream>
#include <string>
#include <string_view>
#include <utility>

#include "gradus/autodiff/materialize.hpp"
#include "gradus/backend/backend.hpp"
#include "gradus/ops/elementwise.hpp"
#include "gradus/ops/reduce.hpp"
#include "gradus/core/compiled.hpp"
#include "gradus/core/error.hpp"
#include "gradus/core/shape.hpp"
#include "gradus/core/tensor.hpp"

namespace gradus::metrics {

namespace detail {

/// `t` as a double tensor; shares storage when it already is one.
template <Element T>
Tensor<double> widen(const Tensor<T>& t) {
  if constexpr (std::same_as<T, double>) {
    return t;
  } else {
    if (!t.defined()) return {};
    Tensor<double> out(t.shape());
    const T* src = t.data();
    double* dst = out.data();
    for (int64_t i = 0, n = t.size(); i < n; ++i) dst[i] = static_cast<double>(src[i]);
    return out;
  }
}

/// Evaluates any expression (Tensor, Var, elementwise chain) into a double tensor.
template <Expression E>
Tensor<double> to_double(const E& e) {
  return widen(gradus::eval(e).to(gradus::cpu));  // metrics count on the host
}

/// `t` as a double tensor on `device` (converted there).
template <Element T>
Tensor<double> widen_on(const Tensor<T>& t, Device device) {
  const Tensor<T> there = t.to(device);
  if constexpr (std::same_as<T, double>) {
    return there;
  } else {
    Tensor<double> out = Tensor<double>::empty(there.shape(), device);
    backend::cast(there.device_data(), there.size(), out.device_data(), false, device);
    return out;
  }
}

inline Shape drop_last(Shape s) {
  s.erase(s.rank() - 1);
  return s;
}

/// TF's remove_squeezable_dimensions: when the ranks differ by one and the higher-rank side
/// ends in a dimension of 1, that dimension goes; then the shapes must be equal.
void match_shapes(Tensor<double>& labels, Tensor<double>& predictions, std::string_view metric);

/// Class-id labels for scores of shape [..., C]: labels [...] or [..., 1] (squeezed).
Tensor<double> sparse_labels(const Tensor<double>& labels, const Tensor<double>& scores,
                             std::string_view metric);

/// Class ids (whole numbers, as doubles in a device's memory) checked there to lie in [0, end),
/// without reading them back: the first one outside is reported as `check` says at the device's
/// next synchronisation point.
void check_ids_on_device(const Tensor<double>& ids, int64_t end, const backend::RangeCheck& check);

/// `t` broadcast to `to` by NumPy rules (dimensions aligned on the right, each 1 or equal);
/// `what` names `t` in the error. Returns `t` itself when it already has shape `to`.
Tensor<double> expand_to(const Tensor<double>& t, const Shape& to, const char* what,
                         std::string_view metric);

/// `t` broadcast to `to` under TF's weight rules (see the file comment): a scalar, or after the
/// trailing squeeze / expand the same rank with every dimension 1 or equal.
Tensor<double> broadcast_to(const Tensor<double>& t, const Shape& to, const char* what,
                            std::string_view metric);

/// Weights for values of shape `to`: undefined (all ones) when `w` is null.
inline Tensor<double> weights_for(const Tensor<double>* w, const Shape& to, std::string_view metric) {
  return w ? broadcast_to(*w, to, "weights", metric) : Tensor<double>();
}

/// "Tensor<float>": how errors name the element type of an argument.
template <class T>
constexpr const char* tensor_type_name() {
  if constexpr (std::same_as<T, float>) return "Tensor<float>";
  else if constexpr (std::same_as<T, double>) return "Tensor<double>";
  else if constexpr (std::same_as<T, int64_t>) return "Tensor<int64_t>";
  else if constexpr (std::same_as<T, uint8_t>) return "Tensor<uint8_t>";
  else if constexpr (std::same_as<T, bfloat16>) return "Tensor<bfloat16>";
  else return "a tensor of another element type";
}

/// `v` as a class index in [0, num_classes); throws naming the metric, what `v` is and where.
/// `given` names the element type the caller passed (null: unknown); when it is not
/// Tensor<int64_t> the message says so and how to convert.
inline int64_t class_index(double v, int64_t num_classes, const char* what, std::string_view metric,
                           int64_t position = -1, const char* given = nullptr) {
  if (v >= 0 && v < double(num_classes) && v == std::floor(v)) [[likely]]
    return static_cast<int64_t>(v);
  std::ostringstream os;
  os << metric << ": " << what << ' ' << v;
  if (position >= 0) os << " at position " << position;
  os << " is not a class index in [0, " << num_classes << ")";
  if (given && std::string_view(given) != "Tensor<int64_t>")
    os << "; " << what << "s must be Tensor<int64_t>, got " << given << ": use gd::cast<int64_t>(" << what << "s)";
  throw value_error(os.str());
}

/// Index of the first largest element of x[0..n) (tf.argmax).
inline int64_t argmax_row(const double* x, int64_t n) {
  int64_t best = 0;
  for (int64_t j = 1; j < n; ++j)
    if (x[j] > x[best]) best = j;
  return best;
}

/// `a / b`, or 0 when b is 0 (tf.math.div_no_nan).
inline double div_no_nan(double a, double b) { return b == 0 ? 0.0 : a / b; }

}  // namespace detail

/// What every metric offers, so a training loop can hold a list of them:
///   std::vector<std::unique_ptr<gd::metrics::Metric>> ms;  ms.push_back(std::make_unique<Accuracy>());
///   for (auto& m : ms) m->update(labels, predictions);   ...   log(m->name(), m->result());
class Metric {
 public:
  virtual ~Metric() = default;

  /// The name used in errors and logs: TF's default ("accuracy") unless renamed.
  std::string_view name() const { return name_; }
  void set_name(std::string name) { name_ = std::move(name); }

  /// Adds one batch. Shapes that do not fit throw gd::shape_error naming the metric.
  template <Expression L, Expression P>
  void update(const L& labels, const P& predictions) {
    const Given given(*this, detail::tensor_type_name<value_type_t<L>>(),
                      detail::tensor_type_name<value_type_t<P>>());
    const auto p = gradus::eval(predictions);
    const auto l = gradus::eval(labels);
    if (!p.in_host_memory() && l.defined()) {  // counted there when the metric can
      const Device d = p.device();
      if (update_on_device(detail::widen_on(l, d), detail::widen_on(p, d), std::same_as<value_type_t<L>, int64_t>,
                           std::same_as<value_type_t<P>, int64_t>)) {
        mark_updated();
        return;
      }
    }
    update_tensors(detail::widen(l.to(gradus::cpu)), detail::widen(p.to(gradus::cpu)), nullptr);
  }
  /// Adds one batch, each element's contribution multiplied by its (broadcast) weight.
  template <Expression L, Expression P, Expression W>
  void update(const L& labels, const P& predictions, const W& weights) {
    const Given given(*this, detail::tensor_type_name<value_type_t<L>>(),
                      detail::tensor_type_name<value_type_t<P>>());
    const Tensor<double> w = detail::to_double(weights);
    update_tensors(detail::to_double(labels), detail::to_double(predictions), &w);
  }
  /// The non-template form of `update`; `weights` may be null (all ones).
  void update_tensors(const Tensor<double>& labels, const Tensor<double>& predictions,
                      const Tensor<double>* weights);

  /// The value over every batch since construction or reset(); throws gd::value_error before
  /// any update ("accuracy: result() before any update").
  double result() const {
    require_result();
    gather_device();
    return compute();
  }
  /// Forgets every batch; result() throws again until the next update.
  void reset() {
    clear();
    updated_ = false;
  }
  /// True once a batch has been added since construction or reset().
  bool has_result() const { return updated_; }

 protected:
  explicit Metric(std::string name) : name_(std::move(name)) {}
  Metric(const Metric&) = default;
  Metric& operator=(const Metric&) = default;

  /// Validates one batch and adds it to the state; must leave the state untouched if it throws.
  virtual void update_batch(const Tensor<double>& labels, const Tensor<double>& predictions,
                            const Tensor<double>* weights) = 0;
  /// Adds one batch whose labels and predictions are in a device's memory without reading them
  /// back, and returns true; false (the default) when the metric cannot, and the batch is then
  /// copied to the host for update_batch. `integer_labels`, `integer_predictions`: they were
  /// given as int64 (whole numbers, so a range check on the device says all that is wrong).
  virtual bool update_on_device(const Tensor<double>& /*labels*/, const Tensor<double>& /*predictions*/,
                                bool /*integer_labels*/, bool /*integer_predictions*/) {
    return false;
  }
  /// Folds what update_on_device left on a device into the host's state (reading it back, which
  /// reports the device's range checks); result() calls it before compute().
  virtual void gather_device() const {}
  /// The value from the state; only called after an update.
  virtual double compute() const = 0;
  /// Zeroes the state.
  virtual void clear() = 0;

  void require_result() const;
  /// Labels[i] (or predictions[i] of MeanIoU, `what` = "prediction") as a class index in
  /// [0, num_classes); the error names the element type `update` was given.
  int64_t class_index(double v, int64_t num_classes, const char* what, int64_t position) const {
    const char* given = std::string_view(what) == "label" ? labels_type_ : predictions_type_;
    return detail::class_index(v, num_classes, what, name_, position, given);
  }
  void require_defined(const Tensor<double>& t, const char* what) const;
  void mark_updated() { updated_ = true; }
  const char* name_c_str() const { return name_.c_str(); }

 private:
  /// Records the element types given to `update` for the duration of one call, so errors of
  /// class ids can name them ("labels must be Tensor<int64_t>, got Tensor<float>").
  struct Given {
    Given(Metric& m, const char* labels, const char* predictions) : m_(m) {
      m_.labels_type_ = labels;
      m_.predictions_type_ = predictions;
    }
    ~Given() { m_.labels_type_ = m_.predictions_type_ = nullptr; }
    Given(const Given&) = delete;
    Given& operator=(const Given&) = delete;
    Metric& m_;
  };

  std::string name_;
  bool updated_ = false;
  const char* labels_type_ = nullptr;
  const char* predictions_type_ = nullptr;
};

/// A metric that is a weighted mean of one value per element: total / count, where total sums
/// weight × value and count sums the weights (0 when count is 0, as TF's div_no_nan).
class MeanMetric : public Metric {
 public:
  /// Σ weight × value so far.
  double total() const { return total_ + device_total(); }
  /// Σ weight so far.
  double count() const { return count_; }

 protected:
  using Metric::Metric;

  /// Adds value_at(i) for every element i of `shape`, weighted by `weights` broadcast to it.
  /// value_at may throw; the state changes only once every element has been read.
  template <class F>
  void accumulate(const Shape& shape, const Tensor<double>* weights, F&& value_at) {
    const Tensor<double> w = detail::weights_for(weights, shape, name());
    const int64_t n = shape.numel();
    double total = 0, count = 0;
    if (!w.defined()) {
      for (int64_t i = 0; i < n; ++i) total += value_at(i);
      count = double(n);
    } else {
      const double* wp = w.data();
      for (int64_t i = 0; i < n; ++i) {
        if (wp[i] == 0) continue;
        total += wp[i] * value_at(i);
        count += wp[i];
      }
    }
    total_ += total;
    count_ += count;
  }
  /// For class-id labels [...] (or [..., 1]) and scores [..., C]: adds value_at(row, C, label)
  /// for each row of C scores and its label, checked to be a class index in [0, C).
  template <class F>
  void accumulate_rows(const Tensor<double>& labels, const Tensor<double>& scores, const Tensor<double>* weights,
                       F&& value_at) {
    const Tensor<double> l = detail::sparse_labels(labels, scores, name());
    const int64_t c = scores.shape().back();
    const double *a = l.data(), *s = scores.data();
    accumulate(l.shape(), weights, [&](int64_t i) { return value_at(s + i * c, c, class_index(a[i], c, "label", i)); });
  }
  /// Adds a batch counted on a device: `total` (a one-element tensor there) over `count` elements.
  /// The total joins a running sum on the device; nothing is read back until result().
  void accumulate_on_device(const Tensor<double>& total, double count) {
    device_total_ = device_total_.defined() ? gradus::eval(device_total_ + total) : total;
    count_ += count;
  }
  double mean() const { return count_ > 0 ? total() / count_ : 0.0; }
  double compute() const override { return mean(); }
  void clear() override {
    total_ = count_ = 0;
    device_total_ = {};
  }

 private:
  double device_total() const { return device_total_.defined() ? device_total_.item() : 0.0; }
  double total_ = 0, count_ = 0;
  Tensor<double> device_total_;  // the batches counted on a device (one element there)
};

/// A MeanMetric of one value per element of labels and predictions of matching shapes (after
/// TF's squeeze of a trailing 1): Derived's `double value(double label, double prediction) const`,
/// called directly (no virtual call per element).
template <class Derived>
class ElementwiseMeanMetric : public MeanMetric {
 protected:
  using MeanMetric::MeanMetric;
  void update_batch(const Tensor<double>& labels, const Tensor<double>& predictions,
                    const Tensor<double>* weights) override {
    Tensor<double> l = labels, p = predictions;
    detail::match_shapes(l, p, name());
    const double *a = l.data(), *b = p.data();
    const Derived& self = static_cast<const Derived&>(*this);
    accumulate(p.shape(), weights, [&](int64_t i) { return self.value(a[i], b[i]); });
  }
  /// Derived's `device_values(labels, predictions)`, an elementwise expression of the values, where it has one.
  bool update_on_device(const Tensor<double>& labels, const Tensor<double>& predictions, bool, bool) override {
    if constexpr (requires(const Tensor<double>& t) { Derived::device_values(t, t); }) {
      Tensor<double> l = labels, p = predictions;
      detail::match_shapes(l, p, name());
      accumulate_on_device(gradus::eval(gradus::sum(Derived::device_values(l, p))), double(p.size()));
      return true;
    } else {
      return false;
    }
  }
};

/// A weighted mean over one tensor of values, TF's `mean(values, weights)` shape: it takes
/// `update(values[, weights])`. Through `Metric&`, update(labels, predictions) throws
/// gd::value_error, since there is no labelled form to guess.
class ValueMetric : public MeanMetric {
 public:
  /// Adds every element of `values`.
  template <Expression V>
  void update(const V& values) {
    update_values(detail::to_double(values), nullptr);
  }
  /// Adds every element of `values` times its (broadcast) weight.
  template <Expression V, Expression W>
  void update(const V& values, const W& weights) {
    const Tensor<double> w = detail::to_double(weights);
    update_values(detail::to_double(values), &w);
  }
  /// The non-template form of `update`; `weights` may be null (all ones).
  void update_values(const Tensor<double>& values, const Tensor<double>* weights);

 protected:
  using MeanMetric::MeanMetric;
  virtual void add_values(const Tensor<double>& values, const Tensor<double>* weights) = 0;
  GRADUS_INLINE_DECL void update_batch(const Tensor<double>&, const Tensor<double>&, const Tensor<double>*) override;
};

}  // namespace gradus::metrics

#if GRADUS_DEFINE_COMPILED  // libgradus holds these with GRADUS_COMPILED (core/compiled.hpp)
namespace gradus::metrics::detail {
GRADUS_INLINE void match_shapes(Tensor<double>& labels, Tensor<double>& predictions, std::string_view metric) {
  const int lr = labels.rank(), pr = predictions.rank();
  if (pr == lr + 1 && predictions.shape().back() == 1)
    predictions = predictions.reshape(drop_last(predictions.shape()));
  else if (lr == pr + 1 && labels.shape().back() == 1)
    labels = labels.reshape(drop_last(labels.shape()));
  GRADUS_CHECK(shape_error, labels.shape() == predictions.shape(), metric, ": labels shape ", labels.shape(),
               " does not match predictions shape ", predictions.shape());
}

GRADUS_INLINE Tensor<double> sparse_labels(const Tensor<double>& labels, const Tensor<double>& scores,
                                           std::string_view metric) {
  GRADUS_CHECK(shape_error, scores.rank() >= 1 && scores.shape().back() > 0, metric,
               ": predictions need a non-empty last (class) dimension, got shape ", scores.shape());
  Tensor<double> l = labels;
  if (l.rank() == scores.rank() && l.shape().back() == 1) l = l.reshape(drop_last(l.shape()));
  GRADUS_CHECK(shape_error, l.shape() == drop_last(scores.shape()), metric, ": labels shape ", labels.shape(),
               " does not match predictions shape ", scores.shape(), " without its class dimension",
               labels.shape() == scores.shape() ? " (one-hot labels? this metric takes class ids: gd::argmax(labels, -1))"
                                                : "");
  return l;
}

GRADUS_INLINE void check_ids_on_device(const Tensor<double>& ids, int64_t end, const backend::RangeCheck& check) {
  const Device d = ids.device();
  Tensor<int64_t> k = Tensor<int64_t>::empty(ids.shape(), d);
  backend::cast(ids.device_data(), ids.size(), k.device_data(), false, d);
  backend::run<backend::kernel::CheckRange, int64_t>(d, k.device_data(), k.size(), end, check);
}

GRADUS_INLINE Tensor<double> expand_to(const Tensor<double>& t, const Shape& to, const char* what,
                                       std::string_view metric) {
  const int r = to.rank();
  bool fits = t.rank() <= r;
  Shape s;
  for (int i = 0; fits && i < r; ++i) {
    const int j = i - (r - t.rank());
    s.push_back(j >= 0 ? t.shape()[j] : 1);
    fits = s[i] == to[i] || s[i] == 1;
  }
  GRADUS_CHECK(shape_error, fits, metric, ": ", what, " shape ", t.shape(), " cannot be broadcast to ", to);
  if (t.shape() == to) return t;
  const Tensor<double> b = t.reshape(s);

  std::array<int64_t, kMaxRank> stride = row_major_strides(s);
  for (int i = 0; i < r; ++i)
    if (s[i] == 1) stride[size_t(i)] = 0;
  Tensor<double> out(to);
  std::array<int64_t, kMaxRank> idx{};
  int64_t off = 0;
  const double* src = b.data();
  double* dst = out.data();
  for (int64_t k = 0, n = out.size(); k < n; ++k) {
    dst[k] = src[off];
    for (int d = r - 1; d >= 0; --d) {
      const size_t ud = size_t(d);
      if (++idx[ud] < to[d]) {
        off += stride[ud];
        break;
      }
      off -= stride[ud] * (to[d] - 1);
      idx[ud] = 0;
    }
  }
  return out;
}

GRADUS_INLINE Tensor<double> broadcast_to(const Tensor<double>& t, const Shape& to, const char* what,
                                          std::string_view metric) {
  const int r = to.rank();
  Tensor<double> b = t;
  if (b.rank() == r + 1 && b.shape().back() == 1) {
    b = b.reshape(drop_last(b.shape()));
  } else if (b.rank() > 0 && b.rank() + 1 == r) {
    Shape s = b.shape();
    s.push_back(1);
    b = b.reshape(s);
  }
  bool fits = b.rank() == 0 || b.rank() == r;
  for (int i = 0; fits && i < b.rank(); ++i) fits = b.shape()[i] == to[i] || b.shape()[i] == 1;
  GRADUS_CHECK(shape_error, fits, metric, ": ", what, " shape ", t.shape(), " cannot be broadcast to ", to);
  return expand_to(b, to, what, metric);
}
}  // namespace gradus::metrics::detail

namespace gradus::metrics {
GRADUS_INLINE void Metric::update_tensors(const Tensor<double>& labels, const Tensor<double>& predictions,
                                          const Tensor<double>* weights) {
  require_defined(labels, "labels");
  require_defined(predictions, "predictions");
  if (weights) require_defined(*weights, "weights");
  update_batch(labels, predictions, weights);
  updated_ = true;
}

GRADUS_INLINE void Metric::require_result() const {
  GRADUS_CHECK(value_error, updated_, name_, ": result() before any update");
}

GRADUS_INLINE void Metric::require_defined(const Tensor<double>& t, const char* what) const {
  GRADUS_CHECK(value_error, t.defined(), name_, ": ", what, " is an undefined tensor");
}

GRADUS_INLINE void ValueMetric::update_values(const Tensor<double>& values, const Tensor<double>* weights) {
  require_defined(values, "values");
  if (weights) require_defined(*weights, "weights");
  add_values(values, weights);
  mark_updated();
}

GRADUS_INLINE void ValueMetric::update_batch(const Tensor<double>&, const Tensor<double>&, const Tensor<double>*) {
  GRADUS_CHECK(value_error, false, name(), ": takes update(values[, weights]), not (labels, predictions)");
}
}  // namespace gradus::metrics
#endif  // GRADUS_DEFINE_COMPILED
