// Pretrained weights from another framework: F16 and BF16 safetensors tensors (written by PyPI's
// safetensors with numpy and ml_dtypes: fixtures/io/make_half_fixtures.py) read as exact floats,
// and io::remap renaming and transposing PyTorch-style Linear and Conv2d weights so that a gradus
// MLP and convolution reproduce the outputs numpy computed from the same weights in float64.
#include <catch2/catch.hpp>
#include <bit>
#include <cmath>
#include <cstdint>
#include <filesystem>
#include <limits>
#include <string>

#include <gradus/gradus.hpp>
#include <gradus/io.hpp>

#include "../support/same_bits.hpp"

namespace gd = gradus;
namespace io = gradus::io;
namespace nn = gradus::nn;
using Catch::Contains;
using gradus_test::same_float;

namespace {

const std::filesystem::path kFixture = std::filesystem::path(GRADUS_TEST_DATA_DIR) / "io" / "half_precision.safetensors";

/// A two-layer tanh MLP whose layers are named as gradus names them.
struct Mlp : nn::Module<float> {
  nn::Dense<float> dense1, dense2;
  explicit Mlp(gd::Rng& rng)
      : dense1({.in = 4, .out = 3, .activation = nn::tanh}, rng), dense2({.in = 3, .out = 2}, rng) {
    register_module("dense1", dense1);
    register_module("dense2", dense2);
  }
  gd::Var<float> forward(const gd::Tensor<float>& x) { return dense2.forward(dense1.forward(x)); }
};

}  // namespace

TEST_CASE("io: F16 and BF16 tensors of another writer read as the exact floats", "[io][safetensors]") {
  const io::Safetensors st = io::load_safetensors(kFixture);
  CHECK(st.metadata.at("writer") == "safetensors.numpy");
  CHECK(st.widened.at("f16_specials") == "F16");
  CHECK(st.widened.at("bf16_specials") == "BF16");
  CHECK(st.widened.at("fc1.weight") == "BF16");
  CHECK(st.widened.count("x") == 0);  // F32 stays as it is

  const float inf = std::numeric_limits<float>::infinity(), nan = std::numeric_limits<float>::quiet_NaN();
  // IEEE half: 1.5, -2, the largest (65504), the smallest normal 2^-14 and subnormal 2^-24, inf, -0, NaN
  const float f16[] = {1.5f, -2.f, 65504.f, 0x1p-14f, 0x1p-24f, inf, -0.f, nan};
  // bfloat16: the largest is (2 - 2^-7) 2^127; the smallest normal 2^-126 and subnormal 2^-133
  const float bf16[] = {1.5f, -2.f, 0x1.fep127f, 0x1p-126f, 0x1p-133f, -inf, -0.f, nan};
  const gd::Tensor<float> a = st.get<float>("f16_specials"), b = st.get<float>("bf16_specials");
  REQUIRE(a.size() == 8);
  REQUIRE(b.size() == 8);
  for (int i = 0; i < 8; ++i) {
    INFO("element " << i);
    CHECK(same_float(a.data()[i], f16[i]));
    CHECK(same_float(b.data()[i], bf16[i]));
  }
}

TEST_CASE("io: every F16 bit pattern widens to the float of its definition", "[io][safetensors]") {
  for (uint32_t h = 0; h < 0x10000; ++h) {
    const int sign = h >> 15, exp = (h >> 10) & 31, mant = h & 1023;
    double v;  // (-1)^sign * 2^(exp - 15) * (1 + mant / 1024), or the subnormal 2^-14 * mant / 1024
    if (exp == 31) v = mant ? std::numeric_limits<double>::quiet_NaN() : std::numeric_limits<double>::infinity();
    else if (exp == 0) v = std::ldexp(double(mant), -24);
    else v = std::ldexp(1.0 + mant / 1024.0, exp - 15);
    if (sign) v = -v;
    const float got = io::detail::half_to_float(uint16_t(h));
    if (std::isnan(v)) {
      CHECK(std::isnan(got));
    } else if (got != float(v) || std::signbit(got) != std::signbit(v)) {
      FAIL("half " << h << " widened to " << got << ", expected " << v);
    }
  }
  CHECK(io::detail::bfloat16_to_float(0x3fc0) == 1.5f);
  CHECK(io::detail::bfloat16_to_float(0x0001) == 0x1p-133f);
}

