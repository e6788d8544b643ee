// draw_bounding_boxes on hand-computed pixels; sample_distorted_bounding_box's constraints over
// many seeds; preprocess_for_train's shape, range and reproducibility.
#include <catch2/catch.hpp>

#include <cmath>

#include <gradus/gradus.hpp>
#include <gradus/image.hpp>

namespace gd = gradus;
namespace gi = gradus::image;

TEST_CASE("draw_bounding_boxes draws TF's one-pixel outlines, skipping inverted and outside boxes", "[image][bbox]") {
  const auto img = gd::Tensor<float>::zeros({1, 5, 6, 3});
  // box 0: the whole image (yellow); box 1: inverted (skipped); box 2: from (2, 2) past the
  // bottom-right corner (red): its bottom and right edges are outside and not drawn
  const auto boxes = gd::Tensor<float>::from({0, 0, 1, 1, 0.8f, 0.1f, 0.2f, 0.9f, 0.5f, 0.5f, 1.5f, 1.5f}, {1, 3, 4});
  const auto out = gi::draw_bounding_boxes(img, boxes);
  auto at = [&](int64_t y, int64_t x) {
    return std::array<float, 3>{out(0, y, x, 0), out(0, y, x, 1), out(0, y, x, 2)};
  };
  const std::array<float, 3> yellow{1, 1, 0}, red{1, 0, 0}, black{0, 0, 0};
  CHECK(at(0, 0) == yellow);
  CHECK(at(0, 3) == yellow);
  CHECK(at(4, 5) == yellow);
  CHECK(at(3, 5) == yellow);
  CHECK(at(1, 1) == black);
  CHECK(at(2, 2) == red);  // rows/cols trunc(0.5 * 4) = 2 and trunc(0.5 * 5) = 2
  CHECK(at(2, 4) == red);
  CHECK(at(3, 2) == red);
  CHECK(at(3, 3) == black);
  CHECK(at(4, 2) == red);     // its left edge runs down to the last row (clamped)
  CHECK(at(4, 3) == yellow);  // but it has no bottom edge: the yellow one shows
  CHECK(img(0, 0, 0, 0) == 0.f);  // a copy: the input is untouched
  // a single gray image, custom colours: the first channel of the colour is written
  const auto g = gi::draw_bounding_boxes(gd::Tensor<double>::zeros({4, 4, 1}),
                                         gd::Tensor<float>::from({0, 0, 1, 1}, {1, 4}), {{0.25f, 1, 1, 1}});
  CHECK(g(0, 2, 0) == 0.25);
  CHECK(g(1, 1, 0) == 0.0);
  CHECK_THROWS_AS(gi::draw_bounding_boxes(img, gd::Tensor<float>::zeros({2, 1, 4})), gd::shape_error);
}

