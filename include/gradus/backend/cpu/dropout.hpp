// gradus/backend/cpu/dropout.hpp — inverted dropout on the CPU: the mask drawn from a Philox
// stream (the one a GPU draws, core/philox.hpp), and the masked products of the forward and
// backward passes.
#pragma once
#include "gradus/core/eigen.hpp"
#include <cstdint>

#include "gradus/core/philox.hpp"

namespace gradus::backend::cpu {

/// mask[i] = `scale` when element i of the Philox stream `key` is below `keep`, else 0.
template <class T>
void dropout_mask(uint64_t key, double keep, T scale, int64_t n, T* mask) {
  for (int64_t b = 0; b * 4 < n; ++b) {  // one Philox block gives four elements
    const PhiloxBlock r = philox4x32_10(unsigned(b), unsigned(uint64_t(b) >> 32), 0u, 0u, unsigned(key),
                                        unsigned(key >> 32));
    for (int64_t j = 0; j < 4 && b * 4 + j < n; ++j) {
      const float u = float(r.v[j] >> 8) * (1.0f / 16777216.0f);  // as philox_uniform
      mask[b * 4 + j] = double(u) < keep ? scale : T(0);
    }
  }
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
