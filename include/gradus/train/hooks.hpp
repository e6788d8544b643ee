// gradus/train/hooks.hpp — the built-in hooks that need no file format: StopAtStep, NanGuard,
// Logging, ProgressBar, EarlyStopping, LrScheduler (CheckpointSaver and SummarySaver have their
// own headers). Pass them to fit by address: `{.hooks = {&stop, &log}}`; they must outlive it.
#pragma once
#include <algorithm>
#include <chrono>
#include <cmath>
#include <cstdint>
#include <cstdio>
#include <functional>
#include <iomanip>
#include <iostream>
#include <limits>
#include <optional>
#include <ostream>
#include <sstream>
#include <string>
#include <type_traits>
#include <utility>
#include <vector>

#include <unistd.h>

#include "gradus/core/compiled.hpp"
#include "gradus/train/session.hpp"

namespace gradus::train {

namespace detail {

using Clock = std::chrono::steady_clock;

inline double seconds_since(Clock::time_point t) {
  return std::chrono::duration<double>(Clock::now() - t).count();
}

/// `v` with `decimals` digits after the point ("0.4321"), or "nan" / "inf".
std::string fixed(double v, int decimals);

/// `v` in the shortest general form with 6 significant digits ("0.001", "1e-05").
std::string general(double v);

/// The warning fit and ProgressBar give when a loss was not finite and no NanGuard stopped the run.
std::string nonfinite_warning(int64_t first, int64_t last);

/// "m:ss" or "h:mm:ss"; "?" when not finite.
std::string clock_time(double seconds);

/// "  val_loss 0.1234  val_accuracy 0.9000" for the validation entries of `logs`.
std::string validation_text(const EpochLogs& logs, int decimals);

/// Whether `os` writes to a terminal: std::cout / std::cerr / std::clog on a tty.
bool is_terminal(const std::ostream& os);

/// Fires every `every_steps` global steps (global_step % every_steps == 0) or when `every_secs`
/// have passed since the last firing (0 disables either), as TF's SecondOrStepTimer.
struct Timer {
  int64_t every_steps = 0;
  double every_secs = 0;
  Clock::time_point last = Clock::now();

  void reset() { last = Clock::now(); }
  bool should_fire(int64_t step) const {
    if (every_steps > 0 && step % every_steps == 0) return true;
    return every_secs > 0 && seconds_since(last) >= every_secs;
  }
};

}  // namespace detail

// ------------------------------------------------------------------------------------ StopAtStep

/// When StopAtStep stops: exactly one of the two is set (>= 0).
struct StopAtStepOptions {
  int64_t num_steps = -1;  ///< this many steps after the step the session starts (or resumes) at
  int64_t last_step = -1;  ///< once the global step reaches this value
};

/// Requests a stop when the global step reaches its target (tf.train.StopAtStepHook): with
/// `last_step` an absolute step (a run resumed at or beyond it stops before any step), with
/// `num_steps` that many steps after the global step at session start.
///   gd::train::StopAtStep stop({.last_step = 1000});
class StopAtStep : public Hook {
 public:
  explicit StopAtStep(StopAtStepOptions o);
  GRADUS_INLINE_DECL void after_create_session(Session& s) override;
  GRADUS_INLINE_DECL void after_step(Session& s, const StepResult& r) override;
  /// The step at which this run stops (valid after session creation).
  int64_t target() const { return target_; }

