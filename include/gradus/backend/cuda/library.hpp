// gradus/backend/cuda/library.hpp — the few fixed GPU kernels that are not generated from an
// expression: filling, accumulating a gradient, finishing a reduction. One source, compiled by
// NVRTC once per architecture (and kept in the kernel cache like any other), loaded once per GPU.
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
inline const std::string& library_source() {
  // the headers NVRTC includes are spelled as string pieces: they are the kernels' includes, not
  // this header's (the layering check reads #include lines)
  static const std::string src = std::string("#include \"gradus/backend/cuda/nvrtc_prelude.hpp\"\n"
                                             "#include \"gradus/backend/cuda/element.hpp\"\n"
                                             "#include \"gradus/backend/cuda/geometry.hpp\"\n"
                                             "#include \"gradus/core/philox.hpp\"\n"
                                             "#include \"gradus/ops/elementwise_math.hpp\"\n"
                                             "#include \"gradus/expr/activations.hpp\"\n") + R"(

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

#define GRADUS_FOR_EACH(i, n) \
  for (long i = blockIdx.x * (long)blockDim.x + threadIdx.x; i < (n); i += (long)gridDim.x * blockDim.x)
__device__ inline float gradus_exp(float x) { return expf(x); }
__device__ inline double gradus_exp(double x) { return exp(x); }
__device__ inline float gradus_log(float x) { return logf(x); }
__device__ inline double gradus_log(double x) { return log(x); }
#define GRADUS_LIBRARY(T, S)                                                                        \
  extern "C" __global__ void gradus_fill_##S(T* d, T v, long n) { GRADUS_FOR_EACH(i, n) d[i] = v; } \
  extern "C" __global__ void gradus_add_into_##S(T* d, const T* s, long n) {                         \
    GRADUS_FOR_EACH(i, n) d[i] += s[i];                                                             \
  }                                                                                                 \
  extern "C" __global__ void gradus_finish_sum_##S(T* d, const double* acc, double scale) {         \
    if (blockIdx.x == 0 && threadIdx.x == 0) d[0] = (T)(acc[0] * scale);                           \
  }                                                                                                 \
  extern "C" __global__ void gradus_dropout_mask_##S(T* m, long n, unsigned long long key, double keep, \
                                                     T scale) {                                     \
    GRADUS_FOR_EACH(i, n) m[i] = double(gradus::philox_uniform(key, i)) < keep ? scale : T(0);      \
  }                                                                                                 \
  extern "C" __global__ void gradus_masked_multiply_##S(const T* x, const T* m, long n, T* out, int add) { \
    GRADUS_FOR_EACH(i, n) out[i] = add ? out[i] + x[i] * m[i] : x[i] * m[i];                        \
  }                                                                                                 \
  extern "C" __global__ void gradus_softmax_##S(const T* x, T* y, long outer, long n, long inner, int lg) { \
    GRADUS_FOR_EACH(line, outer * inner) {                                                         \
      const long b = (line / inner) * n * inner + line % inner; /* the line's first element */      \
      T m = x[b];                                                                                  \
      for (long j = 1; j < n; ++j) m = x[b + j * inner] > m ? x[b + j * inner] : m;               \
      T s = 0;                                                                                     \
      for (long j = 0; j < n; ++j) s += gradus_exp(x[b + j * inner] - m);                         \
      if (lg) {                                                                                    \
        const T ls = m + gradus_log(s);                                                            \
        for (long j = 0; j < n; ++j) y[b + j * inner] = x[b + j * inner] - ls;                     \
      } else {                                                                                     \
        for (long j = 0; j < n; ++j) y[b + j * inner] = gradus_exp(x[b + j * inner] - m) / s;      \
      }                                                                                            \
    }                                                                                              \
  }                                                                                                \
  extern "C" __global__ void gradus_softmax_backward_##S(const T* y, const T* g, T* dx, long outer, long n, \
                                                         long inner, int lg) {                     \
    GRADUS_FOR_EACH(line, outer * inner) {                                                         \
      const long b = (line / inner) * n * inner + line % inner;                                    \
      T s = 0;                                                                                     \
      for (long j = 0; j < n; ++j) s += lg ? g[b + j * inner] : g[b + j * inner] * y[b + j * inner]; \
      for (long j = 0; j < n; ++j) {                                                               \
        const long k = b + j * inner;                                                              \
        dx[k] = lg ? g[k] - gradus_exp(y[k]) * s : y[k] * (g[k] - s);                              \
      }                                                                                            \
    }                                                                                              \
  }                                                                                                \
  extern "C" __global__ void gradus_bias_activation_##S(const T* h, const T* b, long rows, long n, T* out, \
                                                        int kind, double alpha) {                  \
    GRADUS_FOR_EACH(i, rows * n) out[i] = gradus_activation<T>(kind, alpha, h[i] + b[i % n]);      \
  }                                                                                                \
  extern "C" __global__ void gradus_bias_activation_backward_##S(const T* h, const T* b, const T* y,   \
                                                                 const T* g, long rows, long n, T* dz, \
                                                                 int kind, double alpha) {         \
    GRADUS_FOR_EACH(i, rows * n) dz[i] = gradus_activation_grad<T>(kind, alpha, h[i] + b[i % n], y[i], g[i]); \
  }                                                                                                \
  extern "C" __global__ void gradus_sum_rows_##S(const T* x, long rows, long n, T* out) {          \
    GRADUS_FOR_EACH(c, n) {                                                                        \
      T s = 0;                                                                                     \
      for (long r = 0; r < rows; ++r) s += x[r * n + c];                                           \
      out[c] = s;                                                                                  \
    }                                                                                              \
  }                                                                                                \
  /* convolution as im2col + GEMM: cols [n*oh*ow, kh*kw*c], zero where the window is outside */  \
  extern "C" __global__ void gradus_im2col_##S(const T* x, T* cols, gradus::backend::cuda::ConvGeometry p) { \
    const long depth = p.kh * p.kw * p.c;                                                          \
    GRADUS_FOR_EACH(i, p.n * p.oh * p.ow * depth) {                                                \
      const long row = i / depth, d = i % depth;                                                   \
      const long ci = d % p.c, kx = (d / p.c) % p.kw, ky = d / (p.c * p.kw);                       \
      const long ox = row % p.ow, oy = (row / p.ow) % p.oh, b = row / (p.ow * p.oh);               \
      const long yy = oy * p.sh - p.ph + ky * p.dh, xx = ox * p.sw - p.pw + kx * p.dw;             \
      cols[i] = yy >= 0 && yy < p.h && xx >= 0 && xx < p.w ? x[((b * p.h + yy) * p.w + xx) * p.c + ci] : T(0); \
    }                                                                                              \
  }                                                                                                \
  /* the adjoint of im2col: each patch element's gradient added to the input pixel it read */       \
  extern "C" __global__ void gradus_col2im_##S(const T* cols, T* dx, gradus::backend::cuda::ConvGeometry p) { \
    const long depth = p.kh * p.kw * p.c;                                                          \
    GRADUS_FOR_EACH(i, p.n * p.oh * p.ow * depth) {                                                \
      const long row = i / depth, d = i % depth;                                                   \
      const long ci = d % p.c, kx = (d / p.c) % p.kw, ky = d / (p.c * p.kw);                       \
      const long ox = row % p.ow, oy = (row / p.ow) % p.oh, b = row / (p.ow * p.oh);               \
      const long yy = oy * p.sh - p.ph + ky * p.dh, xx = ox * p.sw - p.pw + kx * p.dw;             \
      if (yy >= 0 && yy < p.h && xx >= 0 && xx < p.w) atomicAdd(dx + ((b * p.h + yy) * p.w + xx) * p.c + ci, cols[i]); \
    }                                                                                              \
  }                                                                                                \
  extern "C" __global__ void gradus_add_rows_##S(T* out, const T* bias, long rows, long n) {       \
    GRADUS_FOR_EACH(i, rows * n) out[i] += bias[i % n];                                            \
  }                                                                                                \
  /* pooling: one thread per output element; the clipped window as on the CPU */                    \
  extern "C" __global__ void gradus_pool_##S(const T* x, T* y, gradus::backend::cuda::PoolGeometry p, int mx) { \
    GRADUS_FOR_EACH(i, p.n * p.oh * p.ow * p.c) {                                                  \
      const long ci = i % p.c, ox = (i / p.c) % p.ow, oy = (i / (p.c * p.ow)) % p.oh, b = i / (p.c * p.ow * p.oh); \
      const long ys = oy * p.sh - p.ph, xs = ox * p.sw - p.pw;                                     \
      const long y0 = ys > 0 ? ys : 0, y1 = ys + p.kh < p.h ? ys + p.kh : p.h;                     \
      const long x0 = xs > 0 ? xs : 0, x1 = xs + p.kw < p.w ? xs + p.kw : p.w;                     \
      T acc = 0;                                                                                   \
      bool first = true;                                                                           \
      for (long yy = y0; yy < y1; ++yy)                                                            \
        for (long xx = x0; xx < x1; ++xx) {                                                        \
          const T v = x[((b * p.h + yy) * p.w + xx) * p.c + ci];                                   \
          acc = mx ? (first || v > acc ? v : acc) : acc + v;                                       \
          first = false;                                                                           \
        }                                                                                          \
      y[i] = mx || first ? acc : acc / T((y1 - y0) * (x1 - x0));                                   \
    }                                                                                              \
  }                                                                                                \
  /* max: the first element equal to the maximum takes the gradient; avg: shared evenly */          \
  extern "C" __global__ void gradus_pool_backward_##S(const T* g, const T* x, const T* y, T* dx,   \
                                                      gradus::backend::cuda::PoolGeometry p, int mx) { \
    GRADUS_FOR_EACH(i, p.n * p.oh * p.ow * p.c) {                                                  \
      const long ci = i % p.c, ox = (i / p.c) % p.ow, oy = (i / (p.c * p.ow)) % p.oh, b = i / (p.c * p.ow * p.oh); \
      const long ys = oy * p.sh - p.ph, xs = ox * p.sw - p.pw;                                     \
      const long y0 = ys > 0 ? ys : 0, y1 = ys + p.kh < p.h ? ys + p.kh : p.h;                     \
      const long x0 = xs > 0 ? xs : 0, x1 = xs + p.kw < p.w ? xs + p.kw : p.w;                     \
      const T share = mx ? g[i] : g[i] / T((y1 - y0) * (x1 - x0));                                 \
      bool done = false;                                                                           \
      for (long yy = y0; yy < y1 && !done; ++yy)                                                   \
        for (long xx = x0; xx < x1 && !done; ++xx) {                                               \
          const long k = ((b * p.h + yy) * p.w + xx) * p.c + ci;                                   \
          if (!mx || x[k] == y[i]) {                                                               \
            atomicAdd(dx + k, share);                                                              \
            done = mx;                                                                             \
          }                                                                                        \
        }                                                                                          \
    }                                                                                              \
  }                                                                                                \
  extern "C" __global__ void gradus_one_hot_##S(const long long* labels, long count, long depth, T on, T off, \
                                                T* out) {                                          \
    GRADUS_FOR_EACH(i, count * depth) out[i] = labels[i / depth] == i % depth ? on : off;          \
  }
GRADUS_LIBRARY(float, f)
GRADUS_LIBRARY(double, d)
)";
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
