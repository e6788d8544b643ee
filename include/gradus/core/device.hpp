// gradus/core/device.hpp — where a tensor's elements live, as a runtime value (as in PyTorch).
//
//   gd::Device d = gd::cpu;          // the host
//   gd::Device g = gd::cuda(0);      // the first CUDA GPU (backend/cuda/device.hpp): throws
//                                    // gd::device_error where there is no driver or no GPU
#pragma once
#include <cstddef>
#include <ostream>

namespace gradus {

enum class DeviceType { cpu, cuda };

/// A device: its type and, for GPUs, its ordinal.
struct Device {
  DeviceType type = DeviceType::cpu;
  int index = 0;

  constexpr bool is_cpu() const { return type == DeviceType::cpu; }
  constexpr bool is_cuda() const { return type == DeviceType::cuda; }
  friend constexpr bool operator==(const Device&, const Device&) = default;
  /// `cpu` or `cuda:0`.
  friend std::ostream& operator<<(std::ostream& os, const Device& d) {
    if (d.is_cpu()) return os << "cpu";
    return os << "cuda:" << d.index;
  }
};

/// The host CPU.
inline constexpr Device cpu{};

namespace detail {
struct Block;
}

/// What a backend that owns non-CPU memory gives core/, registered at run time (the CUDA backend
/// registers itself the first time a gd::cuda device is made), so core/ never names a backend and
/// a CPU-only program links nothing new. `allocate` returns a buffer block whose data() is memory
/// of `device` (its `device` field set, its `recycle` returning it to the backend's cache);
/// `copy` moves bytes between two buffers of which at least one is the backend's.
struct DeviceHooks {
  detail::Block* (*allocate)(Device device, size_t bytes) = nullptr;
  void (*copy)(void* dst, Device dst_device, const void* src, Device src_device, size_t bytes) = nullptr;
};

/// The hooks of the backend for device type `t` (all null until the backend registers).
inline DeviceHooks& device_hooks(DeviceType t) {
  static DeviceHooks hooks[2];
  return hooks[static_cast<int>(t)];
}

}  // namespace gradus
