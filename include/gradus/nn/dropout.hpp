// gradus/nn/dropout.hpp — the Dropout layer.
#pragma once
#include "gradus/core/compiled.hpp"
#include "gradus/nn/module.hpp"
#include "gradus/ops/dropout.hpp"

namespace gradus::nn {

/// Options of `Dropout`.
struct DropoutOptions {
  double rate = 0.5;  ///< fraction of elements zeroed in training, in [0, 1)
};

/// Inverted dropout (tf.keras.layers.Dropout): in training mode each element is zeroed with
/// probability `rate` and the rest scaled by 1 / (1 - rate), the mask drawn from `rng` (which
/// must outlive the layer); in eval mode the identity. x -> a Var of the same shape. The
/// generator is registered as "rng" (Module::named_generators), so `fit` checkpoints it.
///   gd::nn::Dropout<float> drop({.rate = 0.5}, rng);
template <Real T = float>
class Dropout : public Module<T, Dropout<T>> {
 public:
  Dropout(const DropoutOptions& o, Rng& rng) : rate_(o.rate), rng_(&rng) {
    GRADUS_CHECK(value_error, o.rate >= 0 && o.rate < 1, "Dropout: rate must be in [0, 1), got ", o.rate);
    this->register_generator("rng", rng);
  }

  template <Expression X>
  Var<T> forward(const X& x) {
    return forward_var(detail::to_var(x));
  }
  /// forward on a Var: compiled once in libgradus with GRADUS_COMPILED.
  Var<T> forward_var(const Var<T>& xv);

  double rate() const { return rate_; }

 private:
  double rate_;
  Rng* rng_;
};

// Out of the class, so that a program built with GRADUS_COMPILED compiles no copy of it.
template <Real T>
Var<T> Dropout<T>::forward_var(const Var<T>& xv) {
  return gradus::dropout(xv, rate_, *rng_, this->is_training());
}
}  // namespace gradus::nn

#if GRADUS_INSTANCES  // compiled once in libgradus with GRADUS_COMPILED (core/compiled.hpp)
namespace gradus::nn {
GRADUS_INSTANCE class Dropout<float>;
GRADUS_INSTANCE_DOUBLE class Dropout<double>;
}  // namespace gradus::nn
#endif
