// gradus/core/device.hpp — where a tensor's elements live, as a runtime value (as in PyTorch).
//
//   gd::Device d = gd::cpu;          // the host
//   gd::Device g = gd::cuda(0);      // the first CUDA GPU (backend/cuda/device.hpp): throws
//                                    // gd::device_error where there is no driver or no GPU
#pragma once
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

}  // namespace gradus
