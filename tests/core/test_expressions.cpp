#include <catch2/catch.hpp>
#include <cmath>
#include <gradus/gradus.hpp>

namespace gd = gradus;

TEST_CASE("expressions: elementwise math with NumPy broadcasting", "[expr]") {
  auto a = gd::Tensor<double>::from({1, 2, 3, 4, 5, 6}, {2, 3});
  auto row = gd::Tensor<double>::from({10, 20, 30}, {3});
  auto col = gd::Tensor<double>::from({100, 200}, {2, 1});
  gd::Tensor<double> r = a + row;
  CHECK(r(1, 2) == 36.0);
  gd::Tensor<double> c = a * col - 1.0;
  CHECK(c(1, 0) == 799.0);
  gd::Tensor<double> outer = col + row;  // [2,1] + [3] -> [2,3]
  CHECK(outer.shape() == gd::Shape{2, 3});
  CHECK(outer(1, 1) == 220.0);
  gd::Tensor<double> s = 1.0 / (a + 1.0);
  CHECK(s(0, 0) == 0.5);
  gd::Tensor<double> e = gd::exp(a * 0.5) + gd::log(a);
  CHECK(e(1, 1) == Approx(std::exp(2.5) + std::log(5.0)));
  // scalar-shaped and rank-0 operands
  gd::Tensor<double> z = a * gd::Tensor<double>::scalar(2.0);
  CHECK(z(1, 2) == 12.0);
  // a large broadcast over several blocks and both threads
  auto big = gd::Tensor<float>::ones({700, 300});
  auto bias = gd::Tensor<float>::from(std::vector<float>(300, 2.f));
  gd::Tensor<float> bb = big * 3.f + bias;
  CHECK(gd::eval(gd::sum(bb)).item() == Approx(700 * 300 * 5.0));
  CHECK(bb(699, 299) == 5.f);
}

TEST_CASE("expressions: shape mistakes throw at the line that builds them", "[expr][errors]") {
  auto a = gd::Tensor<float>::zeros({2, 3});
  auto b = gd::Tensor<float>::zeros({4});
  CHECK_THROWS_AS(a + b, gd::shape_error);
  CHECK_THROWS_WITH(a * b, Catch::Contains("mul") && Catch::Contains("[2,3]") && Catch::Contains("[4]"));
  gd::Tensor<float> c = gd::Tensor<float>::zeros({3, 2});
  CHECK_THROWS_WITH(c.assign(a + 1.f), Catch::Contains("assign") && Catch::Contains("[2,3]"));
}

TEST_CASE("expressions: a fused chain allocates exactly one output buffer", "[expr][memory]") {
  gd::Rng rng(1);
  auto a = gd::Tensor<float>::random_normal({1 << 18}, rng);
  auto b = gd::Tensor<float>::random_normal({1 << 18}, rng);
  auto c = gd::Tensor<float>::random_normal({1 << 18}, rng);
  auto d = gd::Tensor<float>::random_normal({1 << 18}, rng);
  auto count = [] {
    const auto s = gd::memory_stats();
    return s.system_allocations + s.cache_hits;
  };
  auto expr = gd::exp(a * b + c) * d;  // nothing computed yet
  const int64_t before = count();
  gd::Tensor<float> out = gd::eval(expr);
  CHECK(count() - before == 1);
  for (int64_t i : {int64_t(0), int64_t(12345), int64_t(262143)})
    CHECK(out(i) == Approx(std::exp(a(i) * b(i) + c(i)) * d(i)).epsilon(1e-5));
  // in place: no allocation at all
  const int64_t before2 = count();
  out.assign(out * 0.5f + a);
  CHECK(count() == before2);
}

TEST_CASE("expressions: comparisons give masks of the operand type", "[expr]") {
  auto x = gd::Tensor<float>::from({-1, 0, 2});
  gd::Tensor<float> m = x > 0.f;
  CHECK(m(0) == 0.f);
  CHECK(m(2) == 1.f);
  gd::Tensor<float> g = gd::Tensor<float>::ones({3}) * (x > 0.f);
  CHECK(g(2) == 1.f);
  auto i = gd::Tensor<int64_t>::from({1, 5, 3});
  gd::Tensor<int64_t> j = i * int64_t(2) + int64_t(1);
  CHECK(j(1) == 11);
}

