// gradus/optim/optimizers.hpp — the update rules, with TensorFlow / Keras semantics and defaults:
// SGD (momentum, Nesterov), Adam, AdamW, AMSGrad, RMSProp, Adagrad, Adadelta, Adamax, Nadam.
//
// Each is built from its parameters and an aggregate of options:
//   gd::optim::Adam opt(params, {.lr = 1e-3});          // params: std::vector<gd::Var<float>>
// Designated initialisers must follow the declaration order of the fields (C++20). Scalars of a
// step (bias corrections, ...) are computed once per step in double; the elementwise updates run
// in the parameters' element type, in place.
#pragma once
#include <cmath>
#include <initializer_list>

#include "gradus/backend/backend.hpp"
#include "gradus/core/compiled.hpp"
#include "gradus/optim/optimizer.hpp"

namespace gradus::optim {

/// SGD options: plain gradient descent unless momentum > 0.
struct SGDOptions {
  double lr = 0.01;
  double momentum = 0;  ///< >= 0
  bool nesterov = false;
};

/// Gradient descent with optional (Nesterov) momentum, as TF's MomentumOptimizer kernel:
///   a <- momentum·a + g;   w <- w - lr·a        (nesterov: w <- w - lr·g - lr·momentum·a)
/// Without momentum: w <- w - lr·g. State: "momentum" (the accumulator a) when momentum > 0.
///   gd::optim::SGD opt(params, {.lr = 0.1, .momentum = 0.9, .nesterov = true});
template <Real T = float>
class SGD final : public Optimizer<T> {
 public:
  SGD(std::vector<Var<T>> params, SGDOptions o = {}) : Optimizer<T>("SGD", std::move(params), o.lr), o_(o) {
    detail::check_option(o.momentum >= 0 && std::isfinite(o.momentum), "SGD", "momentum", o.momentum, ">= 0");
    if (o.momentum > 0) this->add_slot("momentum");
  }
  SGD(std::initializer_list<Var<T>> params, SGDOptions o = {}) : SGD(std::vector<Var<T>>(params), o) {}

 private:
  void update(size_t i, Tensor<T>& w, const Tensor<T>& g) override {
    const T lr = T(this->lr());
    if (o_.momentum == 0) {
      w.assign(w - lr * g);
      return;
    }
    Tensor<T>& a = this->slot(0, i);
    a.assign(a * T(o_.momentum) + g);
    if (o_.nesterov)
      w.assign(w - lr * g - T(this->lr() * o_.momentum) * a);
    else
      w.assign(w - lr * a);
  }
  SGDOptions o_;
};

/// Adam options (TF1 AdamOptimizer defaults); `amsgrad` selects the AMSGrad variant.
struct AdamOptions {
  double lr = 1e-3;
  double beta1 = 0.9;    ///< in [0, 1)
  double beta2 = 0.999;  ///< in [0, 1)
  double epsilon = 1e-8;
  bool amsgrad = false;
};

/// AdamW options: Adam's (defaults included) plus the decoupled weight decay, in Keras' field
/// order with Keras' default decay.
struct AdamWOptions {
  double lr = 1e-3;
  double weight_decay = 0.004;  ///< >= 0
  double beta1 = 0.9;
  double beta2 = 0.999;
  double epsilon = 1e-8;
  bool amsgrad = false;
};

namespace detail {

/// Adam, AMSGrad and AdamW: one update rule.
///   m <- β1·m + (1-β1)·g;  v <- β2·v + (1-β2)·g²;  [v̂ <- max(v̂, v)]
///   w <- w - lr·wd·w - lr_t·m / (√v + ε),   lr_t = lr·√(1-β2^t) / (1-β1^t)
template <Real T>
class AdamRule : public Optimizer<T> {
 protected:
  AdamRule(const char* name, std::vector<Var<T>> params, double lr, double beta1, double beta2, double epsilon,
           bool amsgrad, double weight_decay)
      : Optimizer<T>(name, std::move(params), lr), beta1_(beta1), beta2_(beta2), epsilon_(epsilon),
        weight_decay_(weight_decay), amsgrad_(amsgrad) {
    check_unit(name, "beta1", beta1);
    check_unit(name, "beta2", beta2);
    check_epsilon(name, epsilon);
    check_option(weight_decay >= 0 && std::isfinite(weight_decay), name, "weight_decay", weight_decay, ">= 0");
    this->add_slot("m");
    this->add_slot("v");
    if (amsgrad) this->add_slot("vhat");
  }

