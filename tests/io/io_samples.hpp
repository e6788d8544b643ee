// Helpers shared by the tests/io files: deterministic tensors, a bitwise comparison of two
// AnyTensors, and the sample list that tests/fixtures/io/read_check.py expects.
#pragma once
#include <cstdint>
#include <cstring>
#include <type_traits>
#include <variant>

#include <gradus/gradus.hpp>
#include <gradus/io.hpp>

namespace gradus::io::testing {

/// arange(shape.numel()) * scale + offset.
template <class T>
Tensor<T> seq(const Shape& shape, T scale, T offset) {
  Tensor<T> t(shape);
  for (int64_t i = 0; i < t.size(); ++i) t.data()[i] = T(i) * scale + offset;
  return t;
}

/// Same dtype, shape and bits.
inline bool same(const AnyTensor& a, const AnyTensor& b) {
  if (a.index() != b.index()) return false;
  return std::visit(
      [&](const auto& x) {
        const auto& y = std::get<std::decay_t<decltype(x)>>(b);
        return x.shape() == y.shape() && std::memcmp(x.data(), y.data(), size_t(x.size()) * sizeof(*x.data())) == 0;
      },
      a);
}

/// One tensor of each dtype, a scalar and an empty one: the arrays read_check.py expects, in order.
inline TensorList sample() {
  return {{"a", seq<float>({2, 3}, 0.5f, 0.f)},
          {"b", seq<double>({5}, 0.25, -1.0)},
          {"c", seq<int64_t>({2, 2}, -3, 0)},
          {"s", Tensor<double>::scalar(3.5)},
          {"e", Tensor<float>::zeros({0, 3})}};
}

}  // namespace gradus::io::testing