 private:
  void stop(Session& s) const;
  StopAtStepOptions o_;
  int64_t target_ = 0;
};

// -------------------------------------------------------------------------------------- NanGuard

/// Thrown by NanGuard: the loss or a gradient is not finite. `step` is the global step.
struct nan_error : value_error {
  nan_error(const std::string& what, int64_t step) : value_error(what), step(step) {}
  int64_t step;
};

/// Options of NanGuard.
struct NanGuardOptions {
  bool fail = true;             ///< throw nan_error; false: request a stop with the same message
  bool check_gradients = true;  ///< also check every parameter's gradient, not only the loss
};

/// Checks after each step that the loss (and every gradient) is finite (tf.train.NanTensorHook).
/// Otherwise throws gd::train::nan_error, or with `.fail = false` requests a stop, with a message
/// naming the step: "NanGuard: loss is nan at step 7 (epoch 1, batch 3 of 5)" or
/// "NanGuard: gradient of '0.kernel' is not finite at step 7 (epoch 1, batch 3 of 5); loss 0.25".
/// The failing step's update has been applied, and with fail = true nothing is saved after it.
class NanGuard : public Hook {
 public:
  explicit NanGuard(NanGuardOptions o = {}) : o_(o) {}
  GRADUS_INLINE_DECL void after_step(Session& s, const StepResult& r) override;

 private:
  static std::string where(const Session& s, const StepResult& r);
  NanGuardOptions o_;
};

// --------------------------------------------------------------------------------------- Logging

namespace detail {
/// "k/n", or "k" while the epoch's length n is not known (0: a Dataset's first epoch).
std::string batch_text(int64_t k, int64_t n);
}  // namespace detail

/// Options of Logging.
struct LoggingOptions {
  int64_t every_steps = 100;  ///< log when global_step % every_steps == 0 (0: never by steps)
  double every_secs = 0;      ///< also log when this many seconds passed since the last line (0: off)
  bool epochs = true;         ///< also log one line per completed epoch
  int decimals = 4;           ///< digits after the point for losses and metrics
  int64_t max_values = 8;     ///< a recorded tensor prints this many values at most, then "..."
};

/// Writes one line every N steps or T seconds (tf.train.LoggingTensorHook):
///   "step 200  epoch 2/10  batch 40/160  loss 0.4321  lr 0.001  153.2 steps/s"
/// (epoch and batch 1-based; loss is this step's; steps/s since the previous line), and with
/// `.epochs` one line per epoch:
///   "epoch 2/10  step 320  loss 0.4100  val_loss 0.3900  val_accuracy 0.8812"
///   gd::train::Logging log({.every_steps = 50}, std::clog);
/// Values of the step's own (tf.train.LoggingTensorHook's `tensors`): `record(name, value)` from
/// inside the step — a number, a Tensor or a Var — adds "  name value" to the next line, with the
/// value the step recorded last; a tensor prints as "[0.1, 0.2, ...] [shape]". A recorded tensor is
/// read (from a GPU) only when a line is written.
///   session.run([&] { auto logits = net(x); log.record("logits", logits); return loss(y, logits); });
class Logging : public Hook {
 public:
  explicit Logging(LoggingOptions o = {}, std::ostream& os = std::cout);
  GRADUS_INLINE_DECL void begin(Session&) override;
  GRADUS_INLINE_DECL void after_create_session(Session& s) override;
  GRADUS_INLINE_DECL void after_step(Session& s, const StepResult& r) override;
  GRADUS_INLINE_DECL void after_epoch(Session& s, const EpochLogs& logs) override;
  GRADUS_INLINE_DECL void after_evaluation(Session& s, const EpochLogs& logs) override;

  /// Records `value` under `name` for the next line (the last value recorded under a name wins).
  GRADUS_INLINE_DECL void record(const std::string& name, double value);
  template <class T>
    requires(std::is_same_v<T, float> || std::is_same_v<T, double> || std::is_same_v<T, int64_t>)
  void record(const std::string& name, const Tensor<T>& value) {
    record_tensor(name, AnyTensor(value));
  }
  template <Real T>
  void record(const std::string& name, const Var<T>& value) {
    record_tensor(name, AnyTensor(value.value()));
  }

 private:
  GRADUS_INLINE_DECL void record_tensor(const std::string& name, AnyTensor value);
  std::string value_text(const AnyTensor& t) const;

