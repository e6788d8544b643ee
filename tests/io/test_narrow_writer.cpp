// Float tensors written as F16 or BF16 (encode_safetensors' `floats`, io::save's `storage`): the
// same 16-bit values numpy's float16 and ml_dtypes' bfloat16 round the same floats to
// (fixtures/io/narrowed.safetensors, written by PyPI's safetensors: make_narrow_fixtures.py), every
// half's neighbours and ties rounded as IEEE's definition says, overflow named, and a model saved in
// 16 bits loading back as the rounded weights.
#include <catch2/catch.hpp>
#include <bit>
#include <cmath>
#include <cstdint>
#include <filesystem>
#include <limits>
#include <string>

#include <gradus/gradus.hpp>
#include <gradus/io.hpp>

#include "../support/same_bits.hpp"

namespace gd = gradus;
namespace io = gradus::io;
namespace nn = gradus::nn;
using Catch::Contains;
using gradus_test::same_float;

namespace {

const std::filesystem::path kFixture = std::filesystem::path(GRADUS_TEST_DATA_DIR) / "io" / "narrowed.safetensors";

/// The size of the data section of the safetensors file at `path` (the file less its header).
uint64_t data_bytes(const std::filesystem::path& path) {
  const std::string bytes = io::read_file(path);
  uint64_t header = 0;
  for (int i = 7; i >= 0; --i) header = (header << 8) | uint8_t(bytes[size_t(i)]);
  return bytes.size() - 8 - header;
}

/// `source` written in `precision` and read back (widened to float exactly).
io::Safetensors round_trip(const gd::Tensor<float>& source, gd::Precision precision) {
  const std::string bytes = io::encode_safetensors({{"t", source}}, {}, precision);
  return io::decode_safetensors(bytes);
}

}  // namespace

TEST_CASE("io: floats written as F16 and BF16 hold what numpy and ml_dtypes round them to", "[io][safetensors]") {
  const io::Safetensors ref = io::load_safetensors(kFixture);
  CHECK(ref.metadata.at("writer") == "safetensors.numpy");
  struct Case {
    const char *source, *expected, *dtype;
    gd::Precision precision;
  };
  for (const Case c : {Case{"f16_source", "f16_numpy", "F16", gd::fp16}, Case{"bf16_source", "bf16_ml_dtypes", "BF16", gd::bf16}}) {
    INFO(c.dtype);
    const gd::Tensor<float> source = ref.get<float>(c.source), expected = ref.get<float>(c.expected);
    REQUIRE(ref.widened.at(c.expected) == c.dtype);
    REQUIRE(source.size() > 16000);
    const std::string bytes = io::encode_safetensors({{"t", source}}, {}, c.precision);
    const io::Safetensors got = io::decode_safetensors(bytes);
    CHECK(got.widened.at("t") == c.dtype);
    // the header, then two bytes an element
    uint64_t header = 0;
    for (int i = 7; i >= 0; --i) header = (header << 8) | uint8_t(bytes[size_t(i)]);
    CHECK(bytes.size() == 8 + header + 2 * size_t(source.size()));
    const gd::Tensor<float> t = got.get<float>("t");
    int mismatches = 0;
    for (int64_t i = 0; i < source.size(); ++i)
      if (!same_float(t.data()[i], expected.data()[i]) && ++mismatches <= 5)
        FAIL_CHECK("element " << i << ": " << source.data()[i] << " became " << t.data()[i] << ", expected "
                              << expected.data()[i]);
    CHECK(mismatches == 0);
  }
}

TEST_CASE("io: every half is kept, and every tie between halves goes to the even one", "[io][safetensors]") {
  // The value of half bits h by IEEE 754's definition, in double (the existing reader's own test
  // checks half_to_float against the same formula).
  const auto value = [](uint32_t h) {
    const int exp = (h >> 10) & 31, mant = h & 1023;
    const double v = exp == 0 ? std::ldexp(double(mant), -24) : std::ldexp(1.0 + mant / 1024.0, exp - 15);
    return (h & 0x8000) ? -v : v;
  };
  int bad = 0;
  for (uint32_t h = 0; h < 0x10000; ++h) {
    const int exp = (h >> 10) & 31;
    if (exp == 31) continue;  // infinities and NaNs: below
    const float x = float(value(h));
    if (io::detail::float_to_half_bits(x) != h && ++bad <= 5) FAIL_CHECK("half " << h << " (" << x << ") is not kept");
    if ((h & 0x7fff) == 0x7bff) continue;  // the largest: its upper neighbour is infinity (below)
    // h and h + 1 are neighbours of one sign: the float halfway between them is exact
    const float mid = float((value(h) + value(h + 1)) / 2);
    REQUIRE(double(mid) == (value(h) + value(h + 1)) / 2);
    const uint16_t even = (h & 1) ? uint16_t(h + 1) : uint16_t(h);
    const float toward_zero = std::nextafter(mid, 0.f), away = std::nextafter(mid, std::copysign(1e9f, mid));
    if ((io::detail::float_to_half_bits(mid) != even || io::detail::float_to_half_bits(toward_zero) != h ||
         io::detail::float_to_half_bits(away) != h + 1) &&
        ++bad <= 5)
      FAIL_CHECK("between halves " << h << " and " << h + 1 << ": the tie " << mid << " gave "
                                   << io::detail::float_to_half_bits(mid));
  }
  CHECK(bad == 0);
  const float inf = std::numeric_limits<float>::infinity();
  CHECK(io::detail::float_to_half_bits(inf) == 0x7c00);
  CHECK(io::detail::float_to_half_bits(-inf) == 0xfc00);
  CHECK(io::detail::float_to_half_bits(65519.996f) == 0x7bff);  // the largest float below 65520: 65504
  CHECK(io::detail::float_to_half_bits(65520.f) == 0x7c00);     // the tie above 65504 goes to even: infinity
  CHECK(io::detail::float_to_half_bits(0x1p-25f) == 0x0000);    // the tie between 0 and 2^-24
  CHECK(io::detail::float_to_half_bits(-0x1p-25f) == 0x8000);
  CHECK(io::detail::float_to_half_bits(std::nextafter(0x1p-25f, 1.f)) == 0x0001);
  CHECK(io::detail::float_to_half_bits(0x1p-30f) == 0x0000);
  // a NaN stays a NaN of its sign, quiet
  const float nan = std::numeric_limits<float>::quiet_NaN();
  CHECK(io::detail::float_to_half_bits(nan) == 0x7e00);
  CHECK(io::detail::float_to_half_bits(-nan) == 0xfe00);
  const uint16_t signalling = io::detail::float_to_half_bits(std::bit_cast<float>(0x7f800001u));
  CHECK((signalling & 0x7c00) == 0x7c00);
  CHECK((signalling & 0x3ff) != 0);
}

