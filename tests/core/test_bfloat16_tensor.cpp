// Tensor<gd::bfloat16>: two bytes an element, filled, cloned, reshaped, printed, and converted with
// gd::cast — from float and double rounded to nearest (ties to even), from integers through float,
// back to float and double exactly — against bit patterns worked out by hand.
#include <catch2/catch.hpp>

#include <bit>
#include <limits>
#include <sstream>

#include <gradus/gradus.hpp>

namespace gd = gradus;

TEST_CASE("Tensor<bfloat16> stores two bytes an element and converts with cast", "[core][bf16]") {
  static_assert(sizeof(gd::bfloat16) == 2 && gd::Element<gd::bfloat16> && !gd::Real<gd::bfloat16>);
  gd::Tensor<float> x({6});
  const float values[] = {1.f, 3.14159265f, std::bit_cast<float>(0x3F808000u), std::bit_cast<float>(0x3F818000u),
                          -std::numeric_limits<float>::infinity(), 65504.f};
  const uint16_t bits[] = {0x3F80, 0x4049, 0x3F80, 0x3F82, 0xFF80, 0x4780};  // 65504 = 0x477FE000: up to 65536
  for (int64_t i = 0; i < 6; ++i) x(i) = values[i];
  const gd::Tensor<gd::bfloat16> h = gd::cast<gd::bfloat16>(x);
  CHECK(h.shape() == gd::Shape{6});
  for (int64_t i = 0; i < 6; ++i) CHECK(h.data()[i].bits == bits[i]);
  // back to float and double: exact
  const gd::Tensor<float> f = gd::cast<float>(h);
  const gd::Tensor<double> d = gd::cast<double>(h);
  for (int64_t i = 0; i < 6; ++i) {
    CHECK(std::bit_cast<uint32_t>(f.data()[i]) == uint32_t(bits[i]) << 16);
    CHECK(d.data()[i] == double(f.data()[i]));
  }
  // doubles go through float (0.1 -> 0x3DCCCCCD -> 0x3DCD), integers too (257 -> 256: a tie, even)
  gd::Tensor<double> xd({2});
  xd(0) = 0.1, xd(1) = 257.0;
  const auto hd = gd::cast<gd::bfloat16>(xd);
  CHECK(hd.data()[0].bits == 0x3DCD);
  CHECK(hd.data()[1].bits == 0x4380);
  gd::Tensor<int64_t> xi({3});
  xi(0) = 257, xi(1) = 259, xi(2) = -3;
  const auto hi = gd::cast<gd::bfloat16>(xi);
  CHECK(float(hi.data()[0]) == 256.f);
  CHECK(float(hi.data()[1]) == 260.f);  // 259 lies between 258 and 260 at 8 bits: up
  CHECK(float(hi.data()[2]) == -3.f);
  CHECK(gd::cast<int64_t>(hi).data()[1] == 260);

  auto z = gd::Tensor<gd::bfloat16>::zeros({2, 2});
  for (int64_t i = 0; i < 4; ++i) CHECK(z.data()[i].bits == 0);
  auto c = h.clone();
  c.data()[0] = gd::bfloat16(2.f);
  CHECK(h.data()[0].bits == 0x3F80);  // clone copied
  CHECK(c.reshape({2, 3})(0, 0) == gd::bfloat16(2.f));
  std::ostringstream os;
  os << gd::cast<gd::bfloat16>(gd::Tensor<float>::ones({2}) * 1.5f);
  CHECK(os.str() == "Tensor([1.5, 1.5], shape=[2])");
  // a Var cast to bfloat16 is a tensor of the rounded values (bfloat16 is not differentiated)
  const gd::Var<float> v(x);
  const gd::Tensor<gd::bfloat16> hv = gd::cast<gd::bfloat16>(v);
  for (int64_t i = 0; i < 6; ++i) CHECK(hv.data()[i].bits == bits[i]);
}
