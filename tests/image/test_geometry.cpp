// Crops, pads, flips, transpose and resize on hand-computed pixels; batches and single images;
// integer samples; the random forms; the thread-split path on large batches.
#include <catch2/catch.hpp>

#include <set>

#include <gradus/gradus.hpp>
#include <gradus/image.hpp>

namespace gd = gradus;
namespace gi = gradus::image;

namespace {

/// [N, H, W, C] with value n*1000 + y*100 + x*10 + c: every pixel says where it came from.
template <class T = double>
gd::Tensor<T> coded(int64_t n, int64_t h, int64_t w, int64_t c) {
  gd::Tensor<T> t({n, h, w, c});
  for (int64_t b = 0; b < n; ++b)
    for (int64_t y = 0; y < h; ++y)
      for (int64_t x = 0; x < w; ++x)
        for (int64_t k = 0; k < c; ++k) t(b, y, x, k) = T(b * 1000 + y * 100 + x * 10 + k);
  return t;
}

}  // namespace

TEST_CASE("crop_to_bounding_box and pad_to_bounding_box move pixels as TF's", "[image][geometry]") {
  const auto x = coded(2, 5, 6, 2);
  const auto crop = gi::crop_to_bounding_box(x, 1, 2, 3, 4);
  REQUIRE(crop.shape() == gd::Shape{2, 3, 4, 2});
  CHECK(crop(0, 0, 0, 0) == 120);
  CHECK(crop(1, 2, 3, 1) == 1351);
  const auto pad = gi::pad_to_bounding_box(x, 2, 1, 8, 9);
  REQUIRE(pad.shape() == gd::Shape{2, 8, 9, 2});
  CHECK(pad(0, 2, 1, 0) == 0);  // pixel (0, 0) of image 0 is coded 0 as well: check a neighbour
  CHECK(pad(0, 3, 2, 1) == 111);
  CHECK(pad(1, 6, 6, 0) == 1450);
  CHECK(pad(1, 1, 3, 0) == 0);
  CHECK(pad(1, 7, 8, 1) == 0);
  // single images and integer samples
  const auto xi = coded<int64_t>(1, 5, 6, 1).reshape({5, 6, 1});
  const auto ci = gi::crop_to_bounding_box(xi, 4, 5, 1, 1);
  REQUIRE(ci.shape() == gd::Shape{1, 1, 1});
  CHECK(ci.item() == 450);
  CHECK(gi::pad_to_bounding_box(xi, 0, 0, 5, 6)(3, 4, 0) == 340);
  // out-of-range windows are value_errors naming the op
  CHECK_THROWS_WITH(gi::crop_to_bounding_box(x, 3, 0, 3, 6), Catch::StartsWith("crop_to_bounding_box: the window"));
  CHECK_THROWS_AS(gi::pad_to_bounding_box(x, 1, 0, 5, 6), gd::value_error);
  CHECK_THROWS_AS(gi::crop_to_bounding_box(gd::Tensor<double>::zeros({5, 6}), 0, 0, 1, 1), gd::shape_error);
}

TEST_CASE("flips and transpose permute pixels; the random flips decide per image", "[image][geometry]") {
  const auto x = coded(3, 4, 5, 2);
  const auto lr = gi::flip_left_right(x), ud = gi::flip_up_down(x), tr = gi::transpose(x);
  REQUIRE(tr.shape() == gd::Shape{3, 5, 4, 2});
  for (int64_t b = 0; b < 3; ++b)
    for (int64_t y = 0; y < 4; ++y)
      for (int64_t c = 0; c < 5; ++c) {
        REQUIRE(lr(b, y, c, 1) == x(b, y, 4 - c, 1));
        REQUIRE(ud(b, y, c, 0) == x(b, 3 - y, c, 0));
        REQUIRE(tr(b, c, y, 1) == x(b, y, c, 1));
      }
  const auto xi = coded<int64_t>(1, 2, 3, 1).reshape({2, 3, 1});
  CHECK(gi::flip_left_right(xi)(1, 0, 0) == 120);
  CHECK(gi::transpose(xi).shape() == gd::Shape{3, 2, 1});

  const auto many = coded(64, 3, 4, 1);
  gd::Rng rng(5);
  const auto r = gi::random_flip_left_right(many, rng);
  const auto flipped = gi::flip_left_right(many);
  int n_flipped = 0;
  for (int64_t b = 0; b < 64; ++b) {
    const bool same = r(b, 1, 0, 0) == many(b, 1, 0, 0) && r(b, 2, 3, 0) == many(b, 2, 3, 0);
    const bool flip = r(b, 1, 0, 0) == flipped(b, 1, 0, 0) && r(b, 2, 3, 0) == flipped(b, 2, 3, 0);
    REQUIRE((same || flip));
    n_flipped += flip;
  }
  CHECK(n_flipped > 16);
  CHECK(n_flipped < 48);
  gd::Rng again(5);
  const auto r2 = gi::random_flip_left_right(many, again);
  CHECK(std::equal(r.begin(), r.end(), r2.begin()));
  const auto v = gi::random_flip_up_down(many, rng);
  CHECK((v(7, 0, 1, 0) == many(7, 0, 1, 0) || v(7, 0, 1, 0) == many(7, 2, 1, 0)));
}

