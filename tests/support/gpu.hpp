// Whether a test that needs a GPU can run here (a real one, or the emulated device of ctest's
// gpu-emu label). Where none can, the test says why in a WARN starting "no GPU:", which ctest's
// `gpu` tests read as "skipped".
#pragma once
#include <catch2/catch.hpp>

#include <gradus/backend/cuda/device.hpp>
#include <gradus/core/rng.hpp>
#include <gradus/core/tensor.hpp>

namespace gradus_test {

/// A host tensor of shape `s`, uniform in [lo, hi), from seed `seed`.
template <class T>
gradus::Tensor<T> uniform(const gradus::Shape& s, double lo, double hi, uint64_t seed) {
  gradus::Rng rng(seed);
  return gradus::Tensor<T>::random_uniform(s, rng, lo, hi);
}

/// True when a GPU is available; otherwise warns "no GPU: <why>" and returns false.
inline bool gpu_available() {
  if (gradus::cuda::is_available()) return true;
  WARN("no GPU: " << gradus::cuda::unavailable_reason());
  return false;
}

}  // namespace gradus_test
