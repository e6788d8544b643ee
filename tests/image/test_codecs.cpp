// PNG and JPEG codecs and convert_image_dtype: decoded pixels against PNGs written by hand and
// JPEGs decoded by djpeg (tests/fixtures/image/codec/), round trips, and corrupt input.
#include <catch2/catch.hpp>

#include <cmath>
#include <string>

#include <gradus/gradus.hpp>
#include <gradus/image.hpp>
#include <zlib.h>

#include "fixtures.hpp"

namespace gd = gradus;
namespace gi = gradus::image;
using gi::testing::read_fixture;
using gi::testing::read_pnm;
using gi::testing::reference_cases;

namespace {

template <class A, class B>
bool same_samples(const gd::Tensor<A>& a, const gd::Tensor<B>& b) {
  if (a.shape() != b.shape()) return false;
  for (int64_t i = 0; i < a.size(); ++i)
    if (double(a.data()[i]) != double(b.data()[i])) return false;
  return true;
}

/// Peak signal-to-noise ratio of two [0, 1] images, in dB.
double psnr(const gd::Tensor<float>& a, const gd::Tensor<float>& b) {
  double se = 0;
  for (int64_t i = 0; i < a.size(); ++i) se += std::pow(double(a.data()[i]) - double(b.data()[i]), 2);
  return 10 * std::log10(1.0 / (se / double(a.size())));
}

/// A smooth colour image (gradients and a soft disc), as JPEG's natural input.
gd::Tensor<float> smooth_image(int64_t h, int64_t w, int64_t c) {
  gd::Tensor<float> t({h, w, c});
  for (int64_t y = 0; y < h; ++y)
    for (int64_t x = 0; x < w; ++x)
      for (int64_t k = 0; k < c; ++k) {
        const double r = std::hypot(double(y) - h / 2.0, double(x) - w / 2.0) / double(std::max(h, w));
        t(y, x, k) = float(0.5 + 0.4 * std::sin(0.15 * double(x + 2 * k) + 0.1 * double(y)) * std::exp(-2 * r));
      }
  return t;
}

/// Every prefix and a sweep of byte corruptions of `bytes` either decode or throw gd::io_error.
template <class Decode>
int corruption_sweep(const std::string& bytes, Decode decode) {
  int rejected = 0;
  auto attempt = [&](std::string_view b) {
    try {
      (void)decode(b);
    } catch (const gd::io_error&) {
      ++rejected;
    }
  };
  for (size_t n = 0; n < bytes.size(); ++n) attempt(std::string_view(bytes).substr(0, n));
  gd::Rng rng(7);
  for (int i = 0; i < 400; ++i) {
    std::string bad = bytes;
    const int flips = 1 + int(rng.below(4));
    for (int k = 0; k < flips; ++k) bad[rng.below(bad.size())] = char(rng.below(256));
    attempt(bad);
  }
  return rejected;
}

}  // namespace

