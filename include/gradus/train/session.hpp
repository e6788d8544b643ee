// gradus/train/session.hpp — what a training run looks like from the inside: the Session that
// fit() drives (tf.train.MonitoredSession), the Hook interface (tf.train.SessionRunHook plus an
// epoch-end call, as Keras callbacks), and the History fit returns.
//
// Lifecycle of one fit() call, as TF's MonitoredTrainingSession:
//   hooks.begin → restore the latest checkpoint of run_dir (or keep the fresh initial state) →
//   hooks.after_create_session → for each step { hooks.before_step → forward, loss, backward,
//   optimizer step → hooks.after_step } with hooks.after_epoch after every full epoch (after
//   validation) → hooks.end. Hooks run in the order given, except that CheckpointSaver hooks run
//   after all the others at each point, so a checkpoint sees every hook's state after that point.
//   A hook stops the run with `session.request_stop(reason)`: the current step completes, then
//   the loop ends (no further epoch-end) and calls end. An exception from a hook or a step ends
//   fit at once; end is not called and nothing more is saved.
#pragma once
#include <chrono>
#include <cmath>
#include <cstdint>
#include <filesystem>
#include <limits>
#include <memory>
#include <optional>
#include <string>
#include <string_view>
#include <utility>
#include <variant>
#include <vector>

#include "gradus/core/error.hpp"
#include "gradus/core/rng.hpp"
#include "gradus/core/tensor.hpp"
#include "gradus/io.hpp"

namespace gradus::train {

/// A tensor of any element type (the same type as gd::io::AnyTensor).
using AnyTensor = std::variant<Tensor<float>, Tensor<double>, Tensor<int64_t>>;

/// A named tensor of the model being trained. `value` shares the model's storage (copy_ into it
/// to change the model); `grad` is the gradient of the last step, absent for buffers and for a
/// parameter that received none.
struct NamedTensor {
  std::string name;
  AnyTensor value;
  std::optional<AnyTensor> grad;
};

/// True when every element of `t` is finite (integers always are).
inline bool all_finite(const AnyTensor& t) {
  return std::visit(
      [](const auto& on_device) {
        const auto x = on_device.to(gradus::cpu);  // itself on the CPU
        using T = std::remove_cvref_t<decltype(*x.data())>;
        if constexpr (std::is_floating_point_v<T>) {
          for (const T v : x)
            if (!std::isfinite(v)) return false;
        }
        return true;
      },
      t);
}

namespace detail {
struct LoopState;
}

/// One epoch of a History. Keys: "loss" (mean training loss, data + regularization, over the
/// epoch's steps), "val_loss" (with validation data) and "val_<metric name>" per metric.
struct EpochLogs {
  int64_t epoch = 0;        ///< 0-based
  int64_t global_step = 0;  ///< the global step at the end of the epoch
  double loss = 0;
  std::optional<double> val_loss = std::nullopt;
  std::vector<std::pair<std::string, double>> val_metrics = {};  ///< ("val_<name>", value), in options order

  /// Whether `key` ("loss", "val_loss", "val_accuracy", ...) has a value in this epoch.
  bool has(std::string_view key) const {
    if (key == "loss") return true;
    if (key == "val_loss") return val_loss.has_value();
    for (const auto& [k, v] : val_metrics)
      if (k == key) return true;
    return false;
  }
  /// The value of `key`; value_error listing the keys there are when it has none.
  double get(std::string_view key) const {
    if (key == "loss") return loss;
    if (key == "val_loss" && val_loss) return *val_loss;
    for (const auto& [k, v] : val_metrics)
      if (k == key) return v;
    std::string keys = "loss";
    if (val_loss) keys += ", val_loss";
    for (const auto& [k, v] : val_metrics) keys += ", " + k;
    throw value_error(::gradus::detail::str("EpochLogs: no value '", key, "' (has: ", keys, ")"));
  }
  bool operator==(const EpochLogs&) const = default;
};

/// What fit returns (Keras' History): one entry per completed epoch.
/// A loss that becomes NaN or infinite does not stop fit unless a NanGuard hook is given (as
/// Keras' TerminateOnNaN is opt-in), but it is never silent: `nonfinite_step` records the first
/// such step of this fit call, the ProgressBar ends with a warning line, and without either hook
/// fit writes one warning line to std::cerr when it returns.
struct History {
  std::vector<EpochLogs> epochs;
  int64_t global_step = 0;  ///< the global step when fit returned
  std::string stop_reason;  ///< why a hook stopped this fit call; empty when it ran every epoch
  std::optional<int64_t> nonfinite_step;  ///< first global step of this call whose loss was nan or ±inf

