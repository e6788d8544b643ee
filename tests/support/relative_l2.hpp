// The relative L2 distance of two tensors, for tests that compare a lower-precision result (an
// autocast step's gradients) with the float one.
#pragma once
#include <cmath>

#include <gradus/core/tensor.hpp>

namespace gradus_test {

/// ||got - want|| / ||want|| over all elements, in double (host tensors of equal size).
inline double relative_l2(const gradus::Tensor<float>& got, const gradus::Tensor<float>& want) {
  double d = 0, s = 0;
  for (int64_t j = 0; j < want.size(); ++j) {
    d += std::pow(double(got.data()[j]) - double(want.data()[j]), 2);
    s += std::pow(double(want.data()[j]), 2);
  }
  return std::sqrt(d / s);
}

}  // namespace gradus_test
