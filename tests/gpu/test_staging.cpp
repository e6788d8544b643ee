// Copies to the GPU that do not stop the host (backend::Stager, Dataset::prefetch_to): the values
// arrive, the host's buffers may be reused at once, and the GPU's later work waits for the copy.
// On the emulated device a copy lands only once something waits for it, so a missing wait reads
// NaN here.
#include <catch2/catch.hpp>

#include <cstring>
#include <string>
#include <vector>

#include "gradus/backend/cuda/device.hpp"
#include "gradus/backend/staging.hpp"
#include "gradus/data.hpp"
#include "gradus/gradus.hpp"
#include "gradus/losses.hpp"
#include "gradus/nn.hpp"
#include "gradus/optim.hpp"
#include "gradus/train.hpp"

#include "../support/gpu.hpp"

namespace gd = gradus;

namespace staging_test {

gd::Tensor<float> ramp(const gd::Shape& s, float from) {
  gd::Tensor<float> t = gd::Tensor<float>::empty(s);
  for (int64_t i = 0; i < t.size(); ++i) t.data()[i] = from + 0.5f * float(i);
  return t;
}

}  // namespace staging_test

using namespace staging_test;

TEST_CASE("Stager: the copy arrives, and the host buffer is free once start returns", "[gpu][staging]") {
  if (!gradus_test::gpu_available()) return;
  const gd::Device dev = gd::cuda(0);
  auto stager = gd::backend::make_stager(dev, 2);
  // more copies than slots: each slot's pinned buffer is reused after its copy ran
  std::vector<gd::Tensor<float>> on_device;
  std::vector<uint64_t> tickets;
  gd::Tensor<float> host = gd::Tensor<float>::empty({300});
  gd::Tensor<int64_t> labels = gd::Tensor<int64_t>::empty({7});
  std::vector<gd::Tensor<int64_t>> label_copies;
  for (int k = 0; k < 6; ++k) {
    for (int64_t i = 0; i < host.size(); ++i) host.data()[i] = float(k * 1000 + i);
    for (int64_t i = 0; i < labels.size(); ++i) labels.data()[i] = k * 10 + i;
    gd::Tensor<float> d = gd::Tensor<float>::empty(host.shape(), dev);
    gd::Tensor<int64_t> l = gd::Tensor<int64_t>::empty(labels.shape(), dev);
    const gd::backend::StagedPiece pieces[] = {{d.device_data(), host.data(), 300 * sizeof(float)},
                                               {l.device_data(), labels.data(), 7 * sizeof(int64_t)}};
    tickets.push_back(stager->start(pieces));
    std::memset(host.data(), 0xff, 300 * sizeof(float));  // the host buffer is reused at once
    on_device.push_back(d);
    label_copies.push_back(l);
  }
  CHECK(tickets == std::vector<uint64_t>{1, 2, 3, 4, 5, 6});
  for (int k = 0; k < 6; ++k) {
    stager->ready(tickets[size_t(k)]);
    const gd::Tensor<float> back = gd::eval(on_device[size_t(k)] * 1.f).to(gd::cpu);  // a kernel reads it
    const gd::Tensor<int64_t> lb = label_copies[size_t(k)].to(gd::cpu);
    int64_t wrong = 0;
    for (int64_t i = 0; i < back.size(); ++i) wrong += back.data()[i] != float(k * 1000 + i);
    for (int64_t i = 0; i < lb.size(); ++i) wrong += lb.data()[i] != k * 10 + i;
    CHECK(wrong == 0);
  }
  CHECK_THROWS_AS(stager->ready(99), gd::value_error);
}