  LoggingOptions o_;
  std::ostream* os_;
  detail::Timer timer_;
  int64_t last_step_ = 0;
  std::vector<std::pair<std::string, AnyTensor>> values_;  // recorded since the last line, in first-record order
};

// ----------------------------------------------------------------------------------- ProgressBar

/// Options of ProgressBar.
struct ProgressBarOptions {
  int64_t every_steps = 50;  ///< without a terminal: one line every this many steps (and at epoch ends)
  int width = 30;            ///< characters of the bar
  std::optional<bool> tty = {};  ///< force terminal / plain mode; unset: detect with isatty
  int decimals = 4;          ///< digits after the point for losses and metrics
};

/// Keras-style progress. On a terminal one live line per epoch, redrawn at most 10 times a second:
///   "epoch 2/10 [=========>                    ] 45/160  loss 0.4321  152.3 steps/s  ETA 0:12"
/// (loss: mean over the epoch so far; ETA: until the last step of the run), ended at the epoch's
/// end by its summary line. Otherwise (a file, a pipe, a std::ostringstream) plain lines:
///   "epoch 2/10  batch 50/160  step 210  loss 0.4321  152.3 steps/s  ETA 0:12"
/// every `every_steps` global steps, and per epoch "epoch 2/10  step 320  loss 0.4100  val_loss 0.3900".
/// A run whose loss was ever nan or inf ends with "warning: the loss was not finite ... first at step N ...".
class ProgressBar : public Hook {
 public:
  explicit ProgressBar(ProgressBarOptions o = {}, std::ostream& os = std::cout);
  GRADUS_INLINE_DECL void begin(Session&) override;
  GRADUS_INLINE_DECL void after_create_session(Session& s) override;
  GRADUS_INLINE_DECL void after_step(Session& s, const StepResult& r) override;
  GRADUS_INLINE_DECL void after_epoch(Session& s, const EpochLogs& logs) override;
  GRADUS_INLINE_DECL void end(Session& s) override;

 private:
  ProgressBarOptions o_;
  std::ostream* os_;
  bool tty_ = false, drawn_ = false;
  detail::Clock::time_point start_{}, last_draw_{};
  int64_t start_step_ = 0;
};

// --------------------------------------------------------------------------------- EarlyStopping

/// Whether a smaller or a larger monitored value is better; `automatic`: larger for a key that
/// contains "acc" or "auc" (accuracy, AUC), smaller otherwise (as Keras' mode="auto").
enum class Mode { min, max, automatic };

/// Options of EarlyStopping (Keras' names and defaults).
struct EarlyStoppingOptions {
  std::string monitor = "val_loss";  ///< an EpochLogs key: "loss", "val_loss", "val_<metric>"
  double min_delta = 0;              ///< an improvement must beat the best by more than this (>= 0)
  int64_t patience = 0;              ///< epochs without improvement before stopping
  Mode mode = Mode::automatic;
  bool restore_best = false;         ///< on stopping, load the weights of the best epoch
  std::string key = "early_stopping";  ///< checkpoint key ("hooks/<key>/"); unique per run
  /// Watch the validations every FitOptions::validation_every_steps steps instead of the epochs'
  /// (patience then counts those validations).
  bool on_evaluations = false;
};

/// Stops training when the monitored quantity has stopped improving (Keras EarlyStopping): after
/// each epoch an improvement resets the wait, anything else (NaN included) increments it, and at
/// `wait >= patience` it requests a stop ("EarlyStopping: val_loss did not improve for 3 epochs
/// (best 0.1234 after epoch 5)"); with `.restore_best` it then copies the parameters and buffers
/// of the best epoch back into the model. Its state (best value, wait, best weights, whether it
/// stopped) is checkpointed, so a resumed run continues it, and a run it stopped stays stopped.
///   gd::train::EarlyStopping early({.monitor = "val_accuracy", .patience = 3, .restore_best = true});
/// With `.on_evaluations` it watches the validations fit runs every `validation_every_steps`
/// steps instead ("... did not improve for 3 evaluations (best 0.1234 at step 600)").
class EarlyStopping : public Hook {
 public:
  explicit EarlyStopping(EarlyStoppingOptions o = {});

  GRADUS_INLINE_DECL void begin(Session&) override;
  GRADUS_INLINE_DECL void after_create_session(Session& s) override;
  GRADUS_INLINE_DECL void after_epoch(Session& s, const EpochLogs& logs) override;
  GRADUS_INLINE_DECL void after_evaluation(Session& s, const EpochLogs& logs) override;

