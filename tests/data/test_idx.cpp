// Tests of the IDX reader and the Fashion-MNIST loader.
#include <sys/resource.h>
#include <sys/wait.h>
#include <unistd.h>
#include <zlib.h>

#include <algorithm>
#include <array>
#include <catch2/catch.hpp>
#include <cstdint>
#include <filesystem>
#include <fstream>
#include <iterator>
#include <string>
#include <vector>

#include "gradus/data/fashion_mnist.hpp"
#include "gradus/data/idx.hpp"
#include "data_support.hpp"
#include "../support/sanitizers.hpp"

namespace gd = gradus;
namespace fs = std::filesystem;
using Bytes = std::vector<uint8_t>;
using Catch::Matchers::Contains;

namespace {

const char* const kFashionDir = "/usr/share/datasets/fashion-mnist";

using data_test::TempDir;

/// An IDX file's bytes: magic (0, 0, type, ndims), big-endian u32 dims, then `data`.
Bytes idx_bytes(const std::vector<uint32_t>& dims, const Bytes& data, uint8_t type = 0x08) {
  Bytes b = {0, 0, type, uint8_t(dims.size())};
  for (uint32_t d : dims)
    for (int s = 24; s >= 0; s -= 8) b.push_back(uint8_t(d >> s));
  b.insert(b.end(), data.begin(), data.end());
  return b;
}

Bytes iota_bytes(size_t n, int step = 7) {
  Bytes b(n);
  for (size_t i = 0; i < n; ++i) b[i] = uint8_t((i * size_t(step)) % 256);
  return b;
}

void write_raw(const std::string& path, const Bytes& b) {
  std::ofstream f(path, std::ios::binary);
  f.write(reinterpret_cast<const char*>(b.data()), std::streamsize(b.size()));
  REQUIRE(f.good());
}

void write_gz(const std::string& path, const Bytes& b) {
  gzFile f = gzopen(path.c_str(), "wb");
  REQUIRE(f != nullptr);
  if (!b.empty()) REQUIRE(gzwrite(f, b.data(), unsigned(b.size())) == int(b.size()));
  REQUIRE(gzclose(f) == Z_OK);
}

Bytes read_file(const std::string& path) {
  std::ifstream f(path, std::ios::binary);
  return Bytes(std::istreambuf_iterator<char>(f), {});
}

/// The message of the io_error that `f` throws; fails the test when it throws nothing.
template <class F>
std::string io_error_message(F&& f) {
  try {
    f();
  } catch (const gd::io_error& e) {
    return e.what();
  }
  FAIL("expected a gd::io_error");
  return {};
}

/// Reads `n` bytes at `offset` of the decompressed file, independently of gradus.
Bytes gz_bytes_at(const std::string& path, long offset, unsigned n) {
  gzFile f = gzopen(path.c_str(), "rb");
  REQUIRE(f != nullptr);
  REQUIRE(gzseek(f, offset, SEEK_SET) == offset);
  Bytes b(n);
  REQUIRE(gzread(f, b.data(), n) == int(n));
  gzclose(f);
  return b;
}

}  // namespace

