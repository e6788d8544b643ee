// gradus/detail/crc32c.hpp — CRC-32C (Castagnoli) and the masked form TFRecord files use
// (gd::io's TFRecord files and gd::summary's event files).
//
// CRC-32C is the reflected CRC with polynomial 0x82F63B78, initial value and final xor
// 0xFFFFFFFF; its check value is crc32c("123456789") = 0xE3069283. The portable path reads
// eight bytes per step with eight 256-entry tables built at compile time ("slicing-by-8");
// when the compiler targets SSE4.2 the CPU's crc32 instruction is used instead (same result).
// TFRecord stores every CRC masked: rotate right by 15 bits, then add 0xa282ead8 (mod 2^32),
// so that a CRC of data which itself contains CRCs does not degenerate.
#pragma once
#include <array>
#include <cstddef>
#include <cstdint>
#include <cstring>
#include <string_view>

#if defined(__SSE4_2__)
#include <nmmintrin.h>
#endif

#include "gradus/core/compiled.hpp"
#include "gradus/detail/endian.hpp"

namespace gradus::detail {

using Crc32cTables = std::array<std::array<uint32_t, 256>, 8>;

consteval Crc32cTables make_crc32c_tables() {
  Crc32cTables t{};
  for (uint32_t i = 0; i < 256; ++i) {
    uint32_t c = i;
    for (int k = 0; k < 8; ++k) c = (c & 1) ? (c >> 1) ^ 0x82F63B78u : c >> 1;
    t[0][i] = c;
  }
  for (int s = 1; s < 8; ++s)
    for (uint32_t i = 0; i < 256; ++i) t[s][i] = (t[s - 1][i] >> 8) ^ t[0][t[s - 1][i] & 0xFF];
  return t;
}

inline constexpr Crc32cTables crc32c_tables = make_crc32c_tables();

/// Continues the raw (un-inverted) CRC state `c` over `n` bytes with the table method.
uint32_t crc32c_extend_portable(uint32_t c, const unsigned char* p, size_t n);

#if defined(__SSE4_2__)
inline uint32_t crc32c_extend_sse42(uint32_t c, const unsigned char* p, size_t n) {
  uint64_t c64 = c;
  for (; n >= 8; n -= 8, p += 8) {
    uint64_t w;
    std::memcpy(&w, p, 8);
    c64 = _mm_crc32_u64(c64, w);
  }
  c = uint32_t(c64);
  for (; n > 0; --n, ++p) c = _mm_crc32_u8(c, *p);
  return c;
}
#endif

/// CRC-32C of `data` by the portable table method, whatever the target (for tests).
uint32_t crc32c_portable(std::string_view data);

/// CRC-32C (Castagnoli) of `data`: crc32c("123456789") == 0xE3069283.
uint32_t crc32c(std::string_view data);

/// The TFRecord mask of a CRC: ((c >> 15) | (c << 17)) + 0xa282ead8, in uint32 arithmetic.
constexpr uint32_t mask_crc(uint32_t c) { return ((c >> 15) | (c << 17)) + 0xa282ead8u; }

/// `mask_crc(crc32c(data))`, the checksum stored in TFRecord framing.
inline uint32_t masked_crc32c(std::string_view data) { return mask_crc(crc32c(data)); }

}  // namespace gradus::detail

#if GRADUS_DEFINE_COMPILED  // libgradus holds these with GRADUS_COMPILED (core/compiled.hpp)
namespace gradus::detail {
GRADUS_INLINE uint32_t crc32c_extend_portable(uint32_t c, const unsigned char* p, size_t n) {
  const auto& t = crc32c_tables;
  for (; n >= 8; n -= 8, p += 8) {
    const uint64_t w = load_le<8>(p) ^ c;
    c = t[7][w & 0xFF] ^ t[6][(w >> 8) & 0xFF] ^ t[5][(w >> 16) & 0xFF] ^ t[4][(w >> 24) & 0xFF] ^
        t[3][(w >> 32) & 0xFF] ^ t[2][(w >> 40) & 0xFF] ^ t[1][(w >> 48) & 0xFF] ^ t[0][w >> 56];
  }
  for (; n > 0; --n, ++p) c = (c >> 8) ^ t[0][(c ^ *p) & 0xFF];
  return c;
}

GRADUS_INLINE uint32_t crc32c_portable(std::string_view data) {
  return ~crc32c_extend_portable(~0u, reinterpret_cast<const unsigned char*>(data.data()), data.size());
}

GRADUS_INLINE uint32_t crc32c(std::string_view data) {
  const auto* p = reinterpret_cast<const unsigned char*>(data.data());
#if defined(__SSE4_2__)
  return ~crc32c_extend_sse42(~0u, p, data.size());
#else
  return ~crc32c_extend_portable(~0u, p, data.size());
#endif
}
}  // namespace gradus::detail
#endif  // GRADUS_DEFINE_COMPILED
