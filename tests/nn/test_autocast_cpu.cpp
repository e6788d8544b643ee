// Layers under gd::autocast(gd::bf16) on the CPU: a CNN's parameter gradients stay within
// bfloat16's tolerance of float's (and differ from them: the rounding took place, in the forward
// products and in the backward ones, which run under each node's recorded precision), and an MLP
// trained under bf16 follows float's loss curve. The kernels themselves are checked against exact
// references in tests/backend/test_gemm_bf16.cpp.
#include <catch2/catch.hpp>

#include <cmath>
#include <vector>

#include <gradus/gradus.hpp>

#include "../support/relative_l2.hpp"

namespace gd = gradus;

TEST_CASE("a CNN's gradients under autocast(bf16) on the CPU stay within bfloat16's tolerance of float's",
          "[nn][bf16]") {
  gd::Rng rng(20);
  gd::nn::Sequential net(
      gd::nn::Conv2d<float>({.in = 1, .filters = 6, .kernel_size = {5, 5}, .activation = gd::nn::relu}, rng),
      gd::nn::MaxPool2d{}, gd::nn::Flatten{},
      gd::nn::Dense<float>({.in = 4 * 4 * 6, .out = 32, .activation = gd::nn::tanh}, rng),
      gd::nn::Dense<float>({.in = 32, .out = 10}, rng));
  const auto x = gd::Tensor<float>::random_normal({16, 12, 12, 1}, rng);
  gd::Tensor<int64_t> labels({16});
  for (int64_t i = 0; i < 16; ++i) labels(i) = int64_t(rng.below(10));
  const auto gradients = [&](gd::Precision p) {
    for (auto& w : net.parameters()) w.zero_grad();
    gd::Var<float> loss;
    {
      gd::autocast mixed(p);
      loss = gd::losses::sparse_softmax_cross_entropy_with_logits(labels, net.forward(x));
    }
    gd::backward(loss);  // outside the scope: each node's products run in its own precision
    std::vector<gd::Tensor<float>> out;
    for (auto& w : net.parameters()) out.push_back(w.grad().clone());
    return out;
  };
  const auto full = gradients(gd::fp32), mixed = gradients(gd::bf16);
  // ||g_bf16 - g|| / ||g|| per parameter; the GPU's emulated device, which rounds the same way,
  // measured at most 0.049 on this network (tests/gpu/test_autocast.cpp): the bound is twice that
  double largest = 0;
  for (size_t i = 0; i < full.size(); ++i) {
    INFO("parameter " << i << " " << full[i].shape());
    const double rel = gradus_test::relative_l2(mixed[i], full[i]);
    CHECK(rel <= 0.1);
    largest = std::max(largest, rel);
  }
  CHECK(largest > 1e-4);  // float's own rounding is below 1e-6: the products were rounded
}

TEST_CASE("an MLP trained under autocast(bf16) on the CPU follows float's loss curve", "[nn][bf16]") {
  gd::Rng data_rng(40);
  const auto x = gd::Tensor<float>::random_normal({128, 64}, data_rng);
  gd::Tensor<int64_t> labels({128});
  for (int64_t i = 0; i < 128; ++i) labels(i) = int64_t(data_rng.below(10));
  const auto train = [&](gd::Precision p) {
    gd::Rng rng(41);
    gd::nn::Sequential net(gd::nn::Dense<float>({.in = 64, .out = 100, .activation = gd::nn::relu}, rng),
                           gd::nn::Dense<float>({.in = 100, .out = 10}, rng));
    gd::optim::SGD<float> opt(net.parameters(), {.lr = 0.05, .momentum = 0.9});
    std::vector<double> losses;
    for (int step = 0; step < 150; ++step) {
      gd::Var<float> loss;
      {
        gd::autocast mixed(p);
        loss = gd::losses::sparse_softmax_cross_entropy_with_logits(labels, net.forward(x));
      }
      opt.minimize(loss);
      losses.push_back(loss.value().item());
    }
    return losses;
  };
  const auto full = train(gd::fp32), mixed = train(gd::bf16);
  CHECK(full.back() < 0.3 * full.front());  // it learns
  bool differs = false;
  for (size_t i = 0; i < full.size(); i += 10) {
    INFO("step " << i);
    CHECK(mixed[i] == Approx(full[i]).epsilon(0.05).margin(0.02));
    differs = differs || mixed[i] != full[i];
  }
  CHECK(differs);
}
