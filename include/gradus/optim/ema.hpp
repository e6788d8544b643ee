// gradus/optim/ema.hpp — exponential moving averages of variables (tf.train.ExponentialMovingAverage).
#pragma once
#include <algorithm>
#include <cstdint>
#include <initializer_list>
#include <string>
#include <vector>

#include "gradus/optim/optimizer.hpp"

namespace gradus::optim {

/// ExponentialMovingAverage options.
struct EmaOptions {
  double decay = 0.999;  ///< in [0, 1]
};

/// Shadow copies of a list of variables that follow them slowly, as tf.train.ExponentialMovingAverage:
/// each `apply()` sets  shadow <- shadow - (1 - decay)·(shadow - var).  The shadows start as copies
/// of the variables' values at construction. Evaluate with the averages swapped in:
///   gd::optim::ExponentialMovingAverage ema(params, {.decay = 0.999});
///   opt.step(); ema.apply(opt.iterations());
///   ema.swap_in(); evaluate(); ema.restore();
template <Real T = float>
class ExponentialMovingAverage {
 public:
  ExponentialMovingAverage(std::vector<Var<T>> vars, EmaOptions o = {}) : vars_(std::move(vars)), decay_(o.decay) {
    for (size_t i = 0; i < vars_.size(); ++i) {
      GRADUS_CHECK(value_error, vars_[i].defined(), "ExponentialMovingAverage: variable ", i, " is an undefined Var");
      for (size_t j = 0; j < i; ++j)
        GRADUS_CHECK(value_error, vars_[j].node() != vars_[i].node(), "ExponentialMovingAverage: variable ", i,
                     " is the same Var as variable ", j);
    }
    detail::check_option(o.decay >= 0 && o.decay <= 1, "ExponentialMovingAverage", "decay", o.decay, "in [0, 1]");
    shadows_.reserve(vars_.size());
    backups_.reserve(vars_.size());
    for (const auto& v : vars_) {
      shadows_.push_back(v.value().clone());
      backups_.push_back(Tensor<T>(v.shape()));
    }
  }
  ExponentialMovingAverage(std::initializer_list<Var<T>> vars, EmaOptions o = {})
      : ExponentialMovingAverage(std::vector<Var<T>>(vars), o) {}

  /// Moves every shadow toward its variable with the configured decay.
  void apply() { apply_decay(decay_); }
  /// As TF with `num_updates` (e.g. the global step): the decay is min(decay, (1 + n)/(10 + n)),
  /// so early averages follow the variables faster.
  void apply(int64_t num_updates) {
    GRADUS_CHECK(value_error, num_updates >= 0, "ExponentialMovingAverage::apply: num_updates must be >= 0, got ",
                 num_updates);
    const double n = double(num_updates);
    apply_decay(std::min(decay_, (1 + n) / (10 + n)));
  }

  /// The moving average of `var` (one of the tracked variables).
  const Tensor<T>& average(const Var<T>& var) const { return shadows_[index_of(var)]; }
  /// The averaged variables, in the order their state is numbered ("var0", "var1", ...).
  const std::vector<Var<T>>& vars() const { return vars_; }
  /// The configured decay (apply(n) may use a smaller one).
  double decay() const { return decay_; }

  /// Copies the averages into the variables (their own values are kept aside) for evaluation.
  void swap_in() {
    GRADUS_CHECK(value_error, !swapped_, "ExponentialMovingAverage::swap_in: the averages are already swapped in");
    for (size_t i = 0; i < vars_.size(); ++i) {
      backups_[i].copy_(vars_[i].value());
      vars_[i].value().copy_(shadows_[i]);
    }
    swapped_ = true;
  }
  /// Puts back the values the variables had at swap_in().
  void restore() {
    GRADUS_CHECK(value_error, swapped_, "ExponentialMovingAverage::restore: swap_in() was not called");
    for (size_t i = 0; i < vars_.size(); ++i) vars_[i].value().copy_(backups_[i]);
    swapped_ = false;
  }
  /// True between swap_in() and restore().
  bool swapped_in() const { return swapped_; }

  /// Deep copies of the averages, named "var<i>/average".
  StateDict<T> state_dict() const {
    StateDict<T> out;
    for (size_t i = 0; i < shadows_.size(); ++i) out.emplace_back(key(i), shadows_[i].clone());
    return out;
  }
  /// Restores averages saved by state_dict() exactly; nothing changes when a check fails.
  void load_state_dict(const StateDict<T>& state) {
    GRADUS_CHECK(value_error, state.size() == shadows_.size(), "ExponentialMovingAverage: load_state_dict: expected ",
                 shadows_.size(), " entries, got ", state.size());
    for (size_t i = 0; i < shadows_.size(); ++i) {
      const Tensor<T>& src = detail::state_entry(state, key(i), "ExponentialMovingAverage");
      GRADUS_CHECK(shape_error, src.shape() == shadows_[i].shape(), "ExponentialMovingAverage: load_state_dict: '",
                   key(i), "' has shape ", src.shape(), " but variable ", i, " has shape ", shadows_[i].shape());
    }
    for (size_t i = 0; i < shadows_.size(); ++i)
      shadows_[i].copy_(detail::state_entry(state, key(i), "ExponentialMovingAverage"));
  }

 private:
  void apply_decay(double decay) {
    GRADUS_CHECK(value_error, !swapped_, "ExponentialMovingAverage::apply: the averages are swapped in; restore() first");
    const T rate = T(1 - decay);
    for (size_t i = 0; i < vars_.size(); ++i) shadows_[i].assign(shadows_[i] - rate * (shadows_[i] - vars_[i].value()));
  }
  size_t index_of(const Var<T>& var) const {
    for (size_t i = 0; i < vars_.size(); ++i)
      if (vars_[i].node() == var.node()) return i;
    throw value_error("ExponentialMovingAverage::average: the Var is not one of the averaged variables");
  }
  static std::string key(size_t i) { return "var" + std::to_string(i) + "/average"; }

  std::vector<Var<T>> vars_;
  double decay_;
  std::vector<Tensor<T>> shadows_, backups_;
  bool swapped_ = false;
};

}  // namespace gradus::optim
