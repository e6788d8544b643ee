// gradus/train/moving_average.hpp — ExponentialMovingAverage: a shadow copy of every parameter,
// moved toward the parameter after each training step (tf.train.ExponentialMovingAverage run with
// the train op, `tf.group(train_step, ema_op)`), saved in and restored from fit's and Session's
// checkpoints, and swapped into the model for evaluation, prediction or export.
//
//   gd::train::ExponentialMovingAverage ema({.decay = 0.999});
//   gd::train::fit(net, opt, loss, train, {.epochs = 10, .hooks = {&ema}, .run_dir = "runs/ema"});
//   {
//     auto averaged = ema.use_averages();          // the parameters hold their averages ...
//     gd::train::evaluate(net, loss, test, {.metrics = {&acc}});
//   }                                              // ... and their trained values again
//
// Each step n (the global step after it) moves every shadow s toward its parameter p as
// TensorFlow does: s -= (1 - d) (s - p), with d = min(decay, (1 + n) / (10 + n)) when
// `num_updates` is on (TensorFlow's num_updates = global_step), else d = decay. A fresh run's
// shadows start as the parameters' values when the session is created; a resumed run's come from
// the checkpoint, so a resumed run's averages are bit-identical to an uninterrupted run's.
#pragma once
#include <algorithm>
#include <cstdint>
#include <string>
#include <type_traits>
#include <utility>
#include <variant>
#include <vector>

#include "gradus/core/compiled.hpp"
#include "gradus/train/hooks.hpp"
#include "gradus/train/session.hpp"

namespace gradus::train {

/// Options of ExponentialMovingAverage.
struct ExponentialMovingAverageOptions {
  double decay = 0.999;     ///< in [0, 1]: the weight of the old average at each step
  bool num_updates = true;  ///< d = min(decay, (1 + n) / (10 + n)) at global step n (TensorFlow's num_updates)
  std::string key = "ema";  ///< its checkpoint entries go under "hooks/<key>/"
};

/// Shadow averages of a model's parameters, updated after each step (see the file comment).
class ExponentialMovingAverage : public Hook {
 public:
  explicit ExponentialMovingAverage(const ExponentialMovingAverageOptions& options = {});

  GRADUS_INLINE_DECL void begin(Session& s) override;
  GRADUS_INLINE_DECL void after_create_session(Session& s) override;
  GRADUS_INLINE_DECL void after_step(Session& s, const StepResult& r) override;
  std::string state_key() const override { return o_.key; }
  GRADUS_INLINE_DECL void save_state(io::TensorList& tensors, io::Metadata& metadata, const std::string& prefix) const override;
  GRADUS_INLINE_DECL void restore_state(const io::Safetensors& checkpoint, const std::string& prefix) override;

  /// The decay of global step `n`.
  double decay_at(int64_t n) const;
  /// The average of the parameter called `name` (its path, as named_parameters gives it); a
  /// value_error names an unknown one.
  const AnyTensor& average(const std::string& name) const;
  /// Every (parameter path, average), in the model's parameter order.
  const std::vector<std::pair<std::string, AnyTensor>>& averages() const { return shadows_; }
  /// Steps averaged so far (those of earlier runs that a resumed run restored included).
  int64_t updates() const { return updates_; }

  /// While it lives, every averaged parameter of the model holds its average; its destructor
  /// puts the trained values back. Evaluate, predict, save or export inside it.
  class Swap {
   public:
    explicit Swap(ExponentialMovingAverage& ema);
    ~Swap();
    Swap(const Swap&) = delete;
    Swap& operator=(const Swap&) = delete;

   private:
    ExponentialMovingAverage& ema_;
    std::vector<AnyTensor> trained_;
  };
  /// Swaps the averages in until the returned scope ends.
  [[nodiscard]] Swap use_averages() { return Swap(*this); }

