// gradus/optim/schedules.hpp — learning-rate schedules (TF1 tf.train.*_decay semantics).
//
// A schedule is a callable `double(int64_t step)`; feed it to an optimizer before each step:
//   auto sched = gd::optim::exponential_decay(0.1, 1000, 0.96, true);
//   opt.set_lr(sched(opt.iterations()));  opt.step();
// ReduceLROnPlateau is not a function of the step but of a monitored metric: `update(metric)`.
#pragma once
#include <algorithm>
#include <cmath>
#include <concepts>
#include <cstdint>
#include <limits>
#include <numbers>
#include <utility>
#include <vector>

#include "gradus/optim/optimizer.hpp"

namespace gradus::optim {

/// A learning-rate schedule: called with a step (>= 0), returns the learning rate.
template <class S>
concept LrSchedule = std::copy_constructible<S> && requires(const S& s, int64_t step) {
  { s(step) } -> std::convertible_to<double>;
};

namespace detail {
inline void check_step(const char* who, int64_t step) {
  GRADUS_CHECK(value_error, step >= 0, who, ": step must be >= 0, got ", step);
}
}  // namespace detail

/// lr · rate^(step / decay_steps); with `staircase` the exponent is floored (tf.train.exponential_decay).
struct ExponentialDecay {
  double lr;
  int64_t decay_steps;
  double decay_rate;
  bool staircase = false;
  double operator()(int64_t step) const {
    detail::check_step("exponential_decay", step);
    const double p = double(step) / double(decay_steps);
    return lr * std::pow(decay_rate, staircase ? std::floor(p) : p);
  }
};
/// See ExponentialDecay.  `exponential_decay(0.1, 100, 0.5, true)(250) == 0.025`.
inline ExponentialDecay exponential_decay(double lr, int64_t decay_steps, double decay_rate, bool staircase = false) {
  detail::check_lr("exponential_decay", lr);
  GRADUS_CHECK(value_error, decay_steps > 0, "exponential_decay: decay_steps must be > 0, got ", decay_steps);
  detail::check_option(decay_rate > 0 && std::isfinite(decay_rate), "exponential_decay", "decay_rate", decay_rate,
                       "> 0");
  return {lr, decay_steps, decay_rate, staircase};
}

/// values[0] while step <= boundaries[0], values[1] while step <= boundaries[1], ...,
/// values.back() after the last boundary (tf.train.piecewise_constant).
struct PiecewiseConstant {
  std::vector<int64_t> boundaries;
  std::vector<double> values;
  double operator()(int64_t step) const {
    detail::check_step("piecewise_constant", step);
    size_t i = 0;
    while (i < boundaries.size() && step > boundaries[i]) ++i;
    return values[i];
  }
};
/// See PiecewiseConstant; `values` has one more entry than the strictly increasing `boundaries`.
///   piecewise_constant({1000, 2000}, {0.1, 0.01, 0.001})
inline PiecewiseConstant piecewise_constant(std::vector<int64_t> boundaries, std::vector<double> values) {
  GRADUS_CHECK(value_error, values.size() == boundaries.size() + 1, "piecewise_constant: expected ",
               boundaries.size() + 1, " values for ", boundaries.size(), " boundaries, got ", values.size());
  for (size_t i = 1; i < boundaries.size(); ++i)
    GRADUS_CHECK(value_error, boundaries[i - 1] < boundaries[i],
                 "piecewise_constant: boundaries must increase strictly, got ", boundaries[i - 1], " then ",
                 boundaries[i]);
  for (double v : values) detail::check_lr("piecewise_constant", v);
  return {std::move(boundaries), std::move(values)};
}

/// lr · ((1-alpha)·½(1 + cos(π·min(step, decay_steps)/decay_steps)) + alpha) (tf.train.cosine_decay):
/// from lr at step 0 down to alpha·lr at decay_steps, constant after.
struct CosineDecay {
  double lr;
  int64_t decay_steps;
  double alpha = 0;
  double operator()(int64_t step) const {
    detail::check_step("cosine_decay", step);
    const double p = double(std::min(step, decay_steps)) / double(decay_steps);
    return lr * ((1 - alpha) * 0.5 * (1 + std::cos(std::numbers::pi * p)) + alpha);
  }
};
/// See CosineDecay; alpha in [0, 1].
inline CosineDecay cosine_decay(double lr, int64_t decay_steps, double alpha = 0) {
  detail::check_lr("cosine_decay", lr);
  GRADUS_CHECK(value_error, decay_steps > 0, "cosine_decay: decay_steps must be > 0, got ", decay_steps);
  detail::check_option(alpha >= 0 && alpha <= 1, "cosine_decay", "alpha", alpha, "in [0, 1]");
  return {lr, decay_steps, alpha};
}

/// Linear warmup, then another schedule started afresh (Keras' warmup form):
///   step < warmup_steps:  initial_lr + (after(0) - initial_lr)·step/warmup_steps
///   otherwise:            after(step - warmup_steps)
template <LrSchedule S>
struct LinearWarmup {
  int64_t warmup_steps;
  S after;
  double initial_lr = 0;
  double operator()(int64_t step) const {
    detail::check_step("warmup", step);
    if (step >= warmup_steps) return double(after(step - warmup_steps));
    return initial_lr + (double(after(0)) - initial_lr) * double(step) / double(warmup_steps);
  }
};
/// See LinearWarmup.  warmup(100, cosine_decay(0.1, 1000)): 0 → 0.1 over 100 steps, then the cosine.
template <LrSchedule S>
LinearWarmup<S> warmup(int64_t warmup_steps, S after, double initial_lr = 0) {
  GRADUS_CHECK(value_error, warmup_steps >= 0, "warmup: warmup_steps must be >= 0, got ", warmup_steps);
  detail::check_lr("warmup", initial_lr);
  return {warmup_steps, std::move(after), initial_lr};
}

/// Whether a smaller or a larger monitored value is better.
enum class PlateauMode { min, max };

/// ReduceLROnPlateau options (Keras defaults).
struct PlateauOptions {
  double factor = 0.1;        ///< the lr is multiplied by this on a plateau; in [0, 1)
  int64_t patience = 10;      ///< updates without improvement before a reduction
  double min_lr = 0;          ///< the lr never goes below this
  int64_t cooldown = 0;       ///< updates after a reduction during which waiting does not count
  double min_delta = 1e-4;    ///< an improvement must beat the best value by more than this
  PlateauMode mode = PlateauMode::min;
};

/// Multiplies the learning rate by `factor` when a metric stops improving, as Keras'
/// ReduceLROnPlateau callback: after `patience` updates without improvement the lr becomes
/// max(lr·factor, min_lr), then `cooldown` updates pass before waiting counts again.
///   gd::optim::ReduceLROnPlateau plateau(0.1, {.factor = 0.5, .patience = 3});
///   opt.set_lr(plateau.update(val_loss));   // once per epoch
class ReduceLROnPlateau {
 public:
  explicit ReduceLROnPlateau(double lr, PlateauOptions o = {}) : o_(o), lr_(lr) {
    detail::check_lr("ReduceLROnPlateau", lr);
    detail::check_option(o.factor >= 0 && o.factor < 1, "ReduceLROnPlateau", "factor", o.factor, "in [0, 1)");
    detail::check_option(o.patience >= 0, "ReduceLROnPlateau", "patience", double(o.patience), ">= 0");
    detail::check_option(o.cooldown >= 0, "ReduceLROnPlateau", "cooldown", double(o.cooldown), ">= 0");
    detail::check_lr("ReduceLROnPlateau", o.min_lr);
    detail::check_option(o.min_delta >= 0, "ReduceLROnPlateau", "min_delta", o.min_delta, ">= 0");
    reset();
  }

