// io::decode_raw against numbers whose bytes are written out by hand (IEEE 754 half, bfloat16,
// float and double patterns; two's-complement integers in both byte orders), one string and a
// batch, fixed_length padding, and the errors; and Tensor<uint8_t>, the element type of bytes.
#include <catch2/catch.hpp>

#include <cmath>
#include <cstdint>
#include <limits>
#include <sstream>
#include <string>
#include <vector>

#include <gradus/gradus.hpp>
#include <gradus/io.hpp>

namespace gd = gradus;
namespace io = gradus::io;
using Catch::Contains;

namespace {

std::string bytes_of(std::initializer_list<int> b) {
  std::string s;
  for (int v : b) s.push_back(char(v));
  return s;
}

template <class T>
std::vector<T> values_of(const gd::Tensor<T>& t) {
  return std::vector<T>(t.data(), t.data() + t.size());
}

}  // namespace

TEST_CASE("decode_raw reads integers of every width in both byte orders", "[io][raw]") {
  const std::string b = bytes_of({0x01, 0x02, 0xFF, 0xFE});
  CHECK(values_of(io::decode_raw<uint8_t>(b)) == std::vector<uint8_t>{1, 2, 255, 254});
  CHECK(values_of(io::decode_raw<int64_t>(b, {.type = io::RawType::int8})) == std::vector<int64_t>{1, 2, -1, -2});
  CHECK(values_of(io::decode_raw<int64_t>(b, {.type = io::RawType::uint8})) == std::vector<int64_t>{1, 2, 255, 254});
  // 0x0201 = 513, 0xFEFF = -257 as int16 (little-endian); 0x0102 = 258, 0xFFFE = -2 big-endian
  CHECK(values_of(io::decode_raw<int64_t>(b, {.type = io::RawType::int16})) == std::vector<int64_t>{513, -257});
  CHECK(values_of(io::decode_raw<int64_t>(b, {.type = io::RawType::int16, .little_endian = false})) ==
        std::vector<int64_t>{258, -2});
  CHECK(values_of(io::decode_raw<int64_t>(b, {.type = io::RawType::uint16})) == std::vector<int64_t>{513, 65279});
  CHECK(values_of(io::decode_raw<int64_t>(b, {.type = io::RawType::int32})) == std::vector<int64_t>{-16842239});  // 0xFEFF0201 - 2^32
  const std::string eight = bytes_of({0xFE, 0xFF, 0xFF, 0xFF, 0xFF, 0xFF, 0xFF, 0xFF});
  CHECK(values_of(io::decode_raw<int64_t>(eight)) == std::vector<int64_t>{-2});
  CHECK(values_of(io::decode_raw<int64_t>(eight, {.little_endian = false})) == std::vector<int64_t>{-72057594037927937});
}

TEST_CASE("decode_raw reads halves, bfloat16, floats and doubles bit for bit", "[io][raw]") {
  // half: 0x3C00 = 1, 0xC000 = -2, 0x7BFF = 65504, 0x0001 = 2^-24, 0x7C00 = inf, 0x7E00 = NaN
  const std::string h = bytes_of({0x00, 0x3C, 0x00, 0xC0, 0xFF, 0x7B, 0x01, 0x00, 0x00, 0x7C, 0x00, 0x7E});
  const auto f = values_of(io::decode_raw<float>(h, {.type = io::RawType::float16}));
  REQUIRE(f.size() == 6);
  CHECK(f[0] == 1.0f);
  CHECK(f[1] == -2.0f);
  CHECK(f[2] == 65504.0f);
  CHECK(f[3] == std::ldexp(1.0f, -24));
  CHECK(f[4] == std::numeric_limits<float>::infinity());
  CHECK(std::isnan(f[5]));
  // bfloat16 0x3F80 = 1, 0xC0A0 = -5 (big-endian bytes here)
  CHECK(values_of(io::decode_raw<double>(bytes_of({0x3F, 0x80, 0xC0, 0xA0}), {.type = io::RawType::bfloat16, .little_endian = false})) ==
        std::vector<double>{1.0, -5.0});
  // float 1.5 = 0x3FC00000, double -0.25 = 0xBFD0000000000000
  CHECK(values_of(io::decode_raw<float>(bytes_of({0x00, 0x00, 0xC0, 0x3F}))) == std::vector<float>{1.5f});
  CHECK(values_of(io::decode_raw<double>(bytes_of({0, 0, 0, 0, 0, 0, 0xD0, 0xBF}))) == std::vector<double>{-0.25});
  CHECK(values_of(io::decode_raw<double>(bytes_of({0x00, 0x00, 0xC0, 0x3F}), {.type = io::RawType::float32})) ==
        std::vector<double>{1.5});
}

TEST_CASE("decode_raw of a batch: one row per string, fixed_length pads and truncates", "[io][raw]") {
  const std::vector<std::string> batch = {bytes_of({1, 0, 2, 0}), bytes_of({3, 0, 4, 0})};
  const gd::Tensor<int64_t> t = io::decode_raw<int64_t>(batch, {.type = io::RawType::int16});
  CHECK(t.shape() == gd::Shape{2, 2});
  CHECK(values_of(t) == std::vector<int64_t>{1, 2, 3, 4});
  const std::vector<std::string> ragged = {bytes_of({1, 2, 3}), bytes_of({4})};
  CHECK_THROWS_WITH(io::decode_raw<uint8_t>(ragged), Contains("string 1 has 1 bytes, string 0 has 3"));
  const gd::Tensor<uint8_t> fixed = io::decode_raw<uint8_t>(ragged, {.fixed_length = 2});
  CHECK(fixed.shape() == gd::Shape{2, 2});
  CHECK(values_of(fixed) == std::vector<uint8_t>{1, 2, 4, 0});
  CHECK(io::decode_raw<float>(std::vector<std::string>{}).shape() == gd::Shape{0, 0});
  CHECK_THROWS_WITH(io::decode_raw<float>(bytes_of({1, 2, 3})), Contains("3 bytes are not a whole number of native values (4 bytes each)"));
  CHECK_THROWS_WITH(io::decode_raw<uint8_t>(bytes_of({1, 2}), {.type = io::RawType::int16}), Contains("int16 values do not fit a Tensor<uint8_t>"));
  CHECK_THROWS_WITH(io::decode_raw<int64_t>(bytes_of({1, 2}), {.type = io::RawType::float16}), Contains("float16 values do not fit a Tensor<int64_t>"));
}

TEST_CASE("Tensor<uint8_t>: bytes print as numbers and convert with gd::cast", "[io][raw][uint8]") {
  const gd::Tensor<uint8_t> t = gd::Tensor<uint8_t>::from({0, 7, 200, 255}, {2, 2});
  std::ostringstream os;
  os << t;
  CHECK(os.str() == "Tensor([[0, 7],\n        [200, 255]], shape=[2,2])");
  CHECK(values_of(gd::cast<float>(t)) == std::vector<float>{0, 7, 200, 255});
  CHECK(values_of(gd::cast<int64_t>(t)) == std::vector<int64_t>{0, 7, 200, 255});
  // to bytes: toward zero through int64, then modulo 256
  CHECK(values_of(gd::cast<uint8_t>(gd::Tensor<float>::from({300.7f, -1.5f, 12.9f}))) == std::vector<uint8_t>{44, 255, 12});
  CHECK(values_of(gd::reshape(t, {4})) == std::vector<uint8_t>{0, 7, 200, 255});
  CHECK(values_of(gd::Tensor<uint8_t>::full({3}, 9)) == std::vector<uint8_t>{9, 9, 9});
}