TEST_CASE("read_idx reads raw and gzipped files exactly", "[data][idx]") {
  TempDir dir("idx");

  SECTION("labels, raw") {
    const Bytes labels = {0, 1, 9, 255, 7};
    write_raw(dir / "labels.idx1", idx_bytes({5}, labels));
    const gd::Tensor<int64_t> y = gd::data::read_idx_labels(dir / "labels.idx1");
    REQUIRE(y.shape() == gd::Shape{5});
    CHECK(std::vector<int64_t>(y.begin(), y.end()) == std::vector<int64_t>{0, 1, 9, 255, 7});
  }
  SECTION("images, gzipped and raw give the same values") {
    const Bytes pixels = iota_bytes(2 * 3 * 4);
    write_gz(dir / "images.gz", idx_bytes({2, 3, 4}, pixels));
    write_raw(dir / "images.idx3", idx_bytes({2, 3, 4}, pixels));
    for (const char* name : {"images.gz", "images.idx3"}) {
      INFO(name);
      const gd::Tensor<float> x = gd::data::read_idx_images(dir / name);
      REQUIRE(x.shape() == gd::Shape{2, 3, 4});
      for (size_t i = 0; i < pixels.size(); ++i) CHECK(x.data()[i] == float(pixels[i]) / 255.f);
      CHECK(x(1, 2, 3) == float(pixels[23]) / 255.f);
    }
  }
  SECTION("pixel 255 is exactly 1 and 0 is exactly 0") {
    write_raw(dir / "bw.idx3", idx_bytes({1, 1, 2}, {0, 255}));
    const gd::Tensor<float> x = gd::data::read_idx_images(dir / "bw.idx3");
    CHECK(x(0, 0, 0) == 0.f);
    CHECK(x(0, 0, 1) == 1.f);
  }
  SECTION("generic read_idx keeps any rank and the raw bytes") {
    const Bytes data = iota_bytes(2 * 1 * 3 * 2, 13);
    write_gz(dir / "r4.gz", idx_bytes({2, 1, 3, 2}, data));
    const gd::data::IdxArray a = gd::data::read_idx(dir / "r4.gz");
    CHECK(a.shape == gd::Shape{2, 1, 3, 2});
    CHECK(a.bytes == data);
  }
  SECTION("a gzip file is recognised by content, whatever its name") {
    write_gz(dir / "images-no-suffix", idx_bytes({1, 2, 2}, {1, 2, 3, 4}));
    CHECK(gd::data::read_idx_images(dir / "images-no-suffix")(0, 1, 1) == 4.f / 255.f);
  }
  SECTION("an empty dataset is valid") {
    write_gz(dir / "empty.gz", idx_bytes({0, 28, 28}, {}));
    const gd::Tensor<float> x = gd::data::read_idx_images(dir / "empty.gz");
    CHECK(x.shape() == gd::Shape{0, 28, 28});
  }
  SECTION("a large gzipped file spanning several read chunks") {
    const Bytes pixels = iota_bytes(5000 * 28 * 28, 31);
    write_gz(dir / "big.gz", idx_bytes({5000, 28, 28}, pixels));
    const gd::data::IdxArray a = gd::data::read_idx(dir / "big.gz");
    CHECK(a.shape == gd::Shape{5000, 28, 28});
    CHECK(a.bytes == pixels);
  }
}

