// gradus/backend/cuda/library.hpp — the few fixed GPU kernels that are not generated from an
// expression: filling, accumulating a gradient, finishing a reduction. One source, compiled by
// NVRTC once per architecture (and kept in the kernel cache like any other), loaded once per GPU;
// its device code is in library/*.cuh, one file per kernel family.
//
//   backend::cuda::fill(p, n, 1.f, dev);   backend::cuda::add_into(dst, src, n, dev);
#pragma once
#include <string>
#include <type_traits>
#include <vector>

#include "gradus/backend/cuda/elementwise.hpp"
#include "gradus/backend/cuda/geometry.hpp"
#include "gradus/backend/plans.hpp"

namespace gradus::backend::cuda {

/// The library's CUDA source: each kernel in float and double (suffix _f, _d), grid-stride loops.
/// The kernels are in library/*.cuh, one file per family, read by NVRTC through include_root().
inline const std::string& library_source() {
  // the headers NVRTC includes are spelled as string pieces: they are the kernels' includes, not
  // this header's (the layering check reads #include lines)
  static const std::string src = "#include \"gradus/backend/cuda/nvrtc_prelude.hpp\"\n"
                                 "#include \"gradus/backend/cuda/element.hpp\"\n"
                                 "#include \"gradus/backend/cuda/geometry.hpp\"\n"
                                 "#include \"gradus/core/philox.hpp\"\n"
                                 "#include \"gradus/ops/elementwise_math.hpp\"\n"
                                 "#include \"gradus/expr/activations.hpp\"\n"
                                 "#include \"gradus/backend/cuda/library/common.cuh\"\n"
                                 "#include \"gradus/backend/cuda/library/fill.cuh\"\n"
                                 "#include \"gradus/backend/cuda/library/layers.cuh\"\n"
                                 "#include \"gradus/backend/cuda/library/softmax.cuh\"\n"
                                 "#include \"gradus/backend/cuda/library/conv.cuh\"\n"
                                 "#include \"gradus/backend/cuda/library/pool.cuh\"\n";
  return src;
}

/// NVRTC's options for the library: the gradus headers it includes, and the op structs'
/// unannotated functions compiled as device functions.
inline std::vector<std::string> library_options() {
  return {"--include-path=" + include_root(), "--device-as-default-execution-space"};
}

/// The library kernel `name` (without its type suffix) for element type T on GPU `ordinal`.
template <class T>
void* library_function(const std::string& name, int ordinal) {
  static_assert(std::is_same_v<T, float> || std::is_same_v<T, double>, "THE_ELEMENT_TYPE_MUST_BE_FLOAT_OR_DOUBLE: cuda library");
  const std::string arch = arch_of(ordinal);
  const Nvrtc& n = Nvrtc::get();
  const std::string key = "gradus-library/" + arch + "/nvrtc-" + std::to_string(n.major) + "." + std::to_string(n.minor);
  const std::string& ptx = KernelCache::get().ptx(key, [&] {
    return compile_ptx(library_source(), "gradus_library.cu", arch, library_options());
  });
  const std::string entry = "gradus_" + name + (std::is_same_v<T, float> ? "_f" : "_d");
  return load_function(key + "/" + entry, ptx, entry.c_str(), ordinal);
}

/// Launches library kernel `fn` over n elements with the given arguments (pointers to each).
inline void launch_library(void* fn, long n, void** params, int ordinal) {
  if (n == 0) return;
  make_current(ordinal);
  const Driver& d = Driver::get();
  d.check(d.launch_kernel(fn, unsigned(grid_blocks(n, ordinal)), 1, 1, 256, 1, 1, 0, nullptr, params, nullptr),
          "cuLaunchKernel (library)");
}

/// The library kernel `name` for T on `device`, looked up once per (T, name, GPU).
template <class T, const char* Name>
void* cached_library_function(Device device) {
  static std::array<std::atomic<void*>, 64> fns{};
  void* fn = fns[size_t(device.index)].load(std::memory_order_acquire);
  if (!fn) fns[size_t(device.index)].store(fn = library_function<T>(Name, device.index), std::memory_order_release);
  return fn;
}
inline constexpr char kFill[] = "fill", kAddInto[] = "add_into", kFinishSum[] = "finish_sum",
                      kDropoutMask[] = "dropout_mask", kMaskedMultiply[] = "masked_multiply";

/// d[i] = v for i < n, on GPU `device`.
template <class T>
void fill(T* d, long n, T v, Device device) {
  void* fn = cached_library_function<T, kFill>(device);
  void* params[] = {&d, &v, &n};
  launch_library(fn, n, params, device.index);
}

/// d[i] += s[i] for i < n, on GPU `device`.
template <class T>
void add_into(T* d, const T* s, long n, Device device) {
  void* fn = cached_library_function<T, kAddInto>(device);
  void* params[] = {&d, &s, &n};
  launch_library(fn, n, params, device.index);
}

/// d[0] = T(acc[0] * scale): a reduction's double accumulator into its result, on the device.
template <class T>
void finish_sum(T* d, const double* acc, double scale, Device device) {
  void* fn = cached_library_function<T, kFinishSum>(device);
  void* params[] = {&d, &acc, &scale};
  launch_library(fn, 1, params, device.index);
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

inline constexpr char kSoftmax[] = "softmax", kSoftmaxBackward[] = "softmax_backward", kOneHot[] = "one_hot",
                      kBiasActivation[] = "bias_activation", kBiasActivationBackward[] = "bias_activation_backward",
                      kSumRows[] = "sum_rows", kIm2col[] = "im2col", kCol2im[] = "col2im", kAddRows[] = "add_rows",
                      kPool[] = "pool", kPoolBackward[] = "pool_backward";

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
/// out [n] = the column sums of x [rows, n] (one thread per column).
template <class T>
void sum_rows(const T* x, int64_t rows, int64_t n, T* out, Device device) {
  long r = long(rows), nn = long(n);
  void* params[] = {&x, &r, &nn, &out};
  launch_library(cached_library_function<T, kSumRows>(device), nn, params, device.index);
}

/// softmax (or log_softmax) of each line of x along the middle axis of [outer, n, inner]: one
/// thread per line, the maximum subtracted first.
template <class T>
void softmax_forward(const T* x, T* y, int64_t outer, int64_t n, int64_t inner, bool log, Device device) {
  long o = long(outer), nn = long(n), in = long(inner);
  int lg = log ? 1 : 0;
  void* params[] = {&x, &y, &o, &nn, &in, &lg};
  launch_library(cached_library_function<T, kSoftmax>(device), o * in, params, device.index);
}
/// dx from the softmax (log_softmax) output y and its adjoint g, line by line.
template <class T>
void softmax_backward(const T* y, const T* g, T* dx, int64_t outer, int64_t n, int64_t inner, bool log, Device device) {
  long o = long(outer), nn = long(n), in = long(inner);
  int lg = log ? 1 : 0;
  void* params[] = {&y, &g, &dx, &o, &nn, &in, &lg};
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
    if (!add_dx) fill(dx, long(p.n * p.h * p.w * p.c), T(0), device);
    const T* cc = c;
    void* params[] = {&cc, &dx, &geo};
    launch_library(cached_library_function<T, kCol2im>(device), long(rows * depth), params, device.index);
  }
  if (db) {
    if (add_db) {
      Tensor<T> tmp = Tensor<T>::empty(Shape{p.f}, device);
      sum_rows(g, rows, p.f, tmp.device_data(), device);
      add_into(db, static_cast<const T*>(tmp.device_data()), long(p.f), device);
    } else {
      sum_rows(g, rows, p.f, db, device);
    }
  }
}

/// max or average pooling of x into y on a GPU, one thread per output element.
template <class T>
void pool2d_forward(const PoolPlan& p, const T* x, T* y, bool max, Device device) {
  PoolGeometry geo = geometry(p);
  int mx = max ? 1 : 0;
  void* params[] = {&x, &y, &geo, &mx};
  launch_library(cached_library_function<T, kPool>(device), long(p.n * p.oh * p.ow * p.c), params, device.index);
}
/// pooling's gradient on a GPU, scatter-added into dx (zeroed first unless `add`).
template <class T>
void pool2d_backward(const PoolPlan& p, const T* g, const T* x, const T* y, T* dx, bool add, bool max,
                     Device device) {
  if (!add) fill(dx, long(p.n * p.h * p.w * p.c), T(0), device);
  PoolGeometry geo = geometry(p);
  int mx = max ? 1 : 0;
  void* params[] = {&g, &x, &y, &dx, &geo, &mx};
  launch_library(cached_library_function<T, kPoolBackward>(device), long(p.n * p.oh * p.ow * p.c), params,
                 device.index);
}

}  // namespace gradus::backend::cuda
