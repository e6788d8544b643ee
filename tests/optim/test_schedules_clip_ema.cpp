// Learning-rate schedules, gradient clipping and moving averages against values worked out by hand
// from TensorFlow's documented formulas.
#include <catch2/catch.hpp>
#include <cmath>
#include <vector>

#include <gradus/gradus.hpp>
#include <gradus/optim.hpp>

namespace gd = gradus;
namespace opt = gradus::optim;
using V = gd::Var<double>;
using Td = gd::Tensor<double>;
using Vec = std::vector<double>;

namespace {
Vec values(const Td& t) { return Vec(t.begin(), t.end()); }
}  // namespace

TEST_CASE("optim schedules: exponential_decay, smooth and staircase", "[optim][schedule]") {
  const auto smooth = opt::exponential_decay(0.1, 100, 0.5);
  CHECK(smooth(0) == Approx(0.1));
  CHECK(smooth(50) == Approx(0.1 * std::sqrt(0.5)));
  CHECK(smooth(200) == Approx(0.025));
  const auto stairs = opt::exponential_decay(0.1, 100, 0.5, true);
  CHECK(stairs(99) == Approx(0.1));
  CHECK(stairs(100) == Approx(0.05));
  CHECK(stairs(250) == Approx(0.025));
  CHECK_THROWS_AS(opt::exponential_decay(0.1, 0, 0.5), gd::value_error);
  CHECK_THROWS_AS(opt::exponential_decay(-0.1, 10, 0.5), gd::value_error);
  CHECK_THROWS_AS(smooth(-1), gd::value_error);
}

TEST_CASE("optim schedules: piecewise_constant switches after each boundary", "[optim][schedule]") {
  const auto pc = opt::piecewise_constant({10, 20}, {1.0, 0.5, 0.1});
  CHECK(pc(0) == 1.0);
  CHECK(pc(10) == 1.0);  // TF: values[0] while step <= boundaries[0]
  CHECK(pc(11) == 0.5);
  CHECK(pc(20) == 0.5);
  CHECK(pc(21) == 0.1);
  CHECK(pc(100000) == 0.1);
  CHECK_THROWS_AS(opt::piecewise_constant({10, 20}, {1.0, 0.5}), gd::value_error);
  CHECK_THROWS_AS(opt::piecewise_constant({20, 10}, {1.0, 0.5, 0.1}), gd::value_error);
}

TEST_CASE("optim schedules: cosine_decay and linear warmup", "[optim][schedule]") {
  const auto cos = opt::cosine_decay(0.1, 100);
  CHECK(cos(0) == Approx(0.1));
  CHECK(cos(50) == Approx(0.05));
  CHECK(cos(25) == Approx(0.1 * 0.5 * (1 + std::sqrt(0.5))));
  CHECK(cos(100) == Approx(0.0).margin(1e-15));
  CHECK(cos(500) == Approx(0.0).margin(1e-15));
  const auto floor = opt::cosine_decay(0.1, 100, 0.1);
  CHECK(floor(50) == Approx(0.055));
  CHECK(floor(100) == Approx(0.01));
  CHECK_THROWS_AS(opt::cosine_decay(0.1, 100, 1.5), gd::value_error);

  const auto w = opt::warmup(10, cos);
  CHECK(w(0) == 0.0);
  CHECK(w(5) == Approx(0.05));
  CHECK(w(10) == Approx(0.1));
  CHECK(w(60) == Approx(0.05));  // cos(50)
  const auto w2 = opt::warmup(10, opt::piecewise_constant({5}, {0.1, 0.01}), 0.01);
  CHECK(w2(5) == Approx(0.055));
  CHECK(w2(16) == Approx(0.01));
  CHECK_THROWS_AS(opt::warmup(-1, cos), gd::value_error);

  // A schedule drives an optimizer through set_lr.
  V x(Td::ones({2}));
  opt::SGD<double> sgd({x}, {.lr = 1.0});
  for (int s = 0; s < 3; ++s) {
    sgd.set_lr(opt::exponential_decay(0.1, 1, 0.5)(sgd.iterations()));
    sgd.minimize(gd::sum(x));  // gradient 1
  }
  CHECK(x.value()(0) == Approx(1 - 0.1 - 0.05 - 0.025));
}

TEST_CASE("optim schedules: reduce_on_plateau with patience, cooldown and min_lr", "[optim][schedule]") {
  auto p = opt::reduce_on_plateau(1.0, {.factor = 0.5, .patience = 2, .min_lr = 0.2, .cooldown = 1});
  const Vec metric{10, 10, 10, 10, 10, 9, 9, 9, 9, 9, 9};
  const Vec expected{1.0, 1.0, 0.5, 0.5, 0.25, 0.25, 0.25, 0.2, 0.2, 0.2, 0.2};
  for (size_t i = 0; i < metric.size(); ++i) {
    INFO("update " << i);
    CHECK(p.update(metric[i]) == expected[i]);
  }
  CHECK(p.lr() == 0.2);
  CHECK(p.best() == 9);

  // An improvement must beat the best by more than min_delta; mode max looks for increases.
  opt::ReduceLROnPlateau q(0.1, {.patience = 1, .min_delta = 0.01, .mode = opt::PlateauMode::max});
  CHECK(q.update(0.5) == 0.1);
  CHECK(q.update(0.505) == Approx(0.01));  // not better by 0.01: reduced
  CHECK(q.update(0.6) == Approx(0.01));
  CHECK_THROWS_AS(opt::ReduceLROnPlateau(0.1, {.factor = 1.0}), gd::value_error);
  CHECK_THROWS_AS(opt::ReduceLROnPlateau(0.1, {.patience = -1}), gd::value_error);
}