TEST_CASE("read_idx rejects missing, malformed and corrupt files", "[data][idx]") {
  TempDir dir("idx");
  const Bytes good = idx_bytes({2, 3, 4}, iota_bytes(24));

  auto expect = [&](const std::string& path, const std::string& substring) {
    INFO(path);
    const std::string msg = io_error_message([&] { gd::data::read_idx_images(path); });
    CHECK_THAT(msg, Contains(substring) && Contains(path));
  };

  SECTION("missing file") { expect(dir / "nope.gz", "no such file"); }
  SECTION("a directory") { expect(dir.path.string(), "directory"); }
  SECTION("empty file") {
    write_raw(dir / "empty", {});
    expect(dir / "empty", "truncated header");
  }
  SECTION("wrong magic") {
    Bytes b = good;
    b[0] = 'P';
    b[1] = 'K';
    write_raw(dir / "zip", b);
    expect(dir / "zip", "bad magic number 0x504b0803");
  }
  SECTION("wrong element type") {
    write_raw(dir / "f32", idx_bytes({2, 3, 4}, iota_bytes(24), 0x0D));
    expect(dir / "f32", "element type code 0x0d");
  }
  SECTION("zero or too many dimensions") {
    write_raw(dir / "rank0", Bytes{0, 0, 8, 0, 1, 2});
    expect(dir / "rank0", "declares 0 dimensions");
    write_raw(dir / "rank9", idx_bytes(std::vector<uint32_t>(9, 1), {1}));
    expect(dir / "rank9", "declares 9 dimensions");
  }
  SECTION("a labels file read as images names the expected magic") {
    write_raw(dir / "labels", idx_bytes({3}, {1, 2, 3}));
    expect(dir / "labels", "0x00000803");
    CHECK_THAT(io_error_message([&] { gd::data::read_idx_labels(dir / "r3"); }), Contains("no such file"));
    write_raw(dir / "r3", good);
    CHECK_THAT(io_error_message([&] { gd::data::read_idx_labels(dir / "r3"); }), Contains("0x00000801"));
  }
  SECTION("truncated header") {
    write_raw(dir / "h3", Bytes(good.begin(), good.begin() + 3));
    expect(dir / "h3", "truncated header");
    write_raw(dir / "h10", Bytes(good.begin(), good.begin() + 10));
    expect(dir / "h10", "truncated header");
    write_gz(dir / "h10.gz", Bytes(good.begin(), good.begin() + 10));
    expect(dir / "h10.gz", "truncated header");
  }
  SECTION("absurd dimensions") {
    write_raw(dir / "huge", idx_bytes({65536, 65536, 2}, {1, 2, 3}));
    expect(dir / "huge", "absurd dimensions");
    write_gz(dir / "overflow.gz", idx_bytes({0xFFFFFFFFu, 0xFFFFFFFFu, 0xFFFFFFFFu}, {1, 2, 3}));
    expect(dir / "overflow.gz", "absurd dimensions");
    // A zero dimension does not excuse the others (a reduction over it would leave 2^64 elements).
    write_raw(dir / "zero", idx_bytes({0, 0xFFFFFFFFu, 0xFFFFFFFFu, 0xFFFFFFFFu}, {}));
    expect(dir / "zero", "absurd dimensions");
    write_raw(dir / "zero2", idx_bytes({65536, 0, 65536}, {}));
    expect(dir / "zero2", "absurd dimensions");
  }
  SECTION("a claimed size far beyond the data is refused without allocating it") {
    write_gz(dir / "liar.gz", idx_bytes({1 << 20, 32, 32}, {1, 2, 3}));  // claims 1 GiB
    expect(dir / "liar.gz", "more than its");                              // from ~40 bytes: not even inflated
    expect(dir / "liar.gz", "can inflate to (deflate's ratio is at most 1032:1)");
    write_raw(dir / "liar", idx_bytes({1 << 20, 32, 32}, {1, 2, 3}));
    expect(dir / "liar", "truncated data");
  }
  SECTION("truncated data") {
    const Bytes cut(good.begin(), good.end() - 5);
    write_raw(dir / "cut", cut);
    expect(dir / "cut", "truncated data");
    write_gz(dir / "cut.gz", cut);
    expect(dir / "cut.gz", "truncated data");
  }
  SECTION("trailing bytes") {
    Bytes longer = good;
    longer.insert(longer.end(), {9, 9, 9});
    write_raw(dir / "long", longer);
    expect(dir / "long", "trailing data");
    expect(dir / "long", ": 3 bytes after the 24 bytes");
    write_gz(dir / "long.gz", longer);
    expect(dir / "long.gz", "trailing data");
  }
  SECTION("bad gzip") {
    write_gz(dir / "ok.gz", good);
    const Bytes gz = read_file(dir / "ok.gz");
    REQUIRE(gz.size() > 18);
    REQUIRE((gz[0] == 0x1f && gz[1] == 0x8b && gz[3] == 0));  // magic, no optional header fields

    write_raw(dir / "raw.gz", good);
    expect(dir / "raw.gz", "not a gzip file");

    Bytes method = gz;
    method[2] = 7;
    write_raw(dir / "method.gz", method);
    expect(dir / "method.gz", "corrupt gzip");

    Bytes block = gz;
    block[10] = 0xFF;  // first deflate block: final, reserved block type 3
    write_raw(dir / "block.gz", block);
    expect(dir / "block.gz", "corrupt gzip");

    Bytes crc = gz;
    crc[crc.size() - 8] ^= 0x5A;
    write_raw(dir / "crc.gz", crc);
    expect(dir / "crc.gz", "corrupt gzip");
    expect(dir / "crc.gz", "incorrect data check");

    write_raw(dir / "short.gz", Bytes(gz.begin(), gz.begin() + long(gz.size() / 2)));
    expect(dir / "short.gz", "corrupt gzip");

    write_raw(dir / "header-only.gz", Bytes(gz.begin(), gz.begin() + 6));
    expect(dir / "header-only.gz", "corrupt gzip");
  }
}