 private:
  void prepare(int64_t t) override {
    const double n = double(t);
    alpha_ = this->lr() * std::sqrt(1 - std::pow(beta2_, n)) / (1 - std::pow(beta1_, n));
  }
  /// The parameters on a device whose backend has the one-pass update (the CPU's and the GPU's
  /// backends) go to it together, instead of three kernels per parameter (a GPU: one launch per
  /// 32 parameters); the others one by one.
  void update_all(const std::vector<size_t>& which, const std::vector<const Tensor<T>*>& grads) override {
    std::vector<size_t>& rest_which = rest_which_;  // kept between steps: no allocation in a steady state
    std::vector<const Tensor<T>*>& rest_grads = rest_grads_;
    std::vector<backend::AdamTensors<T>>& batch = batch_;
    rest_which.clear(), rest_grads.clear(), batch.clear();
    Device batch_device = gradus::cpu;
    const auto flush = [&] {
      if (batch.empty()) return;
      backend::run<backend::kernel::AdamUpdate, T>(batch_device, constants(), batch.data(), int(batch.size()));
      batch.clear();
    };
    for (size_t k = 0; k < which.size(); ++k) {
      const size_t i = which[k];
      Tensor<T>& w = this->weights(i);
      const Tensor<T>& g = *grads[k];
      Tensor<T>& m = this->slot(0, i);
      Tensor<T>& v = this->slot(1, i);
      const Device device = w.device();
      if (!backend::implements<backend::kernel::AdamUpdate, T>(device) || g.device() != device ||
          m.device() != device) {
        rest_which.push_back(i);
        rest_grads.push_back(&g);
        continue;
      }
      if (device != batch_device) flush();
      batch_device = device;
      Tensor<T>* vhat = amsgrad_ ? &this->slot(2, i) : nullptr;
      batch.push_back({w.device_data(), g.device_data(), m.device_data(), v.device_data(),
                       vhat ? vhat->device_data() : nullptr, w.size()});
    }
    flush();
    Optimizer<T>::update_all(rest_which, rest_grads);
  }
  /// A parameter that update_all could not batch — its device's backend has no one-pass update,
  /// or its gradient is on another device: the CPU's one-pass update on host copies of the
  /// weights, gradient and state, written back to where they live. It gives the bits the CPU's
  /// update gives. Written as Adam's expressions on the parameter's device instead, it compiled
  /// five expressions' CPU loops and GPU launchers into every program that uses Adam, whether
  /// or not any parameter ever came here: 1.3-2.6 s of g++ time for a header-only training program.
  void update(size_t i, Tensor<T>& w, const Tensor<T>& g) override {
    Tensor<T>& m = this->slot(0, i);
    Tensor<T>& v = this->slot(1, i);
    Tensor<T>* vhat = amsgrad_ ? &this->slot(2, i) : nullptr;
    Tensor<T> hw = w.to(gradus::cpu), hm = m.to(gradus::cpu), hv = v.to(gradus::cpu);
    const Tensor<T> hg = g.to(gradus::cpu);
    Tensor<T> hvhat = vhat ? vhat->to(gradus::cpu) : Tensor<T>();
    const backend::AdamTensors<T> p{hw.data(), hg.data(), hm.data(), hv.data(), vhat ? hvhat.data() : nullptr, w.size()};
    backend::run<backend::kernel::AdamUpdate, T>(gradus::cpu, constants(), &p, 1);
    w.copy_(hw), m.copy_(hm), v.copy_(hv);  // no copy where they are host tensors already
    if (vhat) vhat->copy_(hvhat);
  }
  /// This step's constants, as the one-pass update takes them.
  backend::AdamStep<T> constants() const {
    return {T(beta1_), T(1 - beta1_), T(beta2_), T(1 - beta2_), T(alpha_), T(epsilon_), T(this->lr() * weight_decay_)};
  }

