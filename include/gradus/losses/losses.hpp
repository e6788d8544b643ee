// gradus/losses/losses.hpp — the tf.losses family (TensorFlow 1.x semantics), built from fused
// expressions.
//
// A loss is its per-element formula written as an elementwise expression, multiplied by the
// weights and reduced in the same pass: `mean_squared_error(y, p)` is one fused loop forward and
// one backward, whatever expression `p` is. The softmax cross-entropies run one log_softmax
// kernel, then a fused sum over classes. Arguments follow TF: (labels, predictions[, options]),
// with options an aggregate passed last:
//   auto loss = gd::losses::mean_squared_error(y, p);                       // rank 0
//   auto per  = gd::losses::huber_loss(y, p, {.reduction = gd::Reduction::none, .weights = w, .delta = 2.0});
// The result is a Var when any argument is differentiable, else a Tensor: rank 0 for a reduction,
// the per-element (per-example for the softmax cross-entropies) shape for Reduction::none.
//
// Weights and reduction, as TF1 `tf.losses.compute_weighted_loss`:
//   weighted = losses * weights, weights a number or a Tensor that is a scalar or has the losses'
//              rank with each dimension 1 or equal to the losses' (TF's broadcast rule; so
//              per-example weights for [N, C] losses are [N, 1]). Weights are constants.
//   none                     weighted
//   sum                      sum(weighted)
//   mean                     sum(weighted) / sum(weights broadcast to the losses' shape)  (TF1 Reduction.MEAN)
//   sum_by_nonzero_weights   sum(weighted) / number of non-zero weights broadcast to the losses' shape
//                            (the default, TF1 SUM_BY_NONZERO_WEIGHTS; with no zero weight it is
//                            TF's SUM_OVER_BATCH_SIZE, sum / number of elements)
// A zero denominator gives 0, as TF's div_no_nan: all-zero weights give a loss of 0 (gradient 0).
// Errors: labels and predictions of different shapes -> shape_error naming the loss and both
// shapes; weights that do not broadcast -> shape_error; an empty batch -> value_error (in every
// reduction mode, `none` included); a sparse label outside [0, classes) -> value_error.
#pragma once
#include <cstdint>
#include <numbers>

#include "gradus/core/compiled.hpp"
#include "gradus/ops/elementwise.hpp"
#include "gradus/ops/reduce.hpp"
#include "gradus/ops/shape.hpp"
#include "gradus/ops/softmax.hpp"

namespace gradus {

/// How a loss reduces its weighted losses (TF1 `tf.losses.Reduction`); see losses/losses.hpp.
enum class Reduction {
  none,                   ///< the weighted losses themselves
  sum,                    ///< sum of weighted losses
  mean,                   ///< sum of weighted losses / sum of the (broadcast) weights
  sum_by_nonzero_weights  ///< sum of weighted losses / number of non-zero (broadcast) weights
};

namespace losses {

/// Loss weights: a number (default 1) or a constant tensor broadcastable to the losses by TF's
/// rule (rank 0, or the losses' rank with every dimension 1 or equal).
///   {.weights = 0.5}   {.weights = gd::Tensor<double>::from({1, 0, 2}, {3, 1})}
template <Real T>
struct Weights {
  T scalar = T(1);
  Tensor<T> tensor;  ///< used instead of `scalar` when defined

