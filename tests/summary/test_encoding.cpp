// Event encoding, TFRecord framing, histograms, PNG and draw_text, all in memory.
#include <catch2/catch.hpp>

#include <cfloat>
#include <cmath>
#include <string>

#include "gradus/core/rng.hpp"
#include "gradus/detail/crc32c.hpp"
#include "gradus/summary.hpp"
#include "../support/hex_bytes.hpp"

namespace gd = gradus;
namespace sm = gradus::summary;
using gradus_test::hex_bytes;

namespace {

gd::Tensor<float> random_image(int64_t h, int64_t w, int64_t c, gd::Rng& rng) {
  auto t = gd::Tensor<float>::empty({h, w, c});
  for (float& v : t) v = float(rng.below(256)) / 255.f;
  return t;
}

}  // namespace

TEST_CASE("crc32c: check value, portable and hardware paths agree, mask", "[summary]") {
  CHECK(gradus::detail::crc32c("123456789") == 0xE3069283u);
  CHECK(gradus::detail::crc32c_portable("123456789") == 0xE3069283u);
  CHECK(gradus::detail::crc32c("") == 0u);
  gd::Rng rng(7);
  std::string data;
  for (int n = 0; n < 200; ++n) {
    CHECK(gradus::detail::crc32c(data) == gradus::detail::crc32c_portable(data));
    data.push_back(char(rng.below(256)));
  }
  const uint32_t c = gradus::detail::crc32c("123456789");
  CHECK(gradus::detail::masked_crc32c("123456789") == uint32_t(((c >> 15) | (c << 17)) + 0xa282ead8u));
}

TEST_CASE("golden bytes: file_version and scalar events, framed", "[summary]") {
  CHECK(gradus::io::encode_tfrecord(sm::encode_file_version_event(256.5)) ==
        hex_bytes("18 00 00 00 00 00 00 00 a3 7f 4b 22 09 00 00 00 00 00 08 70 40 1a 0d \"brain.Event:2\" bc 98 21 2b"));
  CHECK(gradus::io::encode_tfrecord(sm::encode_scalar_event(256.5, 1, "v/1", 1.5f)) ==
        hex_bytes("19 00 00 00 00 00 00 00 8b f1 08 28 09 00 00 00 00 00 08 70 40 10 01 2a 0c 0a 0a 0a 03 \"v/1\" "
                  "15 00 00 c0 3f 2c ec c0 87"));
  // A negative step is a 10-byte varint; a zero simple_value is still written (oneof member).
  const std::string e = sm::encode_scalar_event(0, -1, "z", 0.f);
  CHECK(e == hex_bytes("10 ff ff ff ff ff ff ff ff ff 01 2a 0a 0a 08 0a 01 \"z\" 15 00 00 00 00"));
  const sm::Event d = sm::decode_event(e);
  CHECK(d.step == -1);
  REQUIRE(d.values.size() == 1);
  CHECK(d.values[0].simple_value == 0.f);
}

TEST_CASE("TFRecord: parse what frame_record wrote, reject corrupt and truncated bytes", "[summary]") {
  const std::string file = gradus::io::encode_tfrecord("abc") + gradus::io::encode_tfrecord("") + gradus::io::encode_tfrecord(std::string(300, 'x'));
  const auto recs = gradus::io::decode_tfrecords(file);
  REQUIRE(recs.size() == 3);
  CHECK(recs[0] == "abc");
  CHECK(recs[1].empty());
  CHECK(recs[2] == std::string(300, 'x'));

  std::string bad = file;
  bad[13] ^= 1;  // data of record 0
  CHECK_THROWS_WITH(gradus::io::decode_tfrecords(bad, gradus::io::Compression::none, "f"), Catch::Contains("record 0") && Catch::Contains("data checksum"));
  bad = file;
  bad[19 + 2] ^= 0x40;  // length of record 1
  CHECK_THROWS_WITH(gradus::io::decode_tfrecords(bad, gradus::io::Compression::none, "f"), Catch::Contains("record 1") && Catch::Contains("length checksum"));
  for (size_t cut : {size_t(5), size_t(19 + 11), file.size() - 1})
    CHECK_THROWS_AS(gradus::io::decode_tfrecords(std::string_view(file).substr(0, cut)), gd::io_error);
  // A hostile length (all ones) with a valid length CRC is caught before any allocation.
  std::string huge(8, '\xff');
  huge += std::string(4, '\0');
  const uint32_t m = gradus::detail::masked_crc32c(std::string_view(huge).substr(0, 8));
  for (int i = 0; i < 4; ++i) huge[size_t(8 + i)] = char(m >> (8 * i));
  CHECK_THROWS_WITH(gradus::io::decode_tfrecords(huge + "abcd"), Catch::Contains("truncated"));
}

