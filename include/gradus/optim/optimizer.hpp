// gradus/optim/optimizer.hpp — what every optimizer shares: its parameters, per-parameter state
// tensors ("slots"), the iteration count, the learning rate, and checkpointable state.
//
// A concrete optimizer (optim/optimizers.hpp) names its slots, computes the step's scalars once
// in `prepare(t)` and writes the update of one parameter in `update(i, w, g)` as in-place
// expressions (`w.assign(w - lr * m)`), so a step allocates nothing: the slots are allocated
// once, in the constructor.
#pragma once
#include <cmath>
#include <cstdint>
#include <initializer_list>
#include <string>
#include <utility>
#include <vector>

#include "gradus/autodiff/backward.hpp"
#include "gradus/core/compiled.hpp"
#include "gradus/core/error.hpp"
#include "gradus/core/tensor.hpp"
#include "gradus/ops/elementwise.hpp"

namespace gradus::optim {

/// Named state tensors, in a fixed order: what an optimizer (or a moving average) saves in a
/// checkpoint and restores from it. Names look like "step", "param0/m", "param1/v".
template <Real T>
using StateDict = std::vector<std::pair<std::string, Tensor<T>>>;

namespace detail {

/// Throws value_error "<who>: <field> must be <expected>, got <v>" unless `ok`.
inline void check_option(bool ok, const char* who, const char* field, double v, const char* expected) {
  GRADUS_CHECK(value_error, ok, who, ": ", field, " must be ", expected, ", got ", v);
}
inline void check_lr(const char* who, double lr) { check_option(lr >= 0 && std::isfinite(lr), who, "lr", lr, ">= 0"); }
inline void check_unit(const char* who, const char* field, double v) {
  check_option(v >= 0 && v < 1, who, field, v, "in [0, 1)");
}
inline void check_epsilon(const char* who, double eps) {
  check_option(eps >= 0 && std::isfinite(eps), who, "epsilon", eps, ">= 0");
}

/// The entry `name` of `state`, or value_error naming what is missing.
template <class T>
const Tensor<T>& state_entry(const StateDict<T>& state, const std::string& name, const char* who) {
  for (const auto& [key, t] : state)
    if (key == name) {
      GRADUS_CHECK(value_error, t.defined(), who, ": load_state_dict: entry '", name, "' is an undefined tensor");
      return t;
    }
  ::gradus::detail::throw_error<value_error>({who, ": load_state_dict: missing entry '", name, "'"});
}

/// Checks that a list of Vars holds distinct, defined, trainable (or frozen) leaves.
template <class T>
void check_vars(const std::vector<Var<T>>& vars, const char* who, const char* what) {
  for (size_t i = 0; i < vars.size(); ++i) {
    GRADUS_CHECK(value_error, vars[i].defined(), who, ": ", what, " ", i, " is an undefined Var");
    GRADUS_CHECK(value_error, vars[i].requires_grad() || vars[i].frozen(), who, ": ", what, " ", i,
                 " does not require a gradient (a constant Var cannot be trained)");
    for (size_t j = 0; j < i; ++j)
      GRADUS_CHECK(value_error, vars[j].node() != vars[i].node(), who, ": ", what, " ", i, " is the same Var as ",
                   what, " ", j);
  }
}


}  // namespace detail

/// Base of every optimizer over a fixed list of trainable Vars of element type T.
///   gd::optim::Adam opt(params, {.lr = 1e-3});
///   for (...) { gd::Var<float> loss = ...; opt.minimize(loss); }
/// A parameter that has received no gradient since its last zero_grad is skipped by `step()`
/// (its weights and state stay as they are), as TensorFlow skips variables whose gradient is None;
/// so is a frozen one (Var::set_requires_grad(false), Module::freeze), whatever gradient it is given.
/// A parameter of a lazy layer (Dense without `.in`) may be given before the layer has its shape:
/// its state is made anew at the shape it has at the first step.
template <Real T = float>
class Optimizer {
 public:
  using value_type = T;