 private:
  ExponentialMovingAverageOptions o_;
  std::vector<std::pair<std::string, AnyTensor>> params_;   // the model's parameters (their storage)
  std::vector<std::pair<std::string, AnyTensor>> shadows_;  // same order
  bool restored_ = false;
  int64_t updates_ = 0;
};

#if GRADUS_DEFINE_COMPILED  // libgradus holds these with GRADUS_COMPILED (core/compiled.hpp)

GRADUS_INLINE ExponentialMovingAverage::ExponentialMovingAverage(const ExponentialMovingAverageOptions& options)
    : o_(options) {
  GRADUS_CHECK(value_error, o_.decay >= 0 && o_.decay <= 1, "ExponentialMovingAverage: decay must be in [0, 1], got ",
               o_.decay);
  GRADUS_CHECK(value_error, !o_.key.empty(), "ExponentialMovingAverage: key must not be empty");
}

GRADUS_INLINE void ExponentialMovingAverage::begin(Session&) {
  restored_ = false;
  updates_ = 0;
}

GRADUS_INLINE void ExponentialMovingAverage::after_create_session(Session& s) {
  params_.clear();
  for (const NamedTensor& p : s.parameters())
    if (!std::holds_alternative<Tensor<int64_t>>(p.value)) params_.emplace_back(p.name, p.value);
  if (!restored_) {  // a fresh run: the averages start as the parameters
    shadows_.clear();
    for (const auto& [name, value] : params_) shadows_.emplace_back(name, detail::clone_any(value));
    return;
  }
  // a resumed run: one restored average per parameter, on its parameter's device
  GRADUS_CHECK(io_error, shadows_.size() == params_.size(), "ExponentialMovingAverage: the checkpoint holds ",
               shadows_.size(), " averages for a model of ", params_.size(), " parameters");
  std::vector<std::pair<std::string, AnyTensor>> placed;
  for (const auto& param : params_) {  // not a structured binding: clang 14 cannot capture one
    const std::string& name = param.first;
    auto it = std::find_if(shadows_.begin(), shadows_.end(), [&](const auto& s) { return s.first == name; });
    GRADUS_CHECK(io_error, it != shadows_.end(), "ExponentialMovingAverage: the checkpoint holds no average of '", name, "'");
    AnyTensor shadow = detail::clone_any(param.second);
    detail::copy_any(shadow, it->second, "ExponentialMovingAverage: the saved averages of '" + name + "'");
    placed.emplace_back(name, std::move(shadow));
  }
  shadows_ = std::move(placed);
}

GRADUS_INLINE double ExponentialMovingAverage::decay_at(int64_t n) const {
  return o_.num_updates ? std::min(o_.decay, (1.0 + double(n)) / (10.0 + double(n))) : o_.decay;
}

GRADUS_INLINE void ExponentialMovingAverage::after_step(Session&, const StepResult& r) {
  const double d = decay_at(r.global_step);
  for (size_t i = 0; i < params_.size(); ++i)
    std::visit(
        [&](const auto& p) {
          using Tn = std::remove_cvref_t<decltype(p)>;
          if constexpr (!std::is_same_v<Tn, Tensor<int64_t>>) {
            using T = typename Tn::value_type;
            Tn s = std::get<Tn>(shadows_[i].second);
            s.assign(s - T(1 - d) * (s - p));  // TensorFlow's update, in place
          }
        },
        params_[i].second);
  ++updates_;
}

GRADUS_INLINE void ExponentialMovingAverage::save_state(io::TensorList& tensors, io::Metadata& metadata,
                                                      const std::string& prefix) const {
  tensors.emplace_back(prefix + "updates", Tensor<int64_t>::from({updates_}));
  for (const auto& [name, t] : shadows_) tensors.emplace_back(prefix + "average/" + name, t);
  metadata[prefix + "decay"] = gradus::detail::str(o_.decay);
}

GRADUS_INLINE void ExponentialMovingAverage::restore_state(const io::Safetensors& ckpt, const std::string& prefix) {
  const Tensor<int64_t> n = ckpt.get<int64_t>(prefix + "updates");
  GRADUS_CHECK(io_error, n.size() == 1 && n.data()[0] >= 0, "ExponentialMovingAverage: checkpoint entry '", prefix,
               "updates' must hold one count, got ", n.shape());
  shadows_.clear();
  const std::string ap = prefix + "average/";
  for (const auto& [name, t] : ckpt.tensors)
    if (name.compare(0, ap.size(), ap) == 0) shadows_.emplace_back(name.substr(ap.size()), t);
  updates_ = n.data()[0];
  restored_ = true;
}

GRADUS_INLINE const AnyTensor& ExponentialMovingAverage::average(const std::string& name) const {
  for (const auto& [n, t] : shadows_)
    if (n == name) return t;
  gradus::detail::throw_error<value_error>({"ExponentialMovingAverage: no average of '", name, "'",
                                            shadows_.empty() ? " (no session has run with this hook yet)" : ""});
}

GRADUS_INLINE ExponentialMovingAverage::Swap::Swap(ExponentialMovingAverage& ema) : ema_(ema) {
  GRADUS_CHECK(value_error, !ema.params_.empty(), "ExponentialMovingAverage::use_averages: no session has run with this hook yet");
  for (size_t i = 0; i < ema.params_.size(); ++i) {
    trained_.push_back(detail::clone_any(ema.params_[i].second));
    detail::copy_any(ema.params_[i].second, ema.shadows_[i].second,
                     "use_averages: the averages of '" + ema.params_[i].first + "'");
  }
}

GRADUS_INLINE ExponentialMovingAverage::Swap::~Swap() {
  for (size_t i = 0; i < trained_.size(); ++i)
    detail::copy_any(ema_.params_[i].second, trained_[i],
                     "use_averages: the trained values of '" + ema_.params_[i].first + "'");
}

#endif  // GRADUS_DEFINE_COMPILED

}  // namespace gradus::train