TEST_CASE("fashion_mnist checks its directory and files", "[data][fashion_mnist]") {
  TempDir dir("idx");
  const std::string d = dir.path.string();
  auto write_set = [&](uint32_t n_train, uint32_t rows, uint32_t cols, Bytes train_labels) {
    write_gz(dir / "train-images-idx3-ubyte.gz", idx_bytes({n_train, rows, cols}, iota_bytes(n_train * rows * cols)));
    write_gz(dir / "train-labels-idx1-ubyte.gz", idx_bytes({uint32_t(train_labels.size())}, train_labels));
    write_gz(dir / "t10k-images-idx3-ubyte.gz", idx_bytes({2, rows, cols}, iota_bytes(2 * rows * cols, 3)));
    write_gz(dir / "t10k-labels-idx1-ubyte.gz", idx_bytes({2}, {4, 5}));
  };

  SECTION("missing directory names the Debian package") {
    const std::string msg = io_error_message([&] { gd::datasets::fashion_mnist(d + "/absent"); });
    CHECK_THAT(msg, Contains("apt-get install dataset-fashion-mnist") && Contains(d + "/absent"));
  }
  SECTION("missing file names it and the Debian package") {
    write_set(3, 28, 28, {0, 1, 2});
    fs::remove(dir.path / "t10k-labels-idx1-ubyte.gz");
    const std::string msg = io_error_message([&] { gd::datasets::fashion_mnist(d); });
    CHECK_THAT(msg, Contains("t10k-labels-idx1-ubyte.gz") && Contains("apt-get install dataset-fashion-mnist"));
  }
  SECTION("a small consistent set loads") {
    write_set(3, 28, 28, {0, 9, 2});
    auto [train_x, train_y, test_x, test_y] = gd::datasets::fashion_mnist(d);
    CHECK(train_x.shape() == gd::Shape{3, 28, 28});
    CHECK(train_y.shape() == gd::Shape{3});
    CHECK(test_x.shape() == gd::Shape{2, 28, 28});
    CHECK(test_y(1) == 5);
    CHECK(train_y(1) == 9);
    CHECK(train_x(0, 0, 1) == 7.f / 255.f);
  }
  SECTION("image and label counts must agree") {
    write_set(3, 28, 28, {0, 1});
    CHECK_THAT(io_error_message([&] { gd::datasets::fashion_mnist(d); }), Contains("3 images") && Contains("2 labels"));
  }
  SECTION("labels must be classes 0..9") {
    write_set(3, 28, 28, {0, 10, 1});
    CHECK_THAT(io_error_message([&] { gd::datasets::fashion_mnist(d); }), Contains("label 10 at index 1"));
  }
  SECTION("images must be 28x28") {
    write_set(3, 27, 28, {0, 1, 2});
    CHECK_THAT(io_error_message([&] { gd::datasets::fashion_mnist(d); }), Contains("[N,28,28]"));
  }
}

TEST_CASE("fashion_mnist_class_names", "[data][fashion_mnist]") {
  constexpr auto names = gd::datasets::fashion_mnist_class_names();
  static_assert(names.size() == 10);
  CHECK(names[0] == "T-shirt/top");
  CHECK(names[6] == "Shirt");
  CHECK(names[9] == "Ankle boot");
}

