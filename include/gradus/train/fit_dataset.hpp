// gradus/train/fit_dataset.hpp — fit / evaluate / predict fed by a gd::data::Dataset of batches
// instead of in-memory Data: the same loop, hooks, metrics, validation and checkpoints.
//
//   auto train = gd::data::tfrecord(files).map(parse).shuffle(10000, 1).batch(128).prefetch(2);
//   gd::train::fit(net, opt, loss, train, {.epochs = 5, .validation = &test, .metrics = {&acc},
//                                          .run_dir = "runs/cnn"});
//   gd::train::Evaluation ev = gd::train::evaluate(net, loss, test, {.metrics = {&acc}});
//
// Each element of the dataset is one batch of two fields (x, y), positional or named, in that
// order: x a float or double tensor [n, ...] (converted to the model's element type when it is the
// other one), y the labels [n, ...] as Y (int64 class ids by default: `fit<float>(...)` for float
// targets; a tensor of another element type is converted). Batching, shuffling and dropping a
// remainder are the pipeline's business. Epoch e of fit is epoch e of the dataset (so a shuffle in
// the pipeline gives each epoch its order, the same in every run) and ends when the dataset's
// epoch ends; Session::steps_per_epoch() is 0 until the first epoch has ended. Checkpoints store
// the iterator state (epoch, batches consumed) beside the counters ("train/data_iterator", see
// train/fit.hpp); a run resumed from one re-opens the pipeline with Dataset::iterator(state) and
// sees exactly the batches the uninterrupted run would have seen, so for a deterministic pipeline
// (data/dataset.hpp: same data, functions without hidden state) it ends bit-identical to it.
// Needs gradus::data as well as gradus::io.
#pragma once
#include <algorithm>
#include <cstdint>
#include <cstring>
#include <filesystem>
#include <functional>
#include <optional>
#include <string>
#include <type_traits>
#include <utility>
#include <variant>
#include <vector>

#include "gradus/backend/backend.hpp"
#include "gradus/data/dataset.hpp"
#include "gradus/data/example.hpp"
#include "gradus/train/fit.hpp"

namespace gradus::train {

/// The validation set of fit on a Dataset, given either way:
///   .validation = &test_batches   a Dataset of (x, y) batches, as the training data
///   .validation = &test           in-memory Data (gd::train::Data{x, y}), evaluated in batches of
///                                 DatasetFitOptions::validation_batch_size
/// It holds a pointer to a Dataset (which must outlive fit) or a handle to the Data's tensors
/// (which fit converts to the model's element type and batches once, before the first validation).
class ValidationSet {
 public:
  ValidationSet() = default;
  ValidationSet(std::nullptr_t) {}
  ValidationSet(const data::Dataset* batches) : batches_(batches) {}
  template <Element X, Element Y>
  ValidationSet(const Data<X, Y>* examples) {
    if (!examples) return;
    GRADUS_CHECK(value_error, examples->size() > 0 && examples->y.defined() && examples->y.rank() >= 1 &&
                                  examples->y.dim(0) == examples->size(),
                 "fit: the validation Data must hold x [n, ...] and y [n, ...] with the same n > 0, got x ",
                 examples->x.defined() ? examples->x.shape() : Shape{}, " and y ",
                 examples->y.defined() ? examples->y.shape() : Shape{});
    GRADUS_CHECK(device_error, examples->x.in_host_memory() && examples->y.in_host_memory(),
                 "fit: the validation Data is on ", examples->x.device(), " and ", examples->y.device(),
                 "; it is read from host memory (copy it with .to(gd::cpu))");
    examples_ = data::Example::tuple(examples->x, examples->y);
  }

  explicit operator bool() const { return batches_ != nullptr || examples_.has_value(); }
  /// The Dataset of (x, y) batches, or null when the set is in-memory Data (or empty).
  const data::Dataset* dataset() const { return batches_; }
  /// The in-memory Data as two fields (x, y), or null when the set is a Dataset (or empty).
  const data::Example* examples() const { return examples_ ? &*examples_ : nullptr; }
  /// False for a default-constructed Dataset (a pointer to one that holds no source).
  bool has_source() const { return !batches_ || batches_->source() != nullptr; }

