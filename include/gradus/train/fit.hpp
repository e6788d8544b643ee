// gradus/train/fit.hpp — fit / evaluate / predict: the supervised training loop (Keras fit on a
// tf.train.MonitoredTrainingSession), its options, and the checkpoint layout it reads and writes.
//
// Checkpoints: the layout of train/session_run.hpp, shared with a user-driven Session.
#pragma once
#include <algorithm>
#include <array>
#include <cmath>
#include <cstdint>
#include <cstring>
#include <filesystem>
#include <functional>
#include <iostream>
#include <limits>
#include <memory>
#include <numeric>
#include <optional>
#include <string>
#include <string_view>
#include <type_traits>
#include <utility>
#include <vector>

#include "gradus/autodiff/materialize.hpp"
#include "gradus/backend/staging.hpp"
#include "gradus/core/compiled.hpp"
#include "gradus/metrics/metric.hpp"
#include "gradus/nn/module.hpp"
#include "gradus/nn/registration.hpp"
#include "gradus/optim/optimizer.hpp"
#include "gradus/train/checkpoint_saver.hpp"
#include "gradus/train/data.hpp"
#include "gradus/train/hooks.hpp"
#include "gradus/train/session.hpp"
#include "gradus/train/session_run.hpp"

namespace gradus::train {

/// Options of fit. Designated initializers must follow this order:
///   {.epochs = 10, .batch_size = 64, .seed = 1, .validation = &val, .metrics = {&acc},
///    .hooks = {&early}, .run_dir = "runs/mlp", .rng = &dropout_rng}
template <Element X, Element Y>
struct FitOptions {
  int64_t epochs = 1;         ///< epochs to run to, counting those of a restored run
  int64_t batch_size = 32;    ///< examples per step (> 0)
  bool shuffle = true;        ///< visit the examples of epoch e in epoch_permutation(n, seed, e) order
  uint64_t seed = 0;          ///< the shuffle seed
  bool drop_remainder = false;  ///< skip the last partial batch of each epoch
  const Data<X, Y>* validation = nullptr;  ///< evaluated after every epoch when set
  std::vector<metrics::Metric*> metrics = {};  ///< computed on the validation data: "val_<name>"
  int64_t validation_batch_size = 0;           ///< 0: batch_size
  /// Also validate every this many global steps, into History::evaluations (the
  /// train_and_evaluate pattern; EarlyStopping can watch them); 0: after each epoch only.
  int64_t validation_every_steps = 0;
  std::vector<Hook*> hooks = {};               ///< not owned; must outlive fit
  RunDir run_dir = {};                         ///< restore from / checkpoint into; empty: neither
  CheckpointSaverOptions checkpoint = {};  ///< of the CheckpointSaver fit adds (run_dir set, none in hooks)
  /// A generator saved and restored with checkpoints as "rng". The generators the model's layers
  /// registered (Dropout's, Module::named_generators) are saved as "rng/<path>" without it.
  Rng* rng = nullptr;
  bool verbose = false;  ///< adds a ProgressBar on std::cout
  /// The first step checks that every trainable leaf the loss depends on is a parameter of the
  /// model (or of the optimizer): an unregistered sub-module is an error by default
  /// (`gd::nn::Unregistered::warn`: a warning on std::cerr; `ignore`: no check).
  nn::Unregistered unregistered = nn::Unregistered::error;
  /// Where to train: fit moves the model there first (`module.to`; its optimizer's state
  /// follows). Unset: wherever the model is. Batches are copied to the model's device step by
  /// step; losses, metrics, summaries and checkpoints are read back to the host.
  ///   gd::train::fit(net, opt, loss, train, {.epochs = 5, .device = gd::cuda(0)});
  std::optional<Device> device = std::nullopt;
  /// Data parallelism (gd::dist: num_shards = ctx.size(), shard_index = ctx.rank(), the same seed
  /// on every rank): this process trains on its own disjoint slice of each epoch's order. Step s
  /// of the epoch covers positions [s·S·b, (s+1)·S·b) of the order (S = num_shards, b = this
  /// step's batch_size), as one process with batch_size S·b would, and shard k takes the k-th
  /// b of them: the global batch is S × batch_size. Each epoch uses floor(n / S) · S examples
  /// (fewer than S are left out) so every shard runs the same number of steps. 1: no sharding.
  int64_t num_shards = 1;
  int64_t shard_index = 0;  ///< this process's shard, in [0, num_shards)
  /// Data-parallel training over the processes of a job (see Collective; gd::dist::collective()):
  /// rank 0 alone restores and writes checkpoints and summaries, gradients are averaged over the
  /// ranks before each optimizer step, losses are averaged, stops are shared. With num_shards left
  /// at 1, the data is sharded by the collective (num_shards = size, shard_index = rank): the
  /// global batch is size × batch_size. Every rank passes the same data, options and seed.
  ///   gd::train::fit(net, opt, loss, train, {.batch_size = 64, .collective = gd::dist::collective()});
  Collective collective = {};
  /// Mixed precision (core/precision.hpp): the forward pass of every step under gd::autocast of
  /// this precision (on a CPU, bf16 alone changes its products); gd::fp16 also scales the loss
  /// dynamically (`loss_scale`, saved in checkpoints), skipping the steps whose gradients overflow.
  ///   gd::train::fit(net, opt, loss, train, {.device = gd::cuda(0), .autocast = gd::bf16});
  Precision autocast = Precision::fp32;
  optim::LossScaleOptions loss_scale = {};  ///< the LossScaler's schedule, with autocast = gd::fp16
};

/// Options of evaluate.
struct EvaluateOptions {
  int64_t batch_size = 32;                     ///< examples per forward pass (> 0)
  std::vector<metrics::Metric*> metrics = {};  ///< reset, updated with (labels, predictions) per batch, read
};

/// What evaluate returns.
struct Evaluation {
  double loss = 0;                                       ///< mean over examples (see evaluate)
  std::vector<std::pair<std::string, double>> metrics;  ///< (metric name, result), in options order

