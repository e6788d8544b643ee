// gradus/backend/cuda/reduce.hpp — reductions along one axis on a GPU: max/min, argmax/argmin,
// prod and logsumexp with their gradients, over the [outer, n, inner] view of the axis
// (AxisView), a block of threads per line. Device code: library/reduce.cuh.
//
//   backend::cuda::reduce_extremum(AxisView(x.shape(), 1), x_ptr, y_ptr, /*is_max=*/true, dev);
#pragma once
#include <cstdint>
#include <limits>

#include "gradus/backend/cuda/library.hpp"
#include "gradus/backend/plans.hpp"
#include "gradus/core/device.hpp"

namespace gradus::backend::cuda {

inline constexpr char kReduceExtremum[] = "reduce_extremum", kReduceExtremumBackward[] = "reduce_extremum_backward",
                      kReduceArg[] = "reduce_arg", kReduceProd[] = "reduce_prod",
                      kReduceProdBackward[] = "reduce_prod_backward", kReduceLogsumexp[] = "reduce_logsumexp",
                      kReduceLogsumexpBackward[] = "reduce_logsumexp_backward";

/// Launches the line kernel Name for T over the lines of `v` with the arguments `args` (each
/// followed by the view's outer, n and inner).
template <class T, const char* Name, class... A>
void run_lines(const AxisView& v, Device device, A... args) {
  long outer = long(v.outer), n = long(v.n), inner = long(v.inner);
  void* params[] = {&args..., &outer, &n, &inner};
  launch_lines(cached_library_function<T, Name>(device), outer * inner, n, params, device.index);
}

/// y = max (min) along each line; lines are non-empty.
template <class T>
void reduce_extremum(const AxisView& v, const T* x, T* y, bool is_max, Device device) {
  run_lines<T, kReduceExtremum>(v, device, x, y, is_max ? 1 : 0);
}
/// dx = g shared among the elements equal to the line's extremum y, 0 elsewhere.
template <class T>
void reduce_extremum_backward(const AxisView& v, const T* x, const T* y, const T* g, T* dx, Device device) {
  run_lines<T, kReduceExtremumBackward>(v, device, x, y, g, dx);
}
/// out = index of the first largest (smallest) element of each line.
template <class T>
void reduce_arg(const AxisView& v, const T* x, int64_t* out, bool is_max, Device device) {
  run_lines<T, kReduceArg>(v, device, x, out, is_max ? 1 : 0);
}
/// y = the product of each line (1 for an empty line).
template <class T>
void reduce_prod(const AxisView& v, const T* x, T* y, Device device) {
  run_lines<T, kReduceProd>(v, device, x, y);
}
/// dx = g · the product of the line's other elements.
template <class T>
void reduce_prod_backward(const AxisView& v, const T* x, const T* g, T* dx, Device device) {
  run_lines<T, kReduceProdBackward>(v, device, x, g, dx);
}
/// y = log(sum(exp(x))) of each line from its maximum (-inf for an empty line).
template <class T>
void reduce_logsumexp(const AxisView& v, const T* x, T* y, Device device) {
  if (v.n == 0) return fill(y, long(v.outer * v.inner), -std::numeric_limits<T>::infinity(), device);
  run_lines<T, kReduceLogsumexp>(v, device, x, y);
}
/// dx = g · softmax(x) along each line.
template <class T>
void reduce_logsumexp_backward(const AxisView& v, const T* x, const T* y, const T* g, T* dx, Device device) {
  if (v.n == 0) return;
  run_lines<T, kReduceLogsumexpBackward>(v, device, x, y, g, dx);
}

}  // namespace gradus::backend::cuda