TEST_CASE("io: a float too large for the 16-bit type is named, infinities and NaNs are kept", "[io][safetensors]") {
  const float inf = std::numeric_limits<float>::infinity(), nan = std::numeric_limits<float>::quiet_NaN();
  CHECK_THROWS_WITH(io::encode_safetensors({{"layer.kernel", gd::Tensor<float>::from({1.f, -70000.f})}}, {}, gd::fp16),
                    Contains("'layer.kernel' element 1 is -70000") && Contains("F16") && Contains("65504"));
  CHECK_THROWS_AS(io::encode_safetensors({{"w", gd::Tensor<float>::from({65520.f})}}, {}, gd::fp16), gd::value_error);
  CHECK_THROWS_WITH(io::encode_safetensors({{"w", gd::Tensor<float>::from({std::numeric_limits<float>::max()})}}, {}, gd::bf16),
                    Contains("'w' element 0") && Contains("BF16"));
  CHECK_THROWS_AS(io::encode_safetensors({{"w", gd::Tensor<float>::from({1.f})}}, {}, gd::Precision(7)), gd::value_error);
  for (const gd::Precision p : {gd::fp16, gd::bf16}) {
    const gd::Tensor<float> t = round_trip(gd::Tensor<float>::from({inf, -inf, nan, -0.f, 61440.f}), p).get<float>("t");
    CHECK(same_float(t.data()[0], inf));
    CHECK(same_float(t.data()[1], -inf));
    CHECK(same_float(t.data()[2], nan));
    CHECK(same_float(t.data()[3], -0.f));
    CHECK(t.data()[4] == 61440.f);  // 15 2^12: exact in both
  }
  // double and int64 tensors are written as they are
  const std::string bytes = io::encode_safetensors(
      {{"d", gd::Tensor<double>::from({0.1})}, {"i", gd::Tensor<int64_t>::from({int64_t(1) << 40})}}, {}, gd::bf16);
  const io::Safetensors st = io::decode_safetensors(bytes);
  CHECK(st.widened.empty());
  CHECK(st.get<double>("d").item() == 0.1);
  CHECK(st.get<int64_t>("i").item() == int64_t(1) << 40);
}

TEST_CASE("io: a model saved in BF16 or F16 loads back as its weights rounded, in half the bytes", "[io][safetensors]") {
  namespace fs = std::filesystem;
  const fs::path dir = fs::temp_directory_path() / "gradus_test_narrow_writer";
  fs::remove_all(dir);
  fs::create_directories(dir);
  gd::Rng rng(3);
  nn::Dense<float> net({.in = 64, .out = 32}, rng);
  io::save(dir / "f32.safetensors", net, 7);
  for (const gd::Precision p : {gd::bf16, gd::fp16}) {
    INFO(gd::precision_name(p));
    const fs::path path = dir / (std::string(gd::precision_name(p)) + ".safetensors");
    io::save(path, net, p, 7);
    // the data section halves (2,080 floats: 8,320 bytes as F32, 4,160 as 16-bit)
    CHECK(data_bytes(dir / "f32.safetensors") == 8320);
    CHECK(data_bytes(path) == 4160);
    gd::Rng other(99);
    nn::Dense<float> loaded({.in = 64, .out = 32}, other);
    CHECK(io::load(path, loaded) == 7);
    const auto a = net.named_parameters(), b = loaded.named_parameters();
    REQUIRE(a.size() == b.size());
    for (size_t k = 0; k < a.size(); ++k) {
      const gd::Tensor<float>& w = a[k].second.value();
      const gd::Tensor<float>& r = b[k].second.value();
      for (int64_t i = 0; i < w.size(); ++i) {
        const float x = w.data()[i];
        const float expected = p == gd::bf16 ? gd::round_to_bfloat16(x) : io::detail::half_to_float(io::detail::float_to_half_bits(x));
        if (r.data()[i] != expected) FAIL(a[k].first << "[" << i << "]: " << x << " loaded as " << r.data()[i]);
      }
    }
  }
  // a double model's tensors stay F64
  nn::Dense<double> wide({.in = 4, .out = 2}, rng);
  io::save(dir / "wide.safetensors", wide, gd::bf16);
  CHECK(io::load_safetensors(dir / "wide.safetensors").widened.empty());
  fs::remove_all(dir);
}
