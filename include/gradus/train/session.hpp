// gradus/train/session.hpp — a training run: the Session that fit() drives and that a user with
// a step of their own drives directly (tf.train.MonitoredTrainingSession), the Hook interface
// (tf.train.SessionRunHook plus an epoch-end call, as Keras callbacks), and the History fit returns.
//
// Lifecycle of one fit() call (a user's Session: see Session), as TF's MonitoredTrainingSession:
//   hooks.begin → restore the latest checkpoint of run_dir (or keep the fresh initial state) →
//   hooks.after_create_session → for each step { hooks.before_step → forward, loss, backward,
//   optimizer step → hooks.after_step } with hooks.after_epoch after every full epoch (after
//   validation) → hooks.end. Hooks run in the order given, except that CheckpointSaver hooks run
//   after all the others at each point, so a checkpoint sees every hook's state after that point.
//   A hook stops the run with `session.request_stop(reason)`: the current step completes, then
//   the loop ends (no further epoch-end) and calls end. An exception from a hook or a step ends
//   fit at once; end is not called and nothing more is saved.
#pragma once
#include <atomic>
#include <chrono>
#include <cmath>
#include <cstdint>
#include <filesystem>
#include <functional>
#include <limits>
#include <memory>
#include <optional>
#include <ostream>
#include <string>
#include <string_view>
#include <type_traits>
#include <utility>
#include <variant>
#include <vector>

#include "gradus/autodiff/backward.hpp"
#include "gradus/autodiff/materialize.hpp"
#include "gradus/core/compiled.hpp"
#include "gradus/core/error.hpp"
#include "gradus/core/rng.hpp"
#include "gradus/core/tensor.hpp"
#include "gradus/io/checkpoint.hpp"
#include "gradus/io/saver.hpp"
#include "gradus/nn/module.hpp"
#include "gradus/nn/registration.hpp"
#include "gradus/optim/clip.hpp"
#include "gradus/optim/loss_scale.hpp"
#include "gradus/optim/optimizer.hpp"

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
bool all_finite(const AnyTensor& t);

class Session;

namespace detail {
struct CheckpointCode;
/// The checkpoint code a Session reaches (detail::CheckpointCode below), or null: set where a
/// RunDir or a CollectiveBroadcast is made.
inline std::atomic<const CheckpointCode*>& checkpoint_code_slot() {
  static std::atomic<const CheckpointCode*> code{nullptr};
  return code;
}
/// The checkpoint code (train/session_run.hpp). A template, so that it is instantiated where a
/// RunDir or a CollectiveBroadcast with a value is made, not in every file that includes this header.
template <class Tag>
const CheckpointCode* checkpoint_code();
}  // namespace detail

/// Collective::broadcast: a `std::function<void(std::string&)>`, set from any callable. Setting
/// one is what makes a program compile the code that starts every rank from the chief's state
/// (a checkpoint sent in memory: the checkpoint writer and reader, detail::CheckpointCode).
class CollectiveBroadcast : public std::function<void(std::string&)> {
 public:
  CollectiveBroadcast() = default;
  template <class F>
    requires(std::constructible_from<std::function<void(std::string&)>, F> &&
             !std::same_as<std::remove_cvref_t<F>, CollectiveBroadcast>)
  CollectiveBroadcast(F&& f) : std::function<void(std::string&)>(std::forward<F>(f)) {
    if (*this) detail::checkpoint_code_slot().store(detail::checkpoint_code<F>(), std::memory_order_relaxed);
  }
};

/// How the training processes of a data-parallel job talk to each other, for fit and a Session
/// (train/ does not depend on MPI: gd::dist::collective() fills one from the live gd::dist::Context,
/// <gradus/dist/collective.hpp>). Default-constructed (`sum` empty): a single process, nothing
/// changes. With one set, on every rank of the job:
/// - rank 0 (the chief) alone restores the latest checkpoint of run_dir, then its whole state
///   (model, optimizer, generators, loop counters, History, hook states; fresh or restored) is
///   broadcast, so every rank starts from the same state and a stopped run resumes exactly;
/// - hooks that write files (CheckpointSaver, SummarySaver, ProjectorHook, ProfilerHook: Hook::chief_only)
///   run on the chief only, and fit adds its default CheckpointSaver on the chief only;
/// - after backward each gradient is replaced by its mean over the ranks (`average`), before
///   clipping and optimizer.step(), so every rank applies the same update;
/// - the step's loss is the mean over ranks weighted by each rank's batch size, and validation
///   values are the chief's, so hooks and the History see the same numbers on every rank (and a
///   NaN on one rank is a NaN on all);
/// - a stop requested on any rank (NanGuard, EarlyStopping, StopAtStep...) stops every rank after
///   the same step.
/// Every function must be called by every rank in the same order (they are collectives).
///   gd::dist::Context ctx(argc, argv);
///   gd::train::fit(net, opt, loss, train, {.epochs = 5, .collective = gd::dist::collective()});
struct Collective {
  int rank = 0;  ///< this process, in [0, size); 0 is the chief
  int size = 1;  ///< processes in the job
  std::function<void(std::vector<double>&)> sum;  ///< in place: elementwise sum over the ranks
  std::function<void(std::vector<double>&)> max;  ///< in place: elementwise maximum over the ranks
  CollectiveBroadcast broadcast;                  ///< in place: rank 0's bytes on every rank
  /// In place: each tensor (float or double, on the cpu, the same shapes on every rank) replaced by
  /// a tensor holding its elementwise mean over the ranks.
  std::function<void(std::vector<AnyTensor>&)> average;