 private:
  const data::Dataset* batches_ = nullptr;
  std::optional<data::Example> examples_;
};

/// Options of fit on a Dataset, as FitOptions without the batching (the pipeline batches and
/// shuffles). Designated initializers must follow this order:
///   {.epochs = 5, .validation = &val, .metrics = {&acc}, .hooks = {&log}, .run_dir = "runs/cnn"}
struct DatasetFitOptions {
  int64_t epochs = 1;                          ///< epochs to run to, counting those of a restored run
  ValidationSet validation = {};               ///< evaluated after every epoch: a Dataset* or a Data* (above)
  std::vector<metrics::Metric*> metrics = {};  ///< computed on the validation data: "val_<name>"
  std::vector<Hook*> hooks = {};               ///< not owned; must outlive fit
  RunDir run_dir = {};                         ///< restore from / checkpoint into; empty: neither
  CheckpointSaverOptions checkpoint = {};      ///< of the CheckpointSaver fit adds (run_dir set, none in hooks)
  Rng* rng = nullptr;                          ///< saved and restored with checkpoints as "rng" (see FitOptions)
  bool verbose = false;                        ///< adds a ProgressBar on std::cout
  nn::Unregistered unregistered = nn::Unregistered::error;  ///< see FitOptions
  std::optional<Device> device = std::nullopt;              ///< see FitOptions
  /// Data-parallel training (see FitOptions::collective); each rank's pipeline gives its own
  /// shard (Dataset::shard(size, rank)) with the same number of batches per epoch.
  Collective collective = {};
  int64_t validation_batch_size = 256;  ///< the batch size for in-memory validation Data
  int64_t validation_every_steps = 0;   ///< see FitOptions
  Precision autocast = Precision::fp32;     ///< see FitOptions
  optim::LossScaleOptions loss_scale = {};  ///< see FitOptions
};

namespace detail {

/// Field `i` of a batch as a Tensor<T> (converting from another element type).
template <Element T>
Tensor<T> batch_field(const data::Example& b, int i, const char* who) {
  return std::visit(
      [&](const auto& v) -> Tensor<T> {
        using V = std::decay_t<decltype(v)>;
        if constexpr (std::is_same_v<V, Tensor<T>>) {
          return v;
        } else if constexpr (std::is_same_v<V, std::string> || std::is_same_v<V, data::Strings>) {
          ::gradus::detail::throw_error<value_error>({who, ": field ", i, " of the batch ", b,
                                                      " holds strings; parse or decode them in the pipeline"});
        } else {
          Tensor<T> out = Tensor<T>::empty(v.shape(), v.device());  // on the field's device (prefetch_to)
          backend::cast(v.device_data(), v.size(), out.device_data(), false, v.device());
          return out;
        }
      },
      b[i]);
}

/// The (x, y) of a batch of two fields, with their leading dimensions checked.
template <Element T, Element Y>
std::pair<Tensor<T>, Tensor<Y>> split_batch(const data::Example& b, const char* who) {
  GRADUS_CHECK(value_error, b.size() == 2, who, ": a batch must have two fields (x, y), got ", b);
  Tensor<T> x = batch_field<T>(b, 0, who);
  Tensor<Y> y = batch_field<Y>(b, 1, who);
  GRADUS_CHECK(shape_error, x.rank() >= 1 && y.rank() >= 1 && x.dim(0) == y.dim(0) && x.dim(0) > 0, who,
               ": a batch must be x [n, ...] and y [n, ...] with n > 0, got ", b);
  return {std::move(x), std::move(y)};
}

/// In-memory (x, y), two fields [N, ...], as batches of `batch_size` rows in order (the last one
/// may be smaller), x converted to T and y to Y.
template <Element T, Element Y>
std::vector<std::pair<Tensor<T>, Tensor<Y>>> split_examples(const data::Example& xy, int64_t batch_size) {
  const Tensor<T> x = batch_field<T>(xy, 0, "fit");
  const Tensor<Y> y = batch_field<Y>(xy, 1, "fit");
  std::vector<std::pair<Tensor<T>, Tensor<Y>>> out;
  for (int64_t first = 0, n = x.dim(0); first < n; first += batch_size) {
    const int64_t b = std::min(batch_size, n - first);
    out.emplace_back(slice_rows(x, first, b), slice_rows(y, first, b));
  }
  return out;
}

/// The (x, y) batches of an evaluation, one pointer each, null at the end.
template <Real T, Element Y>
using NextBatch = std::function<const std::pair<Tensor<T>, Tensor<Y>>*()>;

/// The loss and metrics of `model` over the (x, y) batches that `next()` gives, as evaluate on a
/// Dataset (below); `who` names the caller in errors. Defined at the end of this header, and
/// compiled in libgradus for float and double models (int64_t or same-type labels).
template <Real T, Element Y>
Evaluation evaluate_batches(nn::Module<T>& model, const BatchForward<T, T>& forward, const BatchLoss<T, Y>& loss,
                            const std::vector<metrics::Metric*>& metrics, const NextBatch<T, Y>& next, const char* who);

/// model.forward over one pass of `data`, as predict on a Dataset (below): compiled likewise.
template <Real T>
Tensor<T> predict_dataset(nn::Module<T>& model, const BatchForward<T, T>& forward, const data::Dataset& data);


/// A fit fed by a Dataset: the Session's streaming mode.
template <class M, class L, Element Y>
class DatasetLoop final : public ModelLoop<M, L> {
  using Base = ModelLoop<M, L>;
  using T = typename M::value_type;

