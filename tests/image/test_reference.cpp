// gd::image against tests/fixtures/image/reference.txt: TensorFlow 2's formulas for resize,
// colour spaces and adjustments, standardization and crop/pad written out in NumPy
// (make_reference.py), pixel by pixel.
#include <catch2/catch.hpp>

#include <gradus/gradus.hpp>
#include <gradus/image.hpp>

#include "fixtures.hpp"

namespace gd = gradus;
namespace gi = gradus::image;
using gi::testing::max_abs_diff;
using gi::testing::reference_cases;

namespace {

gi::ResizeMethod method_named(const std::string& s) {
  if (s == "bilinear") return gi::ResizeMethod::bilinear;
  if (s == "nearest") return gi::ResizeMethod::nearest;
  if (s == "bicubic") return gi::ResizeMethod::bicubic;
  return gi::ResizeMethod::area;
}

gd::Tensor<float> to_float(const gd::Tensor<double>& t) {
  gd::Tensor<float> f(t.shape());
  for (int64_t i = 0; i < t.size(); ++i) f.data()[i] = float(t.data()[i]);
  return f;
}

}  // namespace

TEST_CASE("resize matches TF2's half-pixel kernels, for every method, up, down and mixed", "[image][resize]") {
  const auto cases = reference_cases("resize");
  REQUIRE(cases.size() == 20);
  for (const auto& c : cases) {
    const auto m = method_named(c.params[0]);
    const int64_t oh = std::stoll(c.params[1]), ow = std::stoll(c.params[2]);
    INFO(c.params[0] << " to " << oh << "x" << ow);
    const auto got = gi::resize(c.in, {oh, ow}, {.method = m});
    REQUIRE(got.shape() == c.out.shape());
    CHECK(max_abs_diff(got, c.out) < 2e-6);
    // float images, and a batch of two copies, agree with the same reference
    CHECK(max_abs_diff(gi::resize(to_float(c.in), {oh, ow}, {.method = m}), c.out) < 2e-5);
    const auto batch = gi::resize(gd::eval(gd::stack({c.in, c.in}, 0)), {oh, ow}, {.method = m});
    CHECK(max_abs_diff(gd::eval(gd::slice(batch, {1, 0, 0, 0}, {1, oh, ow, c.in.shape()[2]})).reshape(c.out.shape()),
                       c.out) < 2e-6);
  }
}

TEST_CASE("rgb_to_hsv, hsv_to_rgb, adjust_hue and adjust_saturation match TF's colour kernels", "[image][color]") {
  for (const auto& c : reference_cases("rgb_to_hsv")) CHECK(max_abs_diff(gi::rgb_to_hsv(c.in), c.out) < 1e-8);
  for (const auto& c : reference_cases("hsv_to_rgb")) CHECK(max_abs_diff(gi::hsv_to_rgb(c.in), c.out) < 1e-8);
  const auto hue = reference_cases("adjust_hue");
  REQUIRE(hue.size() == 3);
  for (const auto& c : hue) {
    INFO("delta " << c.params[0]);
    CHECK(max_abs_diff(gi::adjust_hue(c.in, std::stod(c.params[0])), c.out) < 1e-8);
    CHECK(max_abs_diff(gi::adjust_hue(to_float(c.in), std::stod(c.params[0])), c.out) < 1e-5);
  }
  const auto sat = reference_cases("adjust_saturation");
  REQUIRE(sat.size() == 2);
  for (const auto& c : sat) CHECK(max_abs_diff(gi::adjust_saturation(c.in, std::stod(c.params[0])), c.out) < 1e-8);
  // the HSV round trip is the identity
  for (const auto& c : reference_cases("rgb_to_hsv")) CHECK(max_abs_diff(gi::hsv_to_rgb(gi::rgb_to_hsv(c.in)), c.in) < 1e-8);
}

TEST_CASE("contrast, gamma, brightness, grayscale and standardization match TF's formulas", "[image][color]") {
  const auto con = reference_cases("adjust_contrast");
  REQUIRE(con.size() == 3);
  for (const auto& c : con) CHECK(max_abs_diff(gi::adjust_contrast(c.in, std::stod(c.params[0])), c.out) < 1e-8);
  for (const auto& c : reference_cases("adjust_gamma"))
    CHECK(max_abs_diff(gi::adjust_gamma(c.in, std::stod(c.params[0]), std::stod(c.params[1])), c.out) < 1e-8);
  for (const auto& c : reference_cases("adjust_brightness"))
    CHECK(max_abs_diff(gi::adjust_brightness(c.in, std::stod(c.params[0])), c.out) < 1e-8);
  for (const auto& c : reference_cases("rgb_to_grayscale")) {
    const auto g = gi::rgb_to_grayscale(c.in);
    REQUIRE(g.shape() == c.out.shape());
    CHECK(max_abs_diff(g, c.out) < 1e-8);
  }
  const auto std_cases = reference_cases("per_image_standardization");
  REQUIRE(std_cases.size() == 1);
  CHECK(max_abs_diff(gi::per_image_standardization(std_cases[0].in), std_cases[0].out) < 1e-8);
  // and on a single image: the first of the batch
  const auto first = gd::eval(gd::slice(std_cases[0].in, {0, 0, 0, 0}, {1, 3, 4, 3})).reshape({3, 4, 3});
  const auto want = gd::eval(gd::slice(std_cases[0].out, {0, 0, 0, 0}, {1, 3, 4, 3})).reshape({3, 4, 3});
  CHECK(max_abs_diff(gi::per_image_standardization(first), want) < 1e-8);
}

TEST_CASE("resize_with_crop_or_pad and central_crop match TF's offsets", "[image][geometry]") {
  const auto rcp = reference_cases("resize_with_crop_or_pad");
  REQUIRE(rcp.size() == 4);
  for (const auto& c : rcp) {
    const auto got = gi::resize_with_crop_or_pad(c.in, std::stoll(c.params[0]), std::stoll(c.params[1]));
    REQUIRE(got.shape() == c.out.shape());
    CHECK(max_abs_diff(got, c.out) == 0);
  }
  const auto cc = reference_cases("central_crop");
  REQUIRE(cc.size() == 4);
  for (const auto& c : cc) {
    const auto got = gi::central_crop(c.in, std::stod(c.params[0]));
    REQUIRE(got.shape() == c.out.shape());
    CHECK(max_abs_diff(got, c.out) == 0);
  }
}
