#include <catch2/catch.hpp>
#include <gradus/core/interop_eigen.hpp>
#include <gradus/init.hpp>

#include <algorithm>
#include <cmath>
#include <vector>

namespace gd = gradus;
namespace init = gradus::init;

namespace {

// Sample moments with their standard errors: se(mean) = sqrt(var / n) and
// se(var) = sqrt((m4 - var²) / n), m4 the fourth central moment.
struct Stats {
  double mean = 0, var = 0, mean_se = 0, var_se = 0, min = 0, max = 0;
};

Stats stats(const gd::Tensor<double>& t) {
  const double* p = t.data();
  const auto n = double(t.size());
  Stats s;
  s.min = *std::min_element(p, p + t.size());
  s.max = *std::max_element(p, p + t.size());
  for (int64_t i = 0; i < t.size(); ++i) s.mean += p[i];
  s.mean /= n;
  double m4 = 0;
  for (int64_t i = 0; i < t.size(); ++i) {
    const double d2 = (p[i] - s.mean) * (p[i] - s.mean);
    s.var += d2;
    m4 += d2 * d2;
  }
  s.var /= n;
  m4 /= n;
  s.mean_se = std::sqrt(s.var / n);
  s.var_se = std::sqrt((m4 - s.var * s.var) / n);
  return s;
}

// Both moments within 5 standard errors of their targets.
void check_moments(const Stats& s, double mean, double var) {
  INFO("mean " << s.mean << " (target " << mean << ", se " << s.mean_se << "), var " << s.var << " (target "
               << var << ", se " << s.var_se << ")");
  CHECK(std::abs(s.mean - mean) <= 5 * s.mean_se);
  CHECK(std::abs(s.var - var) <= 5 * s.var_se);
}

template <class T>
bool same(const gd::Tensor<T>& a, const gd::Tensor<T>& b) {
  return a.shape() == b.shape() && std::equal(a.data(), a.data() + a.size(), b.data());
}

constexpr double kTrunc = 0.87962566103423978;

}  // namespace

TEST_CASE("init: compute_fans as TF (2-D, conv NHWC, rank 1 and 0)", "[init]") {
  auto fans = [](gd::Shape s) {
    auto f = init::compute_fans(s);
    return std::pair{f.fan_in, f.fan_out};
  };
  CHECK(fans({784, 500}) == std::pair<int64_t, int64_t>{784, 500});
  CHECK(fans({5, 5, 3, 32}) == std::pair<int64_t, int64_t>{75, 800});
  CHECK(fans({3, 4, 5}) == std::pair<int64_t, int64_t>{12, 15});
  CHECK(fans({2, 3, 3, 8, 16}) == std::pair<int64_t, int64_t>{144, 288});
  CHECK(fans({7}) == std::pair<int64_t, int64_t>{7, 7});
  CHECK(fans({}) == std::pair<int64_t, int64_t>{1, 1});
}

TEST_CASE("init: zeros, ones, constant and identity give exact values", "[init]") {
  gd::Rng rng(1);
  const auto rng_before = rng.state();
  auto z = init::zeros{}.operator()<double>({2, 3}, rng);
  auto o = init::ones{}.operator()<double>({4}, rng);
  auto c = init::constant{.value = -2.5}.operator()<double>({3, 2}, rng);
  CHECK(z.shape() == gd::Shape{2, 3});
  CHECK(std::all_of(z.data(), z.data() + 6, [](double v) { return v == 0.0; }));
  CHECK(std::all_of(o.data(), o.data() + 4, [](double v) { return v == 1.0; }));
  CHECK(std::all_of(c.data(), c.data() + 6, [](double v) { return v == -2.5; }));
  CHECK(rng.state() == rng_before);  // deterministic initializers draw nothing

  auto eye = init::identity{}.operator()<double>({3, 3}, rng);
  for (int64_t i = 0; i < 3; ++i)
    for (int64_t j = 0; j < 3; ++j) CHECK(eye(i, j) == (i == j ? 1.0 : 0.0));
  // Non-square: ones on the main diagonal, as tf.eye(r, c), times gain.
  auto wide = init::identity{.gain = 2}.operator()<double>({2, 4}, rng);
  auto tall = init::identity{.gain = 2}.operator()<double>({4, 2}, rng);
  CHECK(wide.shape() == gd::Shape{2, 4});
  CHECK(tall.shape() == gd::Shape{4, 2});
  for (int64_t i = 0; i < 4; ++i)
    for (int64_t j = 0; j < 2; ++j) {
      CHECK(wide(j, i) == (i == j ? 2.0 : 0.0));
      CHECK(tall(i, j) == (i == j ? 2.0 : 0.0));
    }
  // float is the default element type
  auto f = init::constant{.value = 0.5}({2}, rng);
  static_assert(std::is_same_v<decltype(f), gd::Tensor<float>>);
  CHECK(f(1) == 0.5f);
}

