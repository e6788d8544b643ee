// dropout: mask statistics, inverted scaling, the gradient through the same mask, eval-mode
// identity and reproducibility from the explicit gd::Rng.
#include <catch2/catch.hpp>

#include <algorithm>
#include <cmath>
#include <limits>
#include <type_traits>

#include <gradus/gradus.hpp>
#include <gradus/testing/catch_matchers.hpp>
#include "gradus/ops/dropout.hpp"

namespace gd = gradus;

namespace {
using TensorD = gd::Tensor<double>;
using VarD = gd::Var<double>;
}  // namespace

TEST_CASE("dropout: keeps about 1 - rate of the elements, scaled by 1 / (1 - rate)", "[nnops][dropout]") {
  gd::Rng rng(1);
  const TensorD x = TensorD::random_uniform({1000, 1000}, rng, 1, 2);
  for (double rate : {0.1, 0.5, 0.9}) {
    INFO("rate " << rate);
    const TensorD y = gd::dropout(x, rate, rng);
    static_assert(std::is_same_v<decltype(gd::dropout(x, rate, rng)), TensorD>);
    int64_t kept = 0;
    bool scaled = true;
    for (int64_t i = 0; i < y.size(); ++i) {
      if (y.data()[i] == 0) continue;
      ++kept;
      scaled = scaled && std::abs(y.data()[i] - x.data()[i] / (1 - rate)) < 1e-12;
    }
    CHECK(scaled);
    CHECK(std::abs(double(kept) / double(y.size()) - (1 - rate)) < 0.003);  // ~6 sigma at 1e6 draws
  }
  const gd::Tensor<float> yf = gd::dropout(gd::Tensor<float>::ones({1000}), 0.75, rng);
  CHECK(std::all_of(yf.begin(), yf.end(), [](float v) { return v == 0.f || v == 4.f; }));
}

TEST_CASE("dropout: the gradient is mask / (1 - rate)", "[nnops][dropout]") {
  gd::Rng rng(2);
  const double rate = 0.3;
  const VarD x(TensorD::random_normal({40, 50}, rng));
  const VarD y = gd::dropout(x * 2.0, rate, rng);
  gd::backward(y);
  bool ok = true;
  for (int64_t i = 0; i < x.size(); ++i) {
    const double expect = y.value().data()[i] == 0 ? 0 : 2 / (1 - rate);
    ok = ok && std::abs(x.grad().data()[i] - expect) < 1e-12;
  }
  CHECK(ok);
  // a fixed mask (same seed on every call) against central differences; accumulation on reuse
  auto f = [](const VarD& v) {
    gd::Rng r(3);
    return gd::dropout(v, 0.5, r) + gd::dropout(v, 0.25, r) * v;
  };
  CHECK_THAT(f, gd::testing::GradientIsCorrect(TensorD::random_normal({6, 7}, rng), 1e-8, {.delta = 1e-6}));
}

TEST_CASE("dropout: eval mode and rate 0 are the identity without drawing", "[nnops][dropout]") {
  gd::Rng rng(4);
  const VarD x(TensorD::random_normal({3, 4}, rng));
  const auto before = rng.state();
  const VarD e = gd::dropout(x, 0.5, rng, /*training=*/false);
  CHECK(e.node() == x.node());
  const VarD z = gd::dropout(x, 0.0, rng);
  CHECK(z.node() == x.node());
  CHECK(rng.state() == before);
  const TensorD t = TensorD::ones({2, 2});
  CHECK(gd::dropout(t, 0.5, rng, false).shares_storage(t));
}

TEST_CASE("dropout: same seed same mask; bad rates rejected", "[nnops][dropout]") {
  const TensorD x = TensorD::ones({64, 64});
  gd::Rng a(5), b(5), c(6);
  const TensorD ya = gd::dropout(x, 0.5, a), yb = gd::dropout(x, 0.5, b), yc = gd::dropout(x, 0.5, c);
  CHECK(std::equal(ya.begin(), ya.end(), yb.begin()));
  CHECK_FALSE(std::equal(ya.begin(), ya.end(), yc.begin()));
  CHECK_FALSE(std::equal(ya.begin(), ya.end(), gd::dropout(x, 0.5, a).begin()));  // the rng moved on

  for (double bad : {-0.1, 1.0, 1.5, std::numeric_limits<double>::quiet_NaN()}) {
    INFO("rate " << bad);
    CHECK_THROWS_AS(gd::dropout(x, bad, a), gd::value_error);
    CHECK_THROWS_WITH(gd::dropout(x, bad, a), Catch::Contains("dropout: rate must be in [0, 1)"));
  }
}
