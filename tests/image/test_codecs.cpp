#include <catch2/catch.hpp>
#include <gradus/gradus.hpp>
#include <gradus/image.hpp>
namespace gd = gradus;
TEST_CASE("smoke", "[image]") {
  auto t = gd::Tensor<float>::full({4, 5, 3}, 0.5f);
  auto j = gd::image::encode_jpeg(t);
  auto b = gd::image::decode_jpeg(j);
  CHECK(b.shape() == t.shape());
  auto p = gd::image::decode_png(gd::image::encode_png(t, {.bits = 16}));
  CHECK(p(0, 0, 0) == Approx(0.5).margin(1e-4));
}