 public:
  DatasetLoop(M& model, optim::Optimizer<T>& opt, const L& loss, const data::Dataset& data, const DatasetFitOptions& o)
      : Base(model, opt, loss), data_(data), o_(o) {
    GRADUS_CHECK(value_error, data.source() != nullptr, "fit: the dataset is empty (default-constructed)");
    GRADUS_CHECK(value_error, o.validation.has_source(), "fit: the validation dataset is empty (default-constructed)");
    GRADUS_CHECK(value_error, o.validation_batch_size > 0, "fit: validation_batch_size must be positive, got ",
                 o.validation_batch_size);
    this->streaming_ = true;
    this->examples_ = -1;  // recorded in train/config: a Dataset run
    this->batch_size_ = 0;
    this->shuffle_ = false;
    this->steps_per_epoch_ = 0;  // known once an epoch has ended
    this->configure_fit(o);
  }

  History start() { return this->fit_loop(); }

 protected:
  void open_epoch(int64_t epoch, int64_t consumed) override {
    it_.reset();
    it_.emplace(data_.iterator(data::IteratorState{epoch, consumed}));
    GRADUS_CHECK(value_error, it_->state().consumed == consumed, "fit: epoch ", epoch, " of the dataset has ",
                 it_->state().consumed, " batches; the checkpoint is after batch ", consumed);
  }
  bool fetch_batch(int64_t& n) override {
    GRADUS_CHECK(value_error, it_.has_value(), "fit: no dataset epoch is open");
    std::optional<data::Example> b = it_->next();
    if (!b) return false;
    batch_ = split_batch<T, Y>(*b, "fit");
    n = batch_.first.dim(0);
    return true;
  }
  bool train_fetched() override { return this->step_on(batch_.first, batch_.second); }
  void close_epoch() override {
    it_.reset();
    batch_ = {};
  }
  void validate(EpochLogs& logs) override;