  /// Whether this is a data-parallel run (`sum` is set).
  explicit operator bool() const { return bool(sum); }
  /// Whether this process writes checkpoints and summaries: rank 0, or any single process.
  bool is_chief() const { return rank == 0; }
};

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
  bool has(std::string_view key) const;
  /// The value of `key`; value_error listing the keys there are when it has none.
  double get(std::string_view key) const;
  bool operator==(const EpochLogs&) const = default;
};

/// What fit returns (Keras' History): one entry per completed epoch.
/// A loss that becomes NaN or infinite does not stop fit unless a NanGuard hook is given (as
/// Keras' TerminateOnNaN is opt-in), but it is never silent: `nonfinite_step` records the first
/// such step of this fit call, the ProgressBar ends with a warning line, and without either hook
/// fit writes one warning line to std::cerr when it returns.
struct History {
  std::vector<EpochLogs> epochs;
  /// The validations run every FitOptions::validation_every_steps global steps (the
  /// train_and_evaluate pattern), in order: each with the epoch and global step it ran at, its
  /// validation entries and, as `loss`, the mean training loss of its epoch so far.
  std::vector<EpochLogs> evaluations;
  int64_t global_step = 0;  ///< the global step when fit returned
  std::string stop_reason;  ///< why a hook stopped this fit call; empty when it ran every epoch
  std::optional<int64_t> nonfinite_step;  ///< first global step of this call whose loss was nan or ±inf

  /// The values of `key` over the epochs (see EpochLogs::get).
  std::vector<double> values(std::string_view key) const;
  bool operator==(const History&) const = default;
};

namespace detail {

/// Where a value read from a device lands (PendingScalars).
struct LossCell {
  double value = 0;
  bool known = false;
};

/// One-element tensors on a device — the losses of steps whose kernels may still be running —
/// copied device to device into a buffer there as they come, and read back in one transfer when
/// someone asks: only then does the host wait for the GPU.
class PendingScalars {
 public:
  /// Queues the value of `scalar` (one float or double element, on a device) times `scale`;
  /// returns the cell that settle() writes it to.
  GRADUS_INLINE_DECL std::shared_ptr<LossCell> push(const AnyTensor& scalar, double scale = 1);
  /// Reads every queued value into its cell (the host waits for the device's earlier work).
  GRADUS_INLINE_DECL void settle();

 private:
  static constexpr int64_t kCapacity = 1024;  // queued values before push settles by itself
  AnyTensor buffer_;                          // [kCapacity] on the device, the values' element type
  std::vector<std::pair<std::shared_ptr<LossCell>, double>> cells_;  // queued: cell, scale
};

/// Σ weight·(loss + offset) over batches whose losses may be on a device (evaluate's total):
/// those are read once, by total().
class WeightedSum {
 public:
  /// Adds weight·(loss + offset); `loss` is a one-element float or double tensor.
  GRADUS_INLINE_DECL void add(const AnyTensor& loss, double weight, double offset = 0);
  GRADUS_INLINE_DECL double total();

 private:
  double host_ = 0;
  PendingScalars pending_;
  struct Queued {
    std::shared_ptr<LossCell> cell;
    double weight, offset;
  };
  std::vector<Queued> queued_;
};

}  // namespace detail

/// The loss of a step. Where the model is on the CPU, a number. On a GPU the step's kernels may
/// still be running when the hooks see it: the value is read — the host waiting for the GPU —
/// only when something asks for it (value(), or the conversion to double), and then every loss
/// still on the device is read in the same transfer. A hook that reads the loss every step makes
/// the host wait every step; one that reads it every N steps lets the host run ahead.
class StepLoss {
 public:
  StepLoss(double value = 0) : value_(value) {}  // NOLINT: a loss is a number
  StepLoss(std::shared_ptr<detail::LossCell> cell, std::shared_ptr<detail::PendingScalars> pending)
      : cell_(std::move(cell)), pending_(std::move(pending)) {}
  /// The loss (data + regularization) of the step.
  double value() const {
    if (!cell_) return value_;
    if (!cell_->known) pending_->settle();
    return cell_->value;
  }
  operator double() const { return value(); }  // NOLINT: reads as the number it is
  /// Whether value() returns without waiting for a device.
  bool ready() const { return !cell_ || cell_->known; }

 private:
  double value_ = 0;
  std::shared_ptr<detail::LossCell> cell_;  // set while the value may be on a device
  std::shared_ptr<detail::PendingScalars> pending_;
};

/// What after_step receives about the step that just ran.
struct StepResult {
  int64_t global_step = 0;    ///< after this step: 1 for the first step of a fresh run
  int64_t epoch = 0;          ///< 0-based epoch of this step
  int64_t step_in_epoch = 0;  ///< after this step: 1 .. steps_per_epoch
  int64_t batch_size = 0;     ///< examples in this batch (the last one may be smaller)
  StepLoss loss = 0;          ///< data loss + regularization loss of this batch (read when asked: StepLoss)
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
  /// After a validation in mid-epoch (FitOptions::validation_every_steps), before that step's
  /// after_step; `logs` is the History::evaluations entry just appended.
  virtual void after_evaluation(Session&, const EpochLogs&) {}
  /// At the end of a run that was not ended by an exception.
  virtual void end(Session&) {}

