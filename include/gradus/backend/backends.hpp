// gradus/backend/backends.hpp — the backends built into gradus, registered in one place, and
// the lookup every entry point of backend/backend.hpp makes.
//
// Adding a backend built into the library: a folder backend/<name>/ with its kernels and a
// `kernels.hpp` that defines `<name>::Backend` (its device type and its table, as
// cpu/kernels.hpp does), and one name in the list below. A backend outside the library calls
// register_kernel at run time instead (docs/architecture.md shows both).
#pragma once
#include "gradus/backend/cpu/kernels.hpp"
#include "gradus/backend/cuda/kernels.hpp"
#include "gradus/backend/registry.hpp"

namespace gradus::backend {

/// The backends compiled into gradus.
using CompiledBackends = BackendList<cpu::Backend, cuda::Backend>;

/// The slot of kernel K for T on device type `t`: the function that runs it there, or null.
template <class K, class T>
kernel_fn<K, T>& kernel_slot(DeviceType t) {
  return KernelSlots<K, T, CompiledBackends>::fns[size_t(t)];
}

/// Makes `fn` the kernel K for T on device type `t` (a backend registered at run time; call it
/// before the first tensor of that device type is made). Null removes it.
template <class K, class T>
void register_kernel(DeviceType t, kernel_fn<K, T> fn) {
  kernel_slot<K, T>(t) = fn;
}

/// True when the backend of `device` has kernel K for T.
template <class K, class T>
bool implements(Device device) {
  return kernel_slot<K, T>(device.type) != nullptr;
}

/// The kernel K for T on `device`; gd::device_error naming the op, the element type and the
/// device when its backend has none.
template <class K, class T>
kernel_fn<K, T> find(Device device) {
  const kernel_fn<K, T> fn = kernel_slot<K, T>(device.type);
  if (!fn) [[unlikely]]
    detail::no_kernel(K::name, detail::element_label<T>(), device);
  return fn;
}

/// Runs kernel K for T on `device` with `args` (the device is passed last).
template <class K, class T, class... A>
void run(Device device, A&&... args) {
  find<K, T>(device)(std::forward<A>(args)..., device);
}

}  // namespace gradus::backend