 private:
  data::Dataset data_;  // a handle of its own: the iterators it opens do not touch the caller's
  const DatasetFitOptions& o_;
  std::optional<data::Iterator> it_;
  std::pair<Tensor<T>, Tensor<Y>> batch_;
  std::vector<std::pair<Tensor<T>, Tensor<Y>>> validation_batches_;  // in-memory validation Data, made once
};

}  // namespace detail

/// The loss and metrics of `model` over one pass of `data`, a Dataset of (x, y) batches (see the
/// top of this header), as evaluate on Data: eval mode under no_grad, loss = Σ n_b·(loss_b + reg)
/// / N. `options.batch_size` is not used (the pipeline batches). The pass is the next epoch of a
/// copy of `data`'s handle, so `data` itself is left as it was and every call sees the same epoch.
///   auto ev = gd::train::evaluate(net, loss_fn, test_batches, {.metrics = {&acc}});
template <Element Y = int64_t, nn::ModuleType M, class L>
Evaluation evaluate(M& model, const L& loss, const data::Dataset& data, const EvaluateOptions& options = {}) {
  using T = typename M::value_type;
  for (const metrics::Metric* m : options.metrics)
    GRADUS_CHECK(value_error, m != nullptr, "evaluate: a metric pointer is null");
  GRADUS_CHECK(value_error, data.source() != nullptr, "evaluate: the dataset is empty (default-constructed)");
  data::Dataset d = data;
  data::Iterator it = d.iterator();
  std::pair<Tensor<T>, Tensor<Y>> batch;
  return detail::evaluate_batches<T, Y>(
      model, detail::batch_forward<T>(model), detail::batch_loss<Y, M>(loss), options.metrics,
      [&]() -> const std::pair<Tensor<T>, Tensor<Y>>* {
        std::optional<data::Example> b = it.next();
        if (!b) return nullptr;
        batch = detail::split_batch<T, Y>(*b, "evaluate");
        return &batch;
      },
      "evaluate");
}

/// model.forward over one pass of `data`, a Dataset of batches whose field 0 is x [n, ...] (a
/// second field, the labels, is ignored), in eval mode under no_grad: the outputs concatenated
/// along axis 0. The pass is the next epoch of a copy of `data`'s handle, as in evaluate.
template <nn::ModuleType M>
Tensor<typename M::value_type> predict(M& model, const data::Dataset& data) {
  using T = typename M::value_type;
  return detail::predict_dataset<T>(model, detail::batch_forward<T>(model), data);
}

template <class M, class L, Element Y>
void detail::DatasetLoop<M, L, Y>::validate(EpochLogs& logs) {
  if (!o_.validation) return;
  if (const data::Dataset* batches = o_.validation.dataset()) {
    Base::log_validation(logs, evaluate<Y>(this->model_, this->loss_, *batches, {.metrics = o_.metrics}));
    return;
  }
  if (validation_batches_.empty())
    validation_batches_ = split_examples<T, Y>(*o_.validation.examples(), o_.validation_batch_size);
  size_t at = 0;
  Base::log_validation(logs, evaluate_batches<T, Y>(
                                 this->model_, batch_forward<T>(this->model_), batch_loss<Y, M>(this->loss_), o_.metrics,
                                 [&]() -> const std::pair<Tensor<T>, Tensor<Y>>* {
                                   return at < validation_batches_.size() ? &validation_batches_[at++] : nullptr;
                                 },
                                 "evaluate"));
}

/// Trains `model` on a Dataset of (x, y) batches (see the top of this header); otherwise as fit
/// on Data: hooks, metrics, validation, History, checkpoints into and resume from run_dir.
///   gd::train::fit(net, opt, loss_fn, train_batches, {.epochs = 5, .run_dir = "runs/cnn"});
template <Element Y = int64_t, nn::ModuleType M, class L>
History fit(M& model, optim::Optimizer<typename M::value_type>& optimizer, const L& loss, const data::Dataset& data,
            const DatasetFitOptions& options = {}) {
  detail::DatasetLoop<M, L, Y> loop(model, optimizer, loss, data, options);
  return loop.start();
}

// ---------------------------------------- the loops of evaluate and predict on a Dataset (see above)

template <Real T, Element Y>
Evaluation detail::evaluate_batches(nn::Module<T>& model, const BatchForward<T, T>& forward,
                                    const BatchLoss<T, Y>& loss, const std::vector<metrics::Metric*>& metrics,
                                    const NextBatch<T, Y>& next, const char* who) {
  no_grad guard;
  TrainingMode<T> mode(model, false);
  for (metrics::Metric* m : metrics) m->reset();
  const Device dev = model.device();
  const double reg = double(model.regularization_loss().item());
  detail::WeightedSum total;  // a GPU's losses are read once, at the end
  int64_t n = 0;
  while (const std::pair<Tensor<T>, Tensor<Y>>* b = next()) {
    const auto& [x, y] = *b;
    const int64_t nb = x.dim(0);
    const Var<T> pred = forward(x.to(dev));
    const Tensor<Y> labels = y.to(dev);  // once, for the loss and the metrics (which count where pred is)
    total.add(scalar_loss(loss(labels, pred), who), double(nb), reg);
    for (metrics::Metric* m : metrics) m->update(labels, pred);
    n += nb;
  }
  GRADUS_CHECK(value_error, n > 0, who, ": the dataset gave no batch");
  Evaluation out{total.total() / double(n), {}};
  for (const metrics::Metric* m : metrics) out.metrics.emplace_back(std::string(m->name()), m->result());
  return out;
}

template <Real T>
Tensor<T> detail::predict_dataset(nn::Module<T>& model, const BatchForward<T, T>& forward, const data::Dataset& data) {
  GRADUS_CHECK(value_error, data.source() != nullptr, "predict: the dataset is empty (default-constructed)");
  no_grad guard;
  detail::TrainingMode<T> mode(model, false);
  const Device dev = model.device();
  std::vector<Tensor<T>> outs;
  int64_t rows = 0;
  data::Dataset d = data;
  data::Iterator it = d.iterator();
  while (std::optional<data::Example> b = it.next()) {
    GRADUS_CHECK(value_error, b->size() >= 1, "predict: a batch has no fields");
    const Tensor<T> x = detail::batch_field<T>(*b, 0, "predict");
    GRADUS_CHECK(shape_error, x.rank() >= 1 && x.dim(0) > 0, "predict: x must have shape [n, ...] with n > 0, got ",
                 x.shape());
    Tensor<T> y = forward(x.to(dev)).value().to(gradus::cpu);
    GRADUS_CHECK(shape_error, y.rank() >= 1 && y.dim(0) == x.dim(0), "predict: the model's output for a batch of ",
                 x.dim(0), " examples has shape ", y.shape(), "; expected [", x.dim(0), ", ...]");
    GRADUS_CHECK(shape_error, outs.empty() || y.size() / y.dim(0) == outs[0].size() / outs[0].dim(0),
                 "predict: the model's output shape changed between batches: ", y.shape());
    rows += y.dim(0);
    outs.push_back(std::move(y));
  }
  GRADUS_CHECK(value_error, !outs.empty(), "predict: the dataset gave no batch");
  Shape s = outs[0].shape();
  s[0] = rows;
  Tensor<T> out(s);
  int64_t at = 0;
  for (const Tensor<T>& y : outs) {
    std::memcpy(out.data() + at, y.data(), size_t(y.size()) * sizeof(T));
    at += y.size();
  }
  return out;
}

}  // namespace gradus::train

