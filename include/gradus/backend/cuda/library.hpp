// gradus/backend/cuda/library.hpp — the GPU library: the fixed kernels that are not generated
// from an expression. One CUDA source, compiled by NVRTC once per architecture (and kept in the
// kernel cache like any other), loaded once per GPU. This header holds its loader and the small
// kernels (filling, accumulating a gradient, finishing a reduction); the families have a
// header each, beside their device code in library/*.cuh:
//
//   family                                              host wrappers      device code
//   fill, add_into, finish_sum, check_range             library.hpp        library/fill.cuh
//   bias + activation, dropout                          layers.hpp         library/layers.cuh
//   softmax, log_softmax, one_hot                       softmax.hpp        library/softmax.cuh
//   conv2d (im2col + cuBLAS), pooling                   conv.hpp           library/conv.cuh, pool.cuh
//   bilinear sampling (resampler)                       sampling.hpp       library/sampling.cuh
//   max/min, argmax/argmin, prod, logsumexp              reduce.hpp         library/reduce.cuh
//   strided copies, gather/scatter_add, cast             copy.hpp           library/copy.cuh
//   the LSTM sequence's gate passes (+ cuBLAS)           lstm.hpp           library/lstm.cuh
//
// (library/common.cuh: the grid-stride loop and the math every family uses.)
//
//   backend::cuda::fill(p, n, 1.f, dev);   backend::cuda::add_into(dst, src, n, dev);
#pragma once
#include <algorithm>
#include <array>
#include <atomic>
#include <cstddef>
#include <cstdint>
#include <cstring>
#include <string>
#include <type_traits>
#include <vector>

#include "gradus/backend/cuda/codegen.hpp"
#include "gradus/backend/kernels.hpp"
#include "gradus/backend/cuda/deferred.hpp"
#include "gradus/backend/cuda/elementwise.hpp"
#include "gradus/backend/cuda/kernel_cache.hpp"
#include "gradus/backend/cuda/runtime.hpp"
#include "gradus/core/compiled.hpp"
#include "gradus/core/device.hpp"
#include "gradus/core/shape.hpp"

