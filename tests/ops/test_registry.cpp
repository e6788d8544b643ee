// Walks the op registry: every elementwise op is gradient-checked in double precision against
// central differences, as a plain operand and broadcast, and its forward value is compared with
// the op applied one element at a time. Kernel ops are checked in the list at the bottom.
#include <catch2/catch.hpp>
#include <cmath>
#include <gradus/autodiff/catch_matchers.hpp>
#include <gradus/gradus.hpp>

namespace gd = gradus;
using T = double;

namespace {

// Samples uniformly in [lo, hi], keeping 0.05 away from the op's kinks.
gd::Tensor<T> sample(const gd::Shape& s, gd::Rng& rng, gd::ops::Domain d, std::array<double, 2> kinks = {0, 0}) {
  auto t = gd::Tensor<T>::empty(s);
  for (auto& v : t) {
    do v = rng.uniform(d.lo, d.hi);
    while (std::abs(v - kinks[0]) < 0.05 || std::abs(v - kinks[1]) < 0.05);
  }
  return t;
}

template <class Op>
double scalar_forward(const Op& op, double x) {
  Eigen::Array<double, 1, 1> a;
  a << x;
  return Eigen::Array<double, 1, 1>(op.forward(a))(0);
}
template <class Op>
double scalar_forward(const Op& op, double x, double y) {
  Eigen::Array<double, 1, 1> a, b;
  a << x;
  b << y;
  return Eigen::Array<double, 1, 1>(op.forward(a, b))(0);
}

}  // namespace

TEMPLATE_LIST_TEST_CASE("registry: unary op gradients match central differences", "[registry]",
                        gd::ops::unary_registry) {
  using Op = TestType;
  INFO("op " << Op::name);
  gd::Rng rng(7);
  const auto x0 = sample({3, 5}, rng, Op::domain, Op::kinks);
  auto f = [](const gd::Var<T>& x) { return gd::make_unary(Op{}, x); };
  CHECK_THAT(f, gd::testing::GradientIsCorrect(x0, 1e-6, {.delta = 1e-6}));
  // inside a longer fused chain and through a broadcast operand
  const auto b0 = sample({5}, rng, {0.5, 1.0});
  auto g = [](const gd::Var<T>& x, const gd::Var<T>& b) { return gd::make_unary(Op{}, x * b) * b; };
  CHECK_THAT(g, gd::testing::GradientIsCorrect({x0, b0}, 1e-6, {.delta = 1e-6}));
}

TEMPLATE_LIST_TEST_CASE("registry: binary op gradients match central differences, broadcast both ways", "[registry]",
                        gd::ops::binary_registry) {
  using Op = TestType;
  INFO("op " << Op::name);
  gd::Rng rng(11);
  auto f = [](const gd::Var<T>& x, const gd::Var<T>& y) { return gd::make_binary(Op{}, x, y); };
  // same shapes; [3,4] with [4]; [3,1] with [1,4]
  const std::array<std::pair<gd::Shape, gd::Shape>, 3> shapes{{{{3, 4}, {3, 4}}, {{3, 4}, {4}}, {{3, 1}, {1, 4}}}};
  for (const auto& [sx, sy] : shapes) {
    const auto x0 = sample(sx, rng, Op::domain), y0 = sample(sy, rng, Op::domain_y);
    // keep x and y apart so minimum/maximum are away from their tie
    gd::Tensor<T> y1 = gd::eval(y0 + 0.0);
    CHECK_THAT(f, gd::testing::GradientIsCorrect({x0, y1}, 1e-6, {.delta = 1e-6}));
  }
}

TEMPLATE_LIST_TEST_CASE("registry: forward of every op equals the op applied element by element", "[registry]",
                        gd::ops::unary_registry) {
  using Op = TestType;
  gd::Rng rng(3);
  const auto x0 = sample({1000}, rng, Op::domain, Op::kinks);  // several blocks, vectorised path
  const gd::Tensor<T> y = gd::make_unary(Op{}, x0);
  for (int64_t i = 0; i < x0.size(); ++i) REQUIRE(y(i) == Approx(scalar_forward(Op{}, x0(i))).margin(1e-12));
}

TEMPLATE_LIST_TEST_CASE("registry: non-differentiable ops pass a zero gradient", "[registry]",
                        gd::ops::nondifferentiable_registry) {
  using Op = TestType;
  gd::Var<T> x(gd::Tensor<T>::from({-1, 0.5, 2}));
  gd::Var<T> y = [&] {
    if constexpr (std::is_base_of_v<gd::ops::UnaryOp, Op>)
      return gd::Var<T>(gd::make_unary(Op{}, x) + x);
    else
      return gd::Var<T>(gd::make_binary(Op{}, x, 0.5) + x);
  }();
  const auto g = gd::gradients(y, {x});
  for (int64_t i = 0; i < 3; ++i) CHECK(g[0](i) == 1.0);
}