  /// The values of `key` over the epochs (see EpochLogs::get).
  std::vector<double> values(std::string_view key) const {
    std::vector<double> out;
    for (const auto& e : epochs) out.push_back(e.get(key));
    return out;
  }
  bool operator==(const History&) const = default;
};

/// What after_step receives about the step that just ran.
struct StepResult {
  int64_t global_step = 0;    ///< after this step: 1 for the first step of a fresh run
  int64_t epoch = 0;          ///< 0-based epoch of this step
  int64_t step_in_epoch = 0;  ///< after this step: 1 .. steps_per_epoch
  int64_t batch_size = 0;     ///< examples in this batch (the last one may be smaller)
  double loss = 0;            ///< data loss + regularization loss of this batch
};

class Session;

/// A training-loop callback (tf.train.SessionRunHook + Keras Callback). Override what you need;
/// every call is a no-op by default. A hook may be reused by several fit calls: `begin` starts a
/// run. Hooks whose state must survive a restart (EarlyStopping) return a non-empty
/// `state_key()`; their state is saved with every checkpoint under "hooks/<key>/" and restored
/// before `after_create_session`.
class Hook {
 public:
  virtual ~Hook() = 0;

  /// Before the session is created (before any restore): reset per-run state here.
  virtual void begin(Session&) {}
  /// After restore-or-init, before the first step: global_step() is the restored step.
  virtual void after_create_session(Session&) {}
  /// Before each step (set the learning rate here).
  virtual void before_step(Session&) {}
  /// After each step; `session.request_stop(...)` ends the run after this step.
  virtual void after_step(Session&, const StepResult&) {}
  /// After each full epoch and its validation; `logs` is the History entry just appended.
  virtual void after_epoch(Session&, const EpochLogs&) {}
  /// At the end of a run that was not ended by an exception.
  virtual void end(Session&) {}

  /// Non-empty for a hook with checkpointed state: its entries go under "hooks/<key>/".
  virtual std::string state_key() const { return {}; }
  /// Adds this hook's state; every tensor and metadata name starts with `prefix`.
  virtual void save_state(io::TensorList& /*tensors*/, io::Metadata& /*metadata*/,
                          const std::string& /*prefix*/) const {}
  /// Restores what save_state wrote (called only when the checkpoint has some entry under `prefix`).
  virtual void restore_state(const io::Safetensors& /*checkpoint*/, const std::string& /*prefix*/) {}

 protected:
  Hook() = default;
  Hook(const Hook&) = default;
  Hook& operator=(const Hook&) = default;
};
inline Hook::~Hook() = default;

/// The running training loop as hooks see it: progress counters, the last loss, the learning
/// rate, the model's tensors, the History so far, stopping and checkpointing. Created by fit();
/// the global step (optimizer steps taken by the loop, over every run in run_dir) is owned here.
class Session {
 public:
  virtual ~Session() = default;
  Session(const Session&) = delete;
  Session& operator=(const Session&) = delete;

  /// Steps completed, restored from the checkpoint on resume.
  int64_t global_step() const { return global_step_; }
  /// The 0-based epoch under way (== epochs() once every epoch is done).
  int64_t epoch() const { return epoch_; }
  /// Epochs this fit call runs to (FitOptions::epochs).
  int64_t epochs() const { return epochs_; }
  /// Steps completed in the current epoch.
  int64_t step_in_epoch() const { return step_in_epoch_; }
  /// Batches per epoch. Training on a gd::data::Dataset, 0 until the first epoch has ended (the
  /// pipeline's length is not known before), then that epoch's number of batches.
  int64_t steps_per_epoch() const { return steps_per_epoch_; }
  /// Whether the batches come from a gd::data::Dataset (train/fit_dataset.hpp) rather than
  /// in-memory Data.
  bool streaming() const { return streaming_; }
  /// Global step at which the last epoch ends: the run's last step if nothing stops it.
  int64_t last_step() const { return global_step_ + (epochs_ - epoch_) * steps_per_epoch_ - step_in_epoch_; }
  /// The loss of the last step (NaN before the first step of a fresh run).
  double last_loss() const { return last_loss_; }
  /// Mean loss over the steps of the current epoch so far (NaN before its first step).
  double epoch_loss() const {
    return loss_count_ > 0 ? loss_sum_ / double(loss_count_) : std::numeric_limits<double>::quiet_NaN();
  }
  /// The first global step of this run whose loss was NaN or infinite; empty while every loss is finite.
  const std::optional<int64_t>& nonfinite_step() const { return nonfinite_step_; }
  /// The History so far (completed epochs, including those of restored runs).
  const History& history() const { return history_; }
  /// FitOptions::run_dir (empty: no checkpoints).
  const std::filesystem::path& run_dir() const { return run_dir_; }
  /// The checkpoint this run was restored from, if any.
  const std::optional<std::filesystem::path>& restored_from() const { return restored_from_; }

