// A steady-state gd::train::fit step allocates nothing: the loop, the model's forward and
// backward, the regularization penalties, the optimizer's update and the hooks' bookkeeping all
// reuse what the first steps allocated. Every operator new of this executable is counted
// (tests/support/counting_new.cpp); a hook samples the count after each step.
#include <catch2/catch.hpp>
#include <cstdint>
#include <vector>

#include <gradus/gradus.hpp>
#include <gradus/train.hpp>

#include "../support/counting_new.hpp"

namespace gd = gradus;
namespace nn = gradus::nn;

namespace {

// Records gradus_test::allocations() after every step.
struct AllocationProbe : gd::train::Hook {
  std::vector<long> after;
  void after_step(gd::train::Session&, const gd::train::StepResult&) override {
    after.push_back(gradus_test::allocations());
  }
};

// The allocations made by steps [from, to) of a run, as the probe saw them.
long allocations_between(const AllocationProbe& p, size_t from, size_t to) { return p.after.at(to - 1) - p.after.at(from - 1); }

}  // namespace

TEMPLATE_TEST_CASE("steady state: a fit step allocates nothing once warm", "[memory][fit]", gd::optim::SGD<float>,
                   gd::optim::Adam<float>) {
  gd::Rng rng(3);
  const int64_t n = 256, d = 20, k = 4;
  gd::train::Data<float, int64_t> train{gd::Tensor<float>::random_normal({n, d}, rng), gd::Tensor<int64_t>({n})};
  for (int64_t i = 0; i < n; ++i) train.y.data()[i] = int64_t(train.x.data()[i * d] > 0) + 2 * int64_t(train.x.data()[i * d + 1] > 0);
  nn::Sequential net(nn::Dense<float>({.in = d, .out = 16, .activation = nn::relu, .kernel_regularizer = nn::l2(1e-4)}, rng),
                     nn::Dense<float>({.in = 16, .out = k}, rng));
  TestType opt(net.parameters(), {});
  auto loss = [](const auto& y, const auto& logits) { return gd::losses::sparse_softmax_cross_entropy_with_logits(y, logits); };
  AllocationProbe probe;
  // 8 steps per epoch, 3 epochs: the epoch boundaries (new permutation, History entry) may
  // allocate; the steps inside the second and third epochs must not.
  const gd::train::History h = gd::train::fit(net, opt, loss, train, {.epochs = 3, .batch_size = 32, .hooks = {&probe}});
  REQUIRE(probe.after.size() == 24);
  CHECK(allocations_between(probe, 10, 16) == 0);
  CHECK(allocations_between(probe, 18, 24) == 0);
  CHECK(h.epochs.back().loss < h.epochs.front().loss);  // it is really training
}