  /// "loss" or a metric's name; value_error when absent.
  double get(std::string_view key) const;

  /// "loss 0.3512  accuracy 0.8750": loss then each metric, 4 decimals, as Logging's lines.
  friend std::ostream& operator<<(std::ostream& os, const Evaluation& e) {
    os << "loss " << detail::fixed(e.loss, 4);
    for (const auto& [k, v] : e.metrics) os << "  " << k << ' ' << detail::fixed(v, 4);
    return os;
  }
};

/// One line per epoch in the form of Logging's epoch lines (without the number of epochs), then
/// why the run stopped and the first non-finite step when there are such; no newline at the end:
///   epoch 1  step 5  loss 1.0986  val_loss 0.9000  val_accuracy 0.5000
///   epoch 2  step 10  loss 0.7500  val_loss 0.8000  val_accuracy 0.6250
///   stopped: EarlyStopping: val_accuracy did not improve for 2 epochs
/// A History without epochs prints "no epochs (global step 0)".
std::ostream& operator<<(std::ostream& os, const History& h);

/// Options of predict.
struct PredictOptions {
  int64_t batch_size = 32;  ///< examples per forward pass (> 0)
};

namespace detail {

/// Sets a module's training mode for a scope and restores the previous one on exit.
template <Real T>
class TrainingMode {
 public:
  TrainingMode(nn::Module<T>& m, bool on) : m_(m), prev_(m.is_training()) { m_.train(on); }
  ~TrainingMode() { m_.train(prev_); }
  TrainingMode(const TrainingMode&) = delete;
  TrainingMode& operator=(const TrainingMode&) = delete;