  /// True for a hook that writes files (checkpoints, summaries): with a Collective it runs on the
  /// chief (rank 0) only.
  virtual bool chief_only() const { return false; }

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

/// Options of CheckpointSaver (train/checkpoint_saver.hpp; declared here because Session options
/// hold them). Only the schedules named are used: `{.every_steps = 1000}` saves every 1000 steps
/// and never by time; with none of `every_steps`, `every_secs`, `every_epochs` given it saves
/// every 600 s (TF's CheckpointSaverHook default); with all three 0, only at the end.
struct CheckpointSaverOptions {
  int64_t every_steps = 0;     ///< save when global_step % every_steps == 0 (0: not by steps)
  /// save when this many seconds passed since the last save (0: not by time); unset: 600 when
  /// every_steps and every_epochs are 0, else 0
  std::optional<double> every_secs = std::nullopt;
  int64_t every_epochs = 0;    ///< save after every this many epochs, validation and hooks done (0: not by epochs)
  int max_to_keep = 5;         ///< older checkpoints are deleted (gd::io::SaverOptions)
  std::filesystem::path dir = {};  ///< empty: the session's run_dir
  std::string prefix = "model.ckpt";  ///< files "<dir>/<prefix>-<step>.safetensors"
  /// A checkpoint whose model or optimizer state holds a NaN or an infinity (a diverged run) is
  /// not written, so the last finite one is never rotated out; a warning on std::cerr names the
  /// step and the first such tensor. false: every checkpoint is written as it is.
  bool skip_non_finite = true;
};

/// A run directory (SessionOptions::run_dir, FitOptions::run_dir): a path, made from anything a
/// std::filesystem::path is made from ("runs/mlp", a std::string, a path). A run restores the
/// latest checkpoint there and checkpoints into it; the default, empty, does neither. Making one
/// with a value is what makes a program compile the checkpoint code (detail::CheckpointCode): a
/// program that names no run directory and no collective compiles no checkpoint reader or writer
/// for its training loop.
class RunDir {
 public:
  RunDir() = default;
  template <class P>
    requires(std::constructible_from<std::filesystem::path, P> && !std::same_as<std::remove_cvref_t<P>, RunDir>)
  RunDir(P&& path) : path_(std::forward<P>(path)) {
    if (!path_.empty()) detail::checkpoint_code_slot().store(detail::checkpoint_code<P>(), std::memory_order_relaxed);
  }

  const std::filesystem::path& path() const { return path_; }
  operator const std::filesystem::path&() const { return path_; }
  bool empty() const { return path_.empty(); }
  std::string string() const { return path_.string(); }
  bool operator==(const RunDir&) const = default;
  /// As the path prints (quoted).
  friend std::ostream& operator<<(std::ostream& os, const RunDir& d) { return os << d.path_; }

