// gradus/io/tensor_list.hpp — the named-tensor containers that every gd::io format reads and
// writes, and the little-endian element copies they share.
//
// A file holds tensors of the three element types gradus has (float, double, int64_t), so a
// tensor read from a file is an AnyTensor (a std::variant); `std::get<gd::Tensor<float>>(t)` or
// `Safetensors::get<float>(name)` gives the typed handle. Files store elements little-endian;
// the copies below swap bytes on a big-endian host.
#pragma once
#include <bit>
#include <cstddef>
#include <cstdint>
#include <cstring>
#include <map>
#include <string>
#include <string_view>
#include <utility>
#include <variant>
#include <vector>

#include "gradus/core/compiled.hpp"
#include "gradus/core/error.hpp"
#include "gradus/core/shape.hpp"
#include "gradus/core/tensor.hpp"
#include "gradus/detail/endian.hpp"

namespace gradus::io {

/// A tensor of any element type gradus stores: float, double or int64_t.
using AnyTensor = std::variant<Tensor<float>, Tensor<double>, Tensor<int64_t>>;
/// Named tensors in file order; a file never holds two tensors of the same name.
using TensorList = std::vector<std::pair<std::string, AnyTensor>>;
/// String key/value pairs stored with a file (safetensors "__metadata__").
using Metadata = std::map<std::string, std::string>;

namespace detail {

/// The shape of whichever tensor `t` holds.
inline const Shape& shape_of(const AnyTensor& t) {
  return std::visit([](const auto& x) -> const Shape& { return x.shape(); }, t);
}
/// False for a default-constructed (storage-less) tensor.
inline bool is_defined(const AnyTensor& t) {
  return std::visit([](const auto& x) { return x.defined(); }, t);
}
/// Bytes per element of whichever tensor `t` holds (4 or 8).
inline size_t element_size(const AnyTensor& t) {
  return std::visit([](const auto& x) { return sizeof(typename std::decay_t<decltype(x)>::value_type); }, t);
}

/// Reverses the bytes of each of `n` elements of `width` bytes at `p` (big-endian hosts only).
void swap_each(char* p, size_t n, size_t width);

/// Writes the elements of `t` to `dst` as little-endian bytes (t.size() * sizeof(T) of them).
void write_le(char* dst, const AnyTensor& t);

/// A new tensor of `shape` holding the little-endian elements at `src` (shape.numel() of them).
template <Element T>
Tensor<T> read_le(const char* src, const Shape& shape) {
  Tensor<T> t(shape);
  const size_t n = size_t(shape.numel());
  if (n) std::memcpy(t.data(), src, n * sizeof(T));
  if constexpr (std::endian::native == std::endian::big) swap_each(reinterpret_cast<char*>(t.data()), n, sizeof(T));
  return t;
}

using ::gradus::detail::load_le;
using ::gradus::detail::store_le;

/// Product of `dims` when the product of its nonzero dimensions, times `width` bytes, fits in an
/// int64_t; false on overflow. A zero dimension makes the product 0, but the other dimensions are
/// bounded all the same: a shape [0, 2^62, 2^62] is rejected, since a reduction over its zero
/// axis or a reshape would produce a count that wraps.
bool checked_numel(const std::vector<uint64_t>& dims, uint64_t width, uint64_t& numel, uint64_t& bytes);

}  // namespace detail
}  // namespace gradus::io

#if GRADUS_DEFINE_COMPILED  // libgradus holds these with GRADUS_COMPILED (core/compiled.hpp)
namespace gradus::io::detail {
GRADUS_INLINE void swap_each(char* p, size_t n, size_t width) {
  for (size_t i = 0; i < n; ++i, p += width)
    for (size_t a = 0, b = width - 1; a < b; ++a, --b) std::swap(p[a], p[b]);
}

GRADUS_INLINE void write_le(char* dst, const AnyTensor& t) {
  std::visit(
      [dst](const auto& x) {
        using T = typename std::decay_t<decltype(x)>::value_type;
        const size_t n = size_t(x.size());
        if (n) std::memcpy(dst, x.to(gradus::cpu).data(), n * sizeof(T));  // a GPU's tensor is read back first
        if constexpr (std::endian::native == std::endian::big) swap_each(dst, n, sizeof(T));
      },
      t);
}

GRADUS_INLINE bool checked_numel(const std::vector<uint64_t>& dims, uint64_t width, uint64_t& numel,
                                 uint64_t& bytes) {
  constexpr uint64_t kMax = uint64_t(INT64_MAX);
  uint64_t n = 1;
  bool zero = false;
  for (uint64_t d : dims) {
    if (d == 0) {
      zero = true;
      continue;
    }
    if (d > kMax || n > kMax / d) return false;
    n *= d;
  }
  if (n > kMax / width) return false;
  numel = zero ? 0 : n;
  bytes = numel * width;
  return true;
}

}  // namespace gradus::io::detail
#endif  // GRADUS_DEFINE_COMPILED