  /// The best monitored value so far (±infinity before the first epoch).
  double best() const { return best_; }
  /// The 0-based epoch of the best value (-1 before the first epoch); with `.on_evaluations`, the
  /// global step of the best validation.
  int64_t best_epoch() const { return best_epoch_; }
  /// Epochs since the last improvement.
  int64_t wait() const { return wait_; }
  /// Whether this hook stopped the run.
  bool stopped() const { return stopped_; }

  std::string state_key() const override { return o_.key; }
  GRADUS_INLINE_DECL void save_state(io::TensorList& tensors, io::Metadata& metadata, const std::string& prefix) const override;
  GRADUS_INLINE_DECL void restore_state(const io::Safetensors& ckpt, const std::string& prefix) override;

 private:
  void check(Session& s, const EpochLogs& logs, int64_t at);
  std::string reason() const;
  void snapshot(const Session& s);
  void load(Session& s) const;

  EarlyStoppingOptions o_;
  bool maximize_ = false;
  double best_ = 0;
  int64_t wait_ = 0, best_epoch_ = -1;
  bool stopped_ = false;
  std::vector<std::pair<std::string, AnyTensor>> best_weights_;
};

// ----------------------------------------------------------------------------------- LrScheduler

/// Sets the optimizer's learning rate before each step to `schedule(global_step)` (the global
/// step before that step: 0 for the first), from a callable `double(int64_t)` such as the
/// gd::optim schedules:
///   gd::train::LrScheduler sched(gd::optim::cosine_decay(1e-3, 10000));
class LrScheduler : public Hook {
 public:
  explicit LrScheduler(std::function<double(int64_t)> schedule);
  void before_step(Session& s) override { s.set_lr(schedule_(s.global_step())); }

 private:
  std::function<double(int64_t)> schedule_;
};

}  // namespace gradus::train

