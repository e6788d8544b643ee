// gradus/train/fit.hpp — fit / evaluate / predict: the supervised training loop (Keras fit on a
// tf.train.MonitoredTrainingSession), its options, and the checkpoint layout it reads and writes.
//
// Checkpoint layout (one safetensors file per checkpoint, written by gd::io::Saver; metadata
// "global_step" = the global step):
//   model/<parameter or buffer path>   the model (gd::io::add_module)
//   optimizer/<state name>             the optimizer state keyed by parameter name, "optimizer/step" and
//                                      "optimizer/<path>/<slot>" (gd::io::add_optimizer with the model)
//   rng                                I64 [4], FitOptions::rng's state (only when rng is set)
//   rng/<path>                         I64 [4], each generator the model's layers registered ("rng/drop.rng")
//   train/counters                     I64 [4]: epoch, step in epoch, steps in the epoch's loss mean, global step
//   train/values                       F64 [3]: the epoch's loss sum, the last loss, the learning rate
//   train/config                       I64 [5]: examples, batch_size, shuffle, drop_remainder, seed (bit cast);
//                                      (-1, 0, 0, 0, 0) for a run on a gd::data::Dataset
//   train/data_iterator                I64 [2]: the Dataset's iterator state (epoch, batches consumed),
//                                      only for a run on a Dataset (train/fit_dataset.hpp). It equals
//                                      (epoch, step in epoch): a resumed run re-opens the pipeline with
//                                      Dataset::iterator(state), so it sees exactly the batches the
//                                      uninterrupted run would have seen (for a deterministic pipeline)
//   train/history/global_step          I64 [E]: per completed epoch (absent while E = 0)
//   train/history/values               F64 [E, 1 + K]: "loss", then the K optional keys
//   train/history/present              I64 [E, K]: 1 where epoch e has optional key k (absent when K = 0)
//   hooks/<key>/...                    each stateful hook's entries (EarlyStopping: hooks/early_stopping/state, .../best/<name>)
// metadata: "train/format" = "1"; "train/history/keys" = the K optional keys ("val_loss",
// "val_<metric>") joined by '\n'.
#pragma once
#include <algorithm>
#include <array>
#include <cmath>
#include <cstdint>
#include <cstring>
#include <filesystem>
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
#include "gradus/metrics/metric.hpp"
#include "gradus/nn/module.hpp"
#include "gradus/nn/registration.hpp"
#include "gradus/optim/optimizer.hpp"
#include "gradus/train/checkpoint_saver.hpp"
#include "gradus/train/data.hpp"
#include "gradus/train/hooks.hpp"
#include "gradus/train/session.hpp"

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
  std::vector<Hook*> hooks = {};               ///< not owned; must outlive fit
  std::filesystem::path run_dir = {};          ///< restore from / checkpoint into; empty: neither
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
  double get(std::string_view key) const {
    if (key == "loss") return loss;
    for (const auto& [k, v] : metrics)
      if (k == key) return v;
    throw value_error(::gradus::detail::str("Evaluation: no value '", key, "'"));
  }

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
inline std::ostream& operator<<(std::ostream& os, const History& h) {
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

inline void check_batch_size(const char* who, int64_t b) {
  GRADUS_CHECK(value_error, b > 0, who, ": batch_size must be > 0, got ", b);
}

/// The one-element value of a loss, with an error naming `who` when it is not a scalar.
template <Real T>
double scalar_loss(const Var<T>& loss, const char* who) {
  GRADUS_CHECK(value_error, loss.size() == 1, who, ": the loss must be a scalar, got shape ", loss.shape());
  return double(loss.item());
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

}  // namespace detail

// ------------------------------------------------------------------------- evaluate / predict

/// The loss and metrics of `model` over `data`, in eval mode under no_grad (the previous mode is
/// restored), in batches in order. loss = Σ_batches n_b·(loss(pred_b, y_b) + regularization) / N:
/// for a mean-reduced loss the mean per-example loss plus the regularization loss (as Keras).
/// Each metric is reset, then updated with (y_b, pred_b) per batch.
///   auto ev = gd::train::evaluate(net, loss_fn, test, {.batch_size = 256, .metrics = {&acc}});
template <nn::ModuleType M, class L, Element X, Element Y>
Evaluation evaluate(M& model, const L& loss, const Data<X, Y>& data, const EvaluateOptions& options = {}) {
  using T = typename M::value_type;
  detail::check_data(data, "evaluate", "data");
  detail::check_batch_size("evaluate", options.batch_size);
  for (const metrics::Metric* m : options.metrics)
    GRADUS_CHECK(value_error, m != nullptr, "evaluate: a metric pointer is null");
  no_grad guard;
  detail::TrainingMode<T> mode(model, false);
  for (metrics::Metric* m : options.metrics) m->reset();
  const int64_t n = data.size();
  const Device dev = static_cast<const nn::Module<T>&>(model).device();  // batches go where the model is
  const double reg = double(model.regularization_loss().item());
  double total = 0;
  for (int64_t first = 0; first < n; first += options.batch_size) {
    const int64_t b = std::min(options.batch_size, n - first);
    const Tensor<X> x = detail::slice_rows(data.x, first, b).to(dev);
    const Tensor<Y> y = detail::slice_rows(data.y, first, b);
    const Var<T> pred = to_var(detail::forward_batch(model, x));
    total += double(b) * (detail::scalar_loss(to_var(loss(pred, y.to(dev))), "evaluate") + reg);
    for (metrics::Metric* m : options.metrics) m->update(y, pred);  // metrics read back to the host
  }
  Evaluation out{total / double(n), {}};
  for (const metrics::Metric* m : options.metrics) out.metrics.emplace_back(std::string(m->name()), m->result());
  return out;
}

/// model.forward over `x` ([N, ...]) in batches, in eval mode under no_grad (the previous mode is
/// restored): the outputs concatenated along axis 0, [N, ...out].
///   gd::Tensor<double> logits = gd::train::predict(net, x_test, {.batch_size = 256});
template <nn::ModuleType M, Element X>
Tensor<typename M::value_type> predict(M& model, const Tensor<X>& x, const PredictOptions& options = {}) {
  using T = typename M::value_type;
  GRADUS_CHECK(value_error, x.defined() && x.rank() >= 1 && x.dim(0) > 0,
               "predict: x must have shape [N, ...] with N > 0, got ", x.defined() ? x.shape() : Shape{});
  detail::check_batch_size("predict", options.batch_size);
  no_grad guard;
  detail::TrainingMode<T> mode(model, false);
  const int64_t n = x.dim(0);
  const Device dev = static_cast<const nn::Module<T>&>(model).device();  // batches go where the model is
  Tensor<T> out;
  int64_t row = 0;
  for (int64_t first = 0; first < n; first += options.batch_size) {
    const int64_t b = std::min(options.batch_size, n - first);
    const Tensor<T> y =
        to_var(detail::forward_batch(model, detail::slice_rows(x, first, b).to(dev))).value().to(gradus::cpu);
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

// ------------------------------------------------------------------------------------- the loop

inline void Session::add_loop_state(io::TensorList& out, io::Metadata& metadata) const {
  out.emplace_back("train/counters", Tensor<int64_t>::from({epoch_, step_in_epoch_, loss_count_, global_step_}));
  out.emplace_back("train/values", Tensor<double>::from({loss_sum_, last_loss_, lr()}));
  int64_t seed_bits;
  std::memcpy(&seed_bits, &seed_, sizeof seed_bits);
  out.emplace_back("train/config", Tensor<int64_t>::from({examples_, batch_size_, int64_t(shuffle_),
                                                          int64_t(drop_remainder_), seed_bits}));
  if (streaming_) out.emplace_back("train/data_iterator", Tensor<int64_t>::from({epoch_, step_in_epoch_}));
  metadata["train/format"] = "1";
  const auto e = int64_t(history_.epochs.size());
  if (e == 0) return;
  std::vector<std::string> keys;  // optional keys, in order of first appearance
  auto add_key = [&](const std::string& k) {
    if (std::find(keys.begin(), keys.end(), k) == keys.end()) keys.push_back(k);
  };
  for (const EpochLogs& l : history_.epochs) {
    if (l.val_loss) add_key("val_loss");
    for (const auto& [k, v] : l.val_metrics) add_key(k);
  }
  const auto k = int64_t(keys.size());
  Tensor<int64_t> steps({e});
  Tensor<double> values = Tensor<double>::zeros({e, 1 + k});
  Tensor<int64_t> present = Tensor<int64_t>::zeros({e, k});
  for (int64_t i = 0; i < e; ++i) {
    const EpochLogs& l = history_.epochs[size_t(i)];
    steps.data()[i] = l.global_step;
    values.data()[i * (1 + k)] = l.loss;
    for (int64_t j = 0; j < k; ++j)
      if (l.has(keys[size_t(j)])) {
        values.data()[i * (1 + k) + 1 + j] = l.get(keys[size_t(j)]);
        present.data()[i * k + j] = 1;
      }
  }
  out.emplace_back("train/history/global_step", steps);
  out.emplace_back("train/history/values", values);
  if (k > 0) out.emplace_back("train/history/present", present);
  std::string joined;
  for (const std::string& key : keys) joined += (joined.empty() ? "" : "\n") + key;
  metadata["train/history/keys"] = joined;
}

inline std::filesystem::path Session::save_checkpoint() {
  for (Hook* h : hooks_)
    if (const auto* c = dynamic_cast<const CheckpointSaver*>(h); c && c->saver()) return save_checkpoint(*c->saver());
  throw value_error("Session::save_checkpoint: this run has no CheckpointSaver (set FitOptions::run_dir or add one)");
}

namespace detail {

/// The loop counters and values of a checkpoint ("train/counters", "train/values", "train/config").
struct LoopState {
  int64_t step = 0, epoch = 0, in_epoch = 0, count = 0;
  double loss_sum = 0, last_loss = 0, lr = 0;
  std::array<int64_t, 5> config{};  ///< examples, batch_size, shuffle, drop_remainder, seed bits
  std::optional<std::array<int64_t, 2>> data_iterator;  ///< a Dataset run's (epoch, consumed)
};

/// Reads and checks the loop state of `ckpt` (its global step must match the metadata's).
inline LoopState read_loop_state(const io::Safetensors& ckpt, const std::filesystem::path& path) {
  auto get_i64 = [&](const char* name, int64_t n) {
    Tensor<int64_t> t = ckpt.get<int64_t>(name);
    GRADUS_CHECK(io_error, t.size() == n, "fit: checkpoint ", path, ": '", name, "' must hold ", n,
                 " values, got shape ", t.shape());
    return t;
  };
  LoopState st;
  st.step = io::checkpoint_step(ckpt);
  const Tensor<int64_t> counters = get_i64("train/counters", 4);
  const Tensor<int64_t> config = get_i64("train/config", 5);
  const Tensor<double> values = ckpt.get<double>("train/values");
  GRADUS_CHECK(io_error, values.size() == 3, "fit: checkpoint ", path, ": 'train/values' must hold 3 values, got shape ",
               values.shape());
  st.epoch = counters.data()[0], st.in_epoch = counters.data()[1], st.count = counters.data()[2];
  GRADUS_CHECK(io_error, counters.data()[3] == st.step && st.epoch >= 0 && st.in_epoch >= 0 && st.count >= 0,
               "fit: checkpoint ", path, ": inconsistent counters (epoch ", st.epoch, ", step in epoch ", st.in_epoch,
               ", global step ", counters.data()[3], " vs metadata ", st.step, ")");
  std::copy(config.data(), config.data() + 5, st.config.begin());
  st.loss_sum = values.data()[0], st.last_loss = values.data()[1], st.lr = values.data()[2];
  if (ckpt.find("train/data_iterator")) {
    const Tensor<int64_t> it = get_i64("train/data_iterator", 2);
    st.data_iterator = std::array<int64_t, 2>{it.data()[0], it.data()[1]};
    GRADUS_CHECK(io_error, it.data()[0] == st.epoch && it.data()[1] == st.in_epoch, "fit: checkpoint ", path,
                 ": the dataset iterator state (epoch ", it.data()[0], ", consumed ", it.data()[1],
                 ") does not match the counters (epoch ", st.epoch, ", step in epoch ", st.in_epoch, ")");
  }
  return st;
}

/// The History of `ckpt` ("train/history/..." and the metadata "train/history/keys"); empty when absent.
inline History read_history(const io::Safetensors& ckpt, const std::filesystem::path& path) {
  History history;
  if (!ckpt.find("train/history/global_step")) return history;
  const Tensor<int64_t> steps = ckpt.get<int64_t>("train/history/global_step");
  const Tensor<double> hv = ckpt.get<double>("train/history/values");
  std::vector<std::string> keys;
  if (auto it = ckpt.metadata.find("train/history/keys"); it != ckpt.metadata.end() && !it->second.empty()) {
    size_t at = 0;
    for (;;) {
      const size_t nl = it->second.find('\n', at);
      keys.push_back(it->second.substr(at, nl == std::string::npos ? std::string::npos : nl - at));
      if (nl == std::string::npos) break;
      at = nl + 1;
    }
  }
  const int64_t e = steps.size(), k = int64_t(keys.size());
  Tensor<int64_t> present;
  if (k > 0) present = ckpt.get<int64_t>("train/history/present");
  GRADUS_CHECK(io_error, hv.shape() == Shape({e, 1 + k}) && (k == 0 || present.shape() == Shape({e, k})),
               "fit: checkpoint ", path, ": history tensors do not match ", e, " epochs and ", k, " keys");
  for (int64_t i = 0; i < e; ++i) {
    EpochLogs l;
    l.epoch = i;
    l.global_step = steps.data()[i];
    l.loss = hv.data()[i * (1 + k)];
    for (int64_t j = 0; j < k; ++j) {
      if (present.data()[i * k + j] == 0) continue;
      const double v = hv.data()[i * (1 + k) + 1 + j];
      if (keys[size_t(j)] == "val_loss")
        l.val_loss = v;
      else
        l.val_metrics.emplace_back(keys[size_t(j)], v);
    }
    history.epochs.push_back(std::move(l));
  }
  return history;
}

}  // namespace detail

inline void Session::check_resumable(const detail::LoopState& st, const std::filesystem::path& path) const {
  int64_t seed_bits;
  std::memcpy(&seed_bits, &seed_, sizeof seed_bits);
  const int64_t now[5] = {examples_, batch_size_, int64_t(shuffle_), int64_t(drop_remainder_), seed_bits};
  const bool same_batches = std::equal(now, now + 5, st.config.begin());
  // Mid-epoch, the rest of the epoch is only the same batches under the same batching.
  GRADUS_CHECK(value_error, st.in_epoch == 0 || same_batches, "fit: checkpoint ", path,
               " stopped mid-epoch under other batching (examples, batch_size, shuffle, drop_remainder, seed) = (",
               st.config[0], ", ", st.config[1], ", ", st.config[2], ", ", st.config[3], ", ", uint64_t(st.config[4]),
               "); the options give (", examples_, ", ", batch_size_, ", ", shuffle_, ", ", drop_remainder_, ", ", seed_,
               ")");
  GRADUS_CHECK(value_error, streaming_ || st.in_epoch <= steps_per_epoch_, "fit: checkpoint ", path, " is at step ",
               st.in_epoch, " of an epoch of ", steps_per_epoch_, " steps");
}

inline void Session::restore_hook_states(const io::Safetensors& ckpt) {
  for (Hook* h : hooks_) {
    const std::string key = h->state_key();
    if (key.empty()) continue;
    const std::string prefix = "hooks/" + key + "/";
    bool any = false;
    for (const auto& [name, t] : ckpt.tensors) any = any || name.compare(0, prefix.size(), prefix) == 0;
    for (const auto& [name, v] : ckpt.metadata) any = any || name.compare(0, prefix.size(), prefix) == 0;
    if (any) h->restore_state(ckpt, prefix);
  }
}

// Reads and checks everything before it changes anything that is not checked again later:
// loop state, batching, History; then model and optimizer (validated before they are modified),
// Rng, hook states; the loop counters last.
inline void Session::restore(const std::filesystem::path& path) {
  const io::Safetensors ckpt = io::load_safetensors(path);
  const detail::LoopState st = detail::read_loop_state(ckpt, path);
  check_resumable(st, path);
  History history = detail::read_history(ckpt, path);
  GRADUS_CHECK(io_error, !rng_ || ckpt.find("rng"), "fit: checkpoint ", path,
               " has no 'rng' entry, but FitOptions::rng is set");
  restore_model_state(ckpt);  // the io helpers validate before they modify
  if (rng_) io::restore_rng(ckpt, *rng_, "rng");
  for (const auto& [name, r] : generators_)  // absent from checkpoints written before layers registered them
    if (ckpt.find(name)) io::restore_rng(ckpt, *r, name);
  restore_hook_states(ckpt);
  set_lr(st.lr);
  global_step_ = st.step;
  epoch_ = st.epoch;
  step_in_epoch_ = st.in_epoch;
  loss_count_ = st.count;
  loss_sum_ = st.loss_sum;
  last_loss_ = st.last_loss;
  history_ = std::move(history);
  restored_from_ = path;
}

inline History Session::run() {
  hooks_.clear();
  std::vector<Hook*> savers;
  auto place = [&](Hook* h) { (dynamic_cast<CheckpointSaver*>(h) ? savers : hooks_).push_back(h); };
  for (Hook* h : user_hooks_) place(h);
  for (const auto& h : owned_hooks_) place(h.get());
  hooks_.insert(hooks_.end(), savers.begin(), savers.end());

  global_step_ = epoch_ = step_in_epoch_ = loss_count_ = 0;
  loss_sum_ = 0;
  last_loss_ = std::numeric_limits<double>::quiet_NaN();
  history_ = {};
  stop_ = false;
  stop_reason_.clear();
  restored_from_.reset();
  nonfinite_step_.reset();
  order_epoch_ = -1;

  struct Mode {
    Session& s;
    bool prev;
    ~Mode() { s.set_training(prev); }
  } mode{*this, is_training()};
  set_training(true);

  for (Hook* h : hooks_) h->begin(*this);
  if (!run_dir_.empty())
    if (const auto latest = io::latest_checkpoint(run_dir_)) restore(*latest);
  for (Hook* h : hooks_) h->after_create_session(*this);

  while (!stop_ && epoch_ < epochs_) {
    if (order_epoch_ != epoch_) {
      if (streaming_) {
        open_epoch(epoch_, step_in_epoch_);  // a restored run continues where its pipeline stopped
      } else if (shuffle_) {
        order_ = epoch_permutation(examples_, seed_, epoch_);
      } else {
        order_.resize(size_t(examples_));
        std::iota(order_.begin(), order_.end(), int64_t(0));
      }
      order_epoch_ = epoch_;
    }
    while (!stop_) {
      int64_t n = 0, first = 0;
      if (streaming_) {
        if (!fetch_batch(n)) break;  // the end of the dataset's epoch
      } else {
        if (step_in_epoch_ >= steps_per_epoch_) break;
        first = step_in_epoch_ * batch_size_;
        n = std::min(batch_size_, examples_ - first);
      }
      for (Hook* h : hooks_) h->before_step(*this);
      if (stop_) break;
      const double loss = streaming_ ? train_fetched() : train_step(order_.data() + first, n);
      ++global_step_;
      ++step_in_epoch_;
      last_loss_ = loss;
      if (!std::isfinite(loss) && !nonfinite_step_) nonfinite_step_ = global_step_;
      loss_sum_ += loss;
      ++loss_count_;
      const StepResult r{global_step_, epoch_, step_in_epoch_, n, loss};
      for (Hook* h : hooks_) h->after_step(*this, r);
    }
    if (stop_) break;
    if (streaming_) {
      close_epoch();
      GRADUS_CHECK(value_error, step_in_epoch_ > 0, "fit: epoch ", epoch_, " of the dataset gave no batch");
      steps_per_epoch_ = step_in_epoch_;
    }
    EpochLogs logs;
    logs.epoch = epoch_;
    logs.global_step = global_step_;
    logs.loss = loss_count_ > 0 ? loss_sum_ / double(loss_count_) : std::numeric_limits<double>::quiet_NaN();
    validate(logs);
    history_.epochs.push_back(std::move(logs));
    ++epoch_;
    step_in_epoch_ = loss_count_ = 0;
    loss_sum_ = 0;
    for (Hook* h : hooks_) h->after_epoch(*this, history_.epochs.back());
  }
  history_.global_step = global_step_;
  history_.stop_reason = stop_reason_;
  history_.nonfinite_step = nonfinite_step_;
  if (streaming_) close_epoch();  // joins the pipeline's threads before the hooks end
  for (Hook* h : hooks_) h->end(*this);
  if (nonfinite_step_) {
    bool shown = false;  // a NanGuard or a ProgressBar already said so
    for (const Hook* h : hooks_) shown = shown || dynamic_cast<const NanGuard*>(h) || dynamic_cast<const ProgressBar*>(h);
    if (!shown) std::cerr << detail::nonfinite_warning(*nonfinite_step_, global_step_) << std::endl;
  }
  return history_;
}

namespace detail {

/// The model's part of a fit, whatever feeds it: model, optimizer and loss behind a Session,
/// and one optimizer step on a batch.
template <class M, class L>
class ModelLoop : public Session {
 public:
  using T = typename M::value_type;

  ModelLoop(M& model, optim::Optimizer<T>& opt, const L& loss, nn::Unregistered unregistered)
      : model_(model), opt_(opt), loss_(loss), unregistered_(unregistered) {}

  double lr() const override { return opt_.lr(); }
  void set_lr(double lr) override { opt_.set_lr(lr); }
  std::vector<NamedTensor> parameters() const override {
    std::vector<NamedTensor> out;
    for (auto& [name, v] : model_.named_parameters()) {
      NamedTensor t{name, v.value(), std::nullopt};
      if (const Tensor<T>* g = v.grad_if_any()) t.grad = *g;
      out.push_back(std::move(t));
    }
    return out;
  }
  std::vector<NamedTensor> buffers() const override {
    std::vector<NamedTensor> out;
    for (auto& [name, b] : model_.named_buffers()) out.push_back({name, b, std::nullopt});
    return out;
  }

 protected:
  /// Configuration shared by every feed: epochs, run_dir, device, rng, hooks, the default savers.
  template <class O>
  void configure(const O& o) {
    GRADUS_CHECK(value_error, o.epochs >= 0, "fit: epochs must be >= 0, got ", o.epochs);
    for (const metrics::Metric* m : o.metrics) GRADUS_CHECK(value_error, m != nullptr, "fit: a metric pointer is null");
    GRADUS_CHECK(value_error, o.metrics.empty() || o.validation, "fit: metrics are computed on validation data, but ",
                 "no validation data is given");
    for (const Hook* h : o.hooks) GRADUS_CHECK(value_error, h != nullptr, "fit: a hook pointer is null");
    epochs_ = o.epochs;
    verbose_ = o.verbose;
    run_dir_ = o.run_dir;
    if (o.device) model_.to(*o.device);
    rng_ = o.rng;
    for (const auto& [path, r] : static_cast<const nn::Module<T>&>(model_).named_generators())
      if (r != rng_) generators_.emplace_back("rng/" + path, r);
    user_hooks_ = o.hooks;
    bool has_saver = false;
    for (Hook* h : o.hooks) has_saver = has_saver || dynamic_cast<CheckpointSaver*>(h) != nullptr;
    if (o.verbose) owned_hooks_.push_back(std::make_unique<ProgressBar>());
    if (!o.run_dir.empty() && !has_saver) owned_hooks_.push_back(std::make_unique<CheckpointSaver>(o.checkpoint));
  }

  void add_model_state(io::TensorList& out) const override {
    const nn::Module<T>& m = model_;
    io::add_module(out, m);
    io::add_optimizer(out, opt_, m);  // keyed by parameter name
  }
  void restore_model_state(const io::Safetensors& ckpt) override {
    nn::Module<T>& m = model_;
    io::restore_module(ckpt, m);
    io::restore_optimizer(ckpt, opt_, m);  // by name; checkpoints keyed by position load too
  }
  /// One optimizer step on the host batch (x, y); returns its loss.
  template <Element X, Element Y>
  double step_on(const Tensor<X>& x_host, const Tensor<Y>& y_host) {
    const Device dev = static_cast<const nn::Module<T>&>(model_).device();
    const Tensor<X> x = x_host.to(dev);
    const Tensor<Y> y = y_host.to(dev);
    const Var<T> pred = to_var(forward_batch(model_, x));
    const Var<T> data_loss = to_var(loss_(pred, y));
    scalar_loss(data_loss, "fit");
    const Var<T> loss(data_loss + model_.regularization_loss());
    GRADUS_CHECK(value_error, loss.requires_grad(), "fit: the loss does not depend on any trainable parameter");
    if (!registration_checked_ && unregistered_ != nn::Unregistered::ignore)
      nn::report_unregistered("fit", nn::unregistered_leaves(static_cast<const nn::Module<T>&>(model_), loss, opt_.params()),
                              {.action = unregistered_});
    registration_checked_ = true;
    opt_.minimize(loss);
    return double(loss.item());
  }
  /// Fills the validation entries of `logs` from an Evaluation.
  static void log_validation(EpochLogs& logs, const Evaluation& ev) {
    logs.val_loss = ev.loss;
    for (const auto& [k, v] : ev.metrics) logs.val_metrics.emplace_back("val_" + k, v);
  }
  void set_training(bool on) override { model_.train(on); }
  bool is_training() const override { return model_.is_training(); }

  M& model_;
  optim::Optimizer<T>& opt_;
  const L& loss_;

 private:
  nn::Unregistered unregistered_;
  bool registration_checked_ = false;
};

/// A fit over in-memory Data: batches gathered from the epoch's order.
template <class M, class L, Element X, Element Y>
class Loop final : public ModelLoop<M, L> {
  using Base = ModelLoop<M, L>;

 public:
  Loop(M& model, optim::Optimizer<typename M::value_type>& opt, const L& loss, const Data<X, Y>& data,
       const FitOptions<X, Y>& o)
      : Base(model, opt, loss, o.unregistered), data_(data), o_(o) {
    check_data(data, "fit", "data");
    check_batch_size("fit", o.batch_size);
    if (o.validation) check_data(*o.validation, "fit", "validation");
    GRADUS_CHECK(value_error, o.validation_batch_size >= 0, "fit: validation_batch_size must be >= 0, got ",
                 o.validation_batch_size);
    this->examples_ = data.size();
    this->batch_size_ = o.batch_size;
    this->steps_per_epoch_ = batches_per_epoch(this->examples_, o.batch_size, o.drop_remainder);
    GRADUS_CHECK(value_error, this->steps_per_epoch_ > 0, "fit: drop_remainder with batch_size ", o.batch_size,
                 " leaves no batch of ", this->examples_, " examples");
    this->shuffle_ = o.shuffle;
    this->drop_remainder_ = o.drop_remainder;
    this->seed_ = o.seed;
    this->configure(o);
  }

  History start() { return this->run(); }

 protected:
  double train_step(const int64_t* index, int64_t n) override {
    return this->step_on(gather_rows(data_.x, index, n), gather_rows(data_.y, index, n));
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
};

}  // namespace detail

/// Trains `model` with `optimizer` on `data` (Keras fit on a MonitoredTrainingSession):
/// `loss(prediction, labels)` → a scalar differentiable expression or Var, where prediction is
/// model.forward(batch.x) as a Var (forward may take the Tensor<X> or a `const Var<T>&`) and
/// labels the batch's Tensor<Y>; the model's
/// regularization_loss() is added. Each step: zero_grad, backward, optimizer.step(). With
/// run_dir, the latest checkpoint there is restored first (model, optimizer, global step, rng,
/// History, epoch position, hook state) and checkpoints are written (see CheckpointSaver), so a
/// run resumed after a stop continues bit-identically. The model is in training mode during the
/// steps (eval mode for validation) and gets its previous mode back. Returns the History of every
/// completed epoch, restored ones included.
///   auto loss_fn = [](const auto& logits, const auto& y) {
///     return gd::losses::sparse_softmax_cross_entropy_with_logits(y, logits); };
///   gd::train::History h = gd::train::fit(net, opt, loss_fn, train, {.epochs = 5, .batch_size = 64});
template <nn::ModuleType M, class L, Element X, Element Y>
History fit(M& model, optim::Optimizer<typename M::value_type>& optimizer, const L& loss, const Data<X, Y>& data,
            const std::type_identity_t<FitOptions<X, Y>>& options = {}) {
  detail::Loop<M, L, X, Y> loop(model, optimizer, loss, data, options);
  return loop.start();
}

}  // namespace gradus::train