 private:
  std::filesystem::path path_;
};

/// Options of a Session a user drives. Designated initializers must follow this order:
///   {.run_dir = "runs/lm", .hooks = {&stop, &bar}, .rng = &rng, .checkpoint = {.every_steps = 500}}
struct SessionOptions {
  RunDir run_dir = {};            ///< restore from / checkpoint into; empty: neither
  std::vector<Hook*> hooks = {};  ///< not owned; must outlive the Session
  /// A generator saved and restored with checkpoints as "rng" (the model's registered generators,
  /// Dropout's, are saved as "rng/<path>" without it).
  Rng* rng = nullptr;
  CheckpointSaverOptions checkpoint = {};  ///< of the CheckpointSaver added when run_dir is set and hooks hold none
  bool verbose = false;                    ///< adds a ProgressBar on std::cout
  /// The first step checks that every trainable leaf the loss depends on is a parameter of the
  /// model or of the optimizer (as FitOptions::unregistered).
  nn::Unregistered unregistered = nn::Unregistered::error;
  std::optional<Device> device = std::nullopt;  ///< moves the model there first (`module.to`); unset: where it is
  /// What Session::epochs() tells hooks (Logging's "epoch 1/<epochs>"); a user Session never stops on it.
  int64_t epochs = 1;
  /// > 0: the gradients are clipped to this global norm (optim::clip_by_global_norm) between the
  /// backward pass and the optimizer step of each run(); 0: not clipped.
  double clip_global_norm = 0;
  /// Mixed precision: each run()'s forward pass (and so the backward products) under
  /// gd::autocast of this precision (core/precision.hpp). With gd::fp16 the loss is scaled by a
  /// LossScaler (`loss_scale`): a step whose gradients overflowed is skipped.
  Precision autocast = Precision::fp32;
  optim::LossScaleOptions loss_scale = {};  ///< the scaler's schedule, with autocast = gd::fp16
  /// Data-parallel training over several processes (see Collective); empty: one process.
  ///   {.run_dir = "runs/lm", .hooks = {&stop}, .collective = gd::dist::collective()}
  Collective collective = {};
};

namespace detail {

/// Tag of the Session constructor that fit's loops use (train/fit.hpp).
struct ForFit {};

/// What a Session reaches only when checkpoints are asked for, through checkpoint_code_slot():
/// restoring the latest checkpoint of run_dir, the CheckpointSaver fit adds for it, and a
/// Collective's start (the chief's state to every rank, a checkpoint in memory). With these, the
/// checkpoint writer and reader (safetensors, the Saver, the History's and the loop's entries:
/// about 120 KB of code header-only) are compiled where a RunDir or a CollectiveBroadcast is
/// made, not in every program that trains. A CheckpointSaver hook the program makes, and
/// Session::save_checkpoint, reach it directly.
struct CheckpointCode {
  void (*restore_latest)(Session&);
  void (*sync_state)(Session&);
  std::unique_ptr<Hook> (*default_saver)(const CheckpointSaverOptions&);
};

/// The model and optimizer a Session trains behind one interface, so Session is not a template.
/// TypedTrainee<T> implements it over nn::Module<T> and optim::Optimizer<T>.
class Trainee {
 public:
  virtual ~Trainee() = default;
  virtual double lr() const = 0;
  virtual void set_lr(double lr) = 0;
  virtual std::vector<NamedTensor> parameters() const = 0;
  virtual std::vector<NamedTensor> buffers() const = 0;
  /// The model's registered generators (Module::named_generators).
  virtual std::vector<std::pair<std::string, Rng*>> generators() const = 0;
  /// Adds the model ("model/...") and optimizer ("optimizer/...") entries of a checkpoint.
  virtual void add_state(io::TensorList& out) const = 0;
  /// Restores what add_state wrote; the io helpers validate before they modify.
  virtual void restore_state(const io::Safetensors& ckpt) = 0;
  virtual void set_training(bool on) = 0;
  virtual bool is_training() const = 0;
  virtual void to(Device device) = 0;
  /// Resets the gradients of the optimizer's parameters.
  virtual void zero_grad() = 0;
  /// "float" or "double": the model's element type, for error messages.
  virtual const char* element_type() const = 0;
  /// Scales the loss of every step from now on (fp16 training), with this schedule.
  virtual void scale_loss(const optim::LossScaleOptions& options) = 0;
};

template <Real T>
class TypedTrainee final : public Trainee {
 public:
  TypedTrainee(nn::Module<T>& model, optim::Optimizer<T>& opt) : model_(model), opt_(opt) {}

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
  std::vector<std::pair<std::string, Rng*>> generators() const override { return model_.named_generators(); }
  void add_state(io::TensorList& out) const override {
    io::add_module(out, model_);
    io::add_optimizer(out, opt_, model_);  // keyed by parameter name
    if (scaler_)
      for (auto& [name, t] : scaler_->state_dict()) out.emplace_back("loss_scale/" + name, std::move(t));
  }
  void restore_state(const io::Safetensors& ckpt) override {
    io::restore_module(ckpt, model_);
    io::restore_optimizer(ckpt, opt_, model_);  // by name; checkpoints keyed by position load too
    if (!scaler_) return;
    optim::StateDict<T> state;  // absent (a checkpoint of a run without scaling): the scaler starts afresh
    for (const char* name : {"scale", "good_steps", "skipped_steps"})
      if (const std::string key = std::string("loss_scale/") + name; ckpt.find(key))
        state.emplace_back(name, ckpt.get<T>(key));
    if (state.empty()) return;
    try {
      scaler_->load_state_dict(state);
    } catch (const error& e) {
      ::gradus::detail::throw_error<io_error>({"restore: '", ckpt.source, "': loss_scale/: ", e.what()});
    }
  }
  void set_training(bool on) override { model_.train(on); }
  bool is_training() const override { return model_.is_training(); }
  void to(Device device) override { model_.to(device); }
  void zero_grad() override { opt_.zero_grad(); }
  const char* element_type() const override { return std::is_same_v<T, float> ? "float" : "double"; }
  void scale_loss(const optim::LossScaleOptions& options) override { scaler_.emplace(options); }

  /// Backward from `loss` (a scalar depending on a trainable parameter) and one optimizer step;
  /// the first call also checks the registration of every leaf (`unregistered`). Returns the
  /// loss's value, where the loss is (not read: on a GPU the step's kernels may still be running).
  /// With a Collective, the gradients are averaged over the ranks after backward.
  Tensor<T> apply(const Var<T>& loss, const char* who, nn::Unregistered unregistered, double clip_global_norm = 0,
               const Collective* collective = nullptr) {
    GRADUS_CHECK(value_error, loss.size() == 1, who, ": the loss must be a scalar, got shape ", loss.shape());
    GRADUS_CHECK(value_error, loss.requires_grad(), who, ": the loss does not depend on any trainable parameter");
    if (!registration_checked_ && unregistered != nn::Unregistered::ignore)
      nn::report_unregistered(who, nn::unregistered_leaves(static_cast<const nn::Module<T>&>(model_), loss, opt_.params()),
                              {.action = unregistered});
    registration_checked_ = true;
    if (scaler_)
      scaler_->backward(loss);
    else
      gradus::backward(loss);
    if (collective && *collective) average_gradients(*collective);
    if (scaler_ && !scaler_->unscale(opt_)) {  // overflowed (on every rank alike: the averages are)
      opt_.zero_grad();
      scaler_->skip();
      return loss.value();
    }
    if (clip_global_norm > 0) optim::clip_by_global_norm(opt_.params(), clip_global_norm);
    opt_.step();
    if (scaler_) scaler_->grow();
    return loss.value();
  }