TEST_CASE("decode_png reads hand-written 16-bit, gray+alpha, palette+tRNS, 2-bit and interlaced PNGs", "[image][png]") {
  const auto rgb16 = reference_cases("png_rgb16").at(0).out;
  const std::string f16 = read_fixture("codec/rgb16.png");
  CHECK(same_samples(gi::decode_png<int64_t>(f16, {.bits = 16}), rgb16));
  const auto as_float = gi::decode_png<double>(f16);
  for (int64_t i = 0; i < rgb16.size(); ++i) REQUIRE(as_float.data()[i] == Approx(rgb16.data()[i] / 65535.0).epsilon(1e-12));
  const auto as_u8 = gi::decode_png<int64_t>(f16);  // 16 -> 8 bits, rounded
  for (int64_t i = 0; i < rgb16.size(); ++i) REQUIRE(as_u8.data()[i] == std::lround(rgb16.data()[i] * 255.0 / 65535.0));

  const auto ga = reference_cases("png_ga8").at(0).out;  // gray + alpha -> RGBA
  const std::string fga = read_fixture("codec/ga8.png");
  CHECK(same_samples(gi::decode_png<int64_t>(fga), ga));
  const auto ga_gray = gi::decode_png<int64_t>(fga, {.channels = 1});
  REQUIRE(ga_gray.shape() == gd::Shape{2, 4, 1});
  for (int64_t p = 0; p < 8; ++p) CHECK(ga_gray.data()[p] == ga.data()[4 * p]);
  const auto ga_rgb = gi::decode_png<int64_t>(fga, {.channels = 3});
  REQUIRE(ga_rgb.shape() == gd::Shape{2, 4, 3});
  for (int64_t p = 0; p < 8; ++p) CHECK(ga_rgb.data()[3 * p + 2] == ga.data()[4 * p]);

  CHECK(same_samples(gi::decode_png<int64_t>(read_fixture("codec/pal4.png")), reference_cases("png_pal4").at(0).out));
  CHECK(same_samples(gi::decode_png<int64_t>(read_fixture("codec/gray2.png")), reference_cases("png_gray2").at(0).out));
  const auto il = reference_cases("png_interlaced").at(0).out;
  CHECK(same_samples(gi::decode_png<int64_t>(read_fixture("codec/interlaced.png")), il));
  // RGB -> gray with TF's weights (libpng's fixed-point conversion: within one level)
  const auto gray = gi::decode_png<int64_t>(read_fixture("codec/interlaced.png"), {.channels = 1});
  for (int64_t p = 0; p < 54; ++p)
    CHECK(std::abs(double(gray.data()[p]) - (0.299 * il.data()[3 * p] + 0.587 * il.data()[3 * p + 1] +
                                             0.114 * il.data()[3 * p + 2])) <= 1.0);
  // and opaque alpha added
  const auto rgba = gi::decode_png<int64_t>(read_fixture("codec/interlaced.png"), {.channels = 4});
  for (int64_t p = 0; p < 54; ++p) CHECK(rgba.data()[4 * p + 3] == 255);
}

TEST_CASE("encode_png round-trips 8- and 16-bit gray, RGB and RGBA exactly", "[image][png]") {
  gd::Rng rng(11);
  for (int64_t c : {1, 3, 4})
    for (int bits : {8, 16}) {
      gd::Tensor<int64_t> px({5, 9, c});
      for (auto& v : px) v = int64_t(rng.below(uint64_t(1) << bits));
      const std::string png = gi::encode_png(px, {.bits = bits});
      INFO(c << " channels, " << bits << " bits");
      CHECK(same_samples(gi::decode_png<int64_t>(png, {.bits = bits}), px));
      const auto f = gi::decode_png<double>(png);
      CHECK(f(4, 8, c - 1) == Approx(double(px(4, 8, c - 1)) / double((1 << bits) - 1)));
    }
  // 16-bit float images keep 16-bit precision
  const auto img = gd::Tensor<float>::random_uniform({6, 7, 3}, rng);
  const auto back = gi::decode_png(gi::encode_png(img, {.bits = 16, .compression = 9}));
  for (int64_t i = 0; i < img.size(); ++i) REQUIRE(std::abs(back.data()[i] - img.data()[i]) <= 0.5f / 65535 + 1e-7f);
  CHECK_THROWS_AS(gi::encode_png(gd::Tensor<int64_t>::full({2, 2, 1}, 256)), gd::value_error);
  CHECK_THROWS_AS(gi::encode_png(img, {.bits = 12}), gd::value_error);
  CHECK_THROWS_AS(gi::decode_png(gi::encode_png(img), {.channels = 2}), gd::value_error);
}

TEST_CASE("decode_png rejects truncated, corrupt and oversized PNGs with io_error", "[image][png]") {
  for (const char* f : {"codec/rgb16.png", "codec/pal4.png", "codec/interlaced.png"}) {
    const std::string bytes = read_fixture(f);
    const int rejected = corruption_sweep(bytes, [](std::string_view b) { return gi::decode_png(b); });
    CHECK(rejected >= int(bytes.size()));  // every proper prefix at least
  }
  // an IHDR of 100000 x 100000 RGBA with a valid CRC: refused before any allocation
  std::string big = read_fixture("codec/ga8.png");
  const unsigned char ihdr[] = {'I', 'H', 'D', 'R', 0, 1, 0x86, 0xA0, 0, 1, 0x86, 0xA0, 8, 6, 0, 0, 0};
  big.replace(12, 17, reinterpret_cast<const char*>(ihdr), 17);
  const uint32_t crc = uint32_t(crc32(0, ihdr, 17));
  const char crc_be[] = {char(crc >> 24), char(crc >> 16), char(crc >> 8), char(crc)};
  big.replace(29, 4, crc_be, 4);
  try {
    (void)gi::decode_png(big);
    FAIL("an oversized PNG was accepted");
  } catch (const gd::io_error& e) {
    CHECK_THAT(e.what(), Catch::Contains("larger than 2^28 samples"));
  }
}

