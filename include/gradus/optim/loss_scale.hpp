// gradus/optim/loss_scale.hpp — dynamic loss scaling, for training with fp16 products
// (gd::autocast(gd::fp16)), as PyTorch's GradScaler and TensorFlow's LossScaleOptimizer.
//
// A half has 11 significant bits and no value below 2^-24: a gradient of 1e-8 that enters a
// product under fp16 becomes 0. The scaler multiplies the loss by a large power of two S before
// the backward pass, so every gradient flowing back is S times larger and stays in range, then
// divides the parameters' gradients by S (exactly: S is a power of two) before the step. When a
// gradient overflowed (inf or NaN anywhere), the step is skipped and S halved; after
// `growth_interval` good steps in a row, S doubles.
//
//   gd::optim::LossScaler<float> scaler;                  // S = 2^16 at first
//   for (...) {
//     gd::Var<float> loss;
//     { gd::autocast half(gd::fp16); loss = loss_fn(net(x), y); }
//     scaler.minimize(opt, loss);                         // false: skipped (overflow), S halved
//   }
//
// Each step reads the gradients' finiteness back to the host (one read per device), as
// GradScaler's step does.
#pragma once
#include <cmath>
#include <limits>

#include "gradus/optim/clip.hpp"
#include "gradus/optim/optimizer.hpp"

namespace gradus::optim {

/// The schedule of a LossScaler's scale (PyTorch's GradScaler defaults).
struct LossScaleOptions {
  double initial_scale = 65536.0;  ///< S at the first step (2^16; a power of two keeps the division exact)
  double growth_factor = 2.0;      ///< S *= this after growth_interval finite steps in a row (> 1)
  double backoff_factor = 0.5;     ///< S *= this after a step with a non-finite gradient (in (0, 1))
  int64_t growth_interval = 2000;  ///< finite steps in a row before S grows (> 0)
};

/// Dynamic loss scaling (see the top of this file).
template <Real T = float>
class LossScaler {
 public:
  using value_type = T;

  explicit LossScaler(const LossScaleOptions& options = {}) : o_(options), scale_(options.initial_scale) {
    using detail::check_option;
    check_option(std::isfinite(o_.initial_scale) && o_.initial_scale > 0, "LossScaler", "initial_scale",
                 o_.initial_scale, "> 0");
    check_option(std::isfinite(o_.growth_factor) && o_.growth_factor > 1, "LossScaler", "growth_factor",
                 o_.growth_factor, "> 1");
    check_option(o_.backoff_factor > 0 && o_.backoff_factor < 1, "LossScaler", "backoff_factor", o_.backoff_factor,
                 "in (0, 1)");
    check_option(o_.growth_interval > 0, "LossScaler", "growth_interval", double(o_.growth_interval), "> 0");
  }

  /// The scale S the next backward pass uses.
  double scale() const { return scale_; }
  /// Steps skipped so far because a gradient was not finite.
  int64_t skipped_steps() const { return skipped_; }

  /// The backward pass of S · loss: adds S times the loss's gradient into every leaf's `.grad()`.
  void backward(const Var<T>& loss) {
    GRADUS_CHECK(value_error, loss.defined() && loss.size() == 1, "LossScaler::backward: the loss must be a scalar, got ",
                 loss.defined() ? loss.shape() : Shape{});
    const Device device = loss.value().device();
    if (!seed_.defined() || seed_.shape() != loss.shape() || seed_.device() != device) {
      seed_ = Tensor<T>::empty(loss.shape(), device);
      seed_scale_ = 0;
    }
    if (seed_scale_ != scale_) {  // refilled only when S changes (the backward pass never writes into it)
      seed_.fill_(T(scale_));
      seed_scale_ = scale_;
    }
    gradus::backward(loss, seed_);
  }

  /// Divides the gradients of `opt`'s parameters by S and, when all are finite, takes the
  /// optimizer's step; otherwise clears them and skips it. Then updates S. Returns whether the
  /// step was taken.
  bool step(Optimizer<T>& opt) {
    if (!unscale(opt)) {
      opt.zero_grad();
      skip();
      return false;
    }
    opt.step();
    grow();
    return true;
  }