  /// Replaces the gradient of every optimizer parameter by its mean over the ranks. A parameter
  /// with a gradient on no rank keeps none (the optimizer skips it, as in one process); one with
  /// a gradient on some ranks only counts zeros for the others.
  void average_gradients(const Collective& c) {
    const auto& params = opt_.params();
    std::vector<double> has(params.size());
    for (size_t i = 0; i < params.size(); ++i) has[i] = params[i].grad_if_any() ? 1 : 0;
    c.max(has);
    std::vector<AnyTensor> grads;
    for (size_t i = 0; i < params.size(); ++i) {
      if (has[i] == 0) continue;
      const Tensor<T>* g = params[i].grad_if_any();
      grads.emplace_back(g ? *g : Tensor<T>::empty(params[i].shape(), params[i].value().device()).fill_(T(0)));
    }
    c.average(grads);
    size_t k = 0;
    for (size_t i = 0; i < params.size(); ++i)
      if (has[i] != 0) params[i].grad() = std::get<Tensor<T>>(grads[k++]);
  }

 private:
  nn::Module<T>& model_;
  optim::Optimizer<T>& opt_;
  bool registration_checked_ = false;
  std::optional<optim::LossScaler<T>> scaler_;  // fp16 training (SessionOptions::autocast)
};

template <class R>
struct is_loss_pair : std::false_type {};
template <class L, std::integral N>
struct is_loss_pair<std::pair<L, N>> : std::true_type {};

/// What a Session::run function returned, as (loss Var, batch size; 0 when not given).
template <class R>
auto loss_and_batch(const R& r) {
  if constexpr (is_loss_pair<R>::value) {
    static_assert(Expression<typename R::first_type>,
                  "SESSION_RUN_FUNCTION_MUST_RETURN_A_LOSS_VAR_OR_A_PAIR_OF_LOSS_AND_BATCH_SIZE");
    return std::pair{to_var(r.first), int64_t(r.second)};
  } else {
    static_assert(Expression<R>, "SESSION_RUN_FUNCTION_MUST_RETURN_A_LOSS_VAR_OR_A_PAIR_OF_LOSS_AND_BATCH_SIZE");
    return std::pair{to_var(r), int64_t(0)};
  }
}

}  // namespace detail

/// A training run (tf.train.MonitoredTrainingSession): the model and its optimizer, the global
/// step, hooks, and checkpoints in run_dir. fit() drives one; a user with a step of their own
/// (seq2seq, truncated BPTT, several models) drives one directly and gets the same hooks,
/// restore-or-init and checkpoints (same layout as fit's, see train/session_run.hpp):
///   gd::train::StopAtStep stop({.last_step = 10000});
///   gd::train::Session session(model, optimizer, {.run_dir = "runs/lm", .hooks = {&stop}, .rng = &rng});
///   while (!session.should_stop())
///     session.run([&] { auto [x, y] = next_batch(); return loss_of(model, x, y); });  // scalar Var<T>
///   session.close();
/// Construction: hooks.begin → restore the latest checkpoint of run_dir (model, optimizer, rng
/// and the model's generators, global step, History, hook states) or keep the fresh state →
/// hooks.after_create_session; the model is put in training mode. `run(fn)`: hooks.before_step
/// → zero the optimizer's gradients → fn() → backward → optimizer step → hooks.after_step (CheckpointSavers
/// last). `end_epoch()` optionally marks an epoch's end (hooks.after_epoch: EarlyStopping, epoch
/// logs, every_epochs checkpoints). `close()` (or the destructor) runs hooks.end once and gives the
/// model its previous mode back; after an exception from a step or a hook, end is not called.
/// Needs <gradus/train.hpp> (the definitions are in train/session_run.hpp).
///
/// Hooks see the running session through the rest of this interface: progress counters, the last
/// loss, the learning rate, the model's tensors, the History so far, stopping and checkpointing.
/// The global step (optimizer steps taken by sessions, over every run in run_dir) is owned here.
class Session {
 public:
  /// A session over `model` (an nn::Module<T>) and `optimizer` (over the model's parameters),
  /// opened at once (see above). Throws what a restore throws (a corrupt checkpoint, another model).
  template <nn::ModuleType M>
  Session(M& model, optim::Optimizer<typename M::value_type>& optimizer, const SessionOptions& options = {});
  /// Closes the session (see close) unless it is closed, failed, or an exception is unwinding;
  /// an error from the end hooks is then written to std::cerr: call close() to see it thrown.
  GRADUS_INLINE_DECL virtual ~Session();
  Session(const Session&) = delete;
  Session& operator=(const Session&) = delete;

  /// True once a hook requested a stop (StopAtStep, EarlyStopping, NanGuard{.fail = false}), after
  /// a failed step, and after close().
  bool should_stop() const { return stop_ || failed_ || closed_; }
  /// One training step: hooks.before_step, the optimizer's gradients zeroed, `fn()` — the loss
  /// of the user's own batch: a scalar Var<T> (or differentiable expression), or a std::pair of it
  /// and the batch's number of examples (StepResult::batch_size; 0 when not given) — then
  /// backward, optimizer.step() and hooks.after_step. Returns false, doing nothing, when the
  /// session should stop already or a before_step hook requested a stop. last_loss() is the
  /// step's loss. An exception from fn or a hook marks the session failed and propagates.
  ///   session.run([&] { return std::pair{loss_of(model, x, y), x.dim(0)}; });
  template <class F>
  bool run(F&& fn);
  /// Ends the current epoch (epochs are the user's to define): appends to history() an entry
  /// with the mean loss of the epoch's steps and the given validation values, then runs
  /// hooks.after_epoch (EarlyStopping, Logging's epoch line, CheckpointSaver's every_epochs).
  /// steps_per_epoch() becomes this epoch's number of steps. value_error when no step ran since
  /// the last epoch end.
  ///   session.end_epoch(val_loss, {{"val_accuracy", acc.result()}});
  const EpochLogs& end_epoch(std::optional<double> val_loss = std::nullopt,
                             std::vector<std::pair<std::string, double>> val_metrics = {});
  /// Runs hooks.end (CheckpointSaver's final save, ProgressBar's last line) once, unless a step
  /// failed, and gives the model its previous training mode back. Returns the History (with
  /// global_step, stop_reason and nonfinite_step set). Later calls return it again.
  const History& close();

