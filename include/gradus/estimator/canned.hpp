// gradus/estimator/canned.hpp — canned models over feature columns (tf.estimator's DNNClassifier,
// DNNRegressor and LinearClassifier): a model, its head (the loss and what predictions mean) and
// its input (the raw batches of a Dataset packed by the columns' Features), trained with
// gd::train::fit on a Dataset, so that every hook, checkpoint, metric and device option of fit
// applies.
//
//   namespace fc = gd::feature_column;
//   gd::estimator::DNNClassifier<float> clf({.feature_columns = {fc::numeric_column("age"), ...},
//                                            .hidden_units = {32, 16}, .n_classes = 2,
//                                            .label_key = "income"}, rng);
//   gd::optim::Adagrad<float> opt(clf.parameters(), {.lr = 0.05});
//   clf.train(raw_batches, opt, {.epochs = 10});                 // raw: CSV or parsed Example batches
//   gd::train::Evaluation ev = clf.evaluate(raw_test, {&accuracy});
//   gd::Tensor<float> p = clf.predict_probabilities(raw_test);   // [N, n_classes]
//
// The DNNs are DenseFeatures, then `hidden_units` Dense layers with `activation` (each followed by
// dropout of rate `dropout` while training), then a Dense layer of logits (child "dnn" with
// children "input_layer", "hiddenlayer_<i>", "dropout_<i>", "logits"), kernels Glorot-uniform and
// biases zero as TensorFlow's. The classifiers' head is softmax cross-entropy over n_classes logits, the mean over
// the batch; TensorFlow's binary head uses one logit and a sigmoid instead, the same model with the
// logit difference as its logit. The regressor's head is the mean squared error over the batch
// and the label_dimension outputs.
#pragma once
#include <cstdint>
#include <memory>
#include <string>
#include <utility>
#include <vector>

#include "gradus/estimator/dense_features.hpp"
#include "gradus/losses/losses.hpp"
#include "gradus/nn/dense.hpp"
#include "gradus/nn/dropout.hpp"
#include "gradus/ops/softmax.hpp"
#include "gradus/train/fit_dataset.hpp"

namespace gradus::estimator {

/// Options of DNNClassifier (designated initializers in this order).
struct DNNClassifierOptions {
  std::vector<feature_column::Column> feature_columns = {};
  std::vector<int64_t> hidden_units = {};  ///< the hidden layers' widths, input to output
  int64_t n_classes = 2;
  std::string label_key = "label";              ///< the batch field holding the labels
  std::vector<std::string> label_vocabulary = {};  ///< string labels: class i is label_vocabulary[i]
  Activation activation = nn::relu;
  double dropout = 0;  ///< rate after each hidden layer while training
};

/// Options of DNNRegressor.
struct DNNRegressorOptions {
  std::vector<feature_column::Column> feature_columns = {};
  std::vector<int64_t> hidden_units = {};
  int64_t label_dimension = 1;  ///< outputs per example (the label field: [B] or [B, label_dimension])
  std::string label_key = "label";
  Activation activation = nn::relu;
  double dropout = 0;
};

/// Options of LinearClassifier.
struct LinearClassifierOptions {
  std::vector<feature_column::Column> feature_columns = {};
  int64_t n_classes = 2;
  std::string label_key = "label";
  std::vector<std::string> label_vocabulary = {};
};

namespace detail {

/// `batches` (raw batches; no label field needed) packed by `features` into one field, x: what
/// predict takes.
inline data::Dataset packed_inputs(const feature_column::Features& features, const data::Dataset& batches) {
  return batches.map([f = features](data::Example b) { return data::Example(f.transform(b)); });
}

/// DenseFeatures, hidden Dense layers (with dropout), and an output Dense layer.
template <Real T>
class Dnn : public nn::Module<T, Dnn<T>> {
 public:
  Dnn(feature_column::Features features, const std::vector<int64_t>& hidden, int64_t outputs, Activation activation,
      double dropout, Rng& rng) {
    GRADUS_CHECK(value_error, outputs >= 1, "DNN: the output width must be >= 1, got ", outputs);
    GRADUS_CHECK(value_error, dropout >= 0 && dropout < 1, "DNN: dropout must be in [0, 1), got ", dropout);
    input_ = &this->register_module("input_layer", std::make_unique<feature_column::DenseFeatures<T>>(std::move(features), rng));
    int64_t in = input_->output_width();
    for (size_t i = 0; i < hidden.size(); ++i) {
      GRADUS_CHECK(value_error, hidden[i] >= 1, "DNN: hidden_units[", i, "] must be >= 1, got ", hidden[i]);
      hidden_.push_back(&this->register_module(
          "hiddenlayer_" + std::to_string(i),
          std::make_unique<nn::Dense<T>>(nn::DenseOptions{.in = in, .out = hidden[i], .activation = activation}, rng)));
      if (dropout > 0)
        dropouts_.push_back(&this->register_module("dropout_" + std::to_string(i),
                                                   std::make_unique<nn::Dropout<T>>(nn::DropoutOptions{.rate = dropout}, rng)));
      in = hidden[i];
    }
    logits_ = &this->register_module("logits", std::make_unique<nn::Dense<T>>(nn::DenseOptions{.in = in, .out = outputs}, rng));
  }