  double beta1_, beta2_, epsilon_, weight_decay_;
  bool amsgrad_;
  double alpha_ = 0;
  std::vector<size_t> rest_which_;  // update_all's parameters that go one by one, and the batch
  std::vector<const Tensor<T>*> rest_grads_;
  std::vector<backend::AdamTensors<T>> batch_;
};

}  // namespace detail

/// Adam (Kingma & Ba 2015) as TF1's AdamOptimizer, the efficient form of the paper's §2:
///   lr_t = lr·√(1-β2^t)/(1-β1^t);  m <- β1·m + (1-β1)·g;  v <- β2·v + (1-β2)·g²;
///   w <- w - lr_t·m/(√v + ε).
/// With `.amsgrad = true`, √v is replaced by √v̂, v̂ <- max(v̂, v). State: "m", "v" (and "vhat").
/// The first step moves every weight by almost exactly lr, whatever the gradient's size.
///   gd::optim::Adam opt(params, {.lr = 1e-3});
template <Real T = float>
class Adam : public detail::AdamRule<T> {
 public:
  Adam(std::vector<Var<T>> params, AdamOptions o = {})
      : detail::AdamRule<T>("Adam", std::move(params), o.lr, o.beta1, o.beta2, o.epsilon, o.amsgrad, 0.0) {}
  Adam(std::initializer_list<Var<T>> params, AdamOptions o = {}) : Adam(std::vector<Var<T>>(params), o) {}
};

/// AMSGrad (Reddi et al. 2018) in Keras' form: Adam whose denominator uses the running maximum
/// v̂ <- max(v̂, v) of the second moment. `o.amsgrad` is ignored (always on).
template <Real T = float>
class AMSGrad : public detail::AdamRule<T> {
 public:
  AMSGrad(std::vector<Var<T>> params, AdamOptions o = {})
      : detail::AdamRule<T>("AMSGrad", std::move(params), o.lr, o.beta1, o.beta2, o.epsilon, true, 0.0) {}
  AMSGrad(std::initializer_list<Var<T>> params, AdamOptions o = {}) : AMSGrad(std::vector<Var<T>>(params), o) {}
};

/// AdamW (Loshchilov & Hutter 2019) as Keras: the weights decay by lr·weight_decay·w before
/// (and independently of) the Adam step, which reads the decayed-from weights w of this step:
///   w <- w - lr·wd·w - lr_t·m/(√v + ε).
///   gd::optim::AdamW opt(params, {.lr = 1e-3, .weight_decay = 0.01});
template <Real T = float>
class AdamW : public detail::AdamRule<T> {
 public:
  AdamW(std::vector<Var<T>> params, AdamWOptions o = {})
      : detail::AdamRule<T>("AdamW", std::move(params), o.lr, o.beta1, o.beta2, o.epsilon, o.amsgrad,
                            o.weight_decay) {}
  AdamW(std::initializer_list<Var<T>> params, AdamWOptions o = {}) : AdamW(std::vector<Var<T>>(params), o) {}
};

/// RMSProp options (Keras defaults).
struct RMSPropOptions {
  double lr = 1e-3;
  double rho = 0.9;       ///< in [0, 1)
  double momentum = 0;    ///< >= 0
  double epsilon = 1e-7;  ///< added under the square root
  bool centered = false;  ///< divide by the estimated variance instead of the raw second moment
};

/// RMSProp (Tieleman & Hinton 2012) as Keras (accumulators start at zero):
///   ms <- ρ·ms + (1-ρ)·g²;  [mg <- ρ·mg + (1-ρ)·g;  ms' = ms - mg²]
///   Δ = lr·g/√(ms' + ε);  with momentum: mom <- momentum·mom + Δ, w <- w - mom;  else w <- w - Δ.
/// State: "ms", "mg" (centered), "momentum" (momentum > 0).
template <Real T = float>
class RMSProp final : public Optimizer<T> {
 public:
  RMSProp(std::vector<Var<T>> params, RMSPropOptions o = {})
      : Optimizer<T>("RMSProp", std::move(params), o.lr), o_(o) {
    detail::check_unit("RMSProp", "rho", o.rho);
    detail::check_option(o.momentum >= 0 && std::isfinite(o.momentum), "RMSProp", "momentum", o.momentum, ">= 0");
    detail::check_epsilon("RMSProp", o.epsilon);
    this->add_slot("ms");
    if (o.centered) mg_ = this->add_slot("mg");
    if (o.momentum > 0) mom_ = this->add_slot("momentum");
  }
  RMSProp(std::initializer_list<Var<T>> params, RMSPropOptions o = {}) : RMSProp(std::vector<Var<T>>(params), o) {}