  /// Records one value of the monitored metric; returns the learning rate to use from now on.
  double update(double metric) {
    if (cooldown_left_ > 0) {
      --cooldown_left_;
      wait_ = 0;
    }
    const bool better = o_.mode == PlateauMode::min ? metric < best_ - o_.min_delta : metric > best_ + o_.min_delta;
    if (better) {
      best_ = metric;
      wait_ = 0;
    } else if (cooldown_left_ == 0 && ++wait_ >= o_.patience) {
      if (lr_ > o_.min_lr) {
        lr_ = std::max(lr_ * o_.factor, o_.min_lr);
        cooldown_left_ = o_.cooldown;
        wait_ = 0;
      }
    }
    return lr_;
  }
  /// The current learning rate (what the last update returned).
  double lr() const { return lr_; }
  /// Forgets the best value and the counters (the lr stays).
  void reset() {
    best_ = o_.mode == PlateauMode::min ? std::numeric_limits<double>::infinity()
                                        : -std::numeric_limits<double>::infinity();
    wait_ = 0;
    cooldown_left_ = 0;
  }
  /// The best metric seen since construction or reset() (±infinity before any).
  double best() const { return best_; }

 private:
  PlateauOptions o_;
  double lr_;
  double best_ = 0;
  int64_t wait_ = 0, cooldown_left_ = 0;
};

/// See ReduceLROnPlateau.
inline ReduceLROnPlateau reduce_on_plateau(double lr, PlateauOptions o = {}) { return ReduceLROnPlateau(lr, o); }

}  // namespace gradus::optim