TEST_CASE("init: random_normal has the requested mean and stddev", "[init][stats]") {
  gd::Rng rng(7);
  auto t = init::random_normal{.mean = 0.3, .stddev = 2.0}.operator()<double>({500, 400}, rng);
  CHECK(t.shape() == gd::Shape{500, 400});
  check_moments(stats(t), 0.3, 4.0);
  // TF 2 defaults: mean 0, stddev 0.05
  check_moments(stats(init::random_normal{}.operator()<double>({200000}, rng)), 0.0, 0.05 * 0.05);
}

TEST_CASE("init: truncated_normal redraws beyond 2 stddev; its stddev is 0.8796 sigma", "[init][stats]") {
  gd::Rng rng(8);
  const double mean = -1, sigma = 0.5;
  auto t = init::truncated_normal{.mean = mean, .stddev = sigma}.operator()<double>({200000}, rng);
  const auto s = stats(t);
  CHECK(s.min >= mean - 2 * sigma);
  CHECK(s.max <= mean + 2 * sigma);
  CHECK(s.min < mean - 1.95 * sigma);  // the cut is at 2 sigma, not tighter
  CHECK(s.max > mean + 1.95 * sigma);
  check_moments(s, mean, (kTrunc * sigma) * (kTrunc * sigma));
  CHECK(init::kTruncatedNormalStddev == kTrunc);
}

TEST_CASE("init: random_uniform stays in [minval, maxval) with mean and variance of U(a, b)", "[init][stats]") {
  gd::Rng rng(9);
  auto t = init::random_uniform{.minval = -3, .maxval = 5}.operator()<double>({400, 500}, rng);
  const auto s = stats(t);
  CHECK(s.min >= -3.0);
  CHECK(s.max < 5.0);
  check_moments(s, 1.0, 64.0 / 12);
  const auto d = stats(init::random_uniform{}.operator()<double>({100000}, rng));  // TF 2 defaults ±0.05
  CHECK(d.min >= -0.05);
  CHECK(d.max < 0.05);
  check_moments(d, 0.0, 0.01 / 12);
}

TEST_CASE("init: variance_scaling has variance scale/n for every mode, distribution and layout", "[init][stats]") {
  using init::Distribution;
  using init::FanMode;
  struct Case {
    gd::Shape shape;
    double fan_in, fan_out;
  };
  const Case cases[] = {{{400, 600}, 400, 600}, {{3, 3, 64, 128}, 576, 1152}};
  const double scale = 2.0;
  gd::Rng rng(10);
  for (const auto& c : cases)
    for (auto mode : {FanMode::fan_in, FanMode::fan_out, FanMode::fan_avg})
      for (auto dist : {Distribution::truncated_normal, Distribution::untruncated_normal, Distribution::uniform}) {
        const double n = mode == FanMode::fan_in ? c.fan_in : mode == FanMode::fan_out ? c.fan_out
                                                                                         : (c.fan_in + c.fan_out) / 2;
        const double var = scale / n;
        INFO("shape " << c.shape << " mode " << int(mode) << " distribution " << int(dist) << " n " << n);
        auto t = init::variance_scaling{.scale = scale, .mode = mode, .distribution = dist}.operator()<double>(
            c.shape, rng);
        CHECK(t.shape() == c.shape);
        const auto s = stats(t);
        check_moments(s, 0.0, var);
        const double bound = dist == Distribution::uniform ? std::sqrt(3 * var) : 2 * std::sqrt(var) / kTrunc;
        const double extreme = std::max(-s.min, s.max);
        if (dist == Distribution::untruncated_normal)
          CHECK(extreme > bound);  // a plain normal has tails past the truncation point
        else
          CHECK(extreme <= bound);
      }
  // `normal` is TF's alias of truncated_normal; the default is fan_in, truncated, scale 1.
  STATIC_REQUIRE(Distribution::normal == Distribution::truncated_normal);
  constexpr init::variance_scaling d{};
  STATIC_REQUIRE((d.scale == 1.0 && d.mode == FanMode::fan_in && d.distribution == Distribution::truncated_normal));
}

