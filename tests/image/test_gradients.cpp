// Gradient checks (double, central differences, gd::compute_gradient_error) of every
// differentiable gd::image op, on single images and batches.
#include <catch2/catch.hpp>

#include <gradus/gradus.hpp>
#include <gradus/image.hpp>

namespace gd = gradus;
namespace gi = gradus::image;
using V = gd::Var<double>;

TEST_CASE("resize is differentiable for every method, up and down, batched or not", "[image][grad]") {
  gd::Rng rng(21);
  const auto batch = gd::Tensor<double>::random_uniform({2, 5, 4, 2}, rng);
  const auto single = gd::Tensor<double>::random_uniform({4, 6, 3}, rng);
  for (auto m : {gi::ResizeMethod::bilinear, gi::ResizeMethod::nearest, gi::ResizeMethod::bicubic, gi::ResizeMethod::area})
    for (std::array<int64_t, 2> size : {std::array<int64_t, 2>{3, 7}, {8, 3}, {2, 2}}) {
      INFO(gi::to_string(m) << " to " << size[0] << "x" << size[1]);
      CHECK(gd::compute_gradient_error([&](const V& x) { return gi::resize(x, size, {.method = m}); }, batch) < 1e-8);
      CHECK(gd::compute_gradient_error([&](const V& x) { return gi::resize(x, size, {.method = m}); }, single) < 1e-8);
    }
}

TEST_CASE("crops, pads, flips and transpose are differentiable", "[image][grad]") {
  gd::Rng rng(22);
  const auto x0 = gd::Tensor<double>::random_uniform({2, 5, 6, 2}, rng);
  const auto s0 = gd::Tensor<double>::random_uniform({5, 6, 3}, rng);
  const auto check = [&](auto f) {
    CHECK(gd::compute_gradient_error(f, x0) < 1e-8);
    CHECK(gd::compute_gradient_error(f, s0) < 1e-8);
  };
  check([](const V& x) { return gi::crop_to_bounding_box(x, 1, 2, 3, 3); });
  check([](const V& x) { return gi::pad_to_bounding_box(x, 1, 2, 7, 9); });
  check([](const V& x) { return gi::resize_with_crop_or_pad(x, 8, 3); });
  check([](const V& x) { return gi::central_crop(x, 0.5); });
  check([](const V& x) { return gi::flip_left_right(x); });
  check([](const V& x) { return gi::flip_up_down(x); });
  check([](const V& x) { return gi::transpose(x); });
  check([](const V& x) {
    gd::Rng r(1);  // the same draw on every evaluation
    return gi::random_flip_left_right(x, r);
  });
  check([](const V& x) {
    gd::Rng r(2);
    return gi::random_crop(x, {3, 4}, r);
  });
}

TEST_CASE("brightness, contrast, gamma, standardization and the grey conversions are differentiable", "[image][grad]") {
  gd::Rng rng(23);
  const auto x0 = gd::Tensor<double>::random_uniform({2, 3, 4, 3}, rng, 0.1, 0.9);
  const auto s0 = gd::Tensor<double>::random_uniform({3, 4, 3}, rng, 0.1, 0.9);
  const auto check = [&](auto f) {
    CHECK(gd::compute_gradient_error(f, x0) < 1e-7);
    CHECK(gd::compute_gradient_error(f, s0) < 1e-7);
  };
  check([](const V& x) { return gi::adjust_brightness(x, 0.2); });
  check([](const V& x) { return gi::adjust_contrast(x, 1.8); });
  check([](const V& x) { return gi::adjust_gamma(x, 2.2, 0.8); });
  check([](const V& x) { return gi::per_image_standardization(x); });
  check([](const V& x) { return gi::rgb_to_grayscale(x); });
  check([](const V& x) { return gi::grayscale_to_rgb(gi::rgb_to_grayscale(x)); });
  check([](const V& x) {
    gd::Rng r(3);
    return gi::random_contrast(gi::random_brightness(x, 0.1, r), 0.5, 1.5, r);
  });
}

TEST_CASE("a Var gives the same values as a Tensor, and gradients reach a chain of image ops", "[image][grad]") {
  gd::Rng rng(24);
  const auto x0 = gd::Tensor<double>::random_uniform({2, 6, 5, 3}, rng);
  V x(x0);
  V y = gi::per_image_standardization(gi::resize(gi::flip_left_right(gi::central_crop(x, 0.7)), {7, 7},
                                                 {.method = gi::ResizeMethod::bicubic}));
  const auto t = gi::per_image_standardization(gi::resize(gi::flip_left_right(gi::central_crop(x0, 0.7)), {7, 7},
                                                          {.method = gi::ResizeMethod::bicubic}));
  REQUIRE(y.value().shape() == t.shape());
  CHECK(std::equal(t.begin(), t.end(), y.value().begin()));
  const auto g = gd::gradients(gd::sum(gd::square(y)), {x});
  REQUIRE(g[0].shape() == x0.shape());
  double total = 0;
  for (double v : g[0]) total += std::abs(v);
  CHECK(total > 0);
}