  Weights() = default;
  template <Scalar S>
  Weights(S w) : scalar(T(w)) {}
  template <Expression E>
    requires(std::same_as<value_type_t<E>, T> && !is_differentiable_v<E>)
  Weights(const E& w) : tensor(eval(w)) {}
  template <Expression E>
    requires is_differentiable_v<E>
  Weights(const E&) {
    static_assert(!is_differentiable_v<E>, "LOSS_WEIGHTS_ARE_CONSTANTS: losses — pass a Tensor (e.g. v.value()) or a number");
  }
};

/// Options of every loss: how to reduce and how to weight.
template <Real T>
struct Options {
  Reduction reduction = Reduction::sum_by_nonzero_weights;
  Weights<T> weights = {};
};
/// huber_loss: `delta` (> 0) is where the loss turns from quadratic to linear.
template <Real T>
struct HuberOptions {
  Reduction reduction = Reduction::sum_by_nonzero_weights;
  Weights<T> weights = {};
  double delta = 1.0;
};
/// log_loss: `epsilon` (>= 0) keeps the logarithms finite at predictions 0 and 1.
template <Real T>
struct LogLossOptions {
  Reduction reduction = Reduction::sum_by_nonzero_weights;
  Weights<T> weights = {};
  double epsilon = 1e-7;
};
/// sigmoid and softmax cross-entropy: `label_smoothing` in [0, 1] pulls the labels toward
/// 1/2 (sigmoid) or 1/classes (softmax), as TF.
template <Real T>
struct SmoothingOptions {
  Reduction reduction = Reduction::sum_by_nonzero_weights;
  Weights<T> weights = {};
  double label_smoothing = 0;
};

namespace detail {

/// Labels and predictions of one real element type.
template <class L, class P>
concept LossOperands = Expression<L> && Expression<P> && Real<value_type_t<P>> &&
                       std::same_as<value_type_t<L>, value_type_t<P>>;

inline void check_same_shape(const char* op, const char* what, const Shape& labels, const Shape& other) {
  GRADUS_CHECK(shape_error, labels == other, op, ": labels shape ", labels, " and ", what, " shape ", other,
               " differ");
}

inline void check_classes(const char* op, const Shape& logits) {
  GRADUS_CHECK(value_error, logits.rank() >= 1, op, ": expected logits of rank >= 1 (classes on the last axis), got shape ",
               logits);
}

/// TF1 compute_weighted_loss over per-element losses `e`: one fused pass for the reductions.
template <class E, class T = value_type_t<E>>
auto weighted_loss(const char* op, const E& e, Reduction reduction, const Weights<T>& w) {
  const Shape ls = e.shape();
  const int64_t n = ls.numel();
  GRADUS_CHECK(value_error, n > 0, op, ": empty batch, losses of shape ", ls);
  const bool scalar = !w.tensor.defined() || w.tensor.rank() == 0;
  const T ws = !w.tensor.defined() ? w.scalar : scalar ? w.tensor.item() : T(0);
  double wsum = 0, nonzero = 0;  // over the weights broadcast to the losses' shape
  if (scalar) {
    wsum = double(ws) * double(n);
    nonzero = ws != T(0) ? double(n) : 0.0;
  } else {
    const Shape& s = w.tensor.shape();
    bool fits = s.rank() == ls.rank();
    for (int i = 0; fits && i < s.rank(); ++i) fits = s[i] == 1 || s[i] == ls[i];
    GRADUS_CHECK(shape_error, fits, op, ": weights shape ", s, " does not broadcast to losses shape ", ls,
                 " (weights must be a scalar or have rank ", ls.rank(), " with each dimension 1 or equal)");
    const double copies = double(n / w.tensor.size());
    for (const T v : w.tensor.to(gradus::cpu)) wsum += double(v), nonzero += v != T(0);  // a GPU's weights read back
    wsum *= copies;
    nonzero *= copies;
  }
  if (reduction == Reduction::none) {
    if (scalar) return materialize(e * ws);  // a number: no tensor to place on e's device
    return materialize(e * w.tensor.to(backend::device_of(e)));  // the weights go where the losses are
  }
  const double denom = reduction == Reduction::sum ? 1.0 : reduction == Reduction::mean ? wsum : nonzero;
  const double scale = denom == 0 ? 0.0 : 1.0 / denom;
  if (scalar) return sum(e * T(double(ws) * scale));
  return sum(e * Tensor<T>(w.tensor.to(backend::device_of(e)) * T(scale)));
}

/// Per-example softmax cross-entropy -sum(labels * log_softmax(logits), -1), stable for any logits.
template <class L, class P>
auto softmax_xent(const L& labels, const P& logits) {
  return -sum(labels * log_softmax(logits, -1), -1);
}

/// The operands of a training step, Tensor labels and Var predictions of one element type: each
/// loss sends them to its `_var` function, which a program linking libgradus finds compiled there
/// for float and double (the loss's expressions and kernels are then not compiled in the program);
/// any other operands go to the loss's `_of` template, its body. Both compute the same: `_var`
/// calls `_of` (defined at the end of this file).
template <class L, class P>
concept TrainingOperands = Real<value_type_t<P>> && std::same_as<std::remove_cvref_t<L>, Tensor<value_type_t<P>>> &&
                           std::same_as<std::remove_cvref_t<P>, Var<value_type_t<P>>>;

template <Real T>
Var<T> mean_squared_error_var(const Tensor<T>& labels, const Var<T>& predictions, const Options<T>& opt);
template <Real T>
Var<T> absolute_difference_var(const Tensor<T>& labels, const Var<T>& predictions, const Options<T>& opt);
template <Real T>
Var<T> log_loss_var(const Tensor<T>& labels, const Var<T>& predictions, const LogLossOptions<T>& opt);
template <Real T>
Var<T> hinge_loss_var(const Tensor<T>& labels, const Var<T>& logits, const Options<T>& opt);
template <Real T>
Var<T> huber_loss_var(const Tensor<T>& labels, const Var<T>& predictions, const HuberOptions<T>& opt);
template <Real T>
Var<T> log_cosh_var(const Tensor<T>& labels, const Var<T>& predictions, const Options<T>& opt);
template <Real T>
Var<T> exponential_loss_var(const Tensor<T>& labels, const Var<T>& logits, const Options<T>& opt);
template <Real T>
Var<T> sigmoid_cross_entropy_with_logits_var(const Tensor<T>& labels, const Var<T>& logits,
                                             const SmoothingOptions<T>& opt);
template <Real T>
Var<T> softmax_cross_entropy_with_logits_var(const Tensor<T>& labels, const Var<T>& logits,
                                             const SmoothingOptions<T>& opt);
template <Real T>
Var<T> sparse_softmax_cross_entropy_with_logits_var(const Tensor<int64_t>& labels, const Var<T>& logits,
                                                    const Options<T>& opt);

// The losses' bodies (see TrainingOperands).
template <class L, class P>
auto mean_squared_error_of(const L& labels, const P& predictions, const Options<value_type_t<P>>& opt) {
  detail::check_same_shape("mean_squared_error", "predictions", labels.shape(), predictions.shape());
  return detail::weighted_loss("mean_squared_error", square(predictions - labels), opt.reduction, opt.weights);
}

template <class L, class P>
auto absolute_difference_of(const L& labels, const P& predictions, const Options<value_type_t<P>>& opt) {
  detail::check_same_shape("absolute_difference", "predictions", labels.shape(), predictions.shape());
  return detail::weighted_loss("absolute_difference", abs(predictions - labels), opt.reduction, opt.weights);
}

template <class L, class P>
auto log_loss_of(const L& labels, const P& predictions, const LogLossOptions<value_type_t<P>>& opt) {
  using T = value_type_t<P>;
  detail::check_same_shape("log_loss", "predictions", labels.shape(), predictions.shape());
  GRADUS_CHECK(value_error, opt.epsilon >= 0, "log_loss: epsilon must be >= 0, got ", opt.epsilon);
  const T eps = T(opt.epsilon);
  auto e = -(labels * log(predictions + eps)) - (T(1) - labels) * log(T(1) - predictions + eps);
  return detail::weighted_loss("log_loss", e, opt.reduction, opt.weights);
}

template <class L, class P>
auto hinge_loss_of(const L& labels, const P& logits, const Options<value_type_t<P>>& opt) {
  using T = value_type_t<P>;
  detail::check_same_shape("hinge_loss", "logits", labels.shape(), logits.shape());
  return detail::weighted_loss("hinge_loss", relu(T(1) - (labels * T(2) - T(1)) * logits), opt.reduction, opt.weights);
}

template <class L, class P>
auto huber_loss_of(const L& labels, const P& predictions, const HuberOptions<value_type_t<P>>& opt) {
  using T = value_type_t<P>;
  detail::check_same_shape("huber_loss", "predictions", labels.shape(), predictions.shape());
  GRADUS_CHECK(value_error, opt.delta > 0, "huber_loss: delta must be positive, got ", opt.delta);
  const T d = T(opt.delta);
  auto err = abs(predictions - labels);
  auto quadratic = minimum(err, d);
  auto e = T(0.5) * square(quadratic) + d * (err - quadratic);
  return detail::weighted_loss("huber_loss", e, opt.reduction, opt.weights);
}

template <class L, class P>
auto log_cosh_of(const L& labels, const P& predictions, const Options<value_type_t<P>>& opt) {
  using T = value_type_t<P>;
  detail::check_same_shape("log_cosh", "predictions", labels.shape(), predictions.shape());
  auto x = predictions - labels;
  return detail::weighted_loss("log_cosh", x + softplus(x * T(-2)) - T(std::numbers::ln2), opt.reduction, opt.weights);
}

template <class L, class P>
auto exponential_loss_of(const L& labels, const P& logits, const Options<value_type_t<P>>& opt) {
  using T = value_type_t<P>;
  detail::check_same_shape("exponential_loss", "logits", labels.shape(), logits.shape());
  return detail::weighted_loss("exponential_loss", exp(-((labels * T(2) - T(1)) * logits)), opt.reduction, opt.weights);
}

template <class L, class P>
auto sigmoid_cross_entropy_with_logits_of(const L& labels, const P& logits,
                                          const SmoothingOptions<value_type_t<P>>& opt) {
  using T = value_type_t<P>;
  const char* op = "sigmoid_cross_entropy_with_logits";
  detail::check_same_shape(op, "logits", labels.shape(), logits.shape());
  const double s = opt.label_smoothing;
  GRADUS_CHECK(value_error, s >= 0 && s <= 1, op, ": label_smoothing must be in [0, 1], got ", s);
  auto z = labels * T(1 - s) + T(0.5 * s);
  // maximum/minimum send a tie to their first operand, so the gradient at x = 0 is sigmoid(0) - z
  auto e = maximum(logits, T(0)) - logits * z + log1p(exp(minimum(-logits, logits)));
  return detail::weighted_loss(op, e, opt.reduction, opt.weights);
}

template <class L, class P>
auto softmax_cross_entropy_with_logits_of(const L& labels, const P& logits,
                                          const SmoothingOptions<value_type_t<P>>& opt) {
  using T = value_type_t<P>;
  const char* op = "softmax_cross_entropy_with_logits";
  const Shape ls = logits.shape();
  detail::check_same_shape(op, "logits", labels.shape(), ls);
  detail::check_classes(op, ls);
  GRADUS_CHECK(value_error, ls.numel() > 0, op, ": empty batch, logits of shape ", ls);
  const double s = opt.label_smoothing;
  GRADUS_CHECK(value_error, s >= 0 && s <= 1, op, ": label_smoothing must be in [0, 1], got ", s);
  const auto classes = double(ls[ls.rank() - 1]);
  return detail::weighted_loss(op, detail::softmax_xent(labels * T(1 - s) + T(s / classes), logits), opt.reduction,
                               opt.weights);
}

template <class P>
auto sparse_softmax_cross_entropy_with_logits_of(const Tensor<int64_t>& labels, const P& logits,
                                                 const Options<value_type_t<P>>& opt) {
  using T = value_type_t<P>;
  const char* op = "sparse_softmax_cross_entropy_with_logits";
  const Shape ls = logits.shape();
  detail::check_classes(op, ls);
  Shape batch;
  for (int i = 0; i + 1 < ls.rank(); ++i) batch.push_back(ls[i]);
  GRADUS_CHECK(shape_error, labels.shape() == batch, op, ": labels shape ", labels.shape(),
               " does not match logits shape ", ls, " without its class axis (expected ", batch, ")");
  GRADUS_CHECK(value_error, ls.numel() > 0, op, ": empty batch, logits of shape ", ls);
  const int64_t classes = ls[ls.rank() - 1];
  backend::check_labels(labels, classes, op, ls);  // where the labels are: a GPU's report at its next sync
  const Device dev = backend::device_of(logits);
  const Tensor<int64_t> placed = labels.to(dev);  // the labels go where the logits are
  if (backend::implements<backend::kernel::SparseXent, T>(dev))  // one fused op: logsumexp - the label's logit
    return detail::weighted_loss(op, gradus::detail::sparse_softmax_xent(placed, logits), opt.reduction,
                                 opt.weights);
  // A backend without it: the loss composed of log_softmax and one-hot rows, as the sum of
  // log_softmax(z) · (-one_hot) along the classes, the product's type (Var × Tensor) being one
  // the weighting compiles anyway.
  return detail::weighted_loss(op, sum(log_softmax(logits, -1) * one_hot<T>(placed, classes, T(-1), T(0)), -1),
                               opt.reduction, opt.weights);
}

}  // namespace detail

/// Reduces per-element losses by weights and reduction, as tf.losses.compute_weighted_loss.
///   gd::losses::compute_weighted_loss(per_example, {.reduction = gd::Reduction::mean, .weights = w});
template <Expression E>
  requires Real<value_type_t<E>>
auto compute_weighted_loss(const E& losses, Options<value_type_t<E>> opt = {}) {
  return detail::weighted_loss("compute_weighted_loss", losses, opt.reduction, opt.weights);
}

/// (predictions - labels)^2, weighted and reduced. Labels and predictions have one shape.
///   gd::losses::mean_squared_error(y, p);   // mean over elements by default
template <class L, class P>
  requires detail::LossOperands<L, P>
auto mean_squared_error(const L& labels, const P& predictions, Options<value_type_t<P>> opt = {}) {
  if constexpr (detail::TrainingOperands<L, P>)
    return detail::mean_squared_error_var(labels, predictions, opt);
  else
    return detail::mean_squared_error_of(labels, predictions, opt);
}

/// |predictions - labels|, weighted and reduced (the gradient at 0 is 0).
template <class L, class P>
  requires detail::LossOperands<L, P>
auto absolute_difference(const L& labels, const P& predictions, Options<value_type_t<P>> opt = {}) {
  if constexpr (detail::TrainingOperands<L, P>)
    return detail::absolute_difference_var(labels, predictions, opt);
  else
    return detail::absolute_difference_of(labels, predictions, opt);
}

/// Binary log loss of probabilities p: -y log(p + eps) - (1 - y) log(1 - p + eps), eps = 1e-7.
template <class L, class P>
  requires detail::LossOperands<L, P>
auto log_loss(const L& labels, const P& predictions, LogLossOptions<value_type_t<P>> opt = {}) {
  if constexpr (detail::TrainingOperands<L, P>)
    return detail::log_loss_var(labels, predictions, opt);
  else
    return detail::log_loss_of(labels, predictions, opt);
}

/// Hinge loss of logits for labels in {0, 1} (taken as -1/+1): max(0, 1 - (2y - 1) * logits).
template <class L, class P>
  requires detail::LossOperands<L, P>
auto hinge_loss(const L& labels, const P& logits, Options<value_type_t<P>> opt = {}) {
  if constexpr (detail::TrainingOperands<L, P>)
    return detail::hinge_loss_var(labels, logits, opt);
  else
    return detail::hinge_loss_of(labels, logits, opt);
}

/// Huber loss of e = predictions - labels: e^2/2 where |e| <= delta, delta (|e| - delta/2) beyond.
///   gd::losses::huber_loss(y, p, {.delta = 2.0});
template <class L, class P>
  requires detail::LossOperands<L, P>
auto huber_loss(const L& labels, const P& predictions, HuberOptions<value_type_t<P>> opt = {}) {
  if constexpr (detail::TrainingOperands<L, P>)
    return detail::huber_loss_var(labels, predictions, opt);
  else
    return detail::huber_loss_of(labels, predictions, opt);
}

/// log(cosh(predictions - labels)), as x + softplus(-2x) - log 2: finite for any difference.
template <class L, class P>
  requires detail::LossOperands<L, P>
auto log_cosh(const L& labels, const P& predictions, Options<value_type_t<P>> opt = {}) {
  if constexpr (detail::TrainingOperands<L, P>)
    return detail::log_cosh_var(labels, predictions, opt);
  else
    return detail::log_cosh_of(labels, predictions, opt);
}

/// Exponential (AdaBoost) loss of logits for labels in {0, 1} (taken as -1/+1): exp(-(2y - 1) * logits).
template <class L, class P>
  requires detail::LossOperands<L, P>
auto exponential_loss(const L& labels, const P& logits, Options<value_type_t<P>> opt = {}) {
  if constexpr (detail::TrainingOperands<L, P>)
    return detail::exponential_loss_var(labels, logits, opt);
  else
    return detail::exponential_loss_of(labels, logits, opt);
}

/// Per-element binary cross-entropy of logits x against labels z in [0, 1] (tf.losses.sigmoid_cross_entropy):
/// max(x, 0) - x z + log1p(exp(-|x|)), finite for any x; weights broadcast per element.
/// label_smoothing s: z -> z (1 - s) + s / 2.
template <class L, class P>
  requires detail::LossOperands<L, P>
auto sigmoid_cross_entropy_with_logits(const L& labels, const P& logits, SmoothingOptions<value_type_t<P>> opt = {}) {
  if constexpr (detail::TrainingOperands<L, P>)
    return detail::sigmoid_cross_entropy_with_logits_var(labels, logits, opt);
  else
    return detail::sigmoid_cross_entropy_with_logits_of(labels, logits, opt);
}

/// Per-example cross-entropy -sum(labels * log_softmax(logits)) over the last (class) axis
/// (tf.losses.softmax_cross_entropy): labels [..., C] are probabilities (soft labels are
/// differentiable), losses [...]. label_smoothing s: labels -> labels (1 - s) + s / C.
///   gd::losses::softmax_cross_entropy_with_logits(onehot, logits, {.label_smoothing = 0.1});
template <class L, class P>
  requires detail::LossOperands<L, P>
auto softmax_cross_entropy_with_logits(const L& labels, const P& logits, SmoothingOptions<value_type_t<P>> opt = {}) {
  if constexpr (detail::TrainingOperands<L, P>)
    return detail::softmax_cross_entropy_with_logits_var(labels, logits, opt);
  else
    return detail::softmax_cross_entropy_with_logits_of(labels, logits, opt);
}

/// Per-example cross-entropy -log_softmax(logits)[label] (tf.losses.sparse_softmax_cross_entropy):
/// integer labels [...] in [0, C), logits [..., C], losses [...].
///   gd::losses::sparse_softmax_cross_entropy_with_logits(labels, logits);   // labels [N], logits [N, C]
template <Expression P>
  requires Real<value_type_t<P>>
auto sparse_softmax_cross_entropy_with_logits(const Tensor<int64_t>& labels, const P& logits,
                                              Options<value_type_t<P>> opt = {}) {
  if constexpr (is_var_v<P>)
    return detail::sparse_softmax_cross_entropy_with_logits_var(labels, logits, opt);
  else
    return detail::sparse_softmax_cross_entropy_with_logits_of(labels, logits, opt);
}

/// Labels that are not Tensor<int64_t> (float class ids, a Var, one-hot rows) are refused at
/// compile time with a sentence that says what to do.
template <class L, Expression P>
  requires(!std::same_as<std::remove_cvref_t<L>, Tensor<int64_t>>)
auto sparse_softmax_cross_entropy_with_logits(const L&, const P&, Options<value_type_t<P>> = {}) {
  static_assert(std::same_as<std::remove_cvref_t<L>, Tensor<int64_t>>,
                "LABELS_MUST_BE_TENSOR_INT64_T: sparse_softmax_cross_entropy_with_logits takes class ids as "
                "Tensor<int64_t> (see 'L' below for what was given): use gd::cast<int64_t>(labels), or "
                "softmax_cross_entropy_with_logits for one-hot or soft labels");
  return 0;
}

/// sum(x^2) / 2 over every element (tf.nn.l2_loss): rank 0, no weights; 0 for an empty tensor.
template <Expression E>
  requires Real<value_type_t<E>>
auto l2_loss(const E& x) {
  return sum(square(x) * value_type_t<E>(0.5));
}

// The training operands' copies (TrainingOperands): defined here, not inline, so that a program
// linking libgradus uses the float and double instantiations compiled there.
namespace detail {
template <Real T>
Var<T> mean_squared_error_var(const Tensor<T>& labels, const Var<T>& predictions, const Options<T>& opt) {
  return mean_squared_error_of(labels, predictions, opt);
}

template <Real T>
Var<T> absolute_difference_var(const Tensor<T>& labels, const Var<T>& predictions, const Options<T>& opt) {
  return absolute_difference_of(labels, predictions, opt);
}

template <Real T>
Var<T> log_loss_var(const Tensor<T>& labels, const Var<T>& predictions, const LogLossOptions<T>& opt) {
  return log_loss_of(labels, predictions, opt);
}

template <Real T>
Var<T> hinge_loss_var(const Tensor<T>& labels, const Var<T>& logits, const Options<T>& opt) {
  return hinge_loss_of(labels, logits, opt);
}

template <Real T>
Var<T> huber_loss_var(const Tensor<T>& labels, const Var<T>& predictions, const HuberOptions<T>& opt) {
  return huber_loss_of(labels, predictions, opt);
}

template <Real T>
Var<T> log_cosh_var(const Tensor<T>& labels, const Var<T>& predictions, const Options<T>& opt) {
  return log_cosh_of(labels, predictions, opt);
}

template <Real T>
Var<T> exponential_loss_var(const Tensor<T>& labels, const Var<T>& logits, const Options<T>& opt) {
  return exponential_loss_of(labels, logits, opt);
}

template <Real T>
Var<T> sigmoid_cross_entropy_with_logits_var(const Tensor<T>& labels, const Var<T>& logits,
                                             const SmoothingOptions<T>& opt) {
  return sigmoid_cross_entropy_with_logits_of(labels, logits, opt);
}

template <Real T>
Var<T> softmax_cross_entropy_with_logits_var(const Tensor<T>& labels, const Var<T>& logits,
                                             const SmoothingOptions<T>& opt) {
  return softmax_cross_entropy_with_logits_of(labels, logits, opt);
}

template <Real T>
Var<T> sparse_softmax_cross_entropy_with_logits_var(const Tensor<int64_t>& labels, const Var<T>& logits,
                                                    const Options<T>& opt) {
  return sparse_softmax_cross_entropy_with_logits_of(labels, logits, opt);
}
}  // namespace detail

}  // namespace losses
}  // namespace gradus

