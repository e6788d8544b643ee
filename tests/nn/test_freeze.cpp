// Transfer learning: a frozen feature extractor (Module::freeze) under a new head. Its parameters
// receive no gradient and keep their bits through optimizer steps and fit, a frozen BatchNorm
// keeps its moving statistics in training mode, and the head trains exactly as a head trained
// alone on the extractor's precomputed features (the independent reference, bit for bit).
#include <catch2/catch.hpp>
#include <string>
#include <vector>

#include <gradus/gradus.hpp>
#include <gradus/nn.hpp>
#include <gradus/train.hpp>

#include "../support/same_bits.hpp"

namespace gd = gradus;
namespace nn = gradus::nn;
using Catch::Contains;
using Td = gd::Tensor<double>;
using V = gd::Var<double>;

namespace {

using gradus_test::same_bits;

/// Dense -> BatchNorm: a "pretrained" feature extractor.
struct Features : nn::Module<double> {
  nn::Dense<double> dense;
  nn::BatchNorm<double> bn;
  explicit Features(gd::Rng& rng) : dense({.in = 3, .out = 5, .activation = nn::tanh}, rng), bn({.features = 5}) {
    register_module("dense", dense);
    register_module("bn", bn);
  }
  V forward(const V& x) { return bn.forward(dense.forward(x)); }
};

/// The features under a new head.
struct Net : nn::Module<double> {
  Features features;
  nn::Dense<double> head;
  Net(gd::Rng& rng, gd::Rng& head_rng) : features(rng), head({.in = 5, .out = 2}, head_rng) {
    register_module("features", features);
    register_module("head", head);
  }
  V forward(const V& x) { return head.forward(features.forward(x)); }
};

std::vector<Td> values(const std::vector<V>& vars) {
  std::vector<Td> out;
  for (const V& v : vars) out.push_back(v.value().clone());
  return out;
}

Td batch(int64_t step) {
  gd::Rng data(100 + uint64_t(step));
  return Td::random_normal({8, 3}, data);
}

}  // namespace

TEST_CASE("nn: a frozen feature extractor keeps its bits and the head trains as it would alone", "[nn][freeze]") {
  gd::Rng rng(1), head_rng(2);
  Net net(rng, head_rng);
  // Give BatchNorm moving statistics of its own, as a pretrained layer has.
  for (int s = 0; s < 3; ++s) net.features.forward(V::constant(batch(50 + s)));
  net.features.freeze();
  CHECK(net.features.frozen());
  CHECK(net.features.dense.frozen());  // descendants too
  CHECK_FALSE(net.head.frozen());
  CHECK(net.parameters().size() == 6);            // kernel, bias, gamma, beta, head kernel, head bias
  CHECK(net.trainable_parameters().size() == 2);  // the head's
  CHECK(net.parameter_count() == 3 * 5 + 5 + 5 + 5 + 5 * 2 + 2);

  const std::vector<Td> frozen_before = values(net.features.parameters());
  const Td mean_before = net.features.bn.moving_mean().clone(), var_before = net.features.bn.moving_variance().clone();

  // The reference: the same head, trained alone on the extractor's features (in inference mode,
  // which is what a frozen BatchNorm computes).
  gd::Rng rng2(1), head_rng2(2);
  Net twin(rng2, head_rng2);
  for (int s = 0; s < 3; ++s) twin.features.forward(V::constant(batch(50 + s)));
  twin.features.eval();
  gd::optim::Adam ref_opt(twin.head.parameters(), {.lr = 0.05});

  gd::optim::Adam opt(net.parameters(), {.lr = 0.05});  // all parameters: the frozen ones are skipped
  net.train();
  for (int64_t s = 0; s < 5; ++s) {
    const Td x = batch(s);
    const V loss = gd::mean(gd::square(net.forward(V::constant(x))));
    opt.minimize(loss);
    for (const V& p : net.features.parameters()) CHECK(p.grad_if_any() == nullptr);  // no gradient computed

    const V h = V::constant(twin.features.forward(V::constant(x)).value());
    ref_opt.minimize(gd::mean(gd::square(twin.head.forward(h))));
  }
  const std::vector<Td> frozen_after = values(net.features.parameters());
  for (size_t i = 0; i < frozen_before.size(); ++i) CHECK(same_bits(frozen_after[i], frozen_before[i]));
  CHECK(same_bits(net.features.bn.moving_mean(), mean_before));  // training mode, yet unchanged
  CHECK(same_bits(net.features.bn.moving_variance(), var_before));
  CHECK(same_bits(net.head.parameters()[0].value(), twin.head.parameters()[0].value()));
  CHECK(same_bits(net.head.parameters()[1].value(), twin.head.parameters()[1].value()));

  // Unfrozen, the extractor trains again and BatchNorm updates its statistics.
  net.features.unfreeze();
  CHECK(net.trainable_parameters().size() == 6);
  opt.minimize(gd::mean(gd::square(net.forward(V::constant(batch(9))))));
  CHECK_FALSE(same_bits(net.features.dense.parameters()[0].value(), frozen_before[0]));
  CHECK_FALSE(same_bits(net.features.bn.moving_mean(), mean_before));
}

