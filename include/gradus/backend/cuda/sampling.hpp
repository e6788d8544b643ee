// gradus/backend/cuda/sampling.hpp — bilinear sampling at arbitrary points on a GPU (gd::resampler):
// the forward one thread per output element, the point gradient one thread per point, and the
// image gradient as the points' weighted adjoints scattered by copy.hpp's sorted scatter, in the
// order the CPU adds them and without atomics. Device code: library/sampling.cuh.
//
//   backend::cuda::resample_forward(plan, data, warp, out, dev);
#pragma once
#include <cstdint>

#include "gradus/backend/cuda/copy.hpp"
#include "gradus/backend/cuda/geometry.hpp"
#include "gradus/backend/cuda/library.hpp"
#include "gradus/backend/plans.hpp"
#include "gradus/core/device.hpp"
#include "gradus/core/tensor.hpp"

namespace gradus::backend::cuda {

inline constexpr char kResample[] = "resample", kResampleWarpGrad[] = "resample_warp_grad",
                      kResampleSpread[] = "resample_spread";

/// A plan's shapes as the kernels receive them.
inline ResampleGeometry geometry(const ResamplePlan& p) {
  return {long(p.b), long(p.h), long(p.w), long(p.c), long(p.p)};
}

/// out [b,p,c] = data [b,h,w,c] sampled at warp [b,p,2] on a GPU, one thread per output element.
template <class T>
void resample_forward(const ResamplePlan& p, const T* data, const T* warp, T* out, Device device) {
  ResampleGeometry g = geometry(p);
  void* params[] = {&data, &warp, &out, &g};
  launch_library(cached_library_function<T, kResample>(device), long(p.b * p.p * p.c), params, device.index);
}

/// resample_forward's gradients on a GPU: dwarp one thread per point; ddata from the
/// b·p·4 weighted adjoint rows, added into their pixels in the order of the points.
template <class T>
void resample_backward(const ResamplePlan& p, const T* g, const T* data, const T* warp, T* ddata, bool add_data,
                       T* dwarp, bool add_warp, Device device) {
  ResampleGeometry geo = geometry(p);
  if (dwarp) {
    int add = add_warp ? 1 : 0;
    void* params[] = {&g, &data, &warp, &dwarp, &geo, &add};
    launch_library(cached_library_function<T, kResampleWarpGrad>(device), long(p.b * p.p), params, device.index);
  }
  if (!ddata) return;
  const int64_t pixels = p.b * p.h * p.w, terms = p.b * p.p * 4;
  if (pixels * p.c == 0 || terms == 0) {
    if (!add_data) fill(ddata, long(pixels * p.c), T(0), device);
    return;
  }
  const Tensor<T> contrib = Tensor<T>::empty(Shape{terms, p.c}, device);
  const Tensor<int64_t> rows = Tensor<int64_t>::empty(Shape{terms}, device);
  T* c = contrib.device_data();
  long long* r = reinterpret_cast<long long*>(rows.device_data());
  void* params[] = {&g, &warp, &c, &r, &geo};
  launch_library(cached_library_function<T, kResampleSpread>(device), long(terms * p.c), params, device.index);
  scatter_add_rows(contrib.device_data(), 1, pixels, p.c, rows.device_data(), terms, ddata, add_data, device);
}

}  // namespace gradus::backend::cuda
