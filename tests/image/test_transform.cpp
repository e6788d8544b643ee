// gd::image::transform against TensorFlow's own ImageProjectiveTransformV3 (bilinear, constant
// fill), from tests/fixtures/image/transform_tf.txt (make_transform_tf.py, TensorFlow 2.21.0), and
// its gradients in the image and in the transform (a spatial transformer's) by central differences.
#include <catch2/catch.hpp>

#include <gradus/gradus.hpp>
#include <gradus/image.hpp>

#include "fixtures.hpp"

namespace gd = gradus;
namespace gi = gradus::image;
using V = gd::Var<double>;

namespace {

/// The cases of transform_tf.txt: output size, transforms [m, 8], input and TF's output.
struct TransformCase {
  std::array<int64_t, 2> size;
  gd::Tensor<double> transforms, in, out;
};

std::vector<TransformCase> transform_cases() {
  std::istringstream all(gi::testing::read_fixture("transform_tf.txt"));
  std::vector<TransformCase> cases;
  std::string line, tag;
  while (std::getline(all, line)) {
    std::istringstream head(line);
    std::string name;
    head >> tag >> name;
    if (tag != "case") continue;
    TransformCase c;
    int64_t m;
    head >> c.size[0] >> c.size[1] >> m;
    c.transforms = gd::Tensor<double>(gd::Shape{m, 8});
    for (int64_t i = 0; i < 8 * m; ++i) head >> c.transforms.data()[i];
    for (gd::Tensor<double>* t : {&c.in, &c.out}) {
      std::getline(all, line);
      std::istringstream body(line);
      body >> tag;
      *t = gi::testing::read_tensor(body);
    }
    cases.push_back(std::move(c));
  }
  return cases;
}

}  // namespace

TEST_CASE("image::transform matches TensorFlow's ImageProjectiveTransformV3 (bilinear, zero fill)", "[image][transform]") {
  const auto cases = transform_cases();
  REQUIRE(cases.size() == 8);
  for (size_t k = 0; k < cases.size(); ++k) {
    const TransformCase& c = cases[k];
    INFO("case " << k << ": transforms " << c.transforms << " to " << c.size[0] << "x" << c.size[1]);
    const gd::Tensor<float> in = gd::cast<float>(c.in);
    const gd::Tensor<float> tr = gd::cast<float>(c.transforms);
    const gd::Tensor<float> got = gi::transform(in, tr, c.size);
    REQUIRE(got.shape() == c.out.shape());
    CHECK(gi::testing::max_abs_diff(got, c.out) < 2e-5);
    // the same in double, and one image at a time ([H, W, C] with a [8] transform)
    const gd::Tensor<double> got_d = gi::transform(c.in, c.transforms, c.size);
    CHECK(gi::testing::max_abs_diff(got_d, c.out) < 2e-5);
    const int64_t n = c.in.shape()[0];
    for (int64_t b = 0; b < n; ++b) {
      const auto img = gd::reshape(gd::slice(c.in, {b, 0, 0, 0}, {1, -1, -1, -1}), {c.in.shape()[1], c.in.shape()[2], c.in.shape()[3]});
      const auto t = gd::reshape(gd::slice(c.transforms, {c.transforms.shape()[0] == 1 ? 0 : b, 0}, {1, 8}), {8});
      const auto want = gd::slice(c.out, {b, 0, 0, 0}, {1, -1, -1, -1});
      CHECK(gi::testing::max_abs_diff(gi::transform(img, t, c.size), gd::reshape(want, {c.size[0], c.size[1], c.in.shape()[3]})) < 2e-5);
    }
  }
}

TEST_CASE("image::transform: the identity copies, and an integer shift moves the content", "[image][transform]") {
  gd::Rng rng(3);
  const auto x = gd::Tensor<double>::random_uniform({2, 4, 5, 3}, rng);
  CHECK(gi::testing::max_abs_diff(gi::transform(x, gd::Tensor<double>::from({1, 0, 0, 0, 1, 0, 0, 0}, {8})), x) == 0);
  // output (x, y) reads input (x + 1, y - 2): content moves left by 1 and down by 2
  const auto shifted = gi::transform(x, gd::Tensor<double>::from({1, 0, 1, 0, 1, -2, 0, 0}, {8}));
  for (int64_t b = 0; b < 2; ++b)
    for (int64_t yy = 0; yy < 4; ++yy)
      for (int64_t xx = 0; xx < 5; ++xx)
        for (int64_t c = 0; c < 3; ++c) {
          const bool in = xx + 1 < 5 && yy - 2 >= 0;
          const double want = in ? x.data()[((b * 4 + yy - 2) * 5 + xx + 1) * 3 + c] : 0.0;
          CHECK(shifted.data()[((b * 4 + yy) * 5 + xx) * 3 + c] == want);
        }
}

TEST_CASE("image::transform is differentiable in the image and in the transform (a spatial transformer)", "[image][transform][grad]") {
  gd::Rng rng(4);
  const auto x = gd::Tensor<double>::random_uniform({2, 5, 6, 2}, rng);
  // transforms whose sampling points stay away from integer coordinates, where bilinear
  // interpolation has kinks
  const auto t = gd::Tensor<double>::from({0.93, 0.11, 0.37, -0.07, 1.04, 0.23, 0.013, -0.008,  //
                                           1.06, -0.05, -0.43, 0.09, 0.97, 0.29, -0.004, 0.011},
                                          {2, 8});
  CHECK(gd::compute_gradient_error([&](const V& img) { return gi::transform(img, t); }, x) < 1e-8);
  CHECK(gd::compute_gradient_error([&](const V& tr) { return gi::transform(x, tr, {4, 7}); }, t) < 1e-6);
  CHECK(gd::compute_gradient_error([](const V& img, const V& tr) { return gi::transform(img, tr); }, {x, t}) < 1e-6);
  // one transform for the whole batch gets the gradient of every image
  const auto t1 = gd::Tensor<double>::from({0.93, 0.11, 0.37, -0.07, 1.04, 0.23, 0.013, -0.008}, {8});
  CHECK(gd::compute_gradient_error([&](const V& tr) { return gi::transform(x, tr); }, t1) < 1e-6);
}

TEST_CASE("image::transform and resampler reject bad shapes with the op's name", "[image][transform]") {
  const gd::Tensor<double> x = gd::Tensor<double>::zeros({1, 4, 4, 1});
  CHECK_THROWS_WITH(gi::transform(x, gd::Tensor<double>::zeros({6})), Catch::Contains("transforms must have shape [8] or [N, 8]"));
  CHECK_THROWS_WITH(gi::transform(gd::Tensor<double>::zeros({3, 4, 4, 1}), gd::Tensor<double>::zeros({2, 8})),
                    Catch::Contains("2 transforms for 3 images"));
  CHECK_THROWS_WITH(gd::resampler(x, gd::Tensor<double>::zeros({1, 5, 3})), Catch::Contains("warp must have shape [B, ..., 2]"));
  CHECK_THROWS_WITH(gd::resampler(x, gd::Tensor<double>::zeros({2, 5, 2})), Catch::Contains("warp's batch 2 differs from data's 1"));
  CHECK_THROWS_WITH(gd::resampler(gd::Tensor<double>::zeros({4, 4, 1}), gd::Tensor<double>::zeros({4, 5, 2})),
                    Catch::Contains("data must have rank 4"));
}