TEST_CASE("registry: reference values of elementwise ops", "[registry]") {
  const auto x = gd::Tensor<T>::from({-2, -0.5, 0.5, 3});
  auto at = [](const gd::Tensor<T>& t, int i) { return t(i); };
  // values computed independently (closed forms)
  CHECK(at(gd::eval(gd::gelu(x)), 0) == Approx(-0.04550026389635842));   // -2 * Phi(-2)
  CHECK(at(gd::eval(gd::selu(x)), 1) == Approx(1.0507009873554805 * 1.6732632423543772 * (std::exp(-0.5) - 1)));
  CHECK(at(gd::eval(gd::softplus(x * 1000.0)), 3) == Approx(3000.0));    // no overflow
  CHECK(at(gd::eval(gd::softplus(x * 1000.0)), 0) == Approx(0.0).margin(1e-300));
  CHECK(at(gd::eval(gd::leaky_relu(x)), 0) == Approx(-0.4));
  CHECK(at(gd::eval(gd::elu(x, 2.0)), 0) == Approx(2 * (std::exp(-2.0) - 1)));
  CHECK(at(gd::eval(gd::clamp(x, -1, 1)), 3) == 1.0);
  CHECK(at(gd::eval(gd::pow(x, 2)), 0) == Approx(4.0));
  CHECK(at(gd::eval(gd::pow(2.0, x)), 3) == Approx(8.0));
  CHECK(at(gd::eval(gd::where(x > 0.0, x, 0.0)), 1) == 0.0);
  CHECK(at(gd::eval(gd::where(x > 0.0, x, 0.0)), 2) == 0.5);
  CHECK(at(gd::eval(gd::sigmoid(x * 100.0)), 0) == Approx(0.0).margin(1e-80));
  CHECK(at(gd::eval(x == 0.5), 2) == 1.0);
}

TEST_CASE("registry: where and comparisons route gradients", "[registry]") {
  gd::Rng rng(5);
  const auto a0 = sample({4, 3}, rng, {-2, 2}), b0 = sample({3}, rng, {-2, 2});
  auto f = [](const gd::Var<T>& a, const gd::Var<T>& b) { return gd::where(a > b, a * a, b * 3.0); };
  CHECK_THAT(f, gd::testing::GradientIsCorrect({a0, b0}, 1e-6, {.delta = 1e-6}));
}

// ---------------------------------------------------------------- kernel ops (not elementwise)
TEST_CASE("registry: kernel op gradients match central differences", "[registry]") {
  gd::Rng rng(13);
  const auto a = sample({3, 4}, rng, {-2, 2});
  const auto b = sample({4, 5}, rng, {-2, 2});
  const auto p = sample({2, 3, 4}, rng, {0.5, 1.5});
  const auto w = sample({2, 4, 2}, rng, {-1, 1});
  using V = gd::Var<T>;
  const gd::GradientCheckOptions o{.delta = 1e-6};
  SECTION("matmul") {
    CHECK_THAT([](const V& x, const V& y) { return gd::matmul(x, y); }, gd::testing::GradientIsCorrect({a, b}, 1e-6, o));
    CHECK_THAT([](const V& x, const V& y) { return gd::matmul(x, y); }, gd::testing::GradientIsCorrect({p, b}, 1e-6, o));
    CHECK_THAT([](const V& x, const V& y) { return gd::matmul(x, y); }, gd::testing::GradientIsCorrect({p, w}, 1e-6, o));
    CHECK_THAT([](const V& x, const V& y) { return gd::matmul(x, y); }, gd::testing::GradientIsCorrect({a, w}, 1e-6, o));
  }
  SECTION("sum and mean, fused with a chain, over axes") {
    CHECK_THAT([](const V& x) { return gd::sum(gd::exp(x) * x); }, gd::testing::GradientIsCorrect(p, 1e-6, o));
    CHECK_THAT([](const V& x) { return gd::sum(x * x, 1); }, gd::testing::GradientIsCorrect(p, 1e-6, o));
    CHECK_THAT([](const V& x) { return gd::mean(gd::tanh(x), {0, 2}, true); }, gd::testing::GradientIsCorrect(p, 1e-6, o));
    CHECK_THAT([](const V& x, const V& y) { return gd::mean(gd::square(x - y), -1); },
               gd::testing::GradientIsCorrect({a, gd::Tensor<T>(gd::eval(a * 0.5))}, 1e-6, o));
  }
  SECTION("max, min, prod, logsumexp") {
    CHECK_THAT([](const V& x) { return gd::max(x, 1); }, gd::testing::GradientIsCorrect(p, 1e-6, o));
    CHECK_THAT([](const V& x) { return gd::min(x); }, gd::testing::GradientIsCorrect(p, 1e-6, o));
    CHECK_THAT([](const V& x) { return gd::prod(x, 2, true); }, gd::testing::GradientIsCorrect(p, 1e-6, o));
    CHECK_THAT([](const V& x) { return gd::logsumexp(x, 0); }, gd::testing::GradientIsCorrect(p, 1e-6, o));
  }
  SECTION("softmax and log_softmax on each axis") {
    for (int axis : {0, 1, -1}) {
      CHECK_THAT([axis](const V& x) { return gd::softmax(x * 2.0, axis); }, gd::testing::GradientIsCorrect(p, 1e-6, o));
      CHECK_THAT([axis](const V& x) { return gd::log_softmax(x, axis); }, gd::testing::GradientIsCorrect(p, 1e-6, o));
    }
  }
}