  template <Expression X>
  Var<T> forward(const X& x) {
    Var<T> h = (*input_)(x);
    for (size_t i = 0; i < hidden_.size(); ++i) {
      h = (*hidden_[i])(h);
      if (!dropouts_.empty()) h = (*dropouts_[i])(h);
    }
    return (*logits_)(h);
  }

  feature_column::DenseFeatures<T>& input() const { return *input_; }
  const std::vector<nn::Dense<T>*>& hidden() const { return hidden_; }
  nn::Dense<T>& logits() const { return *logits_; }

 private:
  feature_column::DenseFeatures<T>* input_ = nullptr;
  std::vector<nn::Dense<T>*> hidden_;
  std::vector<nn::Dropout<T>*> dropouts_;
  nn::Dense<T>* logits_ = nullptr;
};

/// What the classifiers share: a multi-class head over `n_classes` logits, and their input.
template <Real T, class Self>
class ClassifierHead : public nn::Module<T, Self> {
 public:
  /// The head's loss: softmax cross-entropy of the logits against class ids, mean over the batch.
  static Var<T> loss(const Tensor<int64_t>& labels, const Var<T>& logits) {
    return Var<T>(losses::sparse_softmax_cross_entropy_with_logits(labels, logits));
  }
  /// `batches` (raw batches: the columns' fields and the label field) packed into (x, y).
  data::Dataset input(const data::Dataset& batches) const { return batches.map(features_.input_fn(label_key_, vocabulary_)); }

  /// Trains on raw batches with gd::train::fit (options as fit's; a validation Dataset must be
  /// packed already: `.validation = &packed` with `auto packed = model.input(raw_test)`).
  train::History train(const data::Dataset& batches, optim::Optimizer<T>& optimizer,
                       const train::DatasetFitOptions& options = {}) {
    return train::fit<int64_t>(self(), optimizer, &ClassifierHead::loss, input(batches), options);
  }
  /// The mean loss and `metrics` over raw batches (gd::train::evaluate).
  train::Evaluation evaluate(const data::Dataset& batches, std::vector<metrics::Metric*> metrics = {}) {
    return train::evaluate<int64_t>(self(), &ClassifierHead::loss, input(batches), {.metrics = std::move(metrics)});
  }
  /// The class probabilities [N, n_classes] (softmax of the logits) over raw batches; the label
  /// field is not needed.
  Tensor<T> predict_probabilities(const data::Dataset& batches) {
    const Tensor<T> logits = train::predict(self(), packed_inputs(features_, batches));
    return softmax(logits, -1);
  }
  /// The most probable class of each example [N] (the first of equal ones).
  Tensor<int64_t> predict_classes(const data::Dataset& batches) { return argmax(predict_probabilities(batches), -1); }

  int64_t n_classes() const { return n_classes_; }
  const feature_column::Features& features() const { return features_; }

 protected:
  ClassifierHead(feature_column::Features features, int64_t n_classes, std::string label_key,
                 std::vector<std::string> vocabulary, const char* who)
      : features_(std::move(features)), n_classes_(n_classes), label_key_(std::move(label_key)),
        vocabulary_(std::move(vocabulary)) {
    GRADUS_CHECK(value_error, n_classes >= 2, who, ": n_classes must be >= 2, got ", n_classes);
    GRADUS_CHECK(value_error, vocabulary_.empty() || int64_t(vocabulary_.size()) == n_classes, who,
                 ": label_vocabulary has ", vocabulary_.size(), " labels for ", n_classes, " classes");
  }