TEST_CASE("init: glorot, he and lecun are their variance_scaling configurations", "[init]") {
  using init::Distribution;
  using init::FanMode;
  const gd::Shape shape{3, 3, 16, 32};
  auto check = [&](const init::Initializer& preset, init::variance_scaling vs) {
    gd::Rng a(5), b(5);
    CHECK(same(preset.operator()<double>(shape, a), vs.operator()<double>(shape, b)));
  };
  check(init::glorot_normal{}, {1.0, FanMode::fan_avg, Distribution::truncated_normal});
  check(init::glorot_uniform{}, {1.0, FanMode::fan_avg, Distribution::uniform});
  check(init::he_normal{}, {2.0, FanMode::fan_in, Distribution::truncated_normal});
  check(init::he_uniform{}, {2.0, FanMode::fan_in, Distribution::uniform});
  check(init::lecun_normal{}, {1.0, FanMode::fan_in, Distribution::truncated_normal});
  check(init::lecun_uniform{}, {1.0, FanMode::fan_in, Distribution::uniform});

  // Glorot uniform's limit is sqrt(6 / (in + out)).
  gd::Rng rng(3);
  auto w = init::glorot_uniform{}({784, 500}, rng);
  static_assert(std::is_same_v<decltype(w), gd::Tensor<float>>);
  const float limit = float(std::sqrt(6.0 / (784 + 500)));
  const auto [lo, hi] = std::minmax_element(w.data(), w.data() + w.size());
  CHECK(*lo >= -limit);
  CHECK(*hi <= limit);
  CHECK(*hi > 0.99f * limit);
}

TEST_CASE("init: orthogonal gives orthonormal rows or columns times gain, any shape", "[init]") {
  gd::Rng rng(11);
  const gd::Shape shapes[] = {{64, 64}, {30, 80}, {80, 30}, {3, 3, 16, 32}, {2, 3, 50}};
  for (const auto& shape : shapes) {
    const double gain = 1.5;
    auto t = init::orthogonal{.gain = gain}.operator()<double>(shape, rng);
    REQUIRE(t.shape() == shape);
    const int64_t cols = shape.back(), rows = shape.numel() / cols;
    auto flat = t.reshape({rows, cols});
    const auto w = gd::eigen_map(std::as_const(flat));
    const Eigen::MatrixXd gram = rows <= cols ? Eigen::MatrixXd(w * w.transpose()) : Eigen::MatrixXd(w.transpose() * w);
    const double err = (gram - gain * gain * Eigen::MatrixXd::Identity(gram.rows(), gram.cols())).cwiseAbs().maxCoeff();
    INFO("shape " << shape << " max |gram - gain² I| " << err);
    CHECK(err < 1e-5);
  }
  // float: the same matrix rounded (QR runs in double)
  gd::Rng a(12), b(12);
  auto f = init::orthogonal{}({20, 10}, a);
  auto d = init::make<double>(init::orthogonal{}, {20, 10}, b);
  for (int64_t i = 0; i < f.size(); ++i) CHECK(f.data()[i] == float(d.data()[i]));
  // A random rotation, not a signed permutation: entries ~ N(0, 1/100), none near ±1.
  const auto q = stats(init::make<double>(init::orthogonal{}, {100, 100}, a));
  CHECK(std::max(-q.min, q.max) < 0.6);
}