TEST_CASE("reductions: values against hand computation", "[reduce]") {
  auto x = gd::Tensor<double>::from({1, 2, 3, 4, 5, 6}, {2, 3});
  CHECK(gd::eval(gd::sum(x)).item() == 21.0);
  CHECK(gd::eval(gd::sum(x, 0))(2) == 9.0);
  CHECK(gd::eval(gd::sum(x, -1))(1) == 15.0);
  CHECK(gd::eval(gd::sum(x, 1, true)).shape() == gd::Shape{2, 1});
  CHECK(gd::eval(gd::mean(x, {0, 1})).item() == 3.5);
  CHECK(gd::eval(gd::max(x, 0))(0) == 4.0);
  CHECK(gd::eval(gd::min(x)).item() == 1.0);
  CHECK(gd::eval(gd::prod(x, 1))(0) == 6.0);
  CHECK(gd::argmax(x, 1)(0) == 2);
  CHECK(gd::argmin(x, 0)(1) == 0);
  CHECK(gd::eval(gd::logsumexp(x, 1))(0) == Approx(std::log(std::exp(1.0) + std::exp(2.0) + std::exp(3.0))));
  CHECK_THROWS_WITH(gd::sum(x, 2), Catch::Contains("sum: axis 2 out of range for rank 2"));
  CHECK_THROWS_AS(gd::max(gd::Tensor<double>::zeros({0})), gd::value_error);
  // a large reduction over an axis runs on both threads and agrees with a double loop
  gd::Rng rng(3);
  auto big = gd::Tensor<double>::random_normal({3000, 70}, rng);
  gd::Tensor<double> s = gd::sum(big * 2.0, 0);
  double ref = 0;
  for (int64_t i = 0; i < 3000; ++i) ref += 2.0 * big(i, 69);
  CHECK(s(69) == Approx(ref));
}

TEST_CASE("softmax: stable for logits of any size", "[softmax]") {
  auto z = gd::Tensor<double>::from({1e4, -1e4, 0, 1000, 1001, 1002}, {2, 3});
  gd::Tensor<double> p = gd::softmax(z);
  CHECK(p(0, 0) == 1.0);
  CHECK(p(0, 1) == 0.0);
  const double e = std::exp(1.0);
  CHECK(p(1, 2) == Approx(e * e / (1 + e + e * e)));
  gd::Tensor<double> lp = gd::log_softmax(z);
  CHECK(lp(0, 1) == Approx(-2e4));
  CHECK(std::isfinite(lp(0, 1)));
  CHECK(lp(1, 0) == Approx(-std::log(1 + e + e * e)));
  gd::Tensor<double> p0 = gd::softmax(z, 0);
  CHECK(p0(0, 0) == 1.0);
}

TEST_CASE("matmul: values, batching and shape errors", "[matmul]") {
  auto a = gd::Tensor<double>::from({1, 2, 3, 4, 5, 6}, {2, 3});
  auto b = gd::Tensor<double>::from({7, 8, 9, 10, 11, 12}, {3, 2});
  gd::Tensor<double> c = gd::matmul(a, b);
  CHECK(c.shape() == gd::Shape{2, 2});
  CHECK(c(0, 0) == 58.0);
  CHECK(c(1, 1) == 154.0);
  auto v = gd::Tensor<double>::from({1, 1, 1});
  CHECK(gd::eval(gd::matmul(a, v)).shape() == gd::Shape{2});
  CHECK(gd::eval(gd::matmul(a, v))(1) == 15.0);
  auto batch = gd::Tensor<double>::ones({4, 2, 3});
  gd::Tensor<double> bc = gd::matmul(batch, b);
  CHECK(bc.shape() == gd::Shape{4, 2, 2});
  CHECK(bc(3, 1, 0) == 27.0);
  gd::Tensor<double> bb = gd::matmul(a, gd::Tensor<double>::ones({5, 3, 2}));
  CHECK(bb.shape() == gd::Shape{5, 2, 2});
  CHECK(bb(4, 1, 1) == 15.0);
  CHECK_THROWS_WITH(gd::matmul(gd::Tensor<float>::zeros({32, 784}), gd::Tensor<float>::zeros({500, 10})),
                    "matmul: inner dimensions differ: [32,784] x [500,10]");
  // fused operand: an expression is materialised first
  gd::Tensor<double> f = gd::matmul(a * 2.0, b);
  CHECK(f(0, 0) == 116.0);
  // large: agrees with a double loop
  gd::Rng rng(9);
  auto x = gd::Tensor<float>::random_normal({129, 257}, rng);
  auto y = gd::Tensor<float>::random_normal({257, 65}, rng);
  gd::Tensor<float> z = gd::matmul(x, y);
  double ref = 0;
  for (int k = 0; k < 257; ++k) ref += double(x(128, k)) * y(k, 64);
  CHECK(z(128, 64) == Approx(ref).epsilon(1e-4));
}