  virtual ~Optimizer() = default;
  Optimizer(const Optimizer&) = delete;  // the state tensors belong to one optimizer
  Optimizer& operator=(const Optimizer&) = delete;
  Optimizer(Optimizer&&) noexcept = default;
  Optimizer& operator=(Optimizer&&) noexcept = default;

  /// Applies one update to every parameter from its `.grad()`, in place; `iterations()` counts it.
  void step() {
    apply([&](size_t i) -> const Tensor<T>* { return params_[i].grad_if_any(); });
  }
  /// Applies one update from gradients computed elsewhere (tf.train.Optimizer.apply_gradients):
  /// `grads[i]` is parameter i's gradient, of its shape and on its device; an undefined tensor
  /// skips that parameter, as step() skips one without gradient. The parameters' `.grad()` is
  /// neither read nor changed. shape_error / device_error name the parameter that does not match;
  /// nothing changes when a check fails.
  ///   std::vector<gd::Tensor<float>> g = gd::gradients(loss, opt.params());
  ///   gd::optim::clip_by_global_norm(g, 5.0);   // or any other processing
  ///   opt.apply_gradients(g);
  void apply_gradients(const std::vector<Tensor<T>>& grads) {
    GRADUS_CHECK(shape_error, grads.size() == params_.size(), name_, ": apply_gradients: expected ", params_.size(),
                 " gradients (one per parameter; an undefined tensor skips one), got ", grads.size());
    for (size_t i = 0; i < params_.size(); ++i) check_gradient(i, grads[i]);
    apply([&](size_t i) { return grads[i].defined() ? &grads[i] : nullptr; });
  }
  /// As above from (parameter, gradient) pairs: each parameter must be one of params(), at most
  /// once; parameters not named are skipped.
  ///   opt.apply_gradients({{w, gw}, {b, gb}});
  void apply_gradients(const std::vector<std::pair<Var<T>, Tensor<T>>>& params_and_grads) {
    std::vector<const Tensor<T>*> by_param(params_.size(), nullptr);
    for (size_t k = 0; k < params_and_grads.size(); ++k) {
      const auto& [var, grad] = params_and_grads[k];
      size_t i = 0;
      while (i < params_.size() && !(var.defined() && params_[i].node() == var.node())) ++i;
      GRADUS_CHECK(value_error, i < params_.size(), name_, ": apply_gradients: pair ", k, " names a Var of shape ",
                   var.defined() ? var.shape() : Shape{}, " that is not a parameter of this optimizer");
      GRADUS_CHECK(value_error, by_param[i] == nullptr, name_, ": apply_gradients: parameter ", i,
                   " is given twice (pair ", k, ")");
      GRADUS_CHECK(value_error, grad.defined(), name_, ": apply_gradients: the gradient of pair ", k, " is undefined");
      check_gradient(i, grad);
      by_param[i] = &grad;
    }
    apply([&](size_t i) { return by_param[i]; });
  }
  /// The braced form of the pairs: chosen over the vector of gradients for `{{w, gw}}`.
  void apply_gradients(std::initializer_list<std::pair<Var<T>, Tensor<T>>> params_and_grads) {
    apply_gradients(std::vector<std::pair<Var<T>, Tensor<T>>>(params_and_grads));
  }
  /// Resets every parameter's gradient (see Var::zero_grad).
  void zero_grad() {
    for (auto& p : params_) p.zero_grad();
  }
  /// One training step on an already computed loss, in this order: zero_grad(), then
  /// gd::backward(loss) (so `.grad()` holds this loss's gradient alone), then step().
  void minimize(const Var<T>& loss) {
    zero_grad();
    gradus::backward(loss);
    step();
  }
  /// As above for a differentiable expression (materialised first).
  template <Expression E>
    requires(!is_var_v<E> && is_differentiable_v<E>)
  void minimize(const E& loss) {
    minimize(Var<T>(loss));
  }

