// Files in tests: a fresh folder for one test, and a whole file read or written as bytes.
#pragma once
#include <catch2/catch.hpp>

#include <filesystem>
#include <fstream>
#include <iterator>
#include <string>
#include <string_view>

namespace gradus_test {

/// root/name with whatever was there removed (the folder itself is not created).
inline std::filesystem::path fresh_dir(const std::filesystem::path& root, const std::string& name) {
  const std::filesystem::path d = root / name;
  std::filesystem::remove_all(d);
  return d;
}

/// The bytes of the file `p`; "" when it cannot be opened.
inline std::string slurp(const std::filesystem::path& p) {
  std::ifstream f(p, std::ios::binary);
  return {std::istreambuf_iterator<char>(f), {}};
}

/// The bytes of the file `p`, which must open (a failed REQUIRE otherwise).
inline std::string slurp_existing(const std::filesystem::path& p) {
  std::ifstream f(p, std::ios::binary);
  REQUIRE(f.good());
  return {std::istreambuf_iterator<char>(f), {}};
}

/// Writes `bytes` to the file `p`, replacing it.
inline void spit(const std::filesystem::path& p, std::string_view bytes) {
  std::ofstream f(p, std::ios::binary | std::ios::trunc);
  f.write(bytes.data(), std::streamsize(bytes.size()));
}

}  // namespace gradus_test
