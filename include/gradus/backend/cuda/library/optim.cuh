// gradus/backend/cuda/library/optim.cuh — the optimizers' fused updates: one pass over a
// parameter and its state instead of one kernel per expression. Device code, read only by NVRTC
// (library.hpp); the host side is adam_update in library.hpp.
#pragma once

// kernel::AdamUpdate (backend/kernels.hpp): the same operations, in the same order and element
// type, as the three expressions of optim::Adam
#define GRADUS_LIBRARY_OPTIM(T, S)                                                                  \
  extern "C" __global__ void gradus_adam_update_##S(gradus::backend::cuda::AdamConstants<T> c, T* w, \
                                                    const T* g, T* m, T* v, T* vhat, long n) {      \
    GRADUS_FOR_EACH(i, n) {                                                                         \
      const T gi = g[i];                                                                            \
      const T mi = c.beta1 * m[i] + c.one_minus_beta1 * gi;                                         \
      const T vi = c.beta2 * v[i] + c.one_minus_beta2 * (gi * gi);                                  \
      m[i] = mi;                                                                                    \
      v[i] = vi;                                                                                    \
      T d = vi;                                                                                     \
      if (vhat) {                                                                                   \
        d = vhat[i] < vi ? vi : vhat[i];                                                            \
        vhat[i] = d;                                                                                \
      }                                                                                             \
      const T wi = w[i];                                                                            \
      const T step = c.alpha * mi / (gradus_sqrt(d) + c.eps);                                       \
      w[i] = c.decay != T(0) ? wi - c.decay * wi - step : wi - step;                                \
    }                                                                                               \
  }
GRADUS_LIBRARY_OPTIM(float, f)
GRADUS_LIBRARY_OPTIM(double, d)
#undef GRADUS_LIBRARY_OPTIM