TEST_CASE("decode_jpeg matches djpeg's pixels for baseline, progressive, grayscale and 1/2-scaled decoding", "[image][jpeg]") {
  const std::string rgb = read_fixture("codec/rgb.jpg"), prog = read_fixture("codec/progressive.jpg"),
                    gray = read_fixture("codec/gray.jpg");
  CHECK(same_samples(gi::decode_jpeg<int64_t>(rgb), read_pnm("codec/rgb.ppm")));
  CHECK(same_samples(gi::decode_jpeg<int64_t>(prog), read_pnm("codec/progressive.ppm")));
  CHECK(same_samples(gi::decode_jpeg<int64_t>(gray), read_pnm("codec/gray.pgm")));
  CHECK(same_samples(gi::decode_jpeg<int64_t>(rgb, {.ratio = 2}), read_pnm("codec/rgb_half.ppm")));
  // floats are the samples / 255; 16-bit samples are x * 257
  const auto f = gi::decode_jpeg(rgb);
  const auto px = read_pnm("codec/rgb.ppm");
  for (int64_t i = 0; i < f.size(); ++i) REQUIRE(f.data()[i] == float(px.data()[i]) * (1.f / 255.f));
  CHECK(gi::decode_jpeg<int64_t>(rgb, {.bits = 16})(3, 4, 1) == px(3, 4, 1) * 257);
  // channels: gray -> RGB repeats, RGB -> gray has one channel
  const auto g3 = gi::decode_jpeg<int64_t>(gray, {.channels = 3});
  REQUIRE(g3.shape() == gd::Shape{14, 20, 3});
  CHECK(g3(5, 6, 0) == g3(5, 6, 2));
  CHECK(gi::decode_jpeg(rgb, {.channels = 1}).shape() == gd::Shape{14, 20, 1});
  // the source the JPEGs were made from is close (quality 85)
  CHECK(psnr(gi::decode_jpeg(rgb), gi::convert_image_dtype<float>(read_pnm("codec/src.ppm"))) > 30);
  // the fast IDCT is within a few levels of the accurate one
  const auto fast = gi::decode_jpeg<int64_t>(rgb, {.fast_dct = true});
  for (int64_t i = 0; i < fast.size(); ++i) REQUIRE(std::abs(fast.data()[i] - px.data()[i]) <= 4);
}

TEST_CASE("encode_jpeg round trips within PSNR bounds", "[image][jpeg]") {
  const auto img = smooth_image(40, 56, 3);
  const std::string q95 = gi::encode_jpeg(img);
  CHECK(q95.substr(0, 3) == "\xFF\xD8\xFF");
  const auto back = gi::decode_jpeg(q95);
  REQUIRE(back.shape() == img.shape());
  CHECK(psnr(back, img) > 38);
  CHECK(psnr(gi::decode_jpeg(gi::encode_jpeg(img, {.quality = 50})), img) > 30);
  CHECK(psnr(gi::decode_jpeg(gi::encode_jpeg(img, {.progressive = true, .optimize_size = true})), img) > 38);
  CHECK(psnr(gi::decode_jpeg(gi::encode_jpeg(img, {.chroma_downsampling = false})), img) > 40);
  CHECK(gi::encode_jpeg(img, {.quality = 50}).size() < q95.size());
  const auto gray = smooth_image(17, 23, 1);
  const auto gback = gi::decode_jpeg(gi::encode_jpeg(gray));
  REQUIRE(gback.shape() == gray.shape());
  CHECK(psnr(gback, gray) > 40);
  // integer samples in, the same within a few levels out
  const auto u8 = gi::convert_image_dtype<int64_t>(img, {.saturate = true});
  const auto u8back = gi::decode_jpeg<int64_t>(gi::encode_jpeg(u8, {.quality = 100, .chroma_downsampling = false}));
  for (int64_t i = 0; i < u8.size(); ++i) REQUIRE(std::abs(u8back.data()[i] - u8.data()[i]) <= 3);
  CHECK_THROWS_AS(gi::encode_jpeg(gd::Tensor<float>::zeros({4, 4, 4})), gd::shape_error);
  CHECK_THROWS_AS(gi::encode_jpeg(img, {.quality = 101}), gd::value_error);
  CHECK_THROWS_AS(gi::decode_jpeg(q95, {.ratio = 3}), gd::value_error);
}

