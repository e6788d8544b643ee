// hex_bytes: bytes written as hex pairs with quoted ASCII runs, for expected wire formats.
#pragma once
#include <string>
#include <string_view>

namespace gradus_test {

/// Bytes from "hex hex ..." with quoted ASCII runs: hex_bytes("0a 03 \"v/1\"") is "\x0a\x03v/1".
inline std::string hex_bytes(std::string_view spec) {
  std::string out;
  for (size_t i = 0; i < spec.size();) {
    if (spec[i] == ' ') {
      ++i;
    } else if (spec[i] == '"') {
      const size_t end = spec.find('"', i + 1);
      out.append(spec.substr(i + 1, end - i - 1));
      i = end + 1;
    } else {
      out.push_back(char(std::stoi(std::string(spec.substr(i, 2)), nullptr, 16)));
      i += 2;
    }
  }
  return out;
}

}  // namespace gradus_test
