// gradus/backend/cuda/reduce.hpp — reductions on a GPU: max/min, argmax/argmin, prod and
// logsumexp with their gradients along one axis, over the [outer, n, inner] view of the axis
// (AxisView), a block of threads per line; and sums over broadcast axes (sum_to: axis sums, a
// broadcast operand's gradient) in a fixed order. Device code: library/reduce.cuh.
//
//   backend::cuda::reduce_extremum(AxisView(x.shape(), 1), x_ptr, y_ptr, /*is_max=*/true, dev);
//   backend::cuda::sum_to(x_ptr, {32, 100}, y_ptr, {100}, /*add=*/false, dev);  // column sums
#pragma once
#include <algorithm>
#include <cstdint>
#include <limits>

#include "gradus/backend/cuda/geometry.hpp"
#include "gradus/backend/cuda/library.hpp"
#include "gradus/backend/plans.hpp"
#include "gradus/core/compiled.hpp"
#include "gradus/core/device.hpp"
#include "gradus/core/shape.hpp"
#include "gradus/core/tensor.hpp"

namespace gradus::backend::cuda {

inline constexpr char kReduceExtremum[] = "reduce_extremum", kReduceExtremumBackward[] = "reduce_extremum_backward",
                      kReduceArg[] = "reduce_arg", kReduceProd[] = "reduce_prod",
                      kReduceProdBackward[] = "reduce_prod_backward", kReduceLogsumexp[] = "reduce_logsumexp",
                      kReduceLogsumexpBackward[] = "reduce_logsumexp_backward", kSumTo[] = "sum_to",
                      kSumParts[] = "sum_parts";

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

/// How sum_to sums x (shape `shape`) into `reduced` (broadcastable to it): the kept and summed
/// axes (merged, as the broadcast map merges them), the threads per output and the parts. All of
/// it follows from the two shapes, and so does the order in which the terms are added.
SumToGeometry sum_to_geometry(const Shape& shape, const Shape& reduced);

/// y (shape `reduced`) = (with `add`, +=) x (shape `shape`, contiguous) summed over the axes along
/// which `reduced` broadcasts to `shape`, in double, in an order fixed by the shapes: the same bits
/// on every run, whatever the GPU schedules first. A long sum (a broadcast scalar's gradient over
/// millions of elements) is cut into parts summed side by side, then added in order: two launches.
template <class T>
void sum_to(const T* x, const Shape& shape, T* y, const Shape& reduced, bool add, Device device) {
  SumToGeometry g = sum_to_geometry(shape, reduced);
  if (g.m == 0) return;
  Tensor<double> partials;
  if (g.parts > 1) partials = Tensor<double>::empty(Shape{int64_t(g.m * g.parts)}, device);
  double* p = g.parts > 1 ? partials.device_data() : nullptr;
  int a = add ? 1 : 0;
  void* first[] = {&x, &g, &y, &p, &a};
  launch_library(cached_library_function<T, kSumTo>(device), ((g.m + g.tx - 1) / g.tx) * g.parts * 256, first,
                 device.index);
  if (g.parts > 1) {
    const double* pc = p;
    void* second[] = {&pc, &g.m, &g.parts, &y, &a};
    launch_library(cached_library_function<T, kSumParts>(device), g.m, second, device.index);
  }
}

#if GRADUS_DEFINE_COMPILED  // libgradus holds these with GRADUS_COMPILED (core/compiled.hpp)
GRADUS_INLINE SumToGeometry sum_to_geometry(const Shape& shape, const Shape& reduced) {
  const ::gradus::backend::cpu::Broadcast b(reduced, shape);
  SumToGeometry g{};
  g.m = g.k = 1;
  g.kept.rank = g.summed.rank = 0;  // a rank-0 map reads offset 0
  long stride = 1;  // x's stride along merged axis d, innermost first
  long x_strides[kMaxRank] = {};
  for (int d = b.rank - 1; d >= 0; --d) {
    x_strides[d] = stride;
    stride *= long(b.dims[size_t(d)]);
  }
  for (int d = 0; d < b.rank; ++d) {
    const long n = long(b.dims[size_t(d)]);
    Bcast& axes = b.strides[size_t(d)] != 0 || n == 1 ? g.kept : g.summed;
    axes.dims[axes.rank] = n, axes.strides[axes.rank++] = x_strides[d];
    (&axes == &g.kept ? g.m : g.k) *= n;
  }
  // A long innermost axis summed (row sums of 128 columns or more): a block's 256 threads read
  // neighbouring terms of one output. Otherwise 32 neighbouring outputs, 8 threads over the terms
  // of each: coalesced where the innermost axis is kept, and no idle threads over short rows.
  const bool inner_summed = b.strides[size_t(b.rank - 1)] == 0 && b.dims[size_t(b.rank - 1)] >= 128;
  g.tx = inner_summed ? 1 : 32;
  // At least 16 terms per thread in each part, at most 1,024 parts.
  g.parts = std::clamp<long>(g.k / ((256 / g.tx) * 16), 1, 1024);
  return g;
}
#endif  // GRADUS_DEFINE_COMPILED

}  // namespace gradus::backend::cuda
