// gradus/backend/cuda/library/optim.cuh — the optimizers' fused updates: one pass over the
// parameters and their state instead of one kernel per expression and parameter. Device code,
// read only by NVRTC (library.hpp); the host side is adam_update in library.hpp.
#pragma once

// kernel::AdamUpdate (backend/kernels.hpp) over a batch of parameters (AdamBatch): the same
// operations, in the same order and element type, as the three expressions of optim::Adam. A
// thread finds its parameter among the batch's starts by bisection.
#define GRADUS_LIBRARY_OPTIM(T, S)                                                                  \
  extern "C" __global__ void gradus_adam_update_##S(gradus::backend::cuda::AdamConstants<T> c,       \
                                                    gradus::backend::cuda::AdamBatch<T> b) {        \
    GRADUS_FOR_EACH(e, b.start[b.count]) {                                                          \
      long lo = 0, hi = b.count;                                                                    \
      while (hi - lo > 1) {                                                                         \
        const long mid = (lo + hi) / 2;                                                             \
        if (b.start[mid] <= e) lo = mid; else hi = mid;                                             \
      }                                                                                             \
      const long i = e - b.start[lo];                                                               \
      T* __restrict__ w = b.w[lo];                                                                  \
      T* __restrict__ m = b.m[lo];                                                                  \
      T* __restrict__ v = b.v[lo];                                                                  \
      T* vhat = b.vhat[lo];                                                                         \
      const T gi = b.g[lo][i];                                                                      \
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