TEST_CASE("optim clip: by value, by norm, by global norm, on Vars' grads and on tensors", "[optim][clip]") {
  V a(Td::zeros({2})), b(Td::zeros({2})), unused(Td::zeros({3}));
  const std::vector<V> ps{a, b, unused};
  auto set = [&] {
    a.grad().copy_(Td::from({3.0, -4.0}));  // norm 5
    b.grad().copy_(Td::from({0.0, 12.0}));  // norm 12; global norm 13
    unused.zero_grad();
  };
  set();
  opt::clip_by_value(ps, -1, 2);
  CHECK(values(a.grad()) == Vec{2, -1});
  CHECK(values(b.grad()) == Vec{0, 2});

  set();
  opt::clip_by_norm(ps, 2.5);
  CHECK(values(a.grad()) == Vec{1.5, -2});
  CHECK(b.grad()(0) == 0.0);
  CHECK(b.grad()(1) == Approx(2.5));

  set();
  CHECK(opt::global_norm(ps) == 13);
  CHECK(opt::clip_by_global_norm(ps, 6.5) == 13);
  CHECK(values(a.grad()) == Vec{1.5, -2});
  CHECK(values(b.grad()) == Vec{0, 6});
  set();
  CHECK(opt::clip_by_global_norm(ps, 20) == 13);  // within the norm: untouched
  CHECK(values(a.grad()) == Vec{3, -4});
  CHECK(values(unused.grad()) == Vec{0, 0, 0});

  std::vector<Td> gs{Td::from({3.0, -4.0}), Td::from({0.0, 12.0})};
  CHECK(opt::clip_by_global_norm(gs, 1.3) == 13);
  CHECK(gs[0](0) == Approx(0.3));
  CHECK(gs[1](1) == Approx(1.2));
  opt::clip_by_norm(gs, 0.5);
  CHECK(gs[0](1) == Approx(-0.4));
  opt::clip_by_value(gs, -0.1, 0.1);
  CHECK(values(gs[1]) == Vec{0, 0.1});

  std::vector<Td> bad{Td::from({1.0, INFINITY}), Td::from({2.0})};
  CHECK(std::isinf(opt::clip_by_global_norm(bad, 1.0)));
  CHECK(std::isnan(bad[0](0)));
  CHECK(std::isnan(bad[1](0)));

  CHECK_THROWS_AS(opt::clip_by_norm(gs, 0.0), gd::value_error);
  CHECK_THROWS_AS(opt::clip_by_global_norm(ps, -1.0), gd::value_error);
  CHECK_THROWS_AS(opt::clip_by_value(ps, 1, -1), gd::value_error);
}

TEST_CASE("optim ema: moving averages, num_updates, swap_in / restore, state", "[optim][ema]") {
  V x(Td::from({1.0, 2.0})), y(Td::from({4.0}));
  opt::ExponentialMovingAverage<double> ema({x, y}, {.decay = 0.5});
  CHECK(values(ema.average(x)) == Vec{1, 2});  // starts at the variables' values
  x.value().copy_(Td::from({3.0, 6.0}));
  ema.apply();  // shadow - 0.5·(shadow - x)
  CHECK(values(ema.average(x)) == Vec{2, 4});
  CHECK(values(ema.average(y)) == Vec{4});
  ema.apply(0);  // decay min(0.5, 1/10) = 0.1
  CHECK(ema.average(x)(0) == Approx(2.9));
  CHECK(ema.average(x)(1) == Approx(5.8));

  ema.swap_in();
  CHECK(x.value()(0) == Approx(2.9));
  CHECK_THROWS_AS(ema.swap_in(), gd::value_error);
  CHECK_THROWS_AS(ema.apply(), gd::value_error);
  ema.restore();
  CHECK(values(x.value()) == Vec{3, 6});
  CHECK_THROWS_AS(ema.restore(), gd::value_error);
  CHECK_THROWS_AS(ema.average(V(Td::zeros({2}))), gd::value_error);

  opt::ExponentialMovingAverage<double> slow({x}, {.decay = 0.999});
  x.value().copy_(Td::from({13.0, 6.0}));
  slow.apply(5);  // decay min(0.999, 6/15) = 0.4
  CHECK(slow.average(x)(0) == Approx(3 + 0.6 * 10));

  const auto sd = ema.state_dict();
  REQUIRE(sd.size() == 2);
  CHECK(sd[0].first == "var0/average");
  opt::ExponentialMovingAverage<double> other({x, y}, {.decay = 0.5});
  other.load_state_dict(sd);
  CHECK(values(other.average(x)) == values(ema.average(x)));
  CHECK_THROWS_AS(opt::ExponentialMovingAverage<double>({x}, {.decay = 1.5}), gd::value_error);
}