 private:
  Self& self() { return static_cast<Self&>(*this); }

  feature_column::Features features_;
  int64_t n_classes_;
  std::string label_key_;
  std::vector<std::string> vocabulary_;
};

}  // namespace detail

/// A feed-forward classifier over feature columns (tf.estimator.DNNClassifier; see the top of this file).
template <Real T = float>
class DNNClassifier : public detail::ClassifierHead<T, DNNClassifier<T>> {
  using Head = detail::ClassifierHead<T, DNNClassifier<T>>;

 public:
  DNNClassifier(const DNNClassifierOptions& o, Rng& rng)
      : Head(feature_column::Features(o.feature_columns), o.n_classes, o.label_key, o.label_vocabulary, "DNNClassifier"),
        dnn_(this->features(), o.hidden_units, o.n_classes, o.activation, o.dropout, rng) {
    this->register_module("dnn", dnn_);
  }

  /// The logits [B, n_classes] of packed features x [B, input_width].
  template <Expression X>
  Var<T> forward(const X& x) {
    return dnn_.forward(x);
  }
  detail::Dnn<T>& layers() { return dnn_; }

 private:
  detail::Dnn<T> dnn_;
};

/// A linear classifier over feature columns (tf.estimator.LinearClassifier): the logits are a
/// feature_column::LinearModel of n_classes units, categorical columns taken directly.
template <Real T = float>
class LinearClassifier : public detail::ClassifierHead<T, LinearClassifier<T>> {
  using Head = detail::ClassifierHead<T, LinearClassifier<T>>;

 public:
  explicit LinearClassifier(const LinearClassifierOptions& o)
      : Head(feature_column::Features(o.feature_columns, true), o.n_classes, o.label_key, o.label_vocabulary,
             "LinearClassifier") {
    linear_ = &this->register_module("linear_model",
                                     std::make_unique<feature_column::LinearModel<T>>(this->features(), o.n_classes));
  }

  template <Expression X>
  Var<T> forward(const X& x) {
    return (*linear_)(x);
  }
  feature_column::LinearModel<T>& linear_model() const { return *linear_; }

 private:
  feature_column::LinearModel<T>* linear_ = nullptr;
};

/// A feed-forward regressor over feature columns (tf.estimator.DNNRegressor; see the top of this file).
template <Real T = float>
class DNNRegressor : public nn::Module<T, DNNRegressor<T>> {
 public:
  DNNRegressor(const DNNRegressorOptions& o, Rng& rng)
      : features_(o.feature_columns), label_key_(o.label_key), dims_(o.label_dimension),
        dnn_(features_, o.hidden_units, o.label_dimension, o.activation, o.dropout, rng) {
    this->register_module("dnn", dnn_);
  }

  template <Expression X>
  Var<T> forward(const X& x) {
    return dnn_.forward(x);
  }
  /// The head's loss: the mean squared error over the batch and the outputs ([B] labels for one output).
  static Var<T> loss(const Tensor<T>& labels, const Var<T>& predictions) {
    return Var<T>(losses::mean_squared_error(reshape(labels, predictions.value().shape()), predictions));
  }
  data::Dataset input(const data::Dataset& batches) const { return batches.map(features_.input_fn(label_key_)); }
  train::History train(const data::Dataset& batches, optim::Optimizer<T>& optimizer,
                       const train::DatasetFitOptions& options = {}) {
    return train::fit<T>(*this, optimizer, &DNNRegressor::loss, input(batches), options);
  }
  train::Evaluation evaluate(const data::Dataset& batches, std::vector<metrics::Metric*> metrics = {}) {
    return train::evaluate<T>(*this, &DNNRegressor::loss, input(batches), {.metrics = std::move(metrics)});
  }
  /// The predictions [N, label_dimension] over raw batches.
  Tensor<T> predict(const data::Dataset& batches) {
    return train::predict(*this, detail::packed_inputs(features_, batches));
  }
  const feature_column::Features& features() const { return features_; }
  int64_t label_dimension() const { return dims_; }
  detail::Dnn<T>& layers() { return dnn_; }

 private:
  feature_column::Features features_;
  std::string label_key_;
  int64_t dims_;
  detail::Dnn<T> dnn_;
};

}  // namespace gradus::estimator