#if GRADUS_DEFINE_COMPILED  // libgradus holds these with GRADUS_COMPILED (core/compiled.hpp)
namespace gradus::train {
GRADUS_INLINE std::string detail::fixed(double v, int decimals) {
  if (std::isnan(v)) return "nan";  // not "-nan", whatever its sign bit
  std::ostringstream os;
  os << std::fixed << std::setprecision(decimals) << v;
  return os.str();
}

GRADUS_INLINE std::string detail::general(double v) {
  std::ostringstream os;
  os << std::setprecision(6) << v;
  return os.str();
}

GRADUS_INLINE std::string detail::nonfinite_warning(int64_t first, int64_t last) {
  return ::gradus::detail::str("warning: the loss was not finite (nan or inf) first at step ", first,
                               "; training went on to step ", last,
                               " (History::nonfinite_step; gd::train::NanGuard stops at the first one)");
}

GRADUS_INLINE std::string detail::clock_time(double seconds) {
  if (!std::isfinite(seconds) || seconds < 0) return "?";
  const auto s = static_cast<long long>(std::llround(seconds));
  char buf[48];
  if (s >= 3600)
    std::snprintf(buf, sizeof buf, "%lld:%02lld:%02lld", s / 3600, (s / 60) % 60, s % 60);
  else
    std::snprintf(buf, sizeof buf, "%lld:%02lld", s / 60, s % 60);
  return buf;
}

GRADUS_INLINE std::string detail::validation_text(const EpochLogs& logs, int decimals) {
  std::string out;
  if (logs.val_loss) out += "  val_loss " + fixed(*logs.val_loss, decimals);
  for (const auto& [k, v] : logs.val_metrics) out += "  " + k + " " + fixed(v, decimals);
  return out;
}

GRADUS_INLINE bool detail::is_terminal(const std::ostream& os) {
  if (&os == &std::cout) return ::isatty(STDOUT_FILENO) == 1;
  if (&os == &std::cerr || &os == &std::clog) return ::isatty(STDERR_FILENO) == 1;
  return false;
}

GRADUS_INLINE StopAtStep::StopAtStep(StopAtStepOptions o) : o_(o) {
  GRADUS_CHECK(value_error, (o.num_steps >= 0) != (o.last_step >= 0),
               "StopAtStep: set exactly one of num_steps and last_step (>= 0), got num_steps = ", o.num_steps,
               ", last_step = ", o.last_step);
}

GRADUS_INLINE void StopAtStep::after_create_session(Session& s) {
  target_ = o_.last_step >= 0 ? o_.last_step : s.global_step() + o_.num_steps;
  if (s.global_step() >= target_) stop(s);
}

GRADUS_INLINE void StopAtStep::after_step(Session& s, const StepResult& r) {
  if (r.global_step >= target_) stop(s);
}

GRADUS_INLINE void StopAtStep::stop(Session& s) const {
  s.request_stop(::gradus::detail::str("StopAtStep: reached step ", target_));
}

GRADUS_INLINE void NanGuard::after_step(Session& s, const StepResult& r) {
  std::string what;
  if (!std::isfinite(r.loss)) {
    what = ::gradus::detail::str("NanGuard: loss is ", std::isnan(r.loss) ? "nan" : r.loss > 0 ? "inf" : "-inf",
                                 " at step ", r.global_step, where(s, r));
  } else if (o_.check_gradients) {
    for (const auto& p : s.parameters())
      if (p.grad && !all_finite(*p.grad)) {
        what = ::gradus::detail::str("NanGuard: gradient of '", p.name, "' is not finite at step ", r.global_step,
                                     where(s, r), "; loss ", r.loss);
        break;
      }
  }
  if (what.empty()) return;
  if (o_.fail) throw nan_error(what, r.global_step);
  s.request_stop(what);
}

GRADUS_INLINE std::string NanGuard::where(const Session& s, const StepResult& r) {
  return ::gradus::detail::str(" (epoch ", r.epoch, ", batch ", r.step_in_epoch, " of ", s.steps_per_epoch(), ")");
}

GRADUS_INLINE std::string detail::batch_text(int64_t k, int64_t n) {
  return n > 0 ? ::gradus::detail::str(k, '/', n) : ::gradus::detail::str(k);
}

GRADUS_INLINE Logging::Logging(LoggingOptions o, std::ostream& os) : o_(o), os_(&os) {
  GRADUS_CHECK(value_error, o.every_steps >= 0 && o.every_secs >= 0, "Logging: every_steps and every_secs must be >= 0, got ",
               o.every_steps, " and ", o.every_secs);
  GRADUS_CHECK(value_error, o.max_values > 0, "Logging: max_values must be > 0, got ", o.max_values);
}

GRADUS_INLINE void Logging::begin(Session&) { timer_ = {o_.every_steps, o_.every_secs, detail::Clock::now()}; }

GRADUS_INLINE void Logging::after_create_session(Session& s) {
  timer_.reset();
  last_step_ = s.global_step();
}

GRADUS_INLINE void Logging::after_step(Session& s, const StepResult& r) {
  if (!timer_.should_fire(r.global_step)) return;
  const double secs = detail::seconds_since(timer_.last);
  const double rate = secs > 0 ? double(r.global_step - last_step_) / secs : 0.0;
  *os_ << "step " << r.global_step << "  epoch " << r.epoch + 1 << '/' << s.epochs() << "  batch "
       << detail::batch_text(r.step_in_epoch, s.steps_per_epoch()) << "  loss " << detail::fixed(r.loss, o_.decimals)
       << "  lr " << detail::general(s.lr()) << "  " << detail::fixed(rate, 1) << " steps/s";
  for (const auto& [name, value] : values_) *os_ << "  " << name << ' ' << value_text(value);
  *os_ << '\n';
  values_.clear();
  os_->flush();
  timer_.reset();
  last_step_ = r.global_step;
}

GRADUS_INLINE void Logging::after_evaluation(Session& s, const EpochLogs& logs) {
  if (!o_.epochs) return;
  *os_ << "evaluation  step " << logs.global_step << "  epoch " << logs.epoch + 1 << '/' << s.epochs()
       << detail::validation_text(logs, o_.decimals) << '\n';
  os_->flush();
}

GRADUS_INLINE void Logging::record(const std::string& name, double value) {
  record_tensor(name, AnyTensor(Tensor<double>::scalar(value)));
}

GRADUS_INLINE void Logging::record_tensor(const std::string& name, AnyTensor value) {
  GRADUS_CHECK(value_error, !name.empty(), "Logging::record: the name must not be empty");
  for (auto& [n, v] : values_)
    if (n == name) {
      v = std::move(value);
      return;
    }
  values_.emplace_back(name, std::move(value));
}

GRADUS_INLINE std::string Logging::value_text(const AnyTensor& any) const {
  return std::visit(
      [&](const auto& t) {
        const auto host = t.to(gradus::cpu);
        using E = typename std::remove_cvref_t<decltype(host)>::value_type;
        auto number = [&](E v) {
          if constexpr (std::is_same_v<E, int64_t>)
            return std::to_string(v);
          else
            return detail::general(double(v));
        };
        if (host.size() == 1) return number(host.data()[0]);
        std::string out = "[";
        const int64_t shown = std::min<int64_t>(host.size(), o_.max_values);
        for (int64_t k = 0; k < shown; ++k) out += (k ? ", " : "") + number(host.data()[k]);
        out += host.size() > shown ? ", ...] " : "] ";
        return out + host.shape().str();
      },
      any);
}

GRADUS_INLINE void Logging::after_epoch(Session& s, const EpochLogs& logs) {
  if (!o_.epochs) return;
  *os_ << "epoch " << logs.epoch + 1 << '/' << s.epochs() << "  step " << logs.global_step << "  loss "
       << detail::fixed(logs.loss, o_.decimals) << detail::validation_text(logs, o_.decimals) << '\n';
  os_->flush();
}

GRADUS_INLINE ProgressBar::ProgressBar(ProgressBarOptions o, std::ostream& os) : o_(o), os_(&os) {
  GRADUS_CHECK(value_error, o.every_steps > 0 && o.width > 0, "ProgressBar: every_steps and width must be > 0, got ",
               o.every_steps, " and ", o.width);
}

GRADUS_INLINE void ProgressBar::begin(Session&) { tty_ = o_.tty ? *o_.tty : detail::is_terminal(*os_); }

GRADUS_INLINE void ProgressBar::after_create_session(Session& s) {
  start_ = detail::Clock::now();
  last_draw_ = start_ - std::chrono::seconds(1);
  start_step_ = s.global_step();
  drawn_ = false;
}

GRADUS_INLINE void ProgressBar::after_step(Session& s, const StepResult& r) {
  const double secs = detail::seconds_since(start_);
  const double rate = secs > 0 ? double(r.global_step - start_step_) / secs : 0.0;
  const double eta = rate > 0 ? double(s.last_step() - r.global_step) / rate : std::nan("");
  if (tty_) {
    const bool epoch_end = r.step_in_epoch == s.steps_per_epoch();
    if (!epoch_end && detail::seconds_since(last_draw_) < 0.1) return;
    last_draw_ = detail::Clock::now();
    const int64_t n = s.steps_per_epoch();
    const int filled = n > 0 ? int(int64_t(o_.width) * r.step_in_epoch / n) : 0;  // n = 0: not known yet
    std::string bar(size_t(o_.width), ' ');
    for (int i = 0; i < filled; ++i) bar[size_t(i)] = '=';
    if (filled < o_.width && filled > 0) bar[size_t(filled - 1)] = '>';
    *os_ << "\r\x1b[K"
         << "epoch " << r.epoch + 1 << '/' << s.epochs() << " [" << bar << "] "
         << detail::batch_text(r.step_in_epoch, n)
         << "  loss " << detail::fixed(s.epoch_loss(), o_.decimals) << "  " << detail::fixed(rate, 1)
         << " steps/s  ETA " << detail::clock_time(eta);
    os_->flush();
    drawn_ = true;
  } else if (r.global_step % o_.every_steps == 0) {
    *os_ << "epoch " << r.epoch + 1 << '/' << s.epochs() << "  batch "
         << detail::batch_text(r.step_in_epoch, s.steps_per_epoch()) << "  step " << r.global_step << "  loss "
         << detail::fixed(s.epoch_loss(), o_.decimals) << "  " << detail::fixed(rate, 1) << " steps/s  ETA "
         << detail::clock_time(eta) << '\n';
    os_->flush();
  }
}

GRADUS_INLINE void ProgressBar::after_epoch(Session& s, const EpochLogs& logs) {
  if (tty_ && drawn_) *os_ << '\n';
  drawn_ = false;
  *os_ << "epoch " << logs.epoch + 1 << '/' << s.epochs() << "  step " << logs.global_step << "  loss "
       << detail::fixed(logs.loss, o_.decimals) << detail::validation_text(logs, o_.decimals) << '\n';
  os_->flush();
}

GRADUS_INLINE void ProgressBar::end(Session& s) {
  if (tty_ && drawn_) *os_ << '\n';
  drawn_ = false;
  if (!s.stop_reason().empty()) *os_ << "stopped: " << s.stop_reason() << '\n';
  if (s.nonfinite_step()) *os_ << detail::nonfinite_warning(*s.nonfinite_step(), s.global_step()) << '\n';
  os_->flush();
}

GRADUS_INLINE EarlyStopping::EarlyStopping(EarlyStoppingOptions o) : o_(std::move(o)) {
  GRADUS_CHECK(value_error, o_.min_delta >= 0 && o_.patience >= 0,
               "EarlyStopping: min_delta and patience must be >= 0, got ", o_.min_delta, " and ", o_.patience);
  GRADUS_CHECK(value_error, !o_.key.empty(), "EarlyStopping: key must not be empty");
  maximize_ = o_.mode == Mode::max || (o_.mode == Mode::automatic && (o_.monitor.find("acc") != std::string::npos ||
                                                                     o_.monitor.find("auc") != std::string::npos));
}

GRADUS_INLINE void EarlyStopping::begin(Session&) {
  best_ = maximize_ ? -std::numeric_limits<double>::infinity() : std::numeric_limits<double>::infinity();
  wait_ = 0;
  best_epoch_ = -1;
  stopped_ = false;
  best_weights_.clear();
}

GRADUS_INLINE void EarlyStopping::after_create_session(Session& s) {
  if (stopped_) s.request_stop(reason());
}

GRADUS_INLINE void EarlyStopping::after_evaluation(Session& s, const EpochLogs& logs) {
  if (o_.on_evaluations) check(s, logs, logs.global_step);
}

GRADUS_INLINE void EarlyStopping::after_epoch(Session& s, const EpochLogs& logs) {
  if (!o_.on_evaluations) check(s, logs, logs.epoch);
}

GRADUS_INLINE void EarlyStopping::check(Session& s, const EpochLogs& logs, int64_t at) {
  const double v = logs.get(o_.monitor);
  const bool better = maximize_ ? v - o_.min_delta > best_ : v + o_.min_delta < best_;
  if (better) {
    best_ = v;
    best_epoch_ = at;
    wait_ = 0;
    if (o_.restore_best) snapshot(s);
    return;
  }
  if (++wait_ < o_.patience) return;
  stopped_ = true;
  if (o_.restore_best && !best_weights_.empty()) load(s);
  s.request_stop(reason());
}

GRADUS_INLINE void EarlyStopping::save_state(io::TensorList& tensors, io::Metadata& metadata,
                                             const std::string& prefix) const {
  tensors.emplace_back(prefix + "state",
                       Tensor<double>::from({best_, double(wait_), double(best_epoch_), stopped_ ? 1.0 : 0.0}));
  for (const auto& [name, t] : best_weights_) tensors.emplace_back(prefix + "best/" + name, t);
  metadata[prefix + "monitor"] = o_.monitor;
}

GRADUS_INLINE void EarlyStopping::restore_state(const io::Safetensors& ckpt, const std::string& prefix) {
  const Tensor<double> st = ckpt.get<double>(prefix + "state");
  GRADUS_CHECK(io_error, st.size() == 4, "EarlyStopping: checkpoint entry '", prefix, "state' must hold 4 values, got ",
               st.shape());
  std::vector<std::pair<std::string, AnyTensor>> best;
  const std::string bp = prefix + "best/";
  for (const auto& [name, t] : ckpt.tensors)
    if (name.compare(0, bp.size(), bp) == 0) best.emplace_back(name.substr(bp.size()), t);
  const auto count = [&](double v, const char* what) {  // a whole number that an int64_t holds exactly
    GRADUS_CHECK(io_error, v == std::floor(v) && v >= -1 && v <= 9007199254740992.0, "EarlyStopping: checkpoint entry '",
                 prefix, "state' has ", what, " ", v, ", not an epoch count");
    return int64_t(v);
  };
  best_ = st.data()[0];
  wait_ = count(st.data()[1], "wait");
  best_epoch_ = count(st.data()[2], "best epoch");
  stopped_ = st.data()[3] != 0;
  best_weights_ = std::move(best);
}

GRADUS_INLINE std::string EarlyStopping::reason() const {
  if (o_.on_evaluations)
    return ::gradus::detail::str("EarlyStopping: ", o_.monitor, " did not improve for ", wait_, " evaluation",
                                 wait_ == 1 ? "" : "s", " (best ", best_, " at step ", best_epoch_, ")");
  return ::gradus::detail::str("EarlyStopping: ", o_.monitor, " did not improve for ", wait_, " epoch",
                               wait_ == 1 ? "" : "s", " (best ", best_, " after epoch ", best_epoch_ + 1, ")");
}

namespace detail {
/// A copy of `t` in new storage on its device.
inline AnyTensor clone_any(const AnyTensor& t) {
  return std::visit([](const auto& x) { return AnyTensor(x.clone()); }, t);
}
/// Copies `src` into `dst`'s storage (moved to dst's device first where it is elsewhere);
/// `subject` ("EarlyStopping: best weights of 'w'") names `src` in the errors about an element
/// type or a shape that differ from dst's.
inline void copy_any(const AnyTensor& dst, const AnyTensor& src, const std::string& subject) {
  GRADUS_CHECK(value_error, src.index() == dst.index(), subject, " have another element type than the model's");
  std::visit(
      [&](const auto& d) {
        using Tn = std::remove_cvref_t<decltype(d)>;
        const Tn& from = std::get<Tn>(src);
        GRADUS_CHECK(shape_error, from.shape() == d.shape(), subject, " have shape ", from.shape(), ", the model's ",
                     d.shape());
        Tn(d).copy_(from.device() == d.device() ? from : from.to(d.device()));
      },
      dst);
}
}  // namespace detail

GRADUS_INLINE void EarlyStopping::snapshot(const Session& s) {
  best_weights_.clear();
  for (const auto& p : s.parameters()) best_weights_.emplace_back(p.name, detail::clone_any(p.value));
  for (const auto& b : s.buffers()) best_weights_.emplace_back(b.name, detail::clone_any(b.value));
}

GRADUS_INLINE void EarlyStopping::load(Session& s) const {
  auto copy = [&](const NamedTensor& dst) {
    for (const auto& best : best_weights_)  // not a structured binding: clang 14 cannot capture one
      if (best.first == dst.name) {
        detail::copy_any(dst.value, best.second, "EarlyStopping: best weights of '" + best.first + "'");
        return;
      }
  };
  for (const auto& p : s.parameters()) copy(p);
  for (const auto& b : s.buffers()) copy(b);
}

GRADUS_INLINE LrScheduler::LrScheduler(std::function<double(int64_t)> schedule) : schedule_(std::move(schedule)) {
  GRADUS_CHECK(value_error, bool(schedule_), "LrScheduler: empty schedule");
}
}  // namespace gradus::train
#endif  // GRADUS_DEFINE_COMPILED