TEST_CASE("fashion_mnist reads Debian's dataset-fashion-mnist", "[data][fashion_mnist][dataset]") {
  if (!fs::is_directory(kFashionDir)) {
    WARN("skipped: " << kFashionDir << " is missing (apt-get install dataset-fashion-mnist)");
    return;
  }
  const auto [train_x, train_y, test_x, test_y] = gd::datasets::fashion_mnist();

  CHECK(train_x.shape() == gd::Shape{60000, 28, 28});
  CHECK(train_y.shape() == gd::Shape{60000});
  CHECK(test_x.shape() == gd::Shape{10000, 28, 28});
  CHECK(test_y.shape() == gd::Shape{10000});

  for (const auto* x : {&train_x, &test_x}) {
    const auto [lo, hi] = std::minmax_element(x->begin(), x->end());
    CHECK(*lo == 0.f);
    CHECK(*hi == 1.f);
  }

  // Fashion-MNIST is balanced: 6000 training and 1000 test images per class.
  std::array<int64_t, 10> train_count{}, test_count{};
  for (int64_t y : train_y) train_count.at(size_t(y))++;
  for (int64_t y : test_y) test_count.at(size_t(y))++;
  for (size_t c = 0; c < 10; ++c) {
    INFO("class " << c);
    CHECK(train_count[c] == 6000);
    CHECK(test_count[c] == 1000);
  }

  // The first training example, read from the files independently of gradus.
  const std::string labels_path = std::string(kFashionDir) + "/train-labels-idx1-ubyte.gz";
  const std::string images_path = std::string(kFashionDir) + "/train-images-idx3-ubyte.gz";
  const Bytes first_label = gz_bytes_at(labels_path, 8, 1);
  CHECK(first_label[0] == 9);
  CHECK(train_y(0) == 9);
  CHECK(gd::datasets::fashion_mnist_class_names()[size_t(train_y(0))] == "Ankle boot");
  const Bytes first_image = gz_bytes_at(images_path, 16, 28 * 28);
  for (size_t i = 0; i < first_image.size(); ++i) CHECK(train_x.data()[i] == float(first_image[i]) / 255.f);
  const Bytes last_test_image = gz_bytes_at(std::string(kFashionDir) + "/t10k-images-idx3-ubyte.gz",
                                            16 + 9999L * 784, 28 * 28);
  for (size_t i = 0; i < last_test_image.size(); ++i)
    CHECK(test_x.data()[9999 * 784 + i] == float(last_test_image[i]) / 255.f);
}

TEST_CASE("read_idx closes the file when it rejects it", "[data][idx]") {
  if (!fs::is_directory("/proc/self/fd")) {
    WARN("skipped: no /proc/self/fd to count open files");
    return;
  }
  TempDir dir("idx");
  const Bytes good = idx_bytes({2, 3, 4}, iota_bytes(24));
  write_gz(dir / "ok.gz", good);
  Bytes method = read_file(dir / "ok.gz");
  method[2] = 7;
  write_raw(dir / "method.gz", method);
  write_raw(dir / "cut", Bytes(good.begin(), good.end() - 1));
  auto open_files = [] { return std::distance(fs::directory_iterator("/proc/self/fd"), fs::directory_iterator{}); };

  const auto before = open_files();
  for (int i = 0; i < 20; ++i)
    for (const char* name : {"method.gz", "cut", "ok.gz"}) {
      try {
        gd::data::read_idx_labels(dir / name);
      } catch (const gd::io_error&) {
      }
    }
  CHECK(open_files() == before);
}

#if !GRADUS_TEST_ASAN
// (AddressSanitizer reserves terabytes of address space: no address-space limit can be set under it)

TEST_CASE("read_idx_labels: a file declaring more than memory holds is an io_error, not std::bad_alloc",
          "[data][idx]") {
  // 2^28 labels compress to ~260 KB and are all there, but their int64 tensor is 2 GiB: in a child
  // process limited to 1.5 GiB of address space, the allocation fails
  TempDir dir("idx_memory");
  write_gz(dir / "many.gz", idx_bytes({1u << 28}, Bytes(size_t(1) << 28, 3)));
  const pid_t child = ::fork();
  REQUIRE(child >= 0);
  if (child == 0) {
    const rlimit limit{size_t(3) << 29, size_t(3) << 29};
    if (::setrlimit(RLIMIT_AS, &limit) != 0) ::_exit(3);
    try {
      (void)gd::data::read_idx_labels(dir / "many.gz");
      ::_exit(2);  // it fitted after all: the limit did not bite
    } catch (const gd::io_error& e) {
      const std::string what = e.what();
      ::_exit(what.find("many.gz") != std::string::npos && what.find("cannot allocate") != std::string::npos ? 0 : 4);
    } catch (...) {
      ::_exit(1);  // std::bad_alloc: the failure this test is about
    }
  }
  int status = 0;
  REQUIRE(::waitpid(child, &status, 0) == child);
  REQUIRE(WIFEXITED(status));
  CHECK(WEXITSTATUS(status) == 0);
}
#endif
