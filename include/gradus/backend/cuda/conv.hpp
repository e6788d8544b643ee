// gradus/backend/cuda/conv.hpp — conv2d and pooling on a GPU: convolution as im2col + one
// cuBLAS product (+ the bias), its gradients through col2im; max and average pooling one thread
// per output element. The plans (backend/plans.hpp) reach the kernels as ConvGeometry and
// PoolGeometry (geometry.hpp). Device code: library/conv.cuh and library/pool.cuh.
//
//   backend::cuda::conv2d_forward(plan, x, w, bias, out, dev);
#pragma once
#include <cstdint>

#include "gradus/backend/cuda/blas.hpp"
#include "gradus/backend/cuda/geometry.hpp"
#include "gradus/backend/cuda/layers.hpp"
#include "gradus/backend/cuda/library.hpp"
#include "gradus/backend/cuda/reduce.hpp"
#include "gradus/backend/plans.hpp"
#include "gradus/core/device.hpp"
#include "gradus/core/tensor.hpp"

namespace gradus::backend::cuda {

inline constexpr char kIm2col[] = "im2col", kCol2im[] = "col2im", kAddRows[] = "add_rows", kPool[] = "pool",
                      kPoolBackward[] = "pool_backward";

/// A plan's shapes as the kernels receive them.
inline ConvGeometry geometry(const ConvPlan& p) {
  return {long(p.n), long(p.h), long(p.w), long(p.c), long(p.kh), long(p.kw), long(p.f), long(p.oh),
          long(p.ow), long(p.sh), long(p.sw), long(p.dh), long(p.dw), long(p.ph), long(p.pw)};
}
inline PoolGeometry geometry(const PoolPlan& p) {
  return {long(p.n), long(p.h), long(p.w), long(p.c), long(p.kh), long(p.kw), long(p.sh), long(p.sw),
          long(p.oh), long(p.ow), long(p.ph), long(p.pw)};
}

/// conv2d on a GPU: the patches gathered (im2col), one cuBLAS product with the filter
/// [kh*kw*c, f], then the bias added to every row.
template <class T>
void conv2d_forward(const ConvPlan& p, const T* x, const T* w, const T* bias, T* out, Device device) {
  ConvGeometry geo = geometry(p);
  const int64_t rows = p.rows(), depth = p.depth();
  Tensor<T> cols = Tensor<T>::empty(Shape{rows, depth}, device);
  T* c = cols.device_data();
  void* im2col_params[] = {&x, &c, &geo};
  launch_library(cached_library_function<T, kIm2col>(device), long(rows * depth), im2col_params, device.index);
  gemm(c, false, w, false, out, rows, depth, p.f, false, device);
  if (bias) {
    long r = long(rows), n = long(p.f);
    void* params[] = {&out, &bias, &r, &n};
    launch_library(cached_library_function<T, kAddRows>(device), r * n, params, device.index);
  }
}

/// conv2d's gradients on a GPU (each pointer null when not wanted, `add_*` to accumulate):
/// dW = colsᵀ·g, dX = col2im(g·Wᵀ), db = the column sums of g.
template <class T>
void conv2d_backward(const ConvPlan& p, const T* g, const T* x, const T* w, T* dx, bool add_dx, T* dw, bool add_dw,
                     T* db, bool add_db, Device device) {
  ConvGeometry geo = geometry(p);
  const int64_t rows = p.rows(), depth = p.depth();
  Tensor<T> cols = Tensor<T>::empty(Shape{rows, depth}, device);
  T* c = cols.device_data();
  if (dw) {
    void* params[] = {&x, &c, &geo};
    launch_library(cached_library_function<T, kIm2col>(device), long(rows * depth), params, device.index);
    gemm(static_cast<const T*>(c), true, g, false, dw, depth, rows, p.f, add_dw, device);
  }
  if (dx) {
    gemm(g, false, w, true, c, rows, p.f, depth, false, device);  // the patches' gradients
    const T* cc = c;
    int add = add_dx ? 1 : 0;
    void* params[] = {&cc, &dx, &geo, &add};
    launch_library(cached_library_function<T, kCol2im>(device), long(p.n * p.h * p.w * p.c), params, device.index);
  }
  if (db) sum_to(g, Shape{rows, p.f}, db, Shape{p.f}, add_db, device);  // the column sums of g
}

/// max or average pooling of x into y on a GPU, one thread per output element.
template <class T>
void pool2d_forward(const PoolPlan& p, const T* x, T* y, bool max, Device device) {
  PoolGeometry geo = geometry(p);
  int mx = max ? 1 : 0;
  void* params[] = {&x, &y, &geo, &mx};
  launch_library(cached_library_function<T, kPool>(device), long(p.n * p.oh * p.ow * p.c), params, device.index);
}
/// pooling's gradient on a GPU into dx (added with `add`): one thread per input element gathers
/// the gradients of the windows that hold it, in a fixed order.
template <class T>
void pool2d_backward(const PoolPlan& p, const T* g, const T* x, const T* y, T* dx, bool add, bool max,
                     Device device) {
  PoolGeometry geo = geometry(p);
  int mx = max ? 1 : 0, a = add ? 1 : 0;
  void* params[] = {&g, &x, &y, &dx, &geo, &mx, &a};
  launch_library(cached_library_function<T, kPoolBackward>(device), long(p.n * p.h * p.w * p.c), params,
                 device.index);
}

}  // namespace gradus::backend::cuda
