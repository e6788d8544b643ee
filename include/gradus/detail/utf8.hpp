// gradus/detail/utf8.hpp — well-formed UTF-8, as the Unicode standard's table of byte sequences
// defines it (shortest form, no surrogates, at most U+10FFFF): what gradus checks where it reads or
// writes text that must be UTF-8 (safetensors headers and names, Chrome trace files).
#pragma once
#include <cstddef>
#include <string_view>

namespace gradus::detail {

/// Length (1 to 4) of the well-formed UTF-8 sequence at the start of `s`, or 0 when it is not one
/// (or `s` is empty).
inline size_t utf8_sequence(std::string_view s) {
  if (s.empty()) return 0;
  const auto b = [&](size_t i) { return static_cast<unsigned char>(s[i]); };
  const unsigned char c = b(0);
  size_t n = 0;
  unsigned lo = 0x80, hi = 0xBF;  // bounds of the second byte
  if (c < 0x80) return 1;
  if (c >= 0xC2 && c <= 0xDF) n = 2;
  else if (c == 0xE0) n = 3, lo = 0xA0;
  else if (c >= 0xE1 && c <= 0xEC) n = 3;
  else if (c == 0xED) n = 3, hi = 0x9F;
  else if (c >= 0xEE && c <= 0xEF) n = 3;
  else if (c == 0xF0) n = 4, lo = 0x90;
  else if (c >= 0xF1 && c <= 0xF3) n = 4;
  else if (c == 0xF4) n = 4, hi = 0x8F;
  else return 0;
  if (s.size() < n || b(1) < lo || b(1) > hi) return 0;
  for (size_t i = 2; i < n; ++i)
    if (b(i) < 0x80 || b(i) > 0xBF) return 0;
  return n;
}

/// Whether all of `s` is well-formed UTF-8.
inline bool valid_utf8(std::string_view s) {
  for (size_t i = 0, n = 0; i < s.size(); i += n)
    if ((n = utf8_sequence(s.substr(i))) == 0) return false;
  return true;
}

}  // namespace gradus::detail