  /// Steps completed, restored from the checkpoint on resume.
  int64_t global_step() const { return global_step_; }
  /// The 0-based epoch under way (== epochs() once every epoch is done).
  int64_t epoch() const { return epoch_; }
  /// Epochs this fit call runs to (FitOptions::epochs; SessionOptions::epochs for a user session).
  int64_t epochs() const { return epochs_; }
  /// Steps completed in the current epoch.
  int64_t step_in_epoch() const { return step_in_epoch_; }
  /// Batches per epoch. Training on a gd::data::Dataset or in a user session, 0 until the first
  /// epoch has ended (the length is not known before), then that epoch's number of batches.
  int64_t steps_per_epoch() const { return steps_per_epoch_; }
  /// Whether the batches come from a gd::data::Dataset (train/fit_dataset.hpp) rather than
  /// in-memory Data or a user's step.
  bool streaming() const { return streaming_; }
  /// Global step at which the last epoch ends: the run's last step if nothing stops it.
  int64_t last_step() const { return global_step_ + (epochs_ - epoch_) * steps_per_epoch_ - step_in_epoch_; }
  /// The loss of the last step (NaN before the first step of a fresh run). On a GPU, reading it
  /// (or epoch_loss, nonfinite_step) waits for the steps still running (see StepLoss).
  double last_loss() const {
    settle();
    return last_loss_;
  }
  /// Mean loss over the steps of the current epoch so far (NaN before its first step).
  double epoch_loss() const {
    settle();
    return loss_count_ > 0 ? loss_sum_ / double(loss_count_) : std::numeric_limits<double>::quiet_NaN();
  }
  /// The first global step of this run whose loss was NaN or infinite; empty while every loss is finite.
  const std::optional<int64_t>& nonfinite_step() const {
    settle();
    return nonfinite_step_;
  }
  /// The History so far (completed epochs, including those of restored runs).
  const History& history() const { return history_; }
  /// FitOptions::run_dir / SessionOptions::run_dir (empty: no checkpoints).
  const std::filesystem::path& run_dir() const { return run_dir_; }
  /// The Collective of a data-parallel run (empty for one process).
  const Collective& collective() const { return collective_; }
  /// Whether this process writes checkpoints and summaries (always, without a Collective).
  bool is_chief() const { return collective_.is_chief(); }
  /// The checkpoint this run was restored from, if any.
  const std::optional<std::filesystem::path>& restored_from() const { return restored_from_; }

  /// The optimizer's learning rate.
  double lr() const { return trainee_->lr(); }
  /// Sets the optimizer's learning rate (>= 0); it is saved with checkpoints.
  void set_lr(double lr) { trainee_->set_lr(lr); }
  /// The model's parameters with their gradients, named as Module::named_parameters.
  std::vector<NamedTensor> parameters() const { return trainee_->parameters(); }
  /// The model's buffers (BatchNorm statistics), named as Module::named_buffers.
  std::vector<NamedTensor> buffers() const { return trainee_->buffers(); }

  /// Ends the run after the current step (or before the next one); the first reason is kept.
  void request_stop(std::string reason) {
    if (!stop_) stop_reason_ = std::move(reason);
    stop_ = true;
  }
  bool stop_requested() const { return stop_; }
  const std::string& stop_reason() const { return stop_reason_; }

  /// Everything a checkpoint holds: model, optimizer, rng, loop state and hook states
  /// (layout in train/session_run.hpp).
  void checkpoint(io::TensorList& tensors, io::Metadata& metadata) const;
  /// Saves a checkpoint of the current state now through `saver`; returns its path.
  std::filesystem::path save_checkpoint(io::Saver& saver) const;
  /// Saves a checkpoint now through the run's first CheckpointSaver (the one added for run_dir
  /// included); value_error when the run has none.
  std::filesystem::path save_checkpoint();

 protected:
  /// fit's session over `model` and `optimizer`; the loop (train/fit.hpp) configures and runs it.
  template <nn::ModuleType M>
  Session(detail::ForFit, M& model, optim::Optimizer<typename M::value_type>& optimizer);

  // --- what fit's loops provide (train/fit.hpp, train/fit_dataset.hpp)
  /// One step on the batch of rows `index[0..n)` through step(); false when it did not run.
  virtual bool train_step(const int64_t* /*index*/, int64_t /*n*/) { return false; }
  // Streaming (a Dataset of batches): open_epoch starts epoch `epoch` with its first `consumed`
  // batches skipped; fetch_batch takes the next batch (false at the end of the epoch) and returns
  // its number of examples in `n`; train_fetched makes one step on it. close_epoch ends the pass.
  virtual void open_epoch(int64_t /*epoch*/, int64_t /*consumed*/) {}
  virtual bool fetch_batch(int64_t& /*n*/) { return false; }
  virtual bool train_fetched() { return false; }
  virtual void close_epoch() {}
  /// Fills the validation entries of `logs`.
  virtual void validate(EpochLogs& /*logs*/) {}

