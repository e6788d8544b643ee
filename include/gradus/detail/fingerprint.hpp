// gradus/detail/fingerprint.hpp — Fingerprint64, the 64-bit string hash TensorFlow buckets strings
// with (tf.strings.to_hash_bucket_fast, hashed feature columns, out-of-vocabulary buckets): FarmHash's
// "na" variant of Hash64, whose values are fixed for all time, so that a column hashed here puts
// every string in the bucket TensorFlow puts it in. Little-endian loads on any host.
#pragma once
#include <cstddef>
#include <cstdint>
#include <string_view>
#include <utility>

#include "gradus/detail/endian.hpp"

namespace gradus::detail {

namespace farm {

inline constexpr uint64_t k0 = 0xc3a5c85c97cb3127ULL;
inline constexpr uint64_t k1 = 0xb492b66fbe98f273ULL;
inline constexpr uint64_t k2 = 0x9ae16a3b2f90404fULL;

inline uint64_t fetch64(const char* p) { return load_le<8>(p); }
inline uint64_t fetch32(const char* p) { return load_le<4>(p); }
inline uint64_t rotate(uint64_t v, int s) { return s == 0 ? v : (v >> s) | (v << (64 - s)); }
inline uint64_t shift_mix(uint64_t v) { return v ^ (v >> 47); }

inline uint64_t hash16(uint64_t u, uint64_t v, uint64_t mul) {
  uint64_t a = (u ^ v) * mul;
  a ^= a >> 47;
  uint64_t b = (v ^ a) * mul;
  b ^= b >> 47;
  return b * mul;
}

inline uint64_t hash_0_to_16(const char* s, size_t len) {
  if (len >= 8) {
    const uint64_t mul = k2 + len * 2;
    const uint64_t a = fetch64(s) + k2, b = fetch64(s + len - 8);
    const uint64_t c = rotate(b, 37) * mul + a, d = (rotate(a, 25) + b) * mul;
    return hash16(c, d, mul);
  }
  if (len >= 4) {
    const uint64_t mul = k2 + len * 2;
    return hash16(len + (fetch32(s) << 3), fetch32(s + len - 4), mul);
  }
  if (len > 0) {
    const auto a = static_cast<uint8_t>(s[0]), b = static_cast<uint8_t>(s[len >> 1]), c = static_cast<uint8_t>(s[len - 1]);
    const uint32_t y = uint32_t(a) + (uint32_t(b) << 8), z = uint32_t(len) + (uint32_t(c) << 2);
    return shift_mix(y * k2 ^ z * k0) * k2;
  }
  return k2;
}

inline uint64_t hash_17_to_32(const char* s, size_t len) {
  const uint64_t mul = k2 + len * 2;
  const uint64_t a = fetch64(s) * k1, b = fetch64(s + 8), c = fetch64(s + len - 8) * mul, d = fetch64(s + len - 16) * k2;
  return hash16(rotate(a + b, 43) + rotate(c, 30) + d, a + rotate(b + k2, 18) + c, mul);
}

inline uint64_t hash_33_to_64(const char* s, size_t len) {
  const uint64_t mul = k2 + len * 2;
  const uint64_t a = fetch64(s) * k2, b = fetch64(s + 8), c = fetch64(s + len - 8) * mul, d = fetch64(s + len - 16) * k2;
  const uint64_t y = rotate(a + b, 43) + rotate(c, 30) + d;
  const uint64_t z = hash16(y, a + rotate(b + k2, 18) + c, mul);
  const uint64_t e = fetch64(s + 16) * mul, f = fetch64(s + 24);
  const uint64_t g = (y + fetch64(s + len - 32)) * mul, h = (z + fetch64(s + len - 24)) * mul;
  return hash16(rotate(e + f, 43) + rotate(g, 30) + h, e + rotate(f + a, 18) + g, mul);
}

/// Two 64-bit halves mixed from the 32 bytes at s and two seeds.
inline std::pair<uint64_t, uint64_t> weak32(const char* s, uint64_t a, uint64_t b) {
  const uint64_t w = fetch64(s), x = fetch64(s + 8), y = fetch64(s + 16), z = fetch64(s + 24);
  a += w;
  b = rotate(b + a + z, 21);
  const uint64_t c = a;
  a += x;
  a += y;
  b += rotate(a, 44);
  return {a + z, b + c};
}

}  // namespace farm

/// TensorFlow's Fingerprint64 of `s` (FarmHash's Hash64, "na" variant).
inline uint64_t fingerprint64(std::string_view str) {
  using namespace farm;
  const char* s = str.data();
  const size_t len = str.size();
  if (len <= 16) return hash_0_to_16(s, len);
  if (len <= 32) return hash_17_to_32(s, len);
  if (len <= 64) return hash_33_to_64(s, len);
  // 64 bytes at a time over a 56-byte state, then the last 64 bytes
  constexpr uint64_t seed = 81;
  uint64_t x = seed, y = seed * k1 + 113, z = shift_mix(y * k2 + 113) * k2;
  std::pair<uint64_t, uint64_t> v{0, 0}, w{0, 0};
  x = x * k2 + fetch64(s);
  const char* end = s + ((len - 1) / 64) * 64;
  const char* last64 = end + ((len - 1) & 63) - 63;
  do {
    x = rotate(x + y + v.first + fetch64(s + 8), 37) * k1;
    y = rotate(y + v.second + fetch64(s + 48), 42) * k1;
    x ^= w.second;
    y += v.first + fetch64(s + 40);
    z = rotate(z + w.first, 33) * k1;
    v = weak32(s, v.second * k1, x + w.first);
    w = weak32(s + 32, z + w.second, y + fetch64(s + 16));
    std::swap(z, x);
    s += 64;
  } while (s != end);
  const uint64_t mul = k1 + ((z & 0xff) << 1);
  s = last64;
  w.first += (len - 1) & 63;
  v.first += w.first;
  w.first += v.first;
  x = rotate(x + y + v.first + fetch64(s + 8), 37) * mul;
  y = rotate(y + v.second + fetch64(s + 48), 42) * mul;
  x ^= w.second * 9;
  y += v.first * 9 + fetch64(s + 40);
  z = rotate(z + w.first, 33) * mul;
  v = weak32(s, v.second * mul, x + w.first);
  w = weak32(s + 32, z + w.second, y + fetch64(s + 16));
  std::swap(z, x);
  return hash16(hash16(v.first, w.first, mul) + shift_mix(y) * k0 + z, hash16(v.second, w.second, mul) + x, mul);
}

}  // namespace gradus::detail