#if GRADUS_INSTANCES  // compiled once in libgradus with GRADUS_COMPILED (core/compiled.hpp)
namespace gradus::train {
GRADUS_INSTANCE Evaluation detail::evaluate_batches(nn::Module<float>&, const detail::BatchForward<float, float>&,
                                                    const detail::BatchLoss<float, int64_t>&,
                                                    const std::vector<metrics::Metric*>&,
                                                    const detail::NextBatch<float, int64_t>&, const char*);
GRADUS_INSTANCE Evaluation detail::evaluate_batches(nn::Module<float>&, const detail::BatchForward<float, float>&,
                                                    const detail::BatchLoss<float, float>&,
                                                    const std::vector<metrics::Metric*>&,
                                                    const detail::NextBatch<float, float>&, const char*);
GRADUS_INSTANCE Tensor<float> detail::predict_dataset(nn::Module<float>&, const detail::BatchForward<float, float>&,
                                                      const data::Dataset&);
GRADUS_INSTANCE_DOUBLE Evaluation detail::evaluate_batches(nn::Module<double>&,
                                                           const detail::BatchForward<double, double>&,
                                                           const detail::BatchLoss<double, int64_t>&,
                                                           const std::vector<metrics::Metric*>&,
                                                           const detail::NextBatch<double, int64_t>&, const char*);
GRADUS_INSTANCE_DOUBLE Evaluation detail::evaluate_batches(nn::Module<double>&,
                                                           const detail::BatchForward<double, double>&,
                                                           const detail::BatchLoss<double, double>&,
                                                           const std::vector<metrics::Metric*>&,
                                                           const detail::NextBatch<double, double>&, const char*);
GRADUS_INSTANCE_DOUBLE Tensor<double> detail::predict_dataset(nn::Module<double>&,
                                                              const detail::BatchForward<double, double>&,
                                                              const data::Dataset&);
}  // namespace gradus::train
#endif
