// The LossScaler's schedule and its steps, on the CPU (where products keep float precision, so
// a scaled step must equal an unscaled one bit for bit). Its use with fp16 products on a GPU is
// tests/gpu/test_autocast.cpp.
#include <catch2/catch.hpp>

#include <cmath>
#include <limits>

#include "gradus/gradus.hpp"
#include "gradus/optim.hpp"

#include "../support/same_bits.hpp"

namespace gd = gradus;

TEST_CASE("LossScaler: a finite step is the optimizer's own step, bit for bit", "[optim][loss_scale]") {
  gd::Rng rng(1);
  const auto x = gd::Tensor<float>::random_normal({20, 6}, rng), w0 = gd::Tensor<float>::random_normal({6, 3}, rng);
  const auto loss_of = [&](const gd::Var<float>& w) { return gd::Var<float>(gd::mean(gd::tanh(gd::matmul(x, w)))); };
  gd::Var<float> a(w0.clone(), true), b(w0.clone(), true);
  gd::optim::Adam<float> opt_a({a}, {.lr = 0.01}), opt_b({b}, {.lr = 0.01});
  gd::optim::LossScaler<float> scaler;
  for (int step = 0; step < 5; ++step) {
    opt_a.minimize(loss_of(a));
    CHECK(scaler.minimize(opt_b, loss_of(b)));
    CHECK(gradus_test::same_bits(a.grad(), b.grad()));  // 2^16 scales and unscales exactly
    CHECK(gradus_test::same_bits(a.value(), b.value()));
  }
  CHECK(scaler.scale() == 65536.0);
  CHECK(scaler.skipped_steps() == 0);
  CHECK(opt_b.iterations() == 5);
}

TEST_CASE("LossScaler: an overflowing gradient skips the step and halves the scale", "[optim][loss_scale]") {
  // loss = Σ w·c with c = 1e34: the gradient c times 2^16 is 6.6e38, beyond float's 3.4e38;
  // times 2^15 it is 3.3e38, which fits
  const auto c = gd::Tensor<float>::full({4}, 1e34f);
  gd::Var<float> w(gd::Tensor<float>::full({4}, 1.0f), true);
  gd::optim::SGD<float> opt({w}, {.lr = 1e-34});
  gd::optim::LossScaler<float> scaler;
  CHECK_FALSE(scaler.minimize(opt, gd::Var<float>(gd::sum(w * c))));
  CHECK(scaler.scale() == 32768.0);
  CHECK(scaler.skipped_steps() == 1);
  CHECK(opt.iterations() == 0);  // no step
  for (int64_t i = 0; i < 4; ++i) CHECK(w.value().data()[i] == 1.0f);
  CHECK(w.grad_if_any() == nullptr);  // cleared: the next step starts from nothing
  CHECK(scaler.minimize(opt, gd::Var<float>(gd::sum(w * c))));
  CHECK(opt.iterations() == 1);
  for (int64_t i = 0; i < 4; ++i) CHECK(w.value().data()[i] == Approx(0.0f).margin(1e-6));  // 1 - 1e-34·1e34
  // a NaN anywhere skips too
  gd::Var<float> v(gd::Tensor<float>::full({2}, 1.0f), true);
  gd::optim::SGD<float> opt_v({v}, {.lr = 0.1});
  CHECK_FALSE(scaler.minimize(opt_v, gd::Var<float>(gd::sum(gd::sqrt(v - 2.0f)))));
  CHECK(scaler.scale() == 16384.0);
  CHECK(scaler.skipped_steps() == 2);
}

TEST_CASE("LossScaler: the scale grows after growth_interval finite steps in a row, and resumes from its state",
          "[optim][loss_scale]") {
  gd::Var<float> w(gd::Tensor<float>::full({3}, 0.5f), true);
  gd::optim::SGD<float> opt({w}, {.lr = 0.01});
  gd::optim::LossScaler<float> scaler({.initial_scale = 8, .growth_factor = 4, .backoff_factor = 0.25, .growth_interval = 3});
  const auto loss = [&] { return gd::Var<float>(gd::sum(w * w)); };
  std::vector<double> scales;
  for (int step = 0; step < 7; ++step) {
    CHECK(scaler.minimize(opt, loss()));
    scales.push_back(scaler.scale());
  }
  CHECK(scales == std::vector<double>{8, 8, 32, 32, 32, 128, 128});
  const auto state = scaler.state_dict();
  gd::optim::LossScaler<float> resumed({.initial_scale = 8, .growth_factor = 4, .backoff_factor = 0.25, .growth_interval = 3});
  resumed.load_state_dict(state);
  CHECK(resumed.scale() == 128.0);
  for (int step = 0; step < 2; ++step) {
    CHECK(resumed.minimize(opt, loss()));
    CHECK(scaler.minimize(opt, loss()));
  }
  CHECK(resumed.scale() == 512.0);  // the 3rd finite step at 128: both grow
  CHECK(scaler.scale() == 512.0);
  // a scale that would pass float's largest value stops growing
  gd::optim::LossScaler<float> top({.initial_scale = 0x1p127, .growth_interval = 1});
  CHECK(top.minimize(opt, loss()));
  CHECK(top.scale() == 0x1p127);
}

TEST_CASE("LossScaler: bad options and bad state are refused by name", "[optim][loss_scale]") {
  using Opt = gd::optim::LossScaleOptions;
  CHECK_THROWS_WITH(gd::optim::LossScaler<float>(Opt{.initial_scale = 0}), Catch::Contains("initial_scale"));
  CHECK_THROWS_WITH(gd::optim::LossScaler<float>(Opt{.growth_factor = 1}), Catch::Contains("growth_factor"));
  CHECK_THROWS_WITH(gd::optim::LossScaler<float>(Opt{.backoff_factor = 1}), Catch::Contains("backoff_factor"));
  CHECK_THROWS_WITH(gd::optim::LossScaler<float>(Opt{.growth_interval = 0}), Catch::Contains("growth_interval"));
  gd::optim::LossScaler<float> s;
  gd::optim::StateDict<float> bad{{"scale", gd::Tensor<float>::scalar(-1)},
                                  {"good_steps", gd::Tensor<float>::scalar(0)},
                                  {"skipped_steps", gd::Tensor<float>::scalar(0)}};
  CHECK_THROWS_WITH(s.load_state_dict(bad), Catch::Contains("'scale' must be > 0"));
  bad[0].second = gd::Tensor<float>::scalar(4);
  bad[1].second = gd::Tensor<float>::scalar(1.5f);
  CHECK_THROWS_WITH(s.load_state_dict(bad), Catch::Contains("good_steps"));
  bad.pop_back();
  CHECK_THROWS_AS(s.load_state_dict(bad), gd::value_error);
  CHECK(s.scale() == 65536.0);  // unchanged by the refused loads
  gd::Var<float> w(gd::Tensor<float>::full({3}, 0.5f), true);
  CHECK_THROWS_WITH(s.backward(w), Catch::Contains("scalar"));
}
