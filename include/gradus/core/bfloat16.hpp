// gradus/core/bfloat16.hpp — bfloat16: float's sign, its 8 exponent bits and the top 7 of its 23
// mantissa bits, so float's range at about 3 significant decimal digits, in 2 bytes.
//
//   gd::bfloat16 h(3.14159f);          // rounded to the nearest bfloat16: 3.140625
//   float x = h;                       // exact: every bfloat16 is a float
//   uint16_t bits = h.bits;            // 0x4049
//
// Rounding is to nearest, ties to even, as TensorFlow, PyTorch and the CPUs' conversion
// instructions round; a NaN stays a NaN (quiet), infinities stay infinite, a float too large for
// bfloat16 rounds to infinity. Under gd::autocast(gd::bf16) a float product's inputs are rounded
// this way (core/precision.hpp).
#pragma once
#include <bit>
#include <cstdint>
#include <ostream>
#include <type_traits>

namespace gradus {

/// The 16 bits of the bfloat16 nearest `x` (ties to even); a NaN gives a quiet NaN of x's sign.
constexpr uint16_t bfloat16_bits(float x) {
  const uint32_t u = std::bit_cast<uint32_t>(x);
  if ((u & 0x7FFFFFFFu) > 0x7F800000u) return uint16_t((u >> 16) | 0x0040u);
  return uint16_t((u + 0x7FFFu + ((u >> 16) & 1u)) >> 16);
}

/// The float whose upper 16 bits are `bits` (exact).
constexpr float bfloat16_value(uint16_t bits) { return std::bit_cast<float>(uint32_t(bits) << 16); }

/// `x` rounded to the nearest bfloat16, as a float.
constexpr float round_to_bfloat16(float x) { return bfloat16_value(bfloat16_bits(x)); }

/// A bfloat16 number: its 16 bits, converted from float by rounding to nearest (ties to even) and
/// to float exactly.
struct bfloat16 {
  uint16_t bits = 0;

  constexpr bfloat16() = default;
  /// The bfloat16 nearest x.
  constexpr explicit bfloat16(float x) : bits(bfloat16_bits(x)) {}
  /// The bfloat16 nearest x, through float (a double is rounded twice, as TensorFlow's cast does;
  /// an integer too).
  template <class A>
    requires std::is_arithmetic_v<A> && (!std::is_same_v<A, float>)
  constexpr explicit bfloat16(A x) : bfloat16(float(x)) {}
  /// The bfloat16 with these bits.
  static constexpr bfloat16 from_bits(uint16_t b) {
    bfloat16 h;
    h.bits = b;
    return h;
  }
  /// Its exact value.
  constexpr operator float() const { return bfloat16_value(bits); }

  friend constexpr bool operator==(bfloat16 a, bfloat16 b) { return float(a) == float(b); }
  /// a = a + b rounded to bfloat16 (the sum is formed in float).
  friend constexpr bfloat16& operator+=(bfloat16& a, bfloat16 b) { return a = bfloat16(float(a) + float(b)); }
};

inline std::ostream& operator<<(std::ostream& os, bfloat16 h) { return os << float(h); }

}  // namespace gradus