namespace gradus::backend::cuda {

/// The library's CUDA source: each kernel in float and double (suffix _f, _d; the data movement
/// kernels in int64 as well, _l), grid-stride loops.
/// The kernels are in library/*.cuh, one file per family, read by NVRTC through include_root().
const std::string& library_source();

/// NVRTC's options for the library: the gradus headers it includes, and the op structs'
/// unannotated functions compiled as device functions.
std::vector<std::string> library_options();

/// The suffix of the library's kernels for element type T: _f, _d or _l (int64).
template <class T>
constexpr const char* library_suffix() {
  static_assert(std::is_same_v<T, float> || std::is_same_v<T, double> || std::is_same_v<T, int64_t>,
                "THE_ELEMENT_TYPE_MUST_BE_FLOAT_DOUBLE_OR_INT64: cuda library");
  return std::is_same_v<T, float> ? "_f" : std::is_same_v<T, double> ? "_d" : "_l";
}

/// The library kernel `entry` (name and type suffix, `gradus_fill_f`) on GPU `ordinal`: the library
/// compiled for the GPU's architecture (or read from the kernel cache) and loaded, once per GPU
/// (FirstLaunch::library, elementwise.hpp).
void* load_library_function(const std::string& entry, int ordinal);

/// The library kernel `name` (without its type suffix) for element type T on GPU `ordinal`.
template <class T>
void* library_function(const std::string& name, int ordinal) {
  return first_launch().library("gradus_" + name + library_suffix<T>(), ordinal);
}

/// Launches library kernel `fn` over n elements with the given arguments (pointers to each).
void launch_library(void* fn, long n, void** params, int ordinal);

/// Launches a library kernel that gives each of `lines` lines of `n` elements one block (a power
/// of two of threads, 32 to 256, by n), enough blocks to fill the GPU looping over the lines.
void launch_lines(void* fn, long lines, long n, void** params, int ordinal);

/// The library kernel `name` for T on `device`, looked up once per (T, name, GPU).
template <class T, const char* Name>
void* cached_library_function(Device device) {
  static std::array<std::atomic<void*>, 64> fns{};
  void* fn = fns[size_t(device.index)].load(std::memory_order_acquire);
  if (!fn) fns[size_t(device.index)].store(fn = library_function<T>(Name, device.index), std::memory_order_release);
  return fn;
}
inline constexpr char kFill[] = "fill", kAddInto[] = "add_into", kFinishSum[] = "finish_sum",
                      kCheckRange[] = "check_range", kValueAt[] = "value_at";

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

/// Checks that every value is in [0, end) on the GPU, without reading them back: the first bad
/// one's error (`check`'s, with the value and its position) is thrown at the next synchronisation
/// point (deferred.hpp).
inline void check_range(const int64_t* values, int64_t n, int64_t end, const RangeCheck& check, Device device) {
  if (n == 0) return;
  auto* slot = reinterpret_cast<unsigned long long*>(
      DeferredChecks::get().add(device.index, {check.op, check.what, end, check.context()}));
  long count = long(n);
  long long c = end;
  void* args[] = {&values, &count, &c, &slot};
  launch_library(cached_library_function<int64_t, kCheckRange>(device), count, args, device.index);
  void* at[] = {&values, &slot};
  launch_library(cached_library_function<int64_t, kValueAt>(device), 1, at, device.index);
}

inline constexpr char kAdamUpdate[] = "adam_update";

/// One Adam step of `count` parameters and their state (library/optim.cuh): one kernel for each
/// 32 of them.
template <class T>
void adam_update(AdamConstants<T> c, const AdamTensors<T>* params, int count, Device device) {
  void* fn = cached_library_function<T, kAdamUpdate>(device);
  for (int first = 0; first < count; first += AdamBatch<T>::kMax) {
    AdamBatch<T> b{};
    b.count = std::min<long>(count - first, AdamBatch<T>::kMax);
    for (long k = 0; k < b.count; ++k) {
      const AdamTensors<T>& p = params[first + k];
      b.start[k + 1] = b.start[k] + long(p.n);
      b.w[k] = p.w, b.g[k] = p.g, b.m[k] = p.m, b.v[k] = p.v, b.vhat[k] = p.vhat;
    }
    void* args[] = {&c, &b};
    launch_library(fn, b.start[b.count], args, device.index);
  }
}

/// d[0] = T(scale · Σ partials[0..count)): a reduction's per-block partial sums (doubles) into its
/// result, on the device, added in a fixed order (one block of 256 threads).
template <class T>
void finish_sum(T* d, const double* partials, long count, double scale, Device device) {
  void* fn = cached_library_function<T, kFinishSum>(device);
  void* params[] = {&d, &partials, &count, &scale};
  launch_library(fn, 256, params, device.index);  // 256 elements: one block
}

#if GRADUS_DEFINE_COMPILED  // libgradus holds these with GRADUS_COMPILED (core/compiled.hpp)
GRADUS_INLINE void* load_library_function(const std::string& entry, int ordinal) {
  const std::string arch = arch_of(ordinal);
  const Nvrtc& n = Nvrtc::get();
  static const std::string src = source_tag(library_source());  // the library's sources, as NVRTC reads them
  const std::string key =
      "gradus-library/" + arch + "/nvrtc-" + std::to_string(n.major) + "." + std::to_string(n.minor) + src;
  const std::string& ptx = KernelCache::get().ptx(key, [&] {
    return compile_ptx(library_source(), "gradus_library.cu", arch, library_options());
  });
  return load_function(key + "/" + entry, ptx, entry.c_str(), ordinal);
}
// (declared in device.hpp) the first launch's functions, for gd::cuda(i) to set
GRADUS_INLINE void install_first_launch() {
  first_launch_slot() = {&load_elementwise, &elementwise_id, &load_library_function};
}
// (declared in device.hpp) `count` elements of 4 or 8 bytes set to the bytes at `value`, bit for bit
GRADUS_INLINE void fill_bytes(void* dst, Device device, const void* value, size_t element_size, size_t count) {
  if (element_size == 4) {
    float v;
    std::memcpy(&v, value, 4);
    fill(static_cast<float*>(dst), long(count), v, device);
  } else if (element_size == 8) {
    int64_t v;  // as an integer: the kernel moves the bits, whatever they mean
    std::memcpy(&v, value, 8);
    fill(static_cast<int64_t*>(dst), long(count), v, device);
  } else {
    ::gradus::detail::throw_error<device_error>({"Tensor::fill_(", device, "): elements of ", element_size,
                                                 " bytes; the GPU fills 4- and 8-byte elements"});
  }
}

GRADUS_INLINE const std::string& library_source() {
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
                                 "#include \"gradus/backend/cuda/library/reduce.cuh\"\n"
                                 "#include \"gradus/backend/cuda/library/softmax.cuh\"\n"
                                 "#include \"gradus/backend/cuda/library/conv.cuh\"\n"
                                 "#include \"gradus/backend/cuda/library/pool.cuh\"\n"
                                 "#include \"gradus/backend/cuda/library/copy.cuh\"\n"
                                 "#include \"gradus/backend/cuda/library/sampling.cuh\"\n"
                                 "#include \"gradus/backend/cuda/library/lstm.cuh\"\n"
                                 "#include \"gradus/backend/cuda/library/optim.cuh\"\n";
  return src;
}

GRADUS_INLINE std::vector<std::string> library_options() {
  return {"--include-path=" + include_root(), "--device-as-default-execution-space"};
}

GRADUS_INLINE void launch_library(void* fn, long n, void** params, int ordinal) {
  if (n == 0) return;
  make_current(ordinal);
  const Driver& d = Driver::get();
  d.launch(fn, unsigned(grid_blocks(n, ordinal, resident_blocks(fn))), 256, params, "cuLaunchKernel (library)",
           [&] { return function_name(fn); });
}

GRADUS_INLINE void launch_lines(void* fn, long lines, long n, void** params, int ordinal) {
  if (lines == 0) return;
  make_current(ordinal);
  long threads = 32;
  while (threads < 256 && threads < n) threads *= 2;
  const long blocks = std::min(lines, grid_blocks(long(1) << 40, ordinal) * (256 / threads));
  const Driver& d = Driver::get();
  d.launch(fn, unsigned(blocks), unsigned(threads), params, "cuLaunchKernel (library, a block per line)",
           [&] { return function_name(fn); });
}
#endif  // GRADUS_DEFINE_COMPILED
}  // namespace gradus::backend::cuda

#if GRADUS_INSTANCES  // compiled once in libgradus with GRADUS_COMPILED (core/compiled.hpp)
namespace gradus::backend::cuda {
GRADUS_INSTANCE void* library_function<float>(const std::string&, int);
GRADUS_INSTANCE_DOUBLE void* library_function<double>(const std::string&, int);
GRADUS_INSTANCE void fill(float*, long, float, Device);
GRADUS_INSTANCE_DOUBLE void fill(double*, long, double, Device);
GRADUS_INSTANCE void add_into(float*, const float*, long, Device);
GRADUS_INSTANCE_DOUBLE void add_into(double*, const double*, long, Device);
GRADUS_INSTANCE void finish_sum(float*, const double*, long, double, Device);
GRADUS_INSTANCE_DOUBLE void finish_sum(double*, const double*, long, double, Device);
}  // namespace gradus::backend::cuda
#endif