 private:
  nn::Module<T>& m_;
  bool prev_;
};

void check_batch_size(const char* who, int64_t b);

/// The one-element value of a loss, where it was computed (not read back from a GPU), with an
/// error naming `who` when it is not a scalar.
template <Real T>
const Tensor<T>& scalar_loss(const Var<T>& loss, const char* who) {
  GRADUS_CHECK(value_error, loss.size() == 1, who, ": the loss must be a scalar, got shape ", loss.shape());
  return loss.value();
}

/// Runs the model on one batch: `model.forward(x)` when forward takes the batch as it is (a
/// Tensor, or any expression), else `model.forward(Var<T>::constant(x))` for a forward that
/// takes `const Var<T>&`, so a model and its blocks can share that one signature.
template <class M, Element X>
auto forward_batch(M& model, const Tensor<X>& x) {
  using T = typename M::value_type;
  if constexpr (requires { model.forward(x); }) {
    return model.forward(x);
  } else {
    static_assert(std::same_as<X, T> && requires { model.forward(Var<T>::constant(x)); },
                  "MODEL_FORWARD_TAKES_NEITHER_THE_BATCH_TENSOR_NOR_A_VAR_OF_ITS_ELEMENT_TYPE: fit/evaluate/predict");
    return model.forward(Var<T>::constant(x));
  }
}

/// `loss(labels, predictions)`: fit's and evaluate's loss takes the labels first, as every
/// gd::losses function. A pointer to one of them
/// (`&gd::losses::mean_squared_error<gd::Tensor<float>, gd::Var<float>>`) is called with its default
/// options. A callable that takes (predictions, labels), the order before, is refused at compile
/// time when the types tell the two apart (a typed `const Var<T>&, const Tensor<int64_t>&` lambda).
template <class F>
struct call_params {};  // the first two parameters of a callable with one, non-template signature
template <class R, class A, class B, class... Rest>
struct call_params<R (*)(A, B, Rest...)> {
  using first = std::remove_cvref_t<A>;
  using second = std::remove_cvref_t<B>;
};
template <class C, class R, class A, class B, class... Rest>
struct call_params<R (C::*)(A, B, Rest...) const> : call_params<R (*)(A, B, Rest...)> {};
template <class C, class R, class A, class B, class... Rest>
struct call_params<R (C::*)(A, B, Rest...)> : call_params<R (*)(A, B, Rest...)> {};

/// True for a callable whose declared parameters are (a Var, something else): a loss written for
/// (predictions, labels). Generic lambdas have no declared types and are not judged.
template <class L>
constexpr bool takes_predictions_first() {
  using F = std::conditional_t<std::is_function_v<L>, L*, L>;
  if constexpr (std::is_pointer_v<F> && std::is_function_v<std::remove_pointer_t<F>>) {
    if constexpr (requires { typename call_params<F>::first; })
      return is_var_v<typename call_params<F>::first> && !is_var_v<typename call_params<F>::second>;
    return false;
  } else if constexpr (requires { &F::operator(); }) {
    using C = call_params<decltype(&F::operator())>;
    if constexpr (requires { typename C::first; }) return is_var_v<typename C::first> && !is_var_v<typename C::second>;
    return false;
  } else {
    return false;
  }
}

template <class L, class Y, class P>
decltype(auto) call_loss(const L& loss, const Y& labels, const P& predictions) {
  static_assert(!takes_predictions_first<L>(),
                "FIT_LOSS_TAKES_LABELS_THEN_PREDICTIONS: the loss is called as loss(labels, predictions), the "
                "order of every gd::losses function; swap the parameters of your loss");
  if constexpr (requires { loss(labels, predictions); }) {
    return loss(labels, predictions);
  } else if constexpr (requires { loss(labels, predictions, {}); }) {
    return loss(labels, predictions, {});
  } else {
    static_assert(requires { loss(labels, predictions); },
                  "FIT_LOSS_MUST_BE_CALLABLE_AS_loss(labels, predictions): labels a Tensor<Y>, predictions a Var<T>");
    return 0;
  }
}

}  // namespace detail

// ------------------------------------------------------------------------- evaluate / predict

namespace detail {

/// A model's forward on one batch, and a loss of a batch's labels and predictions, as the
/// compiled loops of evaluate and predict call them (one indirect call per batch).
template <Real T, Element X>
using BatchForward = std::function<Var<T>(const Tensor<X>&)>;
template <Real T, Element Y>
using BatchLoss = std::function<Var<T>(const Tensor<Y>&, const Var<T>&)>;

// evaluate's and predict's loops, over the model's Module<T> base and its forward and loss as
// functions: defined at the end of this file, and compiled in libgradus for float and double
// models with float, double or int64_t batches (a program linking it compiles none of the loop).
template <Real T, Element X, Element Y>
Evaluation evaluate_data(nn::Module<T>& model, const BatchForward<T, X>& forward, const BatchLoss<T, Y>& loss,
                         const Data<X, Y>& data, const EvaluateOptions& options);
template <Real T, Element X>
Tensor<T> predict_rows(nn::Module<T>& model, const BatchForward<T, X>& forward, const Tensor<X>& x,
                       const PredictOptions& options);

/// `model`'s forward on a batch of X and `loss`, as those loops call them.
template <Element X, class M>
BatchForward<typename M::value_type, X> batch_forward(M& model) {
  return [&model](const Tensor<X>& x) { return to_var(forward_batch(model, x)); };
}
template <Element Y, class M, class L>
BatchLoss<typename M::value_type, Y> batch_loss(const L& loss) {
  using T = typename M::value_type;
  return [&loss](const Tensor<Y>& y, const Var<T>& pred) { return to_var(call_loss(loss, y, pred)); };
}

/// The data loss plus the model's regularization loss, as fit's steps minimise it.
template <Real T>
Var<T> with_regularization(const Var<T>& data_loss, const nn::Module<T>& model);

}  // namespace detail

/// The loss and metrics of `model` over `data`, in eval mode under no_grad (the previous mode is
/// restored), in batches in order. loss = Σ_batches n_b·(loss(y_b, pred_b) + regularization) / N
/// (labels first, as fit):
/// for a mean-reduced loss the mean per-example loss plus the regularization loss (as Keras).
/// Each metric is reset, then updated with (y_b, pred_b) per batch.
///   auto ev = gd::train::evaluate(net, loss_fn, test, {.batch_size = 256, .metrics = {&acc}});
template <nn::ModuleType M, class L, Element X, Element Y>
Evaluation evaluate(M& model, const L& loss, const Data<X, Y>& data, const EvaluateOptions& options = {}) {
  using T = typename M::value_type;
  return detail::evaluate_data<T, X, Y>(
      model, detail::batch_forward<X>(model), detail::batch_loss<Y, M>(loss), data, options);
}

/// model.forward over `x` ([N, ...]) in batches, in eval mode under no_grad (the previous mode is
/// restored): the outputs concatenated along axis 0, [N, ...out].
///   gd::Tensor<double> logits = gd::train::predict(net, x_test, {.batch_size = 256});
template <nn::ModuleType M, Element X>
Tensor<typename M::value_type> predict(M& model, const Tensor<X>& x, const PredictOptions& options = {}) {
  using T = typename M::value_type;
  return detail::predict_rows<T, X>(model, detail::batch_forward<X>(model), x, options);
}

// ------------------------------------------------------------------------------------- the loop

#if GRADUS_DEFINE_COMPILED  // libgradus holds it with GRADUS_COMPILED (core/compiled.hpp)
GRADUS_INLINE History Session::fit_loop() {
  struct Mode {
    Session& s;
    ~Mode() { s.restore_mode(); }
  } mode{*this};
  open();
  while (!stop_requested() && epoch() < epochs_) {
    if (order_epoch_ != epoch()) {
      if (streaming_) {
        open_epoch(epoch(), step_in_epoch());  // a restored run continues where its pipeline stopped
      } else if (shuffle_) {
        order_ = epoch_permutation(examples_, seed_, epoch());
      } else {
        order_.resize(size_t(examples_));
        std::iota(order_.begin(), order_.end(), int64_t(0));
      }
      order_epoch_ = epoch();
    }
    while (!stop_requested()) {
      if (streaming_) {
        int64_t n = 0;
        if (!fetch_batch(n)) break;  // the end of the dataset's epoch
        if (!train_fetched()) break;
      } else {
        if (step_in_epoch() >= steps_per_epoch_) break;
        const int64_t first = step_in_epoch() * batch_size_;
        if (!train_step(order_.data() + first, std::min(batch_size_, examples_ - first))) break;
      }
    }
    if (stop_requested()) break;
    if (streaming_) {
      close_epoch();
      GRADUS_CHECK(value_error, step_in_epoch() > 0, "fit: epoch ", epoch(), " of the dataset gave no batch");
      steps_per_epoch_ = step_in_epoch();
    }
    EpochLogs logs;
    validate(logs);
    finish_epoch(std::move(logs));
  }
  if (streaming_) close_epoch();  // joins the pipeline's threads before the hooks end
  finish();
  return history();
}
#endif  // GRADUS_DEFINE_COMPILED

namespace detail {

/// The model's part of a fit, whatever feeds it: a Session over the model and optimizer, and one
/// optimizer step on a batch through the Session's step.
template <class M, class L>
class ModelLoop : public Session {
 public:
  using T = typename M::value_type;