  /// The learning rate the next step uses.
  double lr() const { return lr_; }
  /// Sets the learning rate (>= 0), e.g. from a schedule: `opt.set_lr(sched(opt.iterations()))`.
  void set_lr(double lr) {
    detail::check_lr(name_, lr);
    lr_ = lr;
  }
  /// Steps taken so far (TF's `iterations`); the next step is number iterations() + 1.
  int64_t iterations() const { return step_; }
  /// The parameters, in the order their state is numbered ("param0", "param1", ...).
  const std::vector<Var<T>>& params() const { return params_; }
  /// "Adam", "SGD", ...: the prefix of this optimizer's error messages.
  const char* name() const { return name_; }

  /// A snapshot (deep copies) of the state: "step" (the iteration count, a scalar; exact up to
  /// 2^24 steps in float) and "param<i>/<slot>" for every state tensor, in a fixed order.
  /// Hyperparameters, the learning rate included, are not state: they come from the options.
  StateDict<T> state_dict() const {
    StateDict<T> out;
    out.reserve(1 + slots_.size() * params_.size());
    out.emplace_back("step", Tensor<T>::scalar(T(step_)));
    for (size_t i = 0; i < params_.size(); ++i)
      for (size_t k = 0; k < slots_.size(); ++k) {
        const Tensor<T>& t = slots_[k].tensors[i];
        out.emplace_back(slot_key(k, i), t.shape() == params_[i].shape() ? t.clone()
                                                                          : Tensor<T>::full(params_[i].shape(), slots_[k].init));
      }
    return out;
  }
  /// Restores a state saved by `state_dict()` of an optimizer of the same kind over parameters of
  /// the same shapes, exactly: continuing afterwards gives bit-identical weights. Every entry must
  /// be present with its shape, and no other entry may be; nothing changes when a check fails.
  void load_state_dict(const StateDict<T>& state) {
    GRADUS_CHECK(value_error, state.size() == 1 + slots_.size() * params_.size(), name_,
                 ": load_state_dict: expected ", 1 + slots_.size() * params_.size(), " entries (step and ",
                 slots_.size(), " slots for each of ", params_.size(), " parameters), got ", state.size());
    const Tensor<T>& step = detail::state_entry(state, "step", name_);
    GRADUS_CHECK(value_error, step.size() == 1, name_, ": load_state_dict: 'step' must hold one value, got shape ",
                 step.shape());
    const T s = step.data()[0];
    GRADUS_CHECK(value_error, s >= 0 && s == std::floor(s) && s <= T(9007199254740992.0), name_,
                 ": load_state_dict: 'step' must be a non-negative integer up to 2^53, got ", s);
    for (size_t i = 0; i < params_.size(); ++i)
      for (size_t k = 0; k < slots_.size(); ++k) {
        const Tensor<T>& src = detail::state_entry(state, slot_key(k, i), name_);
        GRADUS_CHECK(shape_error, src.shape() == params_[i].shape(), name_, ": load_state_dict: '", slot_key(k, i),
                     "' has shape ", src.shape(), " but parameter ", i, " has shape ", params_[i].shape());
      }
    step_ = int64_t(s);
    for (size_t i = 0; i < params_.size(); ++i) {
      fit_slots(i);
      for (size_t k = 0; k < slots_.size(); ++k)
        slots_[k].tensors[i].copy_(detail::state_entry(state, slot_key(k, i), name_));
    }
  }

 protected:
  /// `name` appears in error messages; it must be a string literal.
  Optimizer(const char* name, std::vector<Var<T>> params, double lr) : name_(name), params_(std::move(params)) {
    detail::check_vars(params_, name_, "parameter");
    set_lr(lr);
  }

