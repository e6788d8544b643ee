// gradus/backend/cuda/library.hpp — the few fixed GPU kernels that are not generated from an
// expression: filling, accumulating a gradient, finishing a reduction. One source, compiled by
// NVRTC once per architecture (and kept in the kernel cache like any other), loaded once per GPU.
//
//   backend::cuda::fill(p, n, 1.f, dev);   backend::cuda::add_into(dst, src, n, dev);
#pragma once
#include <string>
#include <type_traits>

#include "gradus/backend/cuda/elementwise.hpp"

namespace gradus::backend::cuda {

/// The library's CUDA source: each kernel in float and double (suffix _f, _d), grid-stride loops.
inline const std::string& library_source() {
  static const std::string src = R"(
#define GRADUS_FOR_EACH(i, n) \
  for (long i = blockIdx.x * (long)blockDim.x + threadIdx.x; i < (n); i += (long)gridDim.x * blockDim.x)
#define GRADUS_LIBRARY(T, S)                                                                        \
  extern "C" __global__ void gradus_fill_##S(T* d, T v, long n) { GRADUS_FOR_EACH(i, n) d[i] = v; } \
  extern "C" __global__ void gradus_add_into_##S(T* d, const T* s, long n) {                         \
    GRADUS_FOR_EACH(i, n) d[i] += s[i];                                                             \
  }                                                                                                 \
  extern "C" __global__ void gradus_finish_sum_##S(T* d, const double* acc, double scale) {         \
    if (blockIdx.x == 0 && threadIdx.x == 0) d[0] = (T)(acc[0] * scale);                           \
  }
GRADUS_LIBRARY(float, f)
GRADUS_LIBRARY(double, d)
)";
  return src;
}

/// The library kernel `name` (without its type suffix) for element type T on GPU `ordinal`.
template <class T>
void* library_function(const std::string& name, int ordinal) {
  static_assert(std::is_same_v<T, float> || std::is_same_v<T, double>, "THE_ELEMENT_TYPE_MUST_BE_FLOAT_OR_DOUBLE: cuda library");
  const std::string arch = arch_of(ordinal);
  const Nvrtc& n = Nvrtc::get();
  const std::string key = "gradus-library/" + arch + "/nvrtc-" + std::to_string(n.major) + "." + std::to_string(n.minor);
  const std::string& ptx = KernelCache::get().ptx(key, [&] { return compile_ptx(library_source(), "gradus_library.cu", arch); });
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

/// d[i] = v for i < n, on GPU `device`.
template <class T>
void fill(T* d, long n, T v, Device device) {
  static std::array<std::atomic<void*>, 64> fns{};
  void* fn = fns[size_t(device.index)].load(std::memory_order_acquire);
  if (!fn) fns[size_t(device.index)].store(fn = library_function<T>("fill", device.index), std::memory_order_release);
  void* params[] = {&d, &v, &n};
  launch_library(fn, n, params, device.index);
}

/// d[i] += s[i] for i < n, on GPU `device`.
template <class T>
void add_into(T* d, const T* s, long n, Device device) {
  static std::array<std::atomic<void*>, 64> fns{};
  void* fn = fns[size_t(device.index)].load(std::memory_order_acquire);
  if (!fn) fns[size_t(device.index)].store(fn = library_function<T>("add_into", device.index), std::memory_order_release);
  void* params[] = {&d, &s, &n};
  launch_library(fn, n, params, device.index);
}

/// d[0] = T(acc[0] * scale): a reduction's double accumulator into its result, on the device.
template <class T>
void finish_sum(T* d, const double* acc, double scale, Device device) {
  static std::array<std::atomic<void*>, 64> fns{};
  void* fn = fns[size_t(device.index)].load(std::memory_order_acquire);
  if (!fn) fns[size_t(device.index)].store(fn = library_function<T>("finish_sum", device.index), std::memory_order_release);
  void* params[] = {&d, &acc, &scale};
  launch_library(fn, 1, params, device.index);
}

}  // namespace gradus::backend::cuda
