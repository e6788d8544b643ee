// Helpers shared by the tests/image files: the fixtures of tests/fixtures/image/ (written by
// make_reference.py there from TensorFlow's formulas in NumPy, and by cjpeg/djpeg).
#pragma once
#include <cstdint>
#include <fstream>
#include <iterator>
#include <sstream>
#include <string>
#include <vector>

#include <gradus/gradus.hpp>

namespace gradus::image::testing {

inline std::string fixture_path(const std::string& name) { return GRADUS_TEST_DATA_DIR "/image/" + name; }

inline std::string read_fixture(const std::string& name) {
  std::ifstream f(fixture_path(name), std::ios::binary);
  if (!f) throw std::runtime_error("missing fixture " + fixture_path(name));
  return {std::istreambuf_iterator<char>(f), std::istreambuf_iterator<char>()};
}

/// One case of reference.txt: its name, parameters, input and expected output.
struct RefCase {
  std::string name;
  std::vector<std::string> params;
  Tensor<double> in, out;
};

inline Tensor<double> read_tensor(std::istringstream& is) {
  int rank;
  is >> rank;
  std::vector<int64_t> dims(static_cast<size_t>(rank));
  for (auto& d : dims) is >> d;
  const Shape s(dims);
  Tensor<double> t(s);
  for (int64_t i = 0; i < t.size(); ++i) is >> t.data()[i];
  return t;
}

/// Every case of reference.txt named `name`.
inline std::vector<RefCase> reference_cases(const std::string& name) {
  std::istringstream all(read_fixture("reference.txt"));
  std::vector<RefCase> out;
  std::string line;
  while (std::getline(all, line)) {
    std::istringstream head(line);
    std::string tag, n;
    head >> tag >> n;
    if (tag != "case") continue;
    RefCase c;
    c.name = n;
    for (std::string p; head >> p;) c.params.push_back(p);
    for (Tensor<double>* t : {&c.in, &c.out}) {
      std::getline(all, line);
      std::istringstream body(line);
      body >> tag;
      *t = read_tensor(body);
    }
    if (n == name) out.push_back(std::move(c));
  }
  return out;
}

/// The samples of a binary PGM (P5) or PPM (P6) file as [H, W, C] integers.
inline Tensor<int64_t> read_pnm(const std::string& name) {
  const std::string bytes = read_fixture(name);
  std::istringstream is(bytes);
  std::string magic;
  int64_t w, h, maxval;
  is >> magic >> w >> h >> maxval;
  is.get();
  const int64_t c = magic == "P6" ? 3 : 1;
  Tensor<int64_t> t({h, w, c});
  for (int64_t i = 0; i < t.size(); ++i) t.data()[i] = int64_t(uint8_t(is.get()));
  return t;
}

template <class T>
double max_abs_diff(const Tensor<T>& a, const Tensor<double>& b) {
  double m = 0;
  for (int64_t i = 0; i < a.size(); ++i) m = std::max(m, std::abs(double(a.data()[i]) - b.data()[i]));
  return m;
}

}  // namespace gradus::image::testing