  /// Adds a state tensor per parameter, filled with `init`; returns the slot's index.
  size_t add_slot(std::string slot_name, T init = T(0)) {
    Slot s{std::move(slot_name), init, {}};
    s.tensors.reserve(params_.size());
    for (const auto& p : params_) s.tensors.push_back(Tensor<T>::full(p.shape(), init).to(p.value().device()));
    slots_.push_back(std::move(s));
    return slots_.size() - 1;
  }
  /// Moves parameter i's state to the parameter's device when the parameter moved there (a
  /// model moved with `module.to(device)` after its optimizer was made): state follows its
  /// parameter, as in PyTorch.
  void follow_device(size_t i) {
    const Device d = params_[i].value().device();
    for (Slot& s : slots_)
      if (s.tensors[i].device() != d) [[unlikely]]
        s.tensors[i] = s.tensors[i].to(d);
  }
  /// State tensor `k` of parameter `i`.
  Tensor<T>& slot(size_t k, size_t i) { return slots_[k].tensors[i]; }

  /// Computes the scalars of step number t (1 for the first step) before the updates run.
  virtual void prepare(int64_t /*t*/) {}
  /// Updates parameter i's weights `w` in place from its gradient `g`.
  virtual void update(size_t i, Tensor<T>& w, const Tensor<T>& g) = 0;
  /// Updates the parameters `which` (ascending), parameter which[k] from grads[k]: update() for
  /// each, unless the rule can do them together (Adam: one GPU kernel for up to 32).
  virtual void update_all(const std::vector<size_t>& which, const std::vector<const Tensor<T>*>& grads) {
    for (size_t k = 0; k < which.size(); ++k) update(which[k], params_[which[k]].value(), *grads[k]);
  }
  /// Parameter i's weights.
  Tensor<T>& weights(size_t i) { return params_[i].value(); }

 private:
  struct Slot {
    std::string name;
    T init;
    std::vector<Tensor<T>> tensors;
  };
  /// A parameter whose shape changed since its state was made (a lazy layer's kernel, [0, out]
  /// until the layer's first input) gets fresh state of its new shape.
  void fit_slots(size_t i) {
    for (Slot& s : slots_)
      if (s.tensors[i].shape() != params_[i].shape()) s.tensors[i] = Tensor<T>::full(params_[i].shape(), s.init);
  }
  /// One step: parameter i is updated from `grad_of(i)` (a const Tensor<T>*), skipped when null.
  template <class G>
  void apply(G&& grad_of) {
    const int64_t t = ++step_;
    prepare(t);
    which_.clear();  // kept between steps: a steady-state step allocates nothing
    grads_.clear();
    for (size_t i = 0; i < params_.size(); ++i)
      if (const Tensor<T>* g = grad_of(i); g && !params_[i].frozen()) {
        fit_slots(i);
        follow_device(i);
        which_.push_back(i);
        grads_.push_back(g);
      }
    update_all(which_, grads_);
  }
  /// Checks a gradient given for parameter i (undefined: none): its shape and device.
  void check_gradient(size_t i, const Tensor<T>& g) const {
    if (!g.defined()) return;
    GRADUS_CHECK(shape_error, g.shape() == params_[i].shape(), name_, ": apply_gradients: the gradient of parameter ",
                 i, " has shape ", g.shape(), " but the parameter has shape ", params_[i].shape());
    GRADUS_CHECK(device_error, g.device() == params_[i].value().device(), name_,
                 ": apply_gradients: the gradient of parameter ", i, " is on ", g.device(), " but the parameter is on ",
                 params_[i].value().device());
  }
  std::string slot_key(size_t k, size_t i) const { return "param" + std::to_string(i) + "/" + slots_[k].name; }

  const char* name_;
  std::vector<Var<T>> params_;
  std::vector<Slot> slots_;
  double lr_ = 0;
  int64_t step_ = 0;
  std::vector<size_t> which_;  // a step's parameters with a gradient, and their gradients
  std::vector<const Tensor<T>*> grads_;
};

}  // namespace gradus::optim

#if GRADUS_INSTANCES  // compiled once in libgradus with GRADUS_COMPILED (core/compiled.hpp)
namespace gradus::optim {
GRADUS_INSTANCE class Optimizer<float>;
GRADUS_INSTANCE_DOUBLE class Optimizer<double>;
}  // namespace gradus::optim
#endif