 private:
  void update(size_t i, Tensor<T>& w, const Tensor<T>& g) override {
    const T rho = T(o_.rho), lr = T(this->lr()), eps = T(o_.epsilon);
    Tensor<T>& ms = this->slot(0, i);
    ms.assign(rho * ms + T(1 - o_.rho) * square(g));
    if (o_.centered) {
      Tensor<T>& mg = this->slot(mg_, i);
      mg.assign(rho * mg + T(1 - o_.rho) * g);
      apply(i, w, lr * g / sqrt(ms - square(mg) + eps));
    } else {
      apply(i, w, lr * g / sqrt(ms + eps));
    }
  }
  template <class E>
  void apply(size_t i, Tensor<T>& w, const E& delta) {
    if (o_.momentum > 0) {
      Tensor<T>& mom = this->slot(mom_, i);
      mom.assign(T(o_.momentum) * mom + delta);
      w.assign(w - mom);
    } else {
      w.assign(w - delta);
    }
  }
  RMSPropOptions o_;
  size_t mg_ = 0, mom_ = 0;
};

/// Adagrad options: TF1's initial accumulator, Keras' epsilon.
struct AdagradOptions {
  double lr = 1e-3;
  double initial_accumulator_value = 0.1;  ///< >= 0
  double epsilon = 1e-7;                   ///< added under the square root
};

/// Adagrad (Duchi, Hazan & Singer 2011) as Keras:
///   acc <- acc + g²;  w <- w - lr·g/√(acc + ε),   acc starting at initial_accumulator_value.
/// State: "accumulator".
template <Real T = float>
class Adagrad final : public Optimizer<T> {
 public:
  Adagrad(std::vector<Var<T>> params, AdagradOptions o = {})
      : Optimizer<T>("Adagrad", std::move(params), o.lr), o_(o) {
    const double a = o.initial_accumulator_value;
    detail::check_option(a >= 0 && std::isfinite(a), "Adagrad", "initial_accumulator_value", a, ">= 0");
    detail::check_epsilon("Adagrad", o.epsilon);
    detail::check_option(a > 0 || o.epsilon > 0, "Adagrad", "epsilon", o.epsilon,
                         "> 0 when initial_accumulator_value is 0");
    this->add_slot("accumulator", T(a));
  }
  Adagrad(std::initializer_list<Var<T>> params, AdagradOptions o = {}) : Adagrad(std::vector<Var<T>>(params), o) {}

