// ExponentialMovingAverage: the averages against TensorFlow's update computed here in double, a
// resumed run's averages bit-identical to an uninterrupted run's, and the swap scope.
#include <catch2/catch.hpp>

#include <algorithm>
#include <filesystem>
#include <vector>

#include <gradus/gradus.hpp>
#include <gradus/train.hpp>

#include "../support/classification_net.hpp"
#include "../support/same_bits.hpp"

namespace gd = gradus;
namespace fs = std::filesystem;

namespace {

/// One parameter w [3], trained on sum((w - target)^2).
struct Quadratic : gd::nn::Module<double> {
  gd::Var<double> w;
  Quadratic() : w(register_parameter("w", gd::Tensor<double>::from({1.0, -2.0, 0.5}))) {}
};

}  // namespace

TEST_CASE("ExponentialMovingAverage: TensorFlow's update, with num_updates, against a double reference", "[train][ema]") {
  for (const bool num_updates : {true, false}) {
    Quadratic net;
    gd::optim::SGD<double> opt(net.parameters(), {.lr = 0.1});
    gd::train::ExponentialMovingAverage ema({.decay = 0.9, .num_updates = num_updates});
    const gd::Tensor<double> target = gd::Tensor<double>::from({0.0, 1.0, 4.0});
    gd::train::Session session(net, opt, {.hooks = {&ema}});
    // by hand: w <- w - 0.1 * 2 (w - target); after step n, s <- s - (1 - d)(s - w), d = min(0.9, (1 + n)/(10 + n))
    std::vector<double> w{1.0, -2.0, 0.5}, s = w;
    for (int n = 1; n <= 6; ++n) {
      session.run([&] { return gd::Var<double>(gd::sum(gd::square(net.w - target))); });
      const double d = num_updates ? std::min(0.9, (1.0 + n) / (10.0 + n)) : 0.9;
      for (size_t i = 0; i < 3; ++i) {
        w[i] -= 0.1 * 2 * (w[i] - target.data()[i]);
        s[i] -= (1 - d) * (s[i] - w[i]);
      }
      CHECK(ema.decay_at(n) == d);
    }
    session.close();
    const auto& avg = std::get<gd::Tensor<double>>(ema.average("w"));
    for (size_t i = 0; i < 3; ++i) {
      CHECK(net.w.value().data()[i] == Approx(w[i]).epsilon(1e-14));
      CHECK(avg.data()[i] == Approx(s[i]).epsilon(1e-14));
    }
    CHECK(ema.updates() == 6);
  }
}

TEST_CASE("ExponentialMovingAverage: a resumed run's averages are bit-identical to an uninterrupted run's",
          "[train][ema][resume]") {
  const gd::train::Data<double, int64_t> train = gradus_test::make_data(44, 4, 3, 1);  // 6 steps per epoch
  struct Run {
    gd::Rng init, dropout;
    gradus_test::DenseBatchNormNet net;
    gd::optim::Adam<double> opt;
    gd::train::ExponentialMovingAverage ema{{.decay = 0.99}};
    explicit Run(uint64_t seed)
        : init(seed), dropout(seed + 1), net(4, 16, 3, 0.25, init, dropout), opt(net.parameters(), {.lr = 0.01}) {}
    gd::train::FitOptions<double, int64_t> options(fs::path dir, std::vector<gd::train::Hook*> extra) {
      std::vector<gd::train::Hook*> hooks{&ema};
      hooks.insert(hooks.end(), extra.begin(), extra.end());
      return {.epochs = 3, .batch_size = 8, .seed = 99, .hooks = hooks, .run_dir = dir, .rng = &dropout};
    }
  };
  Run a(1);
  gd::train::fit(a.net, a.opt, gradus_test::xent, train, a.options({}, {}));
  CHECK(a.ema.updates() == 18);

  const fs::path dir = "ema_resume_run";
  fs::remove_all(dir);
  {
    Run b1(1);
    gd::train::StopAtStep stop({.last_step = 8});
    gd::train::fit(b1.net, b1.opt, gradus_test::xent, train, b1.options(dir, {&stop}));
    CHECK(b1.ema.updates() == 8);
  }
  Run b2(1234);  // other weights: the model, the optimizer and the averages come from the checkpoint
  gd::train::fit(b2.net, b2.opt, gradus_test::xent, train, b2.options(dir, {}));
  CHECK(b2.ema.updates() == 18);
  REQUIRE(b2.ema.averages().size() == a.ema.averages().size());
  for (size_t i = 0; i < a.ema.averages().size(); ++i) {
    INFO(a.ema.averages()[i].first);
    CHECK(b2.ema.averages()[i].first == a.ema.averages()[i].first);
    CHECK(gradus_test::same_bits(std::get<gd::Tensor<double>>(b2.ema.averages()[i].second),
                                 std::get<gd::Tensor<double>>(a.ema.averages()[i].second)));
  }
  // the averages are saved in the checkpoint under hooks/ema/
  const gd::io::Safetensors ck = gd::io::load_safetensors(*gd::io::latest_checkpoint(dir));
  CHECK(ck.get<int64_t>("hooks/ema/updates").data()[0] == 18);
  const std::string first = "hooks/ema/average/" + a.ema.averages()[0].first;
  CHECK(std::any_of(ck.tensors.begin(), ck.tensors.end(), [&](const auto& t) { return t.first == first; }));

  // use_averages: the parameters hold their averages in the scope, their trained values after it
  std::vector<gd::Tensor<double>> trained;
  for (auto& p : a.net.parameters()) trained.push_back(p.value().clone());
  {
    auto averaged = a.ema.use_averages();
    const auto params = a.net.named_parameters();
    for (size_t i = 0; i < params.size(); ++i)
      CHECK(gradus_test::same_bits(params[i].second.value(), std::get<gd::Tensor<double>>(a.ema.average(params[i].first))));
    CHECK_FALSE(gradus_test::same_bits(params[0].second.value(), trained[0]));
  }
  const auto params = a.net.parameters();
  for (size_t i = 0; i < params.size(); ++i) CHECK(gradus_test::same_bits(params[i].value(), trained[i]));
}

TEST_CASE("ExponentialMovingAverage: bad options and early calls are clear errors", "[train][ema]") {
  CHECK_THROWS_WITH(gd::train::ExponentialMovingAverage({.decay = 1.5}), Catch::Contains("decay must be in [0, 1]"));
  gd::train::ExponentialMovingAverage ema;
  CHECK_THROWS_WITH(ema.average("w"), Catch::Contains("no session has run"));
  CHECK_THROWS_AS(ema.use_averages(), gd::value_error);
}
