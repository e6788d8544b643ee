// gradus/backend/cpu/optim.hpp — an optimizer's update of its parameters on the CPU in one pass
// over each (kernel::AdamUpdate).
#pragma once
#include "gradus/core/eigen.hpp"
#include <algorithm>
#include <cstdint>

#include "gradus/backend/cpu/parallel.hpp"
#include "gradus/backend/kernels.hpp"

namespace gradus::backend::cpu {

/// One Adam (AMSGrad, AdamW) step of `count` parameters (kernel::AdamUpdate): for each, in
/// pieces of kAdamPiece elements, m ← β1·m + (1-β1)·g; v ← β2·v + (1-β2)·g²; with vhat,
/// vhat ← max(vhat, v), read in place of v; w ← w [- decay·w] - alpha·m / (√v + eps). Each piece
/// is in L1 from its first expression to its last, so w, g, m and v are read from memory once
/// and written once, where the three expressions the optimizer composes otherwise pass over m
/// and v twice and g twice. The same operations in the same order as those expressions, element
/// by element: the same values.
inline constexpr int64_t kAdamPiece = 1024;

template <class T>
void adam_update(const AdamStep<T>& s, const AdamTensors<T>* params, int count) {
  using A = Eigen::Map<Eigen::Array<T, Eigen::Dynamic, 1>>;
  using CA = Eigen::Map<const Eigen::Array<T, Eigen::Dynamic, 1>>;
  for (int q = 0; q < count; ++q) {
    const AdamTensors<T>& p = params[q];
    parallel_chunks(p.n, kAdamPiece, [&](int, int64_t lo, int64_t hi) {
      for (int64_t i = lo; i < hi; i += kAdamPiece) {
        const int64_t len = std::min(kAdamPiece, hi - i);
        A w(p.w + i, len), m(p.m + i, len), v(p.v + i, len);
        const CA g(p.g + i, len);
        m = s.beta1 * m + s.one_minus_beta1 * g;
        v = s.beta2 * v + s.one_minus_beta2 * g.square();
        const T* denom = p.v + i;
        if (p.vhat) {
          A vhat(p.vhat + i, len);
          vhat = vhat.max(v);
          denom = p.vhat + i;
        }
        const CA d(denom, len);
        if (s.decay == T(0))
          w = w - s.alpha * m / (d.sqrt() + s.eps);
        else
          w = w - s.decay * w - s.alpha * m / (d.sqrt() + s.eps);
      }
    });
  }
}

}  // namespace gradus::backend::cpu
