// Bit-for-bit comparisons of floats, tensors and optimizer states, for the tests of exact
// resumption and of the 16-bit formats.
#pragma once
#include <bit>
#include <cmath>
#include <cstdint>
#include <cstring>

#include <gradus/core/tensor.hpp>
#include <gradus/optim.hpp>

namespace gradus_test {

/// The bits of x equal those of `expected` (a NaN: any NaN of the same sign).
inline bool same_float(float x, float expected) {
  if (std::isnan(expected)) return std::isnan(x) && std::signbit(x) == std::signbit(expected);
  return std::bit_cast<uint32_t>(x) == std::bit_cast<uint32_t>(expected);
}

/// Same shape and the same bits in every element (host tensors).
template <class T>
bool same_bits(const gradus::Tensor<T>& a, const gradus::Tensor<T>& b) {
  return a.shape() == b.shape() && std::memcmp(a.data(), b.data(), size_t(a.size()) * sizeof(T)) == 0;
}

/// The same names in the same order, each with the same bits.
inline bool same_state(const gradus::optim::StateDict<double>& a, const gradus::optim::StateDict<double>& b) {
  if (a.size() != b.size()) return false;
  for (size_t i = 0; i < a.size(); ++i)
    if (a[i].first != b[i].first || !same_bits(a[i].second, b[i].second)) return false;
  return true;
}

}  // namespace gradus_test