  ModelLoop(M& model, optim::Optimizer<T>& opt, const L& loss) : Session(ForFit{}, model, opt), model_(model), loss_(loss) {}

 protected:
  /// Configuration shared by every feed: epochs, run_dir, device, rng, hooks, the default savers.
  template <class O>
  void configure_fit(const O& o) {
    GRADUS_CHECK(value_error, o.epochs >= 0, "fit: epochs must be >= 0, got ", o.epochs);
    if constexpr (requires { o.metrics; }) {
      for (const metrics::Metric* m : o.metrics) GRADUS_CHECK(value_error, m != nullptr, "fit: a metric pointer is null");
      GRADUS_CHECK(value_error, o.metrics.empty() || o.validation, "fit: metrics are computed on validation data, but ",
                   "no validation data is given");
    }
    epochs_ = o.epochs;
    if constexpr (requires { o.validation_every_steps; }) {
      GRADUS_CHECK(value_error, o.validation_every_steps >= 0, "fit: validation_every_steps must be >= 0, got ",
                   o.validation_every_steps);
      GRADUS_CHECK(value_error, o.validation_every_steps == 0 || bool(o.validation), "fit: validation_every_steps is ",
                   o.validation_every_steps, ", but no validation data is given");
      validate_every_ = o.validation_every_steps;
    }
    configure({.run_dir = o.run_dir,
               .hooks = o.hooks,
               .rng = o.rng,
               .checkpoint = o.checkpoint,
               .verbose = o.verbose,
               .unregistered = o.unregistered,
               .device = o.device,
               .autocast = o.autocast,
               .loss_scale = o.loss_scale,
               .collective = collective_of(o)});
  }