TEST_CASE("decode_jpeg rejects truncated, corrupt and oversized JPEGs with io_error", "[image][jpeg]") {
  for (const char* f : {"codec/rgb.jpg", "codec/progressive.jpg", "codec/gray.jpg"}) {
    const std::string bytes = read_fixture(f);
    INFO(f);
    const int rejected = corruption_sweep(bytes, [](std::string_view b) { return gi::decode_jpeg(b); });
    CHECK(rejected >= int(bytes.size()));  // every proper prefix at least
  }
  try {
    (void)gi::decode_jpeg("definitely not a JPEG");
    FAIL("garbage was accepted");
  } catch (const gd::io_error& e) {
    CHECK_THAT(e.what(), Catch::StartsWith("decode_jpeg: not a valid JPEG (21 bytes): Not a JPEG file"));
  }
  const std::string rgb = read_fixture("codec/rgb.jpg");
  try {
    (void)gi::decode_jpeg(std::string_view(rgb).substr(0, rgb.size() - 100));
    FAIL("a truncated JPEG was accepted");
  } catch (const gd::io_error& e) {
    CHECK_THAT(e.what(), Catch::Contains("Premature end of JPEG file"));
  }
  // a frame header claiming 60000 x 60000 pixels: refused before decoding
  std::string big = rgb;
  const size_t sof = big.find("\xFF\xC0");
  REQUIRE(sof != std::string::npos);
  big[sof + 5] = char(0xEA), big[sof + 6] = char(0x60), big[sof + 7] = char(0xEA), big[sof + 8] = char(0x60);
  try {
    (void)gi::decode_jpeg(big);
    FAIL("an oversized JPEG was accepted");
  } catch (const gd::io_error& e) {
    CHECK_THAT(e.what(), Catch::Contains("larger than 2^28 samples"));
  }
}

TEST_CASE("convert_image_dtype follows TF's scaling, truncation and saturation rules", "[image][dtype]") {
  const auto u8 = gd::Tensor<int64_t>::from({0, 1, 128, 255}, {1, 4, 1});
  const auto f = gi::convert_image_dtype<float>(u8);
  CHECK(f.data()[0] == 0.f);
  CHECK(f.data()[2] == 128.f * (1.f / 255.f));
  CHECK(f.data()[3] == 1.f);
  CHECK(gi::convert_image_dtype<double>(gd::Tensor<int64_t>::full({1, 1, 1}, 65535), {.bits = 16}).item() == 1.0);
  // float -> uint8: trunc(x * 255.5); without saturate, out-of-range values leave 0..255
  const auto x = gd::Tensor<float>::from({0.f, 0.5f, 0.999f, 1.f, 1.2f, -0.1f, NAN}, {1, 7, 1});
  const auto plain = gi::convert_image_dtype<int64_t>(x);
  CHECK(std::vector<int64_t>(plain.begin(), plain.end()) == std::vector<int64_t>{0, 127, 255, 255, 306, -25, 0});
  const auto sat = gi::convert_image_dtype<int64_t>(x, {.saturate = true});
  CHECK(std::vector<int64_t>(sat.begin(), sat.end()) == std::vector<int64_t>{0, 127, 255, 255, 255, 0, 0});
  CHECK(gi::convert_image_dtype<int64_t>(x, {.bits = 16, .saturate = true}).data()[1] == 32767);
  // integer -> integer: TF's shifts; float -> float: a cast
  const auto up = gi::convert_image_dtype<int64_t>(u8, {.bits = 8, .to_bits = 16});
  CHECK(up.data()[3] == 65280);
  CHECK(gi::convert_image_dtype<int64_t>(up, {.bits = 16, .to_bits = 8}).data()[3] == 255);
  CHECK(gi::convert_image_dtype<double>(x).data()[1] == 0.5);
  CHECK_THROWS_AS(gi::convert_image_dtype<float>(u8, {.bits = 12}), gd::value_error);
}

