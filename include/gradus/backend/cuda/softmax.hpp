// gradus/backend/cuda/softmax.hpp — the GPU library's softmax and log_softmax (forward and
// backward, along the middle axis of [outer, n, inner]) and one_hot. Device code:
// library/softmax.cuh.
//
//   backend::cuda::softmax_forward(x, y, outer, n, inner, /*log=*/false, dev);
#pragma once
#include <cstdint>

#include "gradus/backend/cuda/library.hpp"
#include "gradus/core/device.hpp"

namespace gradus::backend::cuda {

inline constexpr char kSoftmax[] = "softmax", kSoftmaxBackward[] = "softmax_backward",
                      kSoftmaxLines[] = "softmax_lines", kSoftmaxLinesBackward[] = "softmax_lines_backward",
                      kOneHot[] = "one_hot";

/// softmax (or log_softmax) of each line of x along the middle axis of [outer, n, inner], the
/// maximum subtracted first. Along the last axis (inner 1) a block of threads per line reads it
/// together, coalesced; along another axis one thread per line, neighbours on neighbouring lines.
template <class T>
void softmax_forward(const T* x, T* y, int64_t outer, int64_t n, int64_t inner, bool log, Device device) {
  long o = long(outer), nn = long(n), in = long(inner);
  int lg = log ? 1 : 0;
  void* params[] = {&x, &y, &o, &nn, &in, &lg};
  if (inner == 1 && n > 1)
    launch_lines(cached_library_function<T, kSoftmaxLines>(device), o, nn, params, device.index);
  else
    launch_library(cached_library_function<T, kSoftmax>(device), o * in, params, device.index);
}
/// dx from the softmax (log_softmax) output y and its adjoint g, line by line.
template <class T>
void softmax_backward(const T* y, const T* g, T* dx, int64_t outer, int64_t n, int64_t inner, bool log, Device device) {
  long o = long(outer), nn = long(n), in = long(inner);
  int lg = log ? 1 : 0;
  void* params[] = {&y, &g, &dx, &o, &nn, &in, &lg};
  if (inner == 1 && n > 1)
    launch_lines(cached_library_function<T, kSoftmaxLinesBackward>(device), o, nn, params, device.index);
  else
    launch_library(cached_library_function<T, kSoftmaxBackward>(device), o * in, params, device.index);
}
/// out[r, c] = on where labels[r] == c, else off (a label outside [0, depth): a row of off).
template <class T>
void one_hot(const int64_t* labels, int64_t count, int64_t depth, T on, T off, T* out, Device device) {
  const long long* l = reinterpret_cast<const long long*>(labels);
  long c = long(count), d = long(depth);
  void* params[] = {&l, &c, &d, &on, &off, &out};
  launch_library(cached_library_function<T, kOneHot>(device), c * d, params, device.index);
}

}  // namespace gradus::backend::cuda
