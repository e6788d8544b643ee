// gradus/backend/cuda/library/layers.cuh — the kernels of a layer's pieces (layers.hpp): bias +
// activation forward and backward, column sums, the dropout mask and its product. Device code,
// read only by NVRTC (library_source()); uses common.cuh, element.hpp, core/philox.hpp,
// ops/elementwise_math.hpp and expr/activations.hpp.
#pragma once

// a layer's activation chosen at run time (gd::ActivationKind, expanded from the table of
// expr/activations.hpp), with the op structs the CPU runs: forward of z, and the gradient from
// z, the output y and its adjoint g
template <class T>
__device__ T gradus_activation(int kind, double alpha, T z) {
  using V = gradus::backend::cuda::Element<T>;
  const V x{z};
  switch (kind) {
#define GRADUS_X(name, Op, args, form) \
    case int(gradus::ActivationKind::name): return gradus::ops::Op args .forward(x).v;
    GRADUS_ACTIVATIONS(GRADUS_X)
#undef GRADUS_X
    default: return z;
  }
}
template <class T>
__device__ T gradus_activation_grad(int kind, double alpha, T z, T y, T g) {
  using V = gradus::backend::cuda::Element<T>;
  const V x{z}, out{y}, d{g};
  switch (kind) {
#define GRADUS_X(name, Op, args, form) \
    case int(gradus::ActivationKind::name): return gradus::ops::Op args .backward(x, out, d).v;
    GRADUS_ACTIVATIONS(GRADUS_X)
#undef GRADUS_X
    default: return g;
  }
}

#define GRADUS_LIBRARY_LAYERS(T, S)                                                                 \
  extern "C" __global__ void gradus_bias_activation_##S(const T* h, const T* b, long rows, long n, T* out, \
                                                        int kind, double alpha) {                  \
    GRADUS_FOR_EACH(i, rows * n) out[i] = gradus_activation<T>(kind, alpha, h[i] + b[i % n]);      \
  }                                                                                                \
  extern "C" __global__ void gradus_bias_activation_backward_##S(const T* h, const T* b, const T* y,   \
                                                                 const T* g, long rows, long n, T* dz, \
                                                                 int kind, double alpha) {         \
    GRADUS_FOR_EACH(i, rows * n) dz[i] = gradus_activation_grad<T>(kind, alpha, h[i] + b[i % n], y[i], g[i]); \
  }                                                                                                \
  extern "C" __global__ void gradus_dropout_mask_##S(T* m, long n, unsigned long long key, double keep, \
                                                     T scale) {                                     \
    GRADUS_FOR_EACH(i, n) m[i] = double(gradus::philox_uniform(key, i)) < keep ? scale : T(0);      \
  }                                                                                                 \
  extern "C" __global__ void gradus_masked_multiply_##S(const T* x, const T* m, long n, T* out, int add) { \
    GRADUS_FOR_EACH(i, n) out[i] = add ? out[i] + x[i] * m[i] : x[i] * m[i];                        \
  }
GRADUS_LIBRARY_LAYERS(float, f)
GRADUS_LIBRARY_LAYERS(double, d)