TEST_CASE("decode_event rejects malformed messages", "[summary]") {
  CHECK_THROWS_AS(sm::decode_event(hex_bytes("2a 05 0a 03")), gd::io_error);      // length beyond the end
  CHECK_THROWS_AS(sm::decode_event(hex_bytes("10 ff ff")), gd::io_error);         // truncated varint
  CHECK_THROWS_AS(sm::decode_event(hex_bytes("09 00 00 00")), gd::io_error);      // truncated double
  CHECK_THROWS_AS(sm::decode_event(hex_bytes("0a 00")), gd::io_error);            // wall_time with wire type 2
  CHECK_THROWS_AS(sm::decode_event(hex_bytes("2a 03 0a 01 0b")), gd::io_error);   // group wire type
  CHECK(sm::decode_event(hex_bytes("38 05 62 01 00 1a 00")).file_version.empty());  // unknown fields (7, 12) skipped
}

TEST_CASE("histogram: TF default limits, collapsed empty runs, statistics, non-finite rejected", "[summary]") {
  const auto& lim = sm::default_bucket_limits();
  REQUIRE(lim.size() == 1551);
  CHECK(lim.front() == -DBL_MAX);
  CHECK(lim.back() == DBL_MAX);
  CHECK(lim[775] == 0.0);
  CHECK(lim[776] == 1e-12);
  CHECK(lim[777] == Approx(1.1e-12));
  for (size_t i = 1; i < lim.size(); ++i) REQUIRE(lim[i] > lim[i - 1]);

  const auto h = sm::make_histogram(gd::Tensor<double>::from({-1, 0, 0.5, 0.5, 2}, {5}));
  CHECK(h.min == -1);
  CHECK(h.max == 2);
  CHECK(h.num == 5);
  CHECK(h.sum == 2);
  CHECK(h.sum_squares == 5.5);
  REQUIRE(h.bucket.size() == h.bucket_limit.size());
  double total = 0;
  for (size_t i = 0; i < h.bucket.size(); ++i) {
    total += h.bucket[i];
    if (i > 0) CHECK(h.bucket_limit[i] > h.bucket_limit[i - 1]);
    if (i > 0 && h.bucket[i] == 0) CHECK(h.bucket[i - 1] > 0);  // empty runs are collapsed
  }
  CHECK(total == 5);
  // Every value lies in [previous limit, its bucket's limit).
  for (double v : {-1.0, 0.0, 0.5, 2.0}) {
    size_t b = 0;
    while (h.bucket_limit[b] <= v) ++b;
    CHECK(h.bucket[b] == (v == 0.5 ? 2 : 1));
    CHECK(h.bucket_limit[b - 1] <= v);
  }
  const auto one = sm::make_histogram(gd::Tensor<int64_t>::from({3, 3, 3}));
  REQUIRE(one.bucket.size() == 3);  // empty run, the bucket of 3, empty run up to DBL_MAX
  CHECK(one.bucket == std::vector<double>{0, 3, 0});
  CHECK(one.bucket_limit[2] == DBL_MAX);
  const auto empty = sm::make_histogram(gd::Tensor<float>::zeros({0}));
  CHECK(empty.bucket == std::vector<double>{0});
  CHECK(empty.bucket_limit == std::vector<double>{DBL_MAX});
  CHECK_THROWS_WITH(sm::make_histogram(gd::Tensor<double>::from({1, NAN}), "w"),
                    Catch::Contains("'w'") && Catch::Contains("index 1") && Catch::Contains("not finite"));
  CHECK_THROWS_AS(sm::make_histogram(gd::Tensor<float>::from({INFINITY})), gd::value_error);
}

TEST_CASE("every value kind round-trips through decode_event", "[summary]") {
  const auto h = sm::make_histogram(gd::Tensor<double>::from({1, 2, 3}));
  const std::string e = sm::encode_summary_event(
      12.25, 7,
      {sm::encode_scalar_value("s", -2.5f), sm::encode_histogram_value("h", h), sm::encode_text_value("t", "*hi* ü"),
       sm::encode_image_value("i", {2, 3, 4, "PNGDATA"})});
  const sm::Event d = sm::decode_event(e);
  CHECK(d.wall_time == 12.25);
  CHECK(d.step == 7);
  REQUIRE(d.values.size() == 4);
  CHECK((d.values[0].tag == "s" && d.values[0].simple_value == -2.5f));
  REQUIRE(d.values[1].histo);
  CHECK(d.values[1].histo->bucket == h.bucket);
  CHECK(d.values[1].histo->bucket_limit == h.bucket_limit);
  CHECK((d.values[1].histo->min == 1 && d.values[1].histo->max == 3 && d.values[1].histo->sum_squares == 14));
  CHECK(d.values[2].text == "*hi* ü");
  CHECK(d.values[2].plugin_name == "text");
  CHECK(d.values[2].tensor_shape.empty());
  REQUIRE(d.values[3].image);
  CHECK((d.values[3].image->height == 2 && d.values[3].image->width == 3 && d.values[3].image->colorspace == 4));
  CHECK(d.values[3].image->encoded == "PNGDATA");
  CHECK(sm::decode_event(sm::encode_file_version_event(1.0)).file_version == "brain.Event:2");
}