#if GRADUS_INSTANCES  // compiled once in libgradus with GRADUS_COMPILED (core/compiled.hpp)
namespace gradus::losses {
GRADUS_INSTANCE Var<float> detail::mean_squared_error_var(const Tensor<float>&, const Var<float>&,
                                                          const Options<float>&);
GRADUS_INSTANCE_DOUBLE Var<double> detail::mean_squared_error_var(const Tensor<double>&, const Var<double>&,
                                                                  const Options<double>&);
GRADUS_INSTANCE Var<float> detail::absolute_difference_var(const Tensor<float>&, const Var<float>&,
                                                           const Options<float>&);
GRADUS_INSTANCE_DOUBLE Var<double> detail::absolute_difference_var(const Tensor<double>&, const Var<double>&,
                                                                   const Options<double>&);
GRADUS_INSTANCE Var<float> detail::log_loss_var(const Tensor<float>&, const Var<float>&, const LogLossOptions<float>&);
GRADUS_INSTANCE_DOUBLE Var<double> detail::log_loss_var(const Tensor<double>&, const Var<double>&,
                                                        const LogLossOptions<double>&);
GRADUS_INSTANCE Var<float> detail::hinge_loss_var(const Tensor<float>&, const Var<float>&, const Options<float>&);
GRADUS_INSTANCE_DOUBLE Var<double> detail::hinge_loss_var(const Tensor<double>&, const Var<double>&,
                                                          const Options<double>&);
GRADUS_INSTANCE Var<float> detail::huber_loss_var(const Tensor<float>&, const Var<float>&, const HuberOptions<float>&);
GRADUS_INSTANCE_DOUBLE Var<double> detail::huber_loss_var(const Tensor<double>&, const Var<double>&,
                                                          const HuberOptions<double>&);
GRADUS_INSTANCE Var<float> detail::log_cosh_var(const Tensor<float>&, const Var<float>&, const Options<float>&);
GRADUS_INSTANCE_DOUBLE Var<double> detail::log_cosh_var(const Tensor<double>&, const Var<double>&,
                                                        const Options<double>&);
GRADUS_INSTANCE Var<float> detail::exponential_loss_var(const Tensor<float>&, const Var<float>&, const Options<float>&);
GRADUS_INSTANCE_DOUBLE Var<double> detail::exponential_loss_var(const Tensor<double>&, const Var<double>&,
                                                                const Options<double>&);
GRADUS_INSTANCE Var<float> detail::sigmoid_cross_entropy_with_logits_var(const Tensor<float>&, const Var<float>&,
                                                                         const SmoothingOptions<float>&);
GRADUS_INSTANCE_DOUBLE Var<double> detail::sigmoid_cross_entropy_with_logits_var(const Tensor<double>&,
                                                                                 const Var<double>&,
                                                                                 const SmoothingOptions<double>&);
GRADUS_INSTANCE Var<float> detail::softmax_cross_entropy_with_logits_var(const Tensor<float>&, const Var<float>&,
                                                                         const SmoothingOptions<float>&);
GRADUS_INSTANCE_DOUBLE Var<double> detail::softmax_cross_entropy_with_logits_var(const Tensor<double>&,
                                                                                 const Var<double>&,
                                                                                 const SmoothingOptions<double>&);
GRADUS_INSTANCE Var<float> detail::sparse_softmax_cross_entropy_with_logits_var(const Tensor<int64_t>&,
                                                                                const Var<float>&,
                                                                                const Options<float>&);
GRADUS_INSTANCE_DOUBLE Var<double> detail::sparse_softmax_cross_entropy_with_logits_var(const Tensor<int64_t>&,
                                                                                        const Var<double>&,
                                                                                        const Options<double>&);
}  // namespace gradus::losses
#endif
