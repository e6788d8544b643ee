// gradus/detail/endian.hpp — little-endian unsigned integers in byte buffers: the one helper
// that every file format gradus reads or writes uses (.npy/.npz, safetensors, TFRecord, the
// protocol-buffer fields of event files, CRC-32C's eight-byte steps).
#pragma once
#include <bit>
#include <cstddef>
#include <cstdint>
#include <cstring>
#include <string>

namespace gradus::detail {

/// The little-endian unsigned integer of the `N` bytes (1..8) at `p`.
template <size_t N>
  requires(N >= 1 && N <= 8)
uint64_t load_le(const void* p) {
  const auto* b = static_cast<const unsigned char*>(p);
  uint64_t v = 0;
  if constexpr (std::endian::native == std::endian::little) {
    std::memcpy(&v, b, N);  // one load
  } else {
    for (size_t i = N; i-- > 0;) v = v << 8 | b[i];
  }
  return v;
}

/// Appends the low `N` bytes (1..8) of `v` to `out`, least significant first.
template <size_t N>
  requires(N >= 1 && N <= 8)
void store_le(std::string& out, uint64_t v) {
  char b[N];
  for (size_t i = 0; i < N; ++i) b[i] = char((v >> (8 * i)) & 0xFF);
  out.append(b, N);
}

}  // namespace gradus::detail
