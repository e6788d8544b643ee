// 8-bit images in Tensor<uint8_t>: the codecs decode into it and encode from it with the same
// samples as Tensor<int64_t>, convert_image_dtype moves it to [0, 1] and back with TensorFlow's
// rules, and 16-bit samples are refused with the type that holds them.
#include <catch2/catch.hpp>

#include <gradus/gradus.hpp>
#include <gradus/image.hpp>

#include "fixtures.hpp"

namespace gd = gradus;
namespace gi = gradus::image;
using Catch::Contains;

TEST_CASE("uint8 images: decode, encode and convert as TF's uint8", "[image][uint8]") {
  gd::Rng rng(8);
  const gd::Tensor<float> img = gd::Tensor<float>::random_uniform({5, 7, 3}, rng);
  const std::string png = gi::encode_png(img);
  const gd::Tensor<uint8_t> u8 = gi::decode_png<uint8_t>(png);
  const gd::Tensor<int64_t> i64 = gi::decode_png<int64_t>(png);
  REQUIRE(u8.shape() == i64.shape());
  for (int64_t i = 0; i < u8.size(); ++i) CHECK(int64_t(u8.data()[i]) == i64.data()[i]);
  CHECK(gi::decode_png<uint8_t>(gi::encode_png(u8)).shape() == u8.shape());
  CHECK(gi::encode_png(u8) == gi::encode_png(i64));  // the same samples, the same bytes
  const std::string jpg = gi::encode_jpeg(u8, {.quality = 95});
  const gd::Tensor<uint8_t> j8 = gi::decode_jpeg<uint8_t>(jpg);
  const gd::Tensor<int64_t> j64 = gi::decode_jpeg<int64_t>(jpg);
  for (int64_t i = 0; i < j8.size(); ++i) CHECK(int64_t(j8.data()[i]) == j64.data()[i]);
  // [0, 1] and back: x / 255, then trunc(x * 255.5)
  const gd::Tensor<float> f = gi::convert_image_dtype<float>(u8);
  for (int64_t i = 0; i < f.size(); ++i) CHECK(f.data()[i] == float(u8.data()[i]) * (1.0f / 255.0f));
  const gd::Tensor<uint8_t> back = gi::convert_image_dtype<uint8_t>(f);
  for (int64_t i = 0; i < back.size(); ++i) CHECK(back.data()[i] == u8.data()[i]);
  const gd::Tensor<uint8_t> sat = gi::convert_image_dtype<uint8_t>(gd::Tensor<float>::from({-0.5f, 0.5f, 2.0f}, {1, 1, 3}), {.saturate = true});
  CHECK(std::vector<int>(sat.data(), sat.data() + 3) == std::vector<int>{0, 127, 255});
  const gd::Tensor<int64_t> wide = gi::convert_image_dtype<int64_t>(u8, {.to_bits = 16});
  CHECK(wide.data()[0] == int64_t(u8.data()[0]) << 8);
  CHECK_THROWS_WITH(gi::decode_png<uint8_t>(png, {.bits = 16}), Contains("a Tensor<uint8_t> holds 8-bit samples"));
  CHECK_THROWS_WITH(gi::convert_image_dtype<uint8_t>(wide, {.bits = 16, .to_bits = 16}), Contains("holds 8-bit samples"));
}