TEST_CASE("init: same seed gives identical tensors, different seeds different ones", "[init]") {
  const std::vector<init::Initializer> random_inits = {
      init::random_normal{},  init::truncated_normal{}, init::random_uniform{},
      init::variance_scaling{.distribution = init::Distribution::untruncated_normal},
      init::glorot_normal{},  init::glorot_uniform{},   init::he_normal{},
      init::he_uniform{},     init::lecun_normal{},     init::lecun_uniform{},
      init::orthogonal{}};
  for (size_t k = 0; k < random_inits.size(); ++k) {
    INFO("initializer #" << k);
    const auto& i = random_inits[k];
    gd::Rng a(42), b(42), c(43);
    auto x = i.operator()<double>({16, 8}, a);
    CHECK(same(x, i.operator()<double>({16, 8}, b)));
    CHECK_FALSE(same(x, i.operator()<double>({16, 8}, c)));
    CHECK_FALSE(same(x, i.operator()<double>({16, 8}, a)));  // the generator advanced
  }
}

TEST_CASE("init: Initializer holds any initializer or plain callable", "[init]") {
  gd::Rng a(1), b(1);
  init::Initializer he = init::he_uniform{};
  CHECK(bool(he));
  CHECK(same(he({4, 5}, a), init::he_uniform{}({4, 5}, b)));
  CHECK(same(he.operator()<double>({4, 5}, a), init::make<double>(init::he_uniform{}, {4, 5}, b)));
  static_assert(init::GenericInitializer<init::Initializer>);
  static_assert(init::GenericInitializer<init::orthogonal>);

  // A plain float callable also serves double, converted.
  init::Initializer fives = [](const gd::Shape& s, gd::Rng&) { return gd::Tensor<float>::full(s, 5.f); };
  auto d = fives.operator()<double>({2, 2}, a);
  static_assert(std::is_same_v<decltype(d), gd::Tensor<double>>);
  CHECK(d(1, 1) == 5.0);
  CHECK(fives({3}, a)(2) == 5.f);

  init::Initializer wrong = [](const gd::Shape&, gd::Rng&) { return gd::Tensor<double>::zeros({1}); };
  CHECK_THROWS_WITH(wrong({2, 2}, a), Catch::Contains("Initializer: asked for shape [2,2], got [1]"));
  init::Initializer empty;
  CHECK_FALSE(bool(empty));
  CHECK_THROWS_AS(empty({2}, a), gd::value_error);
  CHECK_THROWS_WITH(empty({2}, a), Catch::Contains("Initializer: empty"));
}

TEST_CASE("init: bad arguments throw value_error naming the initializer", "[init][errors]") {
  gd::Rng rng(0);
  auto throws = [&](const init::Initializer& i, const gd::Shape& shape, const char* text) {
    INFO("expected message containing: " << text);
    CHECK_THROWS_AS(i.operator()<double>(shape, rng), gd::value_error);
    CHECK_THROWS_WITH(i.operator()<double>(shape, rng), Catch::Contains(text));
  };
  throws(init::random_normal{.stddev = -1}, {2}, "random_normal: stddev must be >= 0, got -1");
  throws(init::truncated_normal{.stddev = -0.5}, {2}, "truncated_normal: stddev must be >= 0, got -0.5");
  throws(init::truncated_normal{.stddev = std::nan("")}, {2}, "truncated_normal: stddev");
  throws(init::random_uniform{.minval = 1, .maxval = 0}, {2}, "random_uniform: minval must be <= maxval");
  throws(init::identity{}, {2, 2, 2}, "identity: expected a 2-D shape, got [2,2,2]");
  throws(init::identity{}, {3}, "identity: expected a 2-D shape, got [3]");
  throws(init::variance_scaling{.scale = 0}, {2, 2}, "variance_scaling: scale must be > 0, got 0");
  throws(init::variance_scaling{.scale = -1}, {2, 2}, "variance_scaling: scale must be > 0, got -1");
  throws(init::orthogonal{}, {5}, "orthogonal: expected a shape of rank >= 2, got [5]");
  // Degenerate but legal: a zero stddev gives the mean; an empty shape gives an empty tensor.
  CHECK(init::truncated_normal{.mean = 3, .stddev = 0}.operator()<double>({2}, rng)(1) == 3.0);
  CHECK(init::orthogonal{}.operator()<double>({0, 4}, rng).size() == 0);
  CHECK(init::random_uniform{.minval = 2, .maxval = 2}.operator()<double>({1}, rng)(0) == 2.0);
}