TEST_CASE("PNG round trip for 1, 3 and 4 channels; clamping; corrupt data rejected", "[summary][image]") {
  gd::Rng rng(3);
  for (int64_t c : {1, 3, 4}) {
    const auto img = random_image(5, 7, c, rng);
    const std::string png = gd::image::encode_png(img);
    CHECK(png.substr(1, 3) == "PNG");
    const auto back = gd::image::decode_png(png);
    REQUIRE(back.shape() == img.shape());
    for (int64_t i = 0; i < img.size(); ++i) REQUIRE(back.data()[i] == Approx(img.data()[i]).margin(1e-6));
  }
  const auto clamped = gd::image::decode_png(gd::image::encode_png(gd::Tensor<float>::from({-1.f, 2.f, NAN, 0.5f}, {2, 2, 1})));
  CHECK(clamped.data()[0] == 0.f);
  CHECK(clamped.data()[1] == 1.f);
  CHECK(clamped.data()[2] == 0.f);
  CHECK(clamped.data()[3] == Approx(128.f / 255.f));
  CHECK_THROWS_AS(gd::image::encode_png(gd::Tensor<float>::zeros({4, 4, 2})), gd::shape_error);

  const std::string png = gd::image::encode_png(random_image(16, 16, 3, rng));
  CHECK_THROWS_AS(gd::image::decode_png("not a png at all"), gd::io_error);
  CHECK_THROWS_AS(gd::image::decode_png(""), gd::io_error);
  CHECK_THROWS_AS(gd::image::decode_png(std::string_view(png).substr(0, png.size() / 2)), gd::io_error);
  std::string bad = png;
  bad[png.size() - 20] ^= 0x55;  // inside the last IDAT chunk: its CRC no longer matches
  CHECK_THROWS_AS(gd::image::decode_png(bad), gd::io_error);
}

TEST_CASE("draw_text changes pixels only inside the glyph box", "[summary][image]") {
  auto img = gd::Tensor<float>::zeros({20, 40, 3});
  gd::image::draw_text(img, "Hi!", 3, 4);
  const auto [tw, th] = gd::image::measure_text("Hi!");
  CHECK(tw == 17);
  CHECK(th == 7);
  int changed = 0;
  for (int64_t y = 0; y < 20; ++y)
    for (int64_t x = 0; x < 40; ++x) {
      const bool lit = img(y, x, 0) != 0.f;
      changed += lit;
      if (lit) {
        REQUIRE((x >= 3 && x < 3 + tw && y >= 4 && y < 4 + th));
        CHECK((img(y, x, 0) == 1.f && img(y, x, 1) == 0.f && img(y, x, 2) == 0.f));
      }
    }
  CHECK(changed > 20);
  CHECK(img(4, 3, 0) == 1.f);   // top-left of 'H'
  CHECK(img(5, 4, 0) == 0.f);   // inside 'H', between its bars
  CHECK(img(7, 4, 0) == 1.f);   // the bar of 'H'

  // Scaled, clipped at the border, on gray (luma) and RGBA (alpha set) images.
  auto gray = gd::Tensor<float>::zeros({10, 10, 1});
  gd::image::draw_text(gray, "W\nW", 6, -3, {0, 1, 0}, 2);
  for (int64_t y = 0; y < 10; ++y)
    for (int64_t x = 0; x < 10; ++x)
      if (gray(y, x, 0) != 0.f) CHECK((x >= 6 && gray(y, x, 0) == Approx(0.587f)));
  auto rgba = gd::Tensor<float>::zeros({8, 8, 4});
  gd::image::draw_text(rgba, "|", 0, 0, {0, 0, 1});
  CHECK((rgba(0, 2, 2) == 1.f && rgba(0, 2, 3) == 1.f && rgba(0, 1, 3) == 0.f));
  CHECK_THROWS_AS(gd::image::draw_text(rgba, "x", 0, 0, {1, 1, 1}, 0), gd::value_error);

  const auto up = gd::image::upscale_nearest(gd::Tensor<float>::from({0.f, 1.f}, {1, 2, 1}), 3);
  REQUIRE(up.shape() == gd::Shape{3, 6, 1});
  CHECK((up(2, 2, 0) == 0.f && up(2, 3, 0) == 1.f));
}

TEST_CASE("decoders survive random corruption: a value or an io_error, never a crash", "[summary]") {
  gd::Rng rng(11);
  const std::string event = sm::encode_summary_event(
      3.5, 9,
      {sm::encode_histogram_value("h", sm::make_histogram(gd::Tensor<double>::from({1, 5, 9}))),
       sm::encode_text_value("t", "abc"), sm::encode_image_value("i", {1, 1, 1, "x"})});
  const std::string png = gd::image::encode_png(random_image(6, 6, 4, rng));
  int rejected = 0;
  for (int i = 0; i < 400; ++i) {
    std::string e = event, p = png;
    for (int k = 0; k < 3; ++k) {
      e[rng.below(e.size())] = char(rng.below(256));
      p[rng.below(p.size())] = char(rng.below(256));
    }
    e.resize(e.size() - rng.below(4));
    try {
      (void)sm::decode_event(e);
    } catch (const gd::io_error&) {
      ++rejected;
    }
    try {
      (void)gd::image::decode_png(p);
    } catch (const gd::io_error&) {
      ++rejected;
    }
  }
  CHECK(rejected > 100);
}