TEST_CASE("sample_distorted_bounding_box keeps its constraints over many seeds", "[image][bbox]") {
  const int64_t H = 120, W = 90;
  const std::vector<gi::Box> boxes = {{0.1f, 0.2f, 0.5f, 0.6f}, {0.6f, 0.05f, 0.95f, 0.4f}};
  const gi::DistortedBoxOptions o{.min_object_covered = 0.5f, .aspect_ratio_range = {0.5f, 2.0f},
                                  .area_range = {0.1f, 0.6f}, .max_attempts = 50};
  // the boxes in pixels, truncated as TF does
  std::vector<std::array<int64_t, 4>> px;  // x0, y0, x1, y1
  for (const auto& b : boxes)
    px.push_back({int64_t(b[1] * W), int64_t(b[0] * H), int64_t(b[3] * W), int64_t(b[2] * H)});
  int fallbacks = 0;
  for (uint64_t seed = 0; seed < 3000; ++seed) {
    gd::Rng rng(seed);
    const auto d = gi::sample_distorted_bounding_box({H, W, 3}, boxes, rng, o);
    const int64_t y = d.begin[0], x = d.begin[1], h = d.size[0], w = d.size[1];
    REQUIRE(d.begin[2] == 0);
    REQUIRE(d.size[2] == -1);
    REQUIRE((y >= 0 && x >= 0 && h >= 1 && w >= 1 && y + h <= H && x + w <= W));
    REQUIRE(d.bbox[0] == float(y) / float(H));
    REQUIRE(d.bbox[3] == float(x + w) / float(W));
    if (h == H && w == W) {
      ++fallbacks;
      continue;
    }
    const double area = double(h * w) / double(H * W);
    REQUIRE(area >= 0.1 - 1e-6);
    REQUIRE(area <= 0.6 + 1e-6);
    const double aspect = double(w) / double(h);
    REQUIRE(aspect >= 0.5 - 1.0 / double(h));
    REQUIRE(aspect <= 2.0 + 1.0 / double(h));
    double best = 0;
    for (const auto& b : px) {
      const int64_t ix = std::max<int64_t>(0, std::min(x + w, b[2]) - std::max(x, b[0]));
      const int64_t iy = std::max<int64_t>(0, std::min(y + h, b[3]) - std::max(y, b[1]));
      best = std::max(best, double(ix * iy) / double((b[2] - b[0]) * (b[3] - b[1])));
    }
    REQUIRE(best >= 0.5 - 1e-6);
  }
  CHECK(fallbacks < 300);
  // the same seed gives the same crop
  gd::Rng a(77), b(77);
  CHECK(gi::sample_distorted_bounding_box({H, W, 3}, boxes, a, o).begin ==
        gi::sample_distorted_bounding_box({H, W, 3}, boxes, b, o).begin);
  // an impossible constraint falls back to the whole image
  gd::Rng r(1);
  const auto whole = gi::sample_distorted_bounding_box({H, W, 3}, {{0.f, 0.f, 1.f, 1.f}}, r,
                                                       {.min_object_covered = 1.0f, .area_range = {0.05f, 0.5f}});
  CHECK((whole.size[0] == H && whole.size[1] == W && whole.begin[0] == 0));
  // no boxes: an error unless use_image_if_no_bounding_boxes
  CHECK_THROWS_WITH(gi::sample_distorted_bounding_box({H, W, 3}, {}, r),
                    Catch::Contains("use_image_if_no_bounding_boxes"));
  const auto any = gi::sample_distorted_bounding_box({H, W, 3}, {}, r, {.use_image_if_no_bounding_boxes = true});
  CHECK(any.size[0] * any.size[1] >= int64_t(0.05 * H * W));
  CHECK_THROWS_AS(gi::sample_distorted_bounding_box({H, W, 3}, {{0.5f, 0.f, 0.4f, 1.f}}, r), gd::value_error);
  CHECK_THROWS_AS(gi::sample_distorted_bounding_box({H, W, 3}, {{0.f, 0.f, 1.5f, 1.f}}, r), gd::value_error);
}

TEST_CASE("preprocess_for_train: the requested size, values in [0, 1], reproducible per seed", "[image][preprocess]") {
  gd::Rng src(8);
  const auto img = gd::Tensor<float>::random_uniform({60, 80, 3}, src);
  gd::Rng a(1), b(1), c(2);
  const auto x = gi::preprocess_for_train(img, 32, 24, a, {{0.2f, 0.2f, 0.8f, 0.7f}});
  REQUIRE(x.shape() == gd::Shape{32, 24, 3});
  for (float v : x) REQUIRE((v >= 0.f && v <= 1.f));
  const auto y = gi::preprocess_for_train(img, 32, 24, b, {{0.2f, 0.2f, 0.8f, 0.7f}});
  CHECK(std::equal(x.begin(), x.end(), y.begin()));
  const auto z = gi::preprocess_for_train(img, 32, 24, c);
  CHECK(!std::equal(x.begin(), x.end(), z.begin()));
  const auto f = gi::preprocess_for_train(img, 16, 16, c, {}, {.fast_mode = true});
  CHECK(f.shape() == gd::Shape{16, 16, 3});
  // every colour ordering keeps the range
  for (int order = 0; order < 4; ++order) {
    const auto d = gi::distort_color(img, order, c);
    for (float v : d) REQUIRE((v >= 0.f && v <= 1.f));
  }
  CHECK_THROWS_AS(gi::distort_color(img, 4, c), gd::value_error);
  CHECK_THROWS_AS(gi::preprocess_for_train(gd::Tensor<float>::zeros({4, 4, 1}), 2, 2, c), gd::shape_error);
}
