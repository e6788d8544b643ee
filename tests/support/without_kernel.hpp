// A backend's kernel taken out of its table for the life of a scope, so that a test can run the
// path an op or optimizer takes on a backend without it (the composed form, the fallback), then
// put back.
#pragma once
#include <gradus/backend/backends.hpp>

namespace gradus_test {

/// Empties the slot of kernel K for element type T on device type `t` until destroyed.
///   gradus_test::WithoutKernel<be::kernel::SparseXent, double> composed(gd::DeviceType::cpu);
template <class K, class T>
class WithoutKernel {
 public:
  explicit WithoutKernel(gradus::DeviceType t) : slot_(gradus::backend::kernel_slot<K, T>(t)), kept_(slot_) {
    slot_ = nullptr;
  }
  ~WithoutKernel() { slot_ = kept_; }
  WithoutKernel(const WithoutKernel&) = delete;
  WithoutKernel& operator=(const WithoutKernel&) = delete;

 private:
  gradus::backend::kernel_fn<K, T>& slot_;
  gradus::backend::kernel_fn<K, T> kept_;
};

}  // namespace gradus_test