TEST_CASE("nn: fit leaves a frozen layer's weights and moving statistics as they were", "[nn][freeze]") {
  gd::Rng rng(3), head_rng(4), data(5);
  Net net(rng, head_rng);
  net.features.freeze();
  const std::vector<Td> before = values(net.features.parameters());
  const Td head_before = net.head.parameters()[0].value().clone();
  const Td mean_before = net.features.bn.moving_mean().clone();
  const gd::train::Data<double, double> train{Td::random_normal({64, 3}, data), Td::random_normal({64, 2}, data)};
  gd::optim::SGD opt(net.parameters(), {.lr = 0.1});
  auto mse = [](const auto& y, const auto& p) { return gd::mean(gd::square(p - y)); };
  gd::train::fit(net, opt, mse, train, {.epochs = 2, .batch_size = 16, .seed = 1, .verbose = false});
  const std::vector<Td> after = values(net.features.parameters());
  for (size_t i = 0; i < before.size(); ++i) CHECK(same_bits(after[i], before[i]));
  CHECK(same_bits(net.features.bn.moving_mean(), mean_before));
  CHECK_FALSE(same_bits(net.head.parameters()[0].value(), head_before));
}

TEST_CASE("nn: set_requires_grad freezes a leaf; constants and op results cannot be switched", "[nn][freeze]") {
  V w(Td::ones({2}));
  w.set_requires_grad(false);
  CHECK(w.frozen());
  CHECK_FALSE(w.requires_grad());
  V u(Td::ones({2}));
  gd::backward(gd::sum(gd::square(w) * 3.0 + u));
  CHECK(w.grad_if_any() == nullptr);
  CHECK(u.grad_if_any() != nullptr);
  // With nothing else to differentiate, backward says so.
  CHECK_THROWS_WITH(gd::backward(gd::sum(gd::square(w))), Contains("does not depend on any Var that requires a gradient"));
  gd::optim::SGD opt({w}, {.lr = 1.0});  // a frozen leaf is a parameter still
  opt.apply_gradients({Td::ones({2})});  // skipped while frozen, whatever gradient it is given
  CHECK(w.value().data()[0] == 1.0);
  w.set_requires_grad(true);
  opt.apply_gradients({Td::ones({2})});
  CHECK(w.value().data()[0] == 0.0);

  V c = V::constant(Td::ones({2}));
  CHECK_THROWS_WITH(c.set_requires_grad(true), Contains("is a constant"));
  CHECK_THROWS_WITH(gd::optim::SGD({c}, {.lr = 1.0}), Contains("does not require a gradient"));
  V r = gd::square(w);
  CHECK_THROWS_WITH(r.set_requires_grad(false), Contains("not a leaf"));
}