TEST_CASE("random_crop takes one window for the batch, uniform over the positions", "[image][geometry]") {
  const auto x = coded(2, 6, 7, 1);
  gd::Rng rng(9);
  std::set<std::pair<int64_t, int64_t>> seen;
  for (int i = 0; i < 400; ++i) {
    const auto c = gi::random_crop(x, {4, 5}, rng);
    REQUIRE(c.shape() == gd::Shape{2, 4, 5, 1});
    const int64_t oy = int64_t(c(0, 0, 0, 0)) / 100, ox = int64_t(c(0, 0, 0, 0)) / 10 % 10;
    REQUIRE(c(1, 3, 4, 0) == 1000 + (oy + 3) * 100 + (ox + 4) * 10);
    seen.insert({oy, ox});
  }
  CHECK(seen.size() == 3 * 3);
  CHECK_THROWS_AS(gi::random_crop(x, {7, 5}, rng), gd::value_error);
}

TEST_CASE("resize: identity at the same size, nearest doubling repeats, area halving averages", "[image][resize]") {
  gd::Rng rng(3);
  const auto x = gd::Tensor<double>::random_uniform({2, 4, 6, 3}, rng);
  for (auto m : {gi::ResizeMethod::bilinear, gi::ResizeMethod::nearest, gi::ResizeMethod::bicubic, gi::ResizeMethod::area}) {
    const auto same = gi::resize(x, {4, 6}, {.method = m});
    INFO(gi::to_string(m));
    for (int64_t i = 0; i < x.size(); ++i) REQUIRE(same.data()[i] == Approx(x.data()[i]).margin(1e-12));
  }
  const auto up = gi::resize(x, {8, 12}, {.method = gi::ResizeMethod::nearest});
  CHECK(up(1, 5, 7, 2) == x(1, 2, 3, 2));
  CHECK(up(0, 0, 11, 0) == x(0, 0, 5, 0));
  const auto half = gi::resize(x, {2, 3}, {.method = gi::ResizeMethod::area});
  CHECK(half(1, 1, 2, 1) == Approx((x(1, 2, 4, 1) + x(1, 2, 5, 1) + x(1, 3, 4, 1) + x(1, 3, 5, 1)) / 4));
  // bilinear halving samples between pixels: the mean of the 2 x 2 block as well
  const auto bil = gi::resize(x, {2, 3});
  CHECK(bil(0, 0, 1, 0) == Approx((x(0, 0, 2, 0) + x(0, 0, 3, 0) + x(0, 1, 2, 0) + x(0, 1, 3, 0)) / 4));
  // preserve_aspect_ratio fits inside the box
  CHECK(gi::resize(x, {100, 9}, {.preserve_aspect_ratio = true}).shape() == gd::Shape{2, 6, 9, 3});
  CHECK_THROWS_AS(gi::resize(x, {0, 3}), gd::value_error);
}

TEST_CASE("large batches split over threads give the same bits as one image at a time", "[image][threads]") {
  gd::Rng rng(4);
  const auto x = gd::Tensor<float>::random_uniform({6, 48, 40, 3}, rng);  // 34560 floats per image
  for (auto m : {gi::ResizeMethod::bilinear, gi::ResizeMethod::bicubic, gi::ResizeMethod::area}) {
    const auto all = gi::resize(x, {61, 29}, {.method = m});
    for (int64_t b : {0, 5}) {
      const auto one = gd::eval(gd::slice(x, {b, 0, 0, 0}, {1, 48, 40, 3}));
      const auto r = gi::resize(one.reshape({48, 40, 3}), {61, 29}, {.method = m});
      REQUIRE(std::equal(r.begin(), r.end(), all.begin() + b * r.size()));
    }
  }
  const auto hsv = gi::rgb_to_hsv(x);
  const auto one = gd::eval(gd::slice(x, {5, 0, 0, 0}, {1, 48, 40, 3}));
  const auto hsv1 = gi::rgb_to_hsv(one);
  CHECK(std::equal(hsv1.begin(), hsv1.end(), hsv.begin() + 5 * hsv1.size()));
}
