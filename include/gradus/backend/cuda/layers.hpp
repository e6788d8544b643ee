// gradus/backend/cuda/layers.hpp — the GPU library's kernels of a layer's pieces: bias +
// activation forward and backward (the activation chosen inside the kernel from its kind, with
// the op structs the CPU runs), column sums, dropout's mask and product. Device code:
// library/layers.cuh.
//
//   backend::cuda::bias_activation_forward(int(gd::ActivationKind::relu), 0, h, b, rows, n, out, dev);
#pragma once
#include <cstdint>

#include "gradus/backend/cuda/library.hpp"
#include "gradus/backend/cuda/reduce.hpp"
#include "gradus/core/device.hpp"
#include "gradus/core/tensor.hpp"

namespace gradus::backend::cuda {

inline constexpr char kBiasActivation[] = "bias_activation", kBiasActivationBackward[] = "bias_activation_backward",
                      kDropoutMask[] = "dropout_mask", kMaskedMultiply[] = "masked_multiply";

/// out = activation(h + b) over [rows, n], b broadcast along rows; `kind` is gd::ActivationKind's
/// number (linear through softsign), `alpha` leaky_relu's slope or elu's scale.
template <class T>
void bias_activation_forward(int kind, double alpha, const T* h, const T* b, int64_t rows, int64_t n, T* out,
                             Device device) {
  long r = long(rows), nn = long(n);
  void* params[] = {&h, &b, &r, &nn, &out, &kind, &alpha};
  launch_library(cached_library_function<T, kBiasActivation>(device), r * nn, params, device.index);
}
/// dz = the activation's gradient at h + b, from its output y and adjoint g.
template <class T>
void bias_activation_backward(int kind, double alpha, const T* h, const T* b, const T* y, const T* g, int64_t rows,
                              int64_t n, T* dz, Device device) {
  long r = long(rows), nn = long(n);
  void* params[] = {&h, &b, &y, &g, &r, &nn, &dz, &kind, &alpha};
  launch_library(cached_library_function<T, kBiasActivationBackward>(device), r * nn, params, device.index);
}
/// out [n] = the column sums of x [rows, n] (a bias gradient): sum_to's fixed-order sum, in two
/// stages over tall columns — the same bits on every run.
template <class T>
void sum_rows(const T* x, int64_t rows, int64_t n, T* out, Device device) {
  sum_to(x, Shape{rows, n}, out, Shape{n}, /*add=*/false, device);
}

/// mask[i] = scale when element i of the Philox stream `key` is below `keep`, else 0 (the CPU's
/// numbers: backend/cpu/dropout.hpp).
template <class T>
void dropout_mask(uint64_t key, double keep, T scale, int64_t n, T* mask, Device device) {
  void* fn = cached_library_function<T, kDropoutMask>(device);
  long count = long(n);
  unsigned long long k = key;
  void* params[] = {&mask, &count, &k, &keep, &scale};
  launch_library(fn, count, params, device.index);
}

/// out[i] = (or, with `add`, +=) x[i] * mask[i].
template <class T>
void masked_multiply(const T* x, const T* mask, int64_t n, T* out, bool add, Device device) {
  void* fn = cached_library_function<T, kMaskedMultiply>(device);
  long count = long(n);
  int a = add ? 1 : 0;
  void* params[] = {&x, &mask, &count, &out, &a};
  launch_library(fn, count, params, device.index);
}

}  // namespace gradus::backend::cuda