 private:
  void update(size_t i, Tensor<T>& w, const Tensor<T>& g) override {
    Tensor<T>& acc = this->slot(0, i);
    acc.assign(acc + square(g));
    w.assign(w - T(this->lr()) * g / sqrt(acc + T(o_.epsilon)));
  }
  AdagradOptions o_;
};

/// Adadelta options (Keras 2 defaults: lr 1.0 recovers Zeiler's rule exactly).
struct AdadeltaOptions {
  double lr = 1.0;
  double rho = 0.95;      ///< in [0, 1)
  double epsilon = 1e-7;  ///< > 0
};

/// Adadelta (Zeiler 2012) as Keras:
///   Eg <- ρ·Eg + (1-ρ)·g²;  Δ = √(Ex + ε)/√(Eg + ε)·g;  Ex <- ρ·Ex + (1-ρ)·Δ²;  w <- w - lr·Δ.
/// State: "accum_grad" (Eg), "accum_update" (Ex).
template <Real T = float>
class Adadelta final : public Optimizer<T> {
 public:
  Adadelta(std::vector<Var<T>> params, AdadeltaOptions o = {})
      : Optimizer<T>("Adadelta", std::move(params), o.lr), o_(o) {
    detail::check_unit("Adadelta", "rho", o.rho);
    detail::check_option(o.epsilon > 0 && std::isfinite(o.epsilon), "Adadelta", "epsilon", o.epsilon, "> 0");
    this->add_slot("accum_grad");
    this->add_slot("accum_update");
  }
  Adadelta(std::initializer_list<Var<T>> params, AdadeltaOptions o = {}) : Adadelta(std::vector<Var<T>>(params), o) {}

 private:
  void update(size_t i, Tensor<T>& w, const Tensor<T>& g) override {
    const T rho = T(o_.rho), rest = T(1 - o_.rho), eps = T(o_.epsilon);
    Tensor<T>& eg = this->slot(0, i);
    Tensor<T>& ex = this->slot(1, i);
    eg.assign(rho * eg + rest * square(g));
    // Δ is recomputed rather than stored: w reads Ex before Ex is updated.
    w.assign(w - T(this->lr()) * (sqrt(ex + eps) / sqrt(eg + eps) * g));
    ex.assign(rho * ex + rest * square(sqrt(ex + eps) / sqrt(eg + eps) * g));
  }
  AdadeltaOptions o_;
};

/// Adamax options (Keras defaults).
struct AdamaxOptions {
  double lr = 1e-3;
  double beta1 = 0.9;
  double beta2 = 0.999;
  double epsilon = 1e-7;
};

/// Adamax (Kingma & Ba 2015, §7.1) as Keras:
///   m <- β1·m + (1-β1)·g;  u <- max(β2·u, |g|);  w <- w - lr/(1-β1^t)·m/(u + ε).
/// State: "m", "u".
template <Real T = float>
class Adamax final : public Optimizer<T> {
 public:
  Adamax(std::vector<Var<T>> params, AdamaxOptions o = {})
      : Optimizer<T>("Adamax", std::move(params), o.lr), o_(o) {
    detail::check_unit("Adamax", "beta1", o.beta1);
    detail::check_unit("Adamax", "beta2", o.beta2);
    detail::check_epsilon("Adamax", o.epsilon);
    this->add_slot("m");
    this->add_slot("u");
  }
  Adamax(std::initializer_list<Var<T>> params, AdamaxOptions o = {}) : Adamax(std::vector<Var<T>>(params), o) {}

 private:
  void prepare(int64_t t) override { step_lr_ = this->lr() / (1 - std::pow(o_.beta1, double(t))); }
  void update(size_t i, Tensor<T>& w, const Tensor<T>& g) override {
    Tensor<T>& m = this->slot(0, i);
    Tensor<T>& u = this->slot(1, i);
    m.assign(T(o_.beta1) * m + T(1 - o_.beta1) * g);
    u.assign(maximum(T(o_.beta2) * u, abs(g)));
    w.assign(w - T(step_lr_) * m / (u + T(o_.epsilon)));
  }
  AdamaxOptions o_;
  double step_lr_ = 0;
};

/// Nadam options (Keras defaults).
struct NadamOptions {
  double lr = 1e-3;
  double beta1 = 0.9;
  double beta2 = 0.999;
  double epsilon = 1e-7;
};

/// Nadam (Dozat 2016) as Keras, with the momentum schedule μ_t = β1·(1 - 0.5·0.96^t):
///   m <- β1·m + (1-β1)·g;  v <- β2·v + (1-β2)·g²;
///   m̂ = μ_{t+1}·m/(1 - Π_{i≤t+1} μ_i) + (1-μ_t)·g/(1 - Π_{i≤t} μ_i);  v̂ = v/(1-β2^t);
///   w <- w - lr·m̂/(√v̂ + ε).
/// State: "m", "v" (the product of the μ_i follows from the step count).
template <Real T = float>
class Nadam final : public Optimizer<T> {
 public:
  Nadam(std::vector<Var<T>> params, NadamOptions o = {}) : Optimizer<T>("Nadam", std::move(params), o.lr), o_(o) {
    detail::check_unit("Nadam", "beta1", o.beta1);
    detail::check_unit("Nadam", "beta2", o.beta2);
    detail::check_epsilon("Nadam", o.epsilon);
    this->add_slot("m");
    this->add_slot("v");
  }
  Nadam(std::initializer_list<Var<T>> params, NadamOptions o = {}) : Nadam(std::vector<Var<T>>(params), o) {}