TEST_CASE("io: a PyTorch-style MLP in BF16/F16, remapped, gives numpy's outputs in a gradus model", "[io][safetensors]") {
  const io::Safetensors st = io::load_safetensors(kFixture);
  const io::Safetensors weights = io::remap(
      st, {{.from = "fc*.weight", .to = "model/dense*.kernel", .permute = io::kTorchLinear},
           {.from = "fc*.bias", .to = "model/dense*.bias"},
           {.from = "conv.weight", .to = "conv/kernel", .permute = io::kTorchConv2d},
           {.from = "conv.bias", .to = "conv/bias"}},
      {.keep_unmatched = true});
  CHECK(weights.get<float>("model/dense1.kernel").shape() == gd::Shape{4, 3});
  CHECK(weights.widened.at("model/dense1.kernel") == "BF16");
  CHECK(weights.widened.at("conv/kernel") == "F16");
  // The transpose moved the values: kernel[i][o] is weight[o][i].
  const gd::Tensor<float> w = st.get<float>("fc1.weight"), k = weights.get<float>("model/dense1.kernel");
  for (int o = 0; o < 3; ++o)
    for (int i = 0; i < 4; ++i) CHECK(k.data()[i * 3 + o] == w.data()[o * 4 + i]);

  gd::Rng rng(1);
  Mlp net(rng);
  io::restore_module(weights, net);
  const gd::Tensor<float> y = net.forward(weights.get<float>("x")).value(),
                          expected = weights.get<float>("mlp_expected");
  REQUIRE(y.shape() == expected.shape());
  for (int64_t i = 0; i < y.size(); ++i) CHECK(y.data()[i] == Approx(expected.data()[i]).epsilon(1e-5).margin(1e-6));

  // The convolution: the kernel now [3, 3, 3, 2] (HWIO), the image moved from NCHW to NHWC.
  const gd::Tensor<float> kernel = weights.get<float>("conv/kernel"), bias = weights.get<float>("conv/bias");
  REQUIRE(kernel.shape() == gd::Shape{3, 3, 3, 2});
  const gd::Tensor<float> image = gd::transpose(weights.get<float>("image"), {0, 2, 3, 1});
  const gd::Tensor<float> out = gd::transpose(gd::eval(gd::conv2d(image, kernel) + bias), {0, 3, 1, 2});
  const gd::Tensor<float> conv_expected = weights.get<float>("conv_expected");
  REQUIRE(out.shape() == conv_expected.shape());
  for (int64_t i = 0; i < out.size(); ++i)
    CHECK(out.data()[i] == Approx(conv_expected.data()[i]).epsilon(1e-5).margin(1e-5));
}

TEST_CASE("io: remap names every problem at once", "[io][safetensors]") {
  const io::Safetensors st = io::load_safetensors(kFixture);
  // Unmatched tensors are an error unless kept; a rule that matches nothing is one too.
  CHECK_THROWS_WITH(io::remap(st, {{.from = "fc*.weight", .to = "w*"}, {.from = "fc*.gamma", .to = "g*"}}),
                    Contains("no rule matches 'x'") && Contains("rule 'fc*.gamma' matches no tensor") &&
                        Contains("half_precision.safetensors"));
  // A permutation that does not fit the tensor's rank.
  CHECK_THROWS_WITH(io::remap(st, {{.from = "fc*.bias", .to = "b*", .permute = io::kTorchLinear}}, {.keep_unmatched = true}),
                    Contains("'fc1.bias' has rank 1: the permutation [1,0]"));
  // Two tensors renamed to one name.
  CHECK_THROWS_WITH(io::remap(st, {{.from = "fc*.weight", .to = "w"}}, {.keep_unmatched = true}),
                    Contains("two tensors are renamed 'w'"));
  CHECK_THROWS_AS(io::remap(st, {{.from = "fc.weight", .to = "w*"}}), gd::value_error);
  // '*' stops at a dot, and needs at least one character.
  std::vector<std::string_view> parts;
  CHECK(io::detail::match_pattern("fc*.weight", "fc12.weight", parts));
  CHECK(parts == std::vector<std::string_view>{"12"});
  parts.clear();
  CHECK_FALSE(io::detail::match_pattern("fc*.weight", "fc1.a.weight", parts));
  CHECK_FALSE(io::detail::match_pattern("fc*.weight", "fc.weight", parts));
  CHECK(io::detail::match_pattern("*.*", "a.b", parts));
}

TEST_CASE("io: the dtypes gradus does not read are named", "[io][safetensors]") {
  std::string header = R"({"u":{"dtype":"U8","shape":[2],"data_offsets":[0,2]}})";
  std::string bytes;
  io::detail::store_le<8>(bytes, header.size());
  bytes += header + "ab";
  CHECK_THROWS_WITH(io::decode_safetensors(bytes),
                    Contains("dtype 'U8', which gradus does not read") && Contains("F16 and BF16 read as F32"));
}