TEST_CASE("Dataset::prefetch_to: tensor fields arrive on the GPU with their values, strings stay", "[gpu][staging]") {
  if (!gradus_test::gpu_available()) return;
  const gd::Device dev = gd::cuda(0);
  // element k: x = ramp from k [3, 4], y = {k, k}, name "e<k>"
  gd::Tensor<float> xs_all = gd::Tensor<float>::empty({9, 3, 4});
  gd::Tensor<int64_t> ys_all = gd::Tensor<int64_t>::empty({9, 2});
  gd::data::Strings names;
  for (int k = 0; k < 9; ++k) {
    std::memcpy(xs_all.data() + 12 * k, ramp({3, 4}, float(k)).data(), 12 * sizeof(float));
    ys_all.data()[2 * k] = ys_all.data()[2 * k + 1] = k;
    names.push_back("e" + std::to_string(k));
  }
  const gd::data::Example columns{{"x", xs_all}, {"y", ys_all}, {"name", names}};
  auto ds = gd::data::Dataset::from_tensor_slices(columns).prefetch_to(dev, 2);
  int k = 0;
  for (const gd::data::Example& e : ds) {
    INFO("element " << k);
    const auto& x = e.tensor<float>("x");
    const auto& y = e.tensor<int64_t>("y");
    CHECK(x.device() == dev);
    CHECK(y.device() == dev);
    CHECK(e.string("name") == "e" + std::to_string(k));
    const gd::Tensor<float> xs = gd::eval(x + 0.f).to(gd::cpu);
    const gd::Tensor<float> want = ramp({3, 4}, float(k));
    CHECK(std::memcmp(xs.data(), want.data(), 12 * sizeof(float)) == 0);
    const gd::Tensor<int64_t> ys = y.to(gd::cpu);
    CHECK((ys.data()[0] == k && ys.data()[1] == k));
    ++k;
  }
  CHECK(k == 9);
  // to the CPU: device fields come back, host fields pass through
  int n = 0;
  auto back = gd::data::Dataset::from_tensor_slices(columns).prefetch_to(dev, 1).prefetch_to(gd::cpu, 3);
  for (const gd::data::Example& e : back) {
    CHECK(e.tensor<float>("x").in_host_memory());
    CHECK(e.tensor<float>("x")(1, 2) == float(n) + 3.f);
    ++n;
  }
  CHECK(n == 9);
  CHECK_THROWS_AS(gd::data::Dataset::from_tensor_slices(columns).prefetch_to(dev, 0), gd::value_error);
}

TEST_CASE("fit on a Dataset with prefetch_to(cuda) = fit on host batches", "[gpu][staging]") {
  if (!gradus_test::gpu_available()) return;
  const gd::Device dev = gd::cuda(0);
  gd::Rng data_rng(5);
  const gd::Tensor<float> x = gd::Tensor<float>::random_uniform({96, 6}, data_rng, -1, 1);
  const gd::Tensor<float> y = gd::Tensor<float>::random_uniform({96, 2}, data_rng, -1, 1);
  const auto batches = gd::data::Dataset::from_tensor_slices(x, y).batch(16);
  const auto mse = [](const gd::Tensor<float>& t, const gd::Var<float>& p) { return gd::losses::mean_squared_error(t, p); };
  auto run = [&](const gd::data::Dataset& train) {
    gd::Rng rng(3);
    gd::nn::Sequential net(gd::nn::Dense<float>({.in = 6, .out = 8, .activation = gd::nn::tanh}, rng),
                           gd::nn::Dense<float>({.in = 8, .out = 2}, rng));
    net.to(dev);
    gd::optim::Adam<float> opt(net.parameters(), {.lr = 0.02});
    const auto h = gd::train::fit<float>(net, opt, mse, train, {.epochs = 3, .device = dev});
    return h.epochs;
  };
  const auto plain = run(batches);
  const auto staged = run(batches.prefetch_to(dev, 2));
  REQUIRE(plain.size() == 3);
  REQUIRE(staged.size() == 3);
  for (size_t e = 0; e < 3; ++e) CHECK(staged[e].loss == plain[e].loss);  // the same batches, the same kernels
}
