// gradus/backend/cpu/dropout.hpp — inverted dropout on the CPU: the mask drawn in element
// order from a gd::Rng, and the masked products of the forward and backward passes.
#pragma once
#include <Eigen/Core>
#include <cstdint>

#include "gradus/core/rng.hpp"

namespace gradus::backend::cpu {

/// mask[i] = `scale` with probability `keep` (one rng.uniform() per element, in order), else 0.
template <class T>
void dropout_mask(Rng& rng, double keep, T scale, int64_t n, T* mask) {
  for (int64_t i = 0; i < n; ++i) mask[i] = rng.uniform() < keep ? scale : T(0);
}

/// out[i] = (or, with `add`, +=) x[i] * mask[i].
template <class T>
void masked_multiply(const T* x, const T* mask, int64_t n, T* out, bool add) {
  using Arr = Eigen::Array<T, Eigen::Dynamic, 1>;
  Eigen::Map<Arr> o(out, n);
  const auto xm = Eigen::Map<const Arr>(x, n) * Eigen::Map<const Arr>(mask, n);
  if (add)
    o += xm;
  else
    o = xm;
}

}  // namespace gradus::backend::cpu
