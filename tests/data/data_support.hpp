// Helpers shared by the gd::data tests.
#pragma once
#include <unistd.h>

#include <cstdint>
#include <filesystem>
#include <fstream>
#include <string>
#include <vector>

#include "gradus/data/dataset.hpp"

namespace data_test {

namespace fs = std::filesystem;

/// A fresh directory, removed with everything in it at the end of the test.
struct TempDir {
  fs::path path;
  explicit TempDir(const std::string& tag = "data") {
    static int counter = 0;
    path = fs::temp_directory_path() /
           ("gradus_test_" + tag + "_" + std::to_string(::getpid()) + "_" + std::to_string(counter++));
    fs::remove_all(path);
    fs::create_directories(path);
  }
  ~TempDir() {
    std::error_code ec;
    fs::remove_all(path, ec);
  }
  std::string operator/(const std::string& name) const { return (path / name).string(); }
};

inline void write_file(const std::string& path, const std::string& text) {
  std::ofstream f(path, std::ios::binary);
  f << text;
}

/// Field 0 of each element of the next epoch of `ds`, an int64 scalar.
inline std::vector<int64_t> ints(gradus::data::Dataset& ds) {
  std::vector<int64_t> out;
  for (const auto& e : ds) out.push_back(e.tensor<int64_t>(0).item());
  return out;
}
inline std::vector<int64_t> ints(gradus::data::Dataset&& ds) { return ints(ds); }

/// The elements of a rank-1 (or any) int64 tensor as a vector.
inline std::vector<int64_t> values(const gradus::Tensor<int64_t>& t) { return {t.begin(), t.end()}; }
inline std::vector<float> values(const gradus::Tensor<float>& t) { return {t.begin(), t.end()}; }

}  // namespace data_test