  /// The checks of an in-memory feed (Data, MultiData) and its options: `check(d, what)` checks
  /// the training data (what = "data") and the validation data (what = "validation").
  template <class O, class D, class Check>
  static void check_in_memory(const D& data, const O& o, Check check) {
    check(data, "data");
    check_batch_size("fit", o.batch_size);
    if (o.validation) check(*o.validation, "validation");
    GRADUS_CHECK(value_error, o.validation_batch_size >= 0, "fit: validation_batch_size must be >= 0, got ",
                 o.validation_batch_size);
  }

  /// The batching of an in-memory feed of `examples` per epoch, from its options: steps of
  /// o.batch_size, in epoch_permutation order when o.shuffle.
  template <class O>
  void configure_batches(const O& o, int64_t examples) {
    examples_ = examples;
    batch_size_ = o.batch_size;
    steps_per_epoch_ = batches_per_epoch(examples, o.batch_size, o.drop_remainder);
    GRADUS_CHECK(value_error, steps_per_epoch_ > 0, "fit: drop_remainder with batch_size ", o.batch_size,
                 " leaves no batch of ", examples, " examples");
    shuffle_ = o.shuffle;
    drop_remainder_ = o.drop_remainder;
    seed_ = o.seed;
  }

  template <class O>
  static Collective collective_of(const O& o) {
    if constexpr (requires { o.collective; })
      return o.collective;
    else
      return {};
  }

  /// One optimizer step on the batch (x, y) through Session::step; false when it did not run.
  template <Element X, Element Y>
  bool step_on(const Tensor<X>& x_host, const Tensor<Y>& y_host) {
    return this->step([&] {
      const Device dev = static_cast<const nn::Module<T>&>(model_).device();
      const auto [x, y] = to_model(x_host, y_host, dev);
      const Var<T> pred = to_var(forward_batch(model_, x));
      const Var<T> data_loss = to_var(call_loss(loss_, y, pred));
      scalar_loss(data_loss, "fit");
      return std::pair{with_regularization(data_loss, model_), x_host.dim(0)};
    });
  }
  /// Fills the validation entries of `logs` from an Evaluation.
  static void log_validation(EpochLogs& logs, const Evaluation& ev) {
    logs.val_loss = ev.loss;
    for (const auto& [k, v] : ev.metrics) logs.val_metrics.emplace_back("val_" + k, v);
  }

  /// The batch on `dev`. A batch in host memory goes to a GPU through the backend's Stager
  /// (pinned memory, a copy stream): the host copies it and goes on, where a plain copy from
  /// pageable memory would first wait for the GPU to finish the steps before.
  template <Element X, Element Y>
  std::pair<Tensor<X>, Tensor<Y>> to_model(const Tensor<X>& x, const Tensor<Y>& y, Device dev) {
    if (x.device() == dev && y.device() == dev) return {x, y};
    if (!x.in_host_memory() || !y.in_host_memory()) return {x.to(dev), y.to(dev)};
    if (!stager_ || stager_device_ != dev) {
      stager_ = backend::make_stager(dev, 1);
      stager_device_ = dev;
    }
    std::pair<Tensor<X>, Tensor<Y>> out{Tensor<X>::empty(x.shape(), dev), Tensor<Y>::empty(y.shape(), dev)};
    const backend::StagedPiece pieces[] = {
        {out.first.device_data(), x.data(), size_t(x.size()) * sizeof(X)},
        {out.second.device_data(), y.data(), size_t(y.size()) * sizeof(Y)}};
    stager_->ready(stager_->start(pieces));  // the GPU's later work waits for the copy, not the host
    return out;
  }