 private:
  double mu(int64_t t) const { return o_.beta1 * (1 - 0.5 * std::pow(0.96, double(t))); }
  void prepare(int64_t t) override {
    if (u_product_step_ != t - 1) {  // after load_state_dict: the same products, in the same order
      u_product_ = 1;
      for (int64_t i = 1; i < t; ++i) u_product_ *= mu(i);
    }
    u_product_ *= mu(t);
    u_product_step_ = t;
    const double next_product = u_product_ * mu(t + 1);
    coef_m_ = this->lr() * mu(t + 1) / (1 - next_product);
    coef_g_ = this->lr() * (1 - mu(t)) / (1 - u_product_);
    coef_v_ = 1 / (1 - std::pow(o_.beta2, double(t)));
  }
  void update(size_t i, Tensor<T>& w, const Tensor<T>& g) override {
    Tensor<T>& m = this->slot(0, i);
    Tensor<T>& v = this->slot(1, i);
    m.assign(T(o_.beta1) * m + T(1 - o_.beta1) * g);
    v.assign(T(o_.beta2) * v + T(1 - o_.beta2) * square(g));
    w.assign(w - (T(coef_m_) * m + T(coef_g_) * g) / (sqrt(v * T(coef_v_)) + T(o_.epsilon)));
  }
  NadamOptions o_;
  double u_product_ = 1;
  int64_t u_product_step_ = 0;
  double coef_m_ = 0, coef_g_ = 0, coef_v_ = 0;
};

}  // namespace gradus::optim

#if GRADUS_INSTANCES  // compiled once in libgradus with GRADUS_COMPILED (core/compiled.hpp)
namespace gradus::optim {
GRADUS_INSTANCE class SGD<float>;
GRADUS_INSTANCE_DOUBLE class SGD<double>;
GRADUS_INSTANCE class detail::AdamRule<float>;
GRADUS_INSTANCE_DOUBLE class detail::AdamRule<double>;
GRADUS_INSTANCE class Adam<float>;
GRADUS_INSTANCE_DOUBLE class Adam<double>;
GRADUS_INSTANCE class AMSGrad<float>;
GRADUS_INSTANCE_DOUBLE class AMSGrad<double>;
GRADUS_INSTANCE class AdamW<float>;
GRADUS_INSTANCE_DOUBLE class AdamW<double>;
GRADUS_INSTANCE class RMSProp<float>;
GRADUS_INSTANCE_DOUBLE class RMSProp<double>;
GRADUS_INSTANCE class Adagrad<float>;
GRADUS_INSTANCE_DOUBLE class Adagrad<double>;
GRADUS_INSTANCE class Adadelta<float>;
GRADUS_INSTANCE_DOUBLE class Adadelta<double>;
GRADUS_INSTANCE class Adamax<float>;
GRADUS_INSTANCE_DOUBLE class Adamax<double>;
GRADUS_INSTANCE class Nadam<float>;
GRADUS_INSTANCE_DOUBLE class Nadam<double>;
}  // namespace gradus::optim
#endif
