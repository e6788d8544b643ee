// gradus/backend/registry.hpp — backends as tables of kernels, and the lookup by device.
//
// Every kernel of backend/kernels.hpp has, per element type, one slot per device type holding
// the function of the backend that owns that device type (null where it has none). The
// backends built into gradus fill their slots at compile time: a backend is a type with its
// `device_type` and a variable template `kernel<K, T>` (null where it provides nothing), listed
// once in backend/backends.hpp. Only the kernels a program calls are instantiated, for the
// element types it calls them with. A backend that lives outside the library (a test double,
// an accelerator of its own) registers its functions at run time with register_kernel, for a
// device type it took from register_device_type (core/device.hpp), before it makes tensors.
//
//   kernel_fn<kernel::Gemm, float> f = find<kernel::Gemm, float>(device);  // or device_error
#pragma once
#include <array>
#include <cstdint>
#include <string>

#include "gradus/backend/kernels.hpp"
#include "gradus/core/device.hpp"
#include "gradus/core/error.hpp"

namespace gradus::backend {

/// The function type of kernel K for element type T.
template <class K, class T>
using kernel_fn = typename K::template fn<T>;

/// The backends compiled in, as types: `B::device_type` and `B::kernel<K, T>` of each.
template <class... B>
struct BackendList {
  /// The compile-time slots of kernel K for T: each backend's function at its device type.
  template <class K, class T>
  static constexpr std::array<kernel_fn<K, T>, kMaxDeviceTypes> table() {
    std::array<kernel_fn<K, T>, kMaxDeviceTypes> t{};
    ((t[size_t(B::device_type)] = B::template kernel<K, T>), ...);
    return t;
  }
};

/// The slots of kernel K for element type T, one per device type.
template <class K, class T, class Backends>
struct KernelSlots {
  static inline constinit std::array<kernel_fn<K, T>, kMaxDeviceTypes> fns = Backends::template table<K, T>();
};

}  // namespace gradus::backend

namespace gradus::detail {

template <class T>
constexpr const char* element_label() {
  if constexpr (std::is_same_v<T, float>) return "float";
  else if constexpr (std::is_same_v<T, double>) return "double";
  else if constexpr (std::is_same_v<T, int64_t>) return "int64";
  else if constexpr (std::is_same_v<T, uint8_t>) return "uint8";
  else if constexpr (std::is_same_v<T, bfloat16>) return "bfloat16";
  else return "this element type's";
}

/// The error of a lookup that found no kernel: it names the op, the element type and the device.
[[noreturn]] inline void no_kernel(const char* op, const char* element, Device device) {
  throw_error<device_error>({op, ": the ", device_type_name(device.type), " backend has no ", element,
                             " kernel for it (operands on ", device,
                             "); compute it on the CPU (.to(gd::cpu)) or use another op"});
}

}  // namespace gradus::detail