  // --- the machinery every session shares (train/session_run.hpp)
  /// Checks and applies the options shared by fit and user sessions.
  void configure(const SessionOptions& o);
  /// Orders the hooks, resets the state, enters training mode, hooks.begin, restore-or-init,
  /// hooks.after_create_session.
  void open();
  /// One step (see run): `forward()` returns (loss, batch size). False when it did not run.
  template <class F>
  bool step(F&& forward);
  /// Appends `logs` (its validation entries filled) as the epoch's History entry; after_epoch hooks.
  const EpochLogs& finish_epoch(EpochLogs logs);
  /// With a Collective: the chief's validation values of `logs` on every rank.
  void sync_validation(EpochLogs& logs);
  /// Settles the losses, syncs the validation values and stamps `logs` with the epoch, the global
  /// step and the epoch's mean loss so far.
  void stamp_logs(EpochLogs& logs);
  /// Every validate_every_ global steps: a validation appended to History::evaluations, and the
  /// after_evaluation hooks.
  void evaluate_mid_epoch();
  /// Fills the History's totals, hooks.end, the non-finite warning.
  void finish();
  /// Gives the model the training mode it had before open().
  void restore_mode();
  /// fit's loop: open, epochs of steps, validation, finish (train/fit.hpp).
  History fit_loop();
  void restore(const std::filesystem::path& path);
  /// Restores from a decoded checkpoint; `path` names it in error messages.
  void restore_from(const io::Safetensors& ckpt, const std::filesystem::path& path);
  /// With a Collective: the chief's whole state (checkpoint()) to every other rank.
  void sync_state();
  // The checkpoint code (detail::CheckpointCode): the latest checkpoint of run_dir_, if any,
  // restored; sync_state(); the CheckpointSaver fit adds for run_dir.
  static void restore_latest(Session& s);
  static void sync_state_of(Session& s) { s.sync_state(); }
  static std::unique_ptr<Hook> default_saver(const CheckpointSaverOptions& options);
  template <class Tag>
  friend const detail::CheckpointCode* detail::checkpoint_code();
  /// The checkpoint code, set by then: a run_dir is a RunDir, a Collective has a broadcast.
  const detail::CheckpointCode& checkpoint_code() const;
  /// With a Collective: a stop requested on any rank is requested on every rank.
  void sync_stop();
  void check_resumable(const detail::LoopState& st, const std::filesystem::path& path) const;
  void restore_hook_states(const io::Safetensors& ckpt);
  void add_loop_state(io::TensorList& out, io::Metadata& metadata) const;
  /// The step's loss `value` (a scalar where the loss was computed) as its StepLoss: a number on
  /// the CPU, queued in pending_ on a device; with a Collective, the mean over the ranks weighted
  /// by batch size `n` (computed on the devices for a GPU's loss).
  StepLoss record_loss(const AnyTensor& value, int64_t n);
  /// Counts the losses of unaccounted_ (read from the device now if need be) into the epoch's.
  void settle() const;
  void account(int64_t step, double loss) const;

  // configuration, set by configure() and fit's loops before open()
  const char* who_ = "Session";  // the prefix of error messages: "fit" in fit's sessions
  int64_t validate_every_ = 0;   // fit's validation_every_steps
  std::unique_ptr<detail::Trainee> trainee_;
  nn::Unregistered unregistered_ = nn::Unregistered::error;
  double clip_global_norm_ = 0;
  Precision autocast_ = Precision::fp32;
  int64_t epochs_ = 1, steps_per_epoch_ = 0, examples_ = -1, batch_size_ = 0;
  bool shuffle_ = false, drop_remainder_ = false, verbose_ = false, streaming_ = false;
  uint64_t seed_ = 0;
  std::filesystem::path run_dir_;
  Rng* rng_ = nullptr;
  /// The model's registered generators other than rng_, saved as "rng/<path>" ("rng/drop.rng").
  std::vector<std::pair<std::string, Rng*>> generators_;
  std::vector<Hook*> user_hooks_;
  std::vector<std::unique_ptr<Hook>> owned_hooks_;  // verbose's ProgressBar, the default CheckpointSaver
  Collective collective_;  // empty: one process

 private:
  // state
  int64_t global_step_ = 0, epoch_ = 0, step_in_epoch_ = 0;
  // the losses, accounted once read (settle): a GPU's are read when someone asks
  mutable int64_t loss_count_ = 0;
  mutable double loss_sum_ = 0, last_loss_ = std::numeric_limits<double>::quiet_NaN();
  mutable std::optional<int64_t> nonfinite_step_;
  std::shared_ptr<detail::PendingScalars> pending_ = std::make_shared<detail::PendingScalars>();
  mutable std::vector<std::pair<int64_t, std::shared_ptr<detail::LossCell>>> unaccounted_;  // step, its loss
  History history_;
  bool stop_ = false;
  std::string stop_reason_;
  std::optional<std::filesystem::path> restored_from_;
  std::vector<Hook*> hooks_;  // user hooks and owned ones, CheckpointSavers last
  std::vector<int64_t> order_;
  int64_t order_epoch_ = -1;
  // lifecycle
  bool user_driven_ = false, opened_ = false, closed_ = false, failed_ = false, mode_before_ = true;
  int uncaught_at_open_ = 0;
};

}  // namespace gradus::train