TEST_CASE("decode_jpeg: strict rejects recoverable corruption, non-strict keeps libjpeg's recovery but not truncation", "[image][jpeg]") {
  const std::string rgb = read_fixture("codec/rgb.jpg");
  const size_t sos = rgb.find("\xFF\xDA");  // two stray bytes before the start of scan
  REQUIRE(sos != std::string::npos);
  const std::string extra = rgb.substr(0, sos) + std::string("\x12\x34", 2) + rgb.substr(sos);
  CHECK_THROWS_WITH(gi::decode_jpeg(extra), Catch::Contains("2 extraneous bytes before marker 0xda"));
  CHECK(same_samples(gi::decode_jpeg<int64_t>(extra, {.strict = false}), read_pnm("codec/rgb.ppm")));
  CHECK_THROWS_WITH(gi::decode_jpeg(std::string_view(rgb).substr(0, rgb.size() - 100), {.strict = false}),
                    Catch::Contains("Premature end of JPEG file"));
}

TEST_CASE("resize of integer samples: nearest only", "[image][resize]") {
  const auto px = gd::Tensor<int64_t>::from({10, 20, 30, 40}, {2, 2, 1});
  const auto up = gi::resize(px, {4, 4}, {.method = gi::ResizeMethod::nearest});
  CHECK(up(3, 0, 0) == 30);
  CHECK(up(1, 3, 0) == 20);
  CHECK_THROWS_WITH(gi::resize(px, {4, 4}), Catch::Contains("nearest"));
}

TEST_CASE("decode_image tells PNG from JPEG and refuses anything else", "[image][decode]") {
  CHECK(same_samples(gi::decode_image<int64_t>(read_fixture("codec/rgb.jpg")), read_pnm("codec/rgb.ppm")));
  CHECK(same_samples(gi::decode_image<int64_t>(read_fixture("codec/rgb16.png"), {.bits = 16}),
                     reference_cases("png_rgb16").at(0).out));
  CHECK(gi::decode_image(read_fixture("codec/gray.jpg"), {.channels = 3}).shape() == gd::Shape{14, 20, 3});
  CHECK_THROWS_WITH(gi::decode_image("GIF89a..."), Catch::StartsWith("decode_image: neither a PNG nor a JPEG"));
  CHECK_THROWS_AS(gi::decode_image(""), gd::io_error);
}

namespace {

/// A 4:4:4 CMYK JPEG of one colour, written with libjpeg directly (jpeg_set_colorspace(JCS_CMYK)
/// also writes the Adobe marker, so decoders read the samples as Adobe's inverted CMYK).
std::string cmyk_jpeg(int h, int w, const std::array<uint8_t, 4>& cmyk) {
  jpeg_compress_struct e;
  jpeg_error_mgr err;
  e.err = jpeg_std_error(&err);
  jpeg_create_compress(&e);
  unsigned char* out = nullptr;
  unsigned long size = 0;
  jpeg_mem_dest(&e, &out, &size);
  e.image_width = JDIMENSION(w);
  e.image_height = JDIMENSION(h);
  e.input_components = 4;
  e.in_color_space = JCS_CMYK;
  jpeg_set_defaults(&e);
  jpeg_set_colorspace(&e, JCS_CMYK);
  jpeg_set_quality(&e, 100, TRUE);
  jpeg_start_compress(&e, TRUE);
  std::vector<uint8_t> row(size_t(w) * 4);
  for (int x = 0; x < w; ++x) std::copy(cmyk.begin(), cmyk.end(), row.begin() + 4 * x);
  while (e.next_scanline < e.image_height) {
    JSAMPROW r = row.data();
    jpeg_write_scanlines(&e, &r, 1);
  }
  jpeg_finish_compress(&e);
  jpeg_destroy_compress(&e);
  std::string bytes(reinterpret_cast<const char*>(out), size);
  std::free(out);
  return bytes;
}

}  // namespace

TEST_CASE("decode_jpeg turns Adobe CMYK into RGB as TF does (R = C * K / 255)", "[image][jpeg]") {
  const std::string jpg = cmyk_jpeg(8, 16, {200, 100, 50, 128});
  const auto rgb = gi::decode_jpeg<int64_t>(jpg);
  REQUIRE(rgb.shape() == gd::Shape{8, 16, 3});
  const int64_t want[3] = {200 * 128 / 255, 100 * 128 / 255, 50 * 128 / 255};
  for (int64_t k = 0; k < 3; ++k) CHECK(std::abs(rgb(3, 5, k) - want[k]) <= 2);
  const auto gray = gi::decode_jpeg<int64_t>(jpg, {.channels = 1});
  REQUIRE(gray.shape() == gd::Shape{8, 16, 1});
  CHECK(std::abs(double(gray(2, 2, 0)) - (0.299 * want[0] + 0.587 * want[1] + 0.114 * want[2])) <= 2.5);
}