  M& model_;
  const L& loss_;
  std::unique_ptr<backend::Stager> stager_;  // made for the model's GPU at its first batch there
  Device stager_device_ = cpu;
};

/// A fit over in-memory Data: batches gathered from the epoch's order.
template <class M, class L, Element X, Element Y>
class Loop final : public ModelLoop<M, L> {
  using Base = ModelLoop<M, L>;

 public:
  Loop(M& model, optim::Optimizer<typename M::value_type>& opt, const L& loss, const Data<X, Y>& data,
       const FitOptions<X, Y>& o)
      : Base(model, opt, loss), data_(data), o_(o) {
    Base::check_in_memory(data, o, [](const Data<X, Y>& d, const char* what) { check_data(d, "fit", what); });
    shard_ = data::Shard::checked(o.num_shards, o.shard_index, "fit");
    if (o.collective && o.num_shards == 1) shard_ = {o.collective.size, o.collective.rank};  // sharded by the job's ranks
    GRADUS_CHECK(value_error, data.size() >= shard_.num_shards, "fit: ", data.size(), " examples cannot be split into ",
                 shard_.num_shards, " shards");
    this->configure_batches(o, data.size() / shard_.num_shards);  // this shard's examples per epoch
    this->configure_fit(o);
  }

  History start() { return this->fit_loop(); }

 protected:
  bool train_step(const int64_t* index, int64_t n) override {
    if (shard_.num_shards > 1) index = shard_rows(n);
    return this->step_on(gather_rows(data_.x, index, n), gather_rows(data_.y, index, n));
  }
  // This shard's n rows of the step (FitOptions::num_shards): the step is a round of the epoch's
  // order over all examples, num_shards parts of n rows, and the shard takes its part.
  const int64_t* shard_rows(int64_t n) {
    if (global_epoch_ != this->epoch()) {
      if (o_.shuffle) {
        global_order_ = epoch_permutation(data_.size(), o_.seed, this->epoch());
      } else {
        global_order_.resize(size_t(data_.size()));
        std::iota(global_order_.begin(), global_order_.end(), int64_t(0));
      }
      global_epoch_ = this->epoch();
    }
    return global_order_.data() + shard_.first(this->step_in_epoch() * o_.batch_size * shard_.num_shards, n);
  }
  void validate(EpochLogs& logs) override {
    if (!o_.validation) return;
    Base::log_validation(logs, evaluate(this->model_, this->loss_, *o_.validation,
                                        {.batch_size = o_.validation_batch_size > 0 ? o_.validation_batch_size : o_.batch_size,
                                         .metrics = o_.metrics}));
  }

