// gradus/core/device.hpp — where a tensor's elements live, as a runtime value (as in PyTorch).
//
//   gd::Device d = gd::cpu;          // the host
//   gd::Device g = gd::cuda(0);      // the first CUDA GPU (backend/cuda/device.hpp): throws
//                                    // gd::device_error where there is no driver or no GPU
#pragma once
#include <cstddef>
#include <ostream>
#include <stdexcept>
#include <string>

#include "gradus/core/compiled.hpp"

namespace gradus {

/// The kind of a device: which backend owns its memory and runs its kernels. `cpu` and `cuda`
/// come with gradus; a backend that lives outside the library takes a further value from
/// register_device_type (backend/backends.hpp's registration, docs/architecture.md).
enum class DeviceType : int { cpu = 0, cuda = 1 };

/// How many device types a program can hold (cpu, cuda and registered ones).
inline constexpr int kMaxDeviceTypes = 8;

namespace detail {
/// The printed name of each device type; empty for a value nobody registered.
std::string& device_type_name_slot(DeviceType t);
}  // namespace detail

/// The name a device type prints as (`cpu`, `cuda`, or the registered one).
inline const std::string& device_type_name(DeviceType t) { return detail::device_type_name_slot(t); }

/// A new device type named `name`, for a backend registered at run time (its tensors print as
/// `name:index`); registering the same name again returns the same type. Throws
/// std::length_error when every one of the kMaxDeviceTypes values is taken.
DeviceType register_device_type(const std::string& name);

/// A device: its type and, for GPUs, its ordinal.
struct Device {
  DeviceType type = DeviceType::cpu;
  int index = 0;

  constexpr bool is_cpu() const { return type == DeviceType::cpu; }
  constexpr bool is_cuda() const { return type == DeviceType::cuda; }
  friend constexpr bool operator==(const Device&, const Device&) = default;
  /// `cpu`, `cuda:0`, or a registered type's `name:index`.
  friend std::ostream& operator<<(std::ostream& os, const Device& d) { return d.print(os); }

 private:
  std::ostream& print(std::ostream& os) const;
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
/// `copy` moves bytes between two buffers of which at least one is the backend's; `fill` (optional)
/// sets `count` elements of `element_size` bytes in the backend's memory to the bytes at `value`.
struct DeviceHooks {
  detail::Block* (*allocate)(Device device, size_t bytes) = nullptr;
  void (*copy)(void* dst, Device dst_device, const void* src, Device src_device, size_t bytes) = nullptr;
  void (*fill)(void* dst, Device device, const void* value, size_t element_size, size_t count) = nullptr;
};

/// The hooks of the backend for device type `t` (all null until the backend registers).
DeviceHooks& device_hooks(DeviceType t);

}  // namespace gradus

#if GRADUS_DEFINE_COMPILED  // libgradus holds these with GRADUS_COMPILED (core/compiled.hpp)
namespace gradus {
GRADUS_INLINE std::string& detail::device_type_name_slot(DeviceType t) {
  static std::string names[kMaxDeviceTypes] = {"cpu", "cuda"};
  return names[static_cast<int>(t)];
}
GRADUS_INLINE DeviceType register_device_type(const std::string& name) {
  for (int i = 0; i < kMaxDeviceTypes; ++i)
    if (detail::device_type_name_slot(DeviceType(i)) == name) return DeviceType(i);
  for (int i = 2; i < kMaxDeviceTypes; ++i) {
    std::string& slot = detail::device_type_name_slot(DeviceType(i));
    if (slot.empty()) {
      slot = name;
      return DeviceType(i);
    }
  }
  throw std::length_error("register_device_type: every device type is taken, cannot add '" + name + "'");
}
GRADUS_INLINE std::ostream& Device::print(std::ostream& os) const {
  if (is_cpu()) return os << "cpu";
  return os << device_type_name(type) << ':' << index;
}
GRADUS_INLINE DeviceHooks& device_hooks(DeviceType t) {
  static DeviceHooks hooks[kMaxDeviceTypes];
  return hooks[static_cast<int>(t)];
}
}  // namespace gradus
#endif  // GRADUS_DEFINE_COMPILED