#if GRADUS_DEFINE_COMPILED  // libgradus holds these with GRADUS_COMPILED (core/compiled.hpp)
namespace gradus::train {
GRADUS_INLINE bool all_finite(const AnyTensor& t) {
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

GRADUS_INLINE std::shared_ptr<detail::LossCell> detail::PendingScalars::push(const AnyTensor& scalar, double scale) {
  std::visit(
      [&](const auto& t) {
        using T = typename std::remove_cvref_t<decltype(t)>::value_type;
        if constexpr (std::is_floating_point_v<T>) {
          GRADUS_CHECK(value_error, t.size() == 1 && !t.in_host_memory(), "PendingScalars: expected one element on a device, got ",
                       t.shape(), " on ", t.device());
          auto* buf = std::get_if<Tensor<T>>(&buffer_);
          if (!buf || !buf->defined() || buf->device() != t.device() || cells_.size() == size_t(kCapacity)) {
            settle();  // what the old buffer holds first
            buffer_ = Tensor<T>::empty({kCapacity}, t.device());
            buf = &std::get<Tensor<T>>(buffer_);
          }
          // device to device: the host does not wait
          ::gradus::detail::device_copy(buf->device_data() + cells_.size(), t.device(), t.device_data(), t.device(),
                                        sizeof(T));
        } else {
          throw value_error("PendingScalars: a loss must be float or double, got int64");
        }
      },
      scalar);
  cells_.emplace_back(std::make_shared<LossCell>(), scale);
  return cells_.back().first;
}

GRADUS_INLINE void detail::PendingScalars::settle() {
  if (cells_.empty()) return;
  std::visit(
      [&](const auto& buf) {
        using T = typename std::remove_cvref_t<decltype(buf)>::value_type;
        std::vector<T> host(cells_.size());
        ::gradus::detail::device_copy(host.data(), ::gradus::cpu, buf.device_data(), buf.device(),
                                      host.size() * sizeof(T));
        for (size_t i = 0; i < cells_.size(); ++i) {
          cells_[i].first->value = double(host[i]) * cells_[i].second;
          cells_[i].first->known = true;
        }
      },
      buffer_);
  cells_.clear();  // not before the copy: an error it reports leaves the values to read again
}

GRADUS_INLINE void detail::WeightedSum::add(const AnyTensor& loss, double weight, double offset) {
  const bool on_device = std::visit([](const auto& t) { return !t.in_host_memory(); }, loss);
  if (on_device) {
    queued_.push_back({pending_.push(loss, 1), weight, offset});
  } else {
    host_ += weight * (std::visit([](const auto& t) { return double(t.item()); }, loss) + offset);
  }
}

GRADUS_INLINE double detail::WeightedSum::total() {
  pending_.settle();
  for (const Queued& q : queued_) host_ += q.weight * (q.cell->value + q.offset);
  queued_.clear();
  return host_;
}

GRADUS_INLINE bool EpochLogs::has(std::string_view key) const {
  if (key == "loss") return true;
  if (key == "val_loss") return val_loss.has_value();
  for (const auto& [k, v] : val_metrics)
    if (k == key) return true;
  return false;
}

GRADUS_INLINE double EpochLogs::get(std::string_view key) const {
  if (key == "loss") return loss;
  if (key == "val_loss" && val_loss) return *val_loss;
  for (const auto& [k, v] : val_metrics)
    if (k == key) return v;
  std::string keys = "loss";
  if (val_loss) keys += ", val_loss";
  for (const auto& [k, v] : val_metrics) keys += ", " + k;
  ::gradus::detail::throw_error<value_error>({"EpochLogs: no value '", key, "' (has: ", keys, ")"});
}

GRADUS_INLINE std::vector<double> History::values(std::string_view key) const {
  std::vector<double> out;
  for (const auto& e : epochs) out.push_back(e.get(key));
  return out;
}

GRADUS_INLINE void Session::checkpoint(io::TensorList& tensors, io::Metadata& metadata) const {
  trainee_->add_state(tensors);
  if (rng_) io::add_rng(tensors, *rng_, "rng");
  for (const auto& [name, r] : generators_) io::add_rng(tensors, *r, name);
  add_loop_state(tensors, metadata);
  for (const Hook* h : hooks_) {
    const std::string key = h->state_key();
    if (!key.empty()) h->save_state(tensors, metadata, "hooks/" + key + "/");
  }
}

GRADUS_INLINE std::filesystem::path Session::save_checkpoint(io::Saver& saver) const {
  io::TensorList tensors;
  io::Metadata metadata;
  checkpoint(tensors, metadata);
  return saver.save(global_step_, tensors, std::move(metadata));
}
}  // namespace gradus::train
#endif  // GRADUS_DEFINE_COMPILED

#if GRADUS_INSTANCES  // compiled once in libgradus with GRADUS_COMPILED (core/compiled.hpp)
namespace gradus::train {
GRADUS_INSTANCE class detail::TypedTrainee<float>;
GRADUS_INSTANCE_DOUBLE class detail::TypedTrainee<double>;
}  // namespace gradus::train
#endif