 private:
  const Data<X, Y>& data_;
  const FitOptions<X, Y>& o_;
  data::Shard shard_;  // FitOptions' or the collective's
  std::vector<int64_t> global_order_;  // with num_shards > 1: the epoch's order over all examples
  int64_t global_epoch_ = -1;
};

}  // namespace detail

/// Trains `model` with `optimizer` on `data` (Keras fit on a MonitoredTrainingSession):
/// `loss(labels, predictions)` → a scalar differentiable expression or Var — labels first, as
/// every gd::losses function — where labels is the batch's Tensor<Y> and predictions is
/// model.forward(batch.x) as a Var (forward may take the Tensor<X> or a `const Var<T>&`); the model's
/// regularization_loss() is added. Each step: zero_grad, backward, optimizer.step(). With
/// run_dir, the latest checkpoint there is restored first (model, optimizer, global step, rng,
/// History, epoch position, hook state) and checkpoints are written (see CheckpointSaver), so a
/// run resumed after a stop continues bit-identically. The model is in training mode during the
/// steps (eval mode for validation) and gets its previous mode back. Returns the History of every
/// completed epoch, restored ones included.
///   auto loss_fn = [](const auto& y, const auto& logits) {
///     return gd::losses::sparse_softmax_cross_entropy_with_logits(y, logits); };
///   gd::train::History h = gd::train::fit(net, opt, loss_fn, train, {.epochs = 5, .batch_size = 64});
template <nn::ModuleType M, class L, Element X, Element Y>
History fit(M& model, optim::Optimizer<typename M::value_type>& optimizer, const L& loss, const Data<X, Y>& data,
            const std::type_identity_t<FitOptions<X, Y>>& options = {}) {
  detail::Loop<M, L, X, Y> loop(model, optimizer, loss, data, options);
  return loop.start();
}

// ------------------------------------------------- evaluate's and predict's loops (see above)

template <Real T, Element X, Element Y>
Evaluation detail::evaluate_data(nn::Module<T>& model, const BatchForward<T, X>& forward, const BatchLoss<T, Y>& loss,
                                 const Data<X, Y>& data, const EvaluateOptions& options) {
  detail::check_data(data, "evaluate", "data");
  detail::check_batch_size("evaluate", options.batch_size);
  for (const metrics::Metric* m : options.metrics)
    GRADUS_CHECK(value_error, m != nullptr, "evaluate: a metric pointer is null");
  no_grad guard;
  detail::TrainingMode<T> mode(model, false);
  for (metrics::Metric* m : options.metrics) m->reset();
  const int64_t n = data.size();
  const Device dev = model.device();  // batches go where the model is
  const double reg = double(model.regularization_loss().item());
  detail::WeightedSum total;  // a GPU's losses are read once, at the end
  for (int64_t first = 0; first < n; first += options.batch_size) {
    const int64_t b = std::min(options.batch_size, n - first);
    const Tensor<X> x = detail::slice_rows(data.x, first, b).to(dev);
    const Tensor<Y> y = detail::slice_rows(data.y, first, b).to(dev);
    const Var<T> pred = forward(x);
    total.add(detail::scalar_loss(loss(y, pred), "evaluate"), double(b), reg);
    for (metrics::Metric* m : options.metrics) m->update(y, pred);  // counted where pred is, when the metric can
  }
  Evaluation out{total.total() / double(n), {}};
  for (const metrics::Metric* m : options.metrics) out.metrics.emplace_back(std::string(m->name()), m->result());
  return out;
}

template <Real T, Element X>
Tensor<T> detail::predict_rows(nn::Module<T>& model, const BatchForward<T, X>& forward, const Tensor<X>& x,
                               const PredictOptions& options) {
  GRADUS_CHECK(value_error, x.defined() && x.rank() >= 1 && x.dim(0) > 0,
               "predict: x must have shape [N, ...] with N > 0, got ", x.defined() ? x.shape() : Shape{});
  detail::check_batch_size("predict", options.batch_size);
  no_grad guard;
  detail::TrainingMode<T> mode(model, false);
  const int64_t n = x.dim(0);
  const Device dev = model.device();  // batches go where the model is
  Tensor<T> out;
  int64_t row = 0;
  for (int64_t first = 0; first < n; first += options.batch_size) {
    const int64_t b = std::min(options.batch_size, n - first);
    const Tensor<T> y = forward(detail::slice_rows(x, first, b).to(dev)).value().to(gradus::cpu);
    GRADUS_CHECK(shape_error, y.rank() >= 1 && y.dim(0) == b, "predict: the model's output for a batch of ", b,
                 " examples has shape ", y.shape(), "; expected [", b, ", ...]");
    if (!out.defined()) {
      Shape s = y.shape();
      s[0] = n;
      out = Tensor<T>(s);
      row = y.size() / b;
    }
    GRADUS_CHECK(shape_error, y.size() == b * row, "predict: the model's output shape changed between batches: ",
                 y.shape());
    std::memcpy(out.data() + first * row, y.data(), size_t(b * row) * sizeof(T));
  }
  return out;
}

template <Real T>
Var<T> detail::with_regularization(const Var<T>& data_loss, const nn::Module<T>& model) {
  return model.add_regularization(data_loss);
}

}  // namespace gradus::train

