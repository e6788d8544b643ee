// gradus/backend/cuda/device.hpp — `gd::cuda(i)`: a CUDA GPU as a gd::Device, checked against
// the driver found at run time.
//
//   if (gd::cuda::is_available()) { gd::Device d = gd::cuda(0); ... }
//   gd::cuda(0);   // without a driver or GPU: gd::device_error
//                  // "cuda(0): no CUDA driver (libcuda.so.1, libcuda.so not found); check
//                  //  gd::cuda::is_available() first and fall back to gd::cpu"
#pragma once
#include <string>

#include "gradus/core/compiled.hpp"
#include "gradus/backend/cuda/blas.hpp"
#include "gradus/backend/cuda/memory.hpp"
#include "gradus/backend/cuda/nccl.hpp"
#include "gradus/backend/cuda/staging.hpp"
#include "gradus/backend/cuda/runtime.hpp"
#include "gradus/core/device.hpp"

namespace gradus {

/// The CUDA GPU of ordinal `index`, and the questions about CUDA a program asks before
/// choosing a device. Constructing one checks that the driver is there and that the GPU exists;
/// it converts to gd::Device.
struct cuda {
  int index;

  explicit cuda(int i = 0);
  operator Device() const { return Device{DeviceType::cuda, index}; }

  /// True when a CUDA driver is loaded and reports at least one GPU.
  static bool is_available() { return backend::cuda::Driver::get().problem.empty(); }
  /// The number of GPUs the driver reports (0 without a driver).
  static int device_count() { return backend::cuda::Driver::get().devices; }
  /// Why CUDA cannot be used here (empty when it can): no driver, no GPU, ...
  static std::string unavailable_reason() { return backend::cuda::Driver::get().problem; }
  /// The GPU's name as the driver gives it (`NVIDIA H100 80GB HBM3`).
  std::string name() const;
  /// Lets float matrix products use TF32 tensor cores (faster, inputs rounded to 10-bit
  /// mantissas); off by default, as in PyTorch.
  static void allow_tf32(bool on) { backend::cuda::tf32_allowed().store(on); }
  static bool tf32_allowed() { return backend::cuda::tf32_allowed().load(); }
  /// Counters of this GPU's caching allocator (a steady-state step adds no device_allocations).
  backend::cuda::DeviceMemoryStats memory_stats() const { return backend::cuda::device_cache(index).stats(); }
  /// Returns this GPU's cached (unused) tensor buffers to the driver.
  void empty_cache() const { backend::cuda::device_cache(index).empty(); }
  /// Waits until every kernel and copy issued to this GPU has finished; a check made on the GPU
  /// since the last synchronisation (a sparse loss's labels) throws its error here.
  void synchronize() const {
    backend::cuda::make_current(index);
    const auto& d = backend::cuda::Driver::get();
    d.check(d.ctx_synchronize(), "cuCtxSynchronize");
    backend::cuda::DeferredChecks::get().report(index);
  }
  /// The compute capability as major * 10 + minor (90 for an H100).
  int compute_capability() const {
    const auto& d = backend::cuda::Driver::get();
    int dev = 0, major = 0, minor = 0;
    d.device_get(&dev, index);
    d.device_get_attribute(&major, backend::cuda::Driver::kComputeCapabilityMajor, dev);
    d.device_get_attribute(&minor, backend::cuda::Driver::kComputeCapabilityMinor, dev);
    return major * 10 + minor;
  }
};

}  // namespace gradus

namespace gradus::backend::cuda {
/// DeviceHooks::fill for GPU memory (Tensor::fill_), registered with the memory hooks; a library
/// kernel, defined in library.hpp.
void fill_bytes(void* dst, Device device, const void* value, size_t element_size, size_t count);
/// Lets kernels be compiled and loaded on their first launch (FirstLaunch, elementwise.hpp);
/// defined in library.hpp.
void install_first_launch();
}  // namespace gradus::backend::cuda

#if GRADUS_DEFINE_COMPILED  // libgradus holds these with GRADUS_COMPILED (core/compiled.hpp)
namespace gradus {
GRADUS_INLINE cuda::cuda(int i) : index(i) {
  const auto& d = backend::cuda::Driver::get();
  GRADUS_CHECK(device_error, d.problem.empty(), "cuda(", i, "): ", d.problem,
               "; check gd::cuda::is_available() first and fall back to gd::cpu");
  GRADUS_CHECK(device_error, i >= 0 && i < d.devices, "cuda(", i, "): no such GPU; the driver reports ", d.devices,
               " (ordinals 0 to ", d.devices - 1, ")");
  backend::cuda::register_memory_hooks();
  static const bool once = [] {
    device_hooks(DeviceType::cuda).fill = backend::cuda::fill_bytes;
    backend::collective_hooks(DeviceType::cuda) = backend::cuda::nccl_hooks();
    backend::stager_factory(DeviceType::cuda) = backend::cuda::make_cuda_stager;
    backend::cuda::install_first_launch();
    return true;
  }();
  (void)once;
}
GRADUS_INLINE std::string cuda::name() const {
  const auto& d = backend::cuda::Driver::get();
  int dev = 0;
  char buf[256] = {};
  if (const int rc = d.device_get(&dev, index); rc != 0)
    ::gradus::detail::throw_error<device_error>({"cuda(", index, ").name(): ", d.error_string(rc)});
  if (const int rc = d.device_get_name(buf, int(sizeof buf), dev); rc != 0)
    ::gradus::detail::throw_error<device_error>({"cuda(", index, ").name(): ", d.error_string(rc)});
  return buf;
}
}  // namespace gradus
#endif  // GRADUS_DEFINE_COMPILED