  /// The optimizer's learning rate.
  virtual double lr() const = 0;
  /// Sets the optimizer's learning rate (>= 0); it is saved with checkpoints.
  virtual void set_lr(double lr) = 0;
  /// The model's parameters with their gradients, named as Module::named_parameters.
  virtual std::vector<NamedTensor> parameters() const = 0;
  /// The model's buffers (BatchNorm statistics), named as Module::named_buffers.
  virtual std::vector<NamedTensor> buffers() const = 0;

  /// Ends the run after the current step (or before the next one); the first reason is kept.
  void request_stop(std::string reason) {
    if (!stop_) stop_reason_ = std::move(reason);
    stop_ = true;
  }
  bool stop_requested() const { return stop_; }
  const std::string& stop_reason() const { return stop_reason_; }

  /// Everything a checkpoint holds: model, optimizer, rng, loop state and hook states
  /// (layout in train/fit.hpp).
  void checkpoint(io::TensorList& tensors, io::Metadata& metadata) const {
    add_model_state(tensors);
    if (rng_) io::add_rng(tensors, *rng_, "rng");
    for (const auto& [name, r] : generators_) io::add_rng(tensors, *r, name);
    add_loop_state(tensors, metadata);
    for (const Hook* h : hooks_) {
      const std::string key = h->state_key();
      if (!key.empty()) h->save_state(tensors, metadata, "hooks/" + key + "/");
    }
  }
  /// Saves a checkpoint of the current state now through `saver`; returns its path.
  std::filesystem::path save_checkpoint(io::Saver& saver) const {
    io::TensorList tensors;
    io::Metadata metadata;
    checkpoint(tensors, metadata);
    return saver.save(global_step_, tensors, std::move(metadata));
  }
  /// Saves a checkpoint now through the run's first CheckpointSaver (the one fit adds for run_dir
  /// included); value_error when the run has none.
  std::filesystem::path save_checkpoint();

 protected:
  Session() = default;

  // --- what the typed loop (train/fit.hpp) provides
  virtual void add_model_state(io::TensorList& out) const = 0;
  virtual void restore_model_state(const io::Safetensors& ckpt) = 0;
  /// One optimizer step on the batch of rows `index[0..n)`; returns its loss.
  virtual double train_step(const int64_t* index, int64_t n) = 0;
  // Streaming (a Dataset of batches): open_epoch starts epoch `epoch` with its first `consumed`
  // batches skipped; fetch_batch takes the next batch (false at the end of the epoch) and returns
  // its number of examples in `n`; train_fetched makes one step on it. close_epoch ends the pass.
  virtual void open_epoch(int64_t /*epoch*/, int64_t /*consumed*/) {}
  virtual bool fetch_batch(int64_t& /*n*/) { return false; }
  virtual double train_fetched() { return 0; }
  virtual void close_epoch() {}
  /// Fills the validation entries of `logs`.
  virtual void validate(EpochLogs& logs) = 0;
  virtual void set_training(bool on) = 0;
  virtual bool is_training() const = 0;

  // --- the run (defined in train/fit.hpp)
  History run();
  void restore(const std::filesystem::path& path);
  void check_resumable(const detail::LoopState& st, const std::filesystem::path& path) const;
  void restore_hook_states(const io::Safetensors& ckpt);
  void add_loop_state(io::TensorList& out, io::Metadata& metadata) const;

  // configuration, set by the typed loop before run()
  int64_t epochs_ = 1, steps_per_epoch_ = 0, examples_ = 0, batch_size_ = 1;
  bool shuffle_ = true, drop_remainder_ = false, verbose_ = false, streaming_ = false;
  uint64_t seed_ = 0;
  std::filesystem::path run_dir_;
  Rng* rng_ = nullptr;
  /// The model's registered generators other than rng_, saved as "rng/<path>" ("rng/drop.rng").
  std::vector<std::pair<std::string, Rng*>> generators_;
  std::vector<Hook*> user_hooks_;
  std::vector<std::unique_ptr<Hook>> owned_hooks_;  // verbose's ProgressBar, the default CheckpointSaver

 private:
  // state
  int64_t global_step_ = 0, epoch_ = 0, step_in_epoch_ = 0, loss_count_ = 0;
  double loss_sum_ = 0, last_loss_ = std::numeric_limits<double>::quiet_NaN();
  History history_;
  bool stop_ = false;
  std::string stop_reason_;
  std::optional<std::filesystem::path> restored_from_;
  std::optional<int64_t> nonfinite_step_;
  std::vector<Hook*> hooks_;  // user hooks and owned ones, CheckpointSavers last
  std::vector<int64_t> order_;
  int64_t order_epoch_ = -1;
};

}  // namespace gradus::train