#if GRADUS_DEFINE_COMPILED  // libgradus holds these with GRADUS_COMPILED (core/compiled.hpp)
namespace gradus::train {
GRADUS_INLINE double Evaluation::get(std::string_view key) const {
  if (key == "loss") return loss;
  for (const auto& [k, v] : metrics)
    if (k == key) return v;
  ::gradus::detail::throw_error<value_error>({"Evaluation: no value '", key, "'"});
}

GRADUS_INLINE std::ostream& operator<<(std::ostream& os, const History& h) {
  if (h.epochs.empty()) os << "no epochs (global step " << h.global_step << ')';
  for (size_t i = 0; i < h.epochs.size(); ++i) {
    const EpochLogs& e = h.epochs[i];
    os << (i ? "\n" : "") << "epoch " << e.epoch + 1 << "  step " << e.global_step << "  loss "
       << detail::fixed(e.loss, 4) << detail::validation_text(e, 4);
  }
  if (!h.stop_reason.empty()) os << "\nstopped: " << h.stop_reason;
  if (h.nonfinite_step) os << "\nthe loss was not finite first at step " << *h.nonfinite_step;
  return os;
}

GRADUS_INLINE void detail::check_batch_size(const char* who, int64_t b) {
  GRADUS_CHECK(value_error, b > 0, who, ": batch_size must be > 0, got ", b);
}
}  // namespace gradus::train
#endif  // GRADUS_DEFINE_COMPILED

#if GRADUS_INSTANCES  // compiled once in libgradus with GRADUS_COMPILED (core/compiled.hpp)
namespace gradus::train {
GRADUS_INSTANCE Evaluation detail::evaluate_data(nn::Module<float>&, const detail::BatchForward<float, float>&,
                                                 const detail::BatchLoss<float, int64_t>&, const Data<float, int64_t>&,
                                                 const EvaluateOptions&);
GRADUS_INSTANCE Evaluation detail::evaluate_data(nn::Module<float>&, const detail::BatchForward<float, float>&,
                                                 const detail::BatchLoss<float, float>&, const Data<float, float>&,
                                                 const EvaluateOptions&);
GRADUS_INSTANCE Tensor<float> detail::predict_rows(nn::Module<float>&, const detail::BatchForward<float, float>&,
                                                   const Tensor<float>&, const PredictOptions&);
GRADUS_INSTANCE Evaluation detail::evaluate_data(nn::Module<float>&, const detail::BatchForward<float, int64_t>&,
                                                 const detail::BatchLoss<float, int64_t>&,
                                                 const Data<int64_t, int64_t>&, const EvaluateOptions&);
GRADUS_INSTANCE Evaluation detail::evaluate_data(nn::Module<float>&, const detail::BatchForward<float, int64_t>&,
                                                 const detail::BatchLoss<float, float>&, const Data<int64_t, float>&,
                                                 const EvaluateOptions&);
GRADUS_INSTANCE Tensor<float> detail::predict_rows(nn::Module<float>&, const detail::BatchForward<float, int64_t>&,
                                                   const Tensor<int64_t>&, const PredictOptions&);
GRADUS_INSTANCE Var<float> detail::with_regularization(const Var<float>&, const nn::Module<float>&);
GRADUS_INSTANCE_DOUBLE Evaluation detail::evaluate_data(nn::Module<double>&,
                                                        const detail::BatchForward<double, double>&,
                                                        const detail::BatchLoss<double, int64_t>&,
                                                        const Data<double, int64_t>&, const EvaluateOptions&);
GRADUS_INSTANCE_DOUBLE Evaluation detail::evaluate_data(nn::Module<double>&,
                                                        const detail::BatchForward<double, double>&,
                                                        const detail::BatchLoss<double, double>&,
                                                        const Data<double, double>&, const EvaluateOptions&);
GRADUS_INSTANCE_DOUBLE Tensor<double> detail::predict_rows(nn::Module<double>&,
                                                           const detail::BatchForward<double, double>&,
                                                           const Tensor<double>&, const PredictOptions&);
GRADUS_INSTANCE_DOUBLE Evaluation detail::evaluate_data(nn::Module<double>&,
                                                        const detail::BatchForward<double, int64_t>&,
                                                        const detail::BatchLoss<double, int64_t>&,
                                                        const Data<int64_t, int64_t>&, const EvaluateOptions&);
GRADUS_INSTANCE_DOUBLE Evaluation detail::evaluate_data(nn::Module<double>&,
                                                        const detail::BatchForward<double, int64_t>&,
                                                        const detail::BatchLoss<double, double>&,
                                                        const Data<int64_t, double>&, const EvaluateOptions&);
GRADUS_INSTANCE_DOUBLE Tensor<double> detail::predict_rows(nn::Module<double>&,
                                                           const detail::BatchForward<double, int64_t>&,
                                                           const Tensor<int64_t>&, const PredictOptions&);
GRADUS_INSTANCE_DOUBLE Var<double> detail::with_regularization(const Var<double>&, const nn::Module<double>&);
}  // namespace gradus::train
#endif