  /// One training step: zero_grad(), backward(loss) scaled, step(opt). Returns whether the
  /// optimizer's step was taken (false: a gradient overflowed, S was reduced).
  bool minimize(Optimizer<T>& opt, const Var<T>& loss) {
    opt.zero_grad();
    backward(loss);
    return step(opt);
  }

  /// The parts of step() for callers that process gradients between them (clipping, averaging
  /// over ranks): divides every gradient of `opt`'s parameters by S and returns whether all are
  /// finite. Call skip() or grow() after, once per step.
  bool unscale(Optimizer<T>& opt) {
    const T inv = T(1.0 / scale_);
    for (const Var<T>& p : opt.params())
      if (Tensor<T>* g = p.grad_if_any()) g->assign(*g * inv);
    // Σ 0·g is 0 when every element is finite and NaN otherwise (0·inf is NaN); a norm would
    // overflow for large finite gradients
    for (const double z : detail::gradient_sums(opt.params(), "LossScaler", [](const auto& g) { return g * T(0); }))
      if (z != 0) return false;
    return true;
  }
  /// A step with a non-finite gradient: S *= backoff_factor.
  void skip() {
    scale_ *= o_.backoff_factor;
    good_ = 0;
    ++skipped_;
  }
  /// A finite step: S *= growth_factor after growth_interval of them in a row.
  void grow() {
    if (++good_ >= o_.growth_interval) {
      const double grown = scale_ * o_.growth_factor;
      if (std::isfinite(grown) && grown <= double(std::numeric_limits<T>::max())) scale_ = grown;
      good_ = 0;
    }
  }

  /// The scale, the count of finite steps since it last changed, and the steps skipped, for a
  /// checkpoint: "scale", "good_steps", "skipped_steps".
  StateDict<T> state_dict() const {
    return {{"scale", Tensor<T>::scalar(T(scale_))},
            {"good_steps", Tensor<T>::scalar(T(good_))},
            {"skipped_steps", Tensor<T>::scalar(T(skipped_))}};
  }
  /// Restores what state_dict() saved (a resumed run continues with the same S).
  void load_state_dict(const StateDict<T>& state) {
    GRADUS_CHECK(value_error, state.size() == 3, "LossScaler: load_state_dict: expected 3 entries, got ", state.size());
    const auto read = [&](const char* name) {
      const Tensor<T>& t = detail::state_entry(state, name, "LossScaler");
      GRADUS_CHECK(value_error, t.size() == 1, "LossScaler: load_state_dict: '", name, "' must hold one value, got shape ",
                   t.shape());
      return double(t.to(gradus::cpu).data()[0]);
    };
    const double s = read("scale"), g = read("good_steps"), k = read("skipped_steps");
    GRADUS_CHECK(value_error, std::isfinite(s) && s > 0, "LossScaler: load_state_dict: 'scale' must be > 0, got ", s);
    GRADUS_CHECK(value_error, g >= 0 && g == std::floor(g) && k >= 0 && k == std::floor(k),
                 "LossScaler: load_state_dict: 'good_steps' and 'skipped_steps' must be non-negative integers, got ",
                 g, " and ", k);
    scale_ = s;
    good_ = int64_t(g);
    skipped_ = int64_t(k);
  }

 private:
  LossScaleOptions o_;
  double scale_;
  int64_t good_ = 0, skipped_ = 0;
  Tensor<T> seed_;  // S in the loss's shape and device, kept between steps
  double seed_scale_ = 0;
};

}  // namespace gradus::optim

#if GRADUS_INSTANCES  // compiled once in libgradus with GRADUS_COMPILED (core/compiled.hpp)
namespace gradus::optim {
GRADUS_INSTANCE class LossScaler<float>;
GRADUS_INSTANCE_DOUBLE class LossScaler<double>;
}  // namespace gradus::optim
#endif
