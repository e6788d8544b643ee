// tests/dist/test_device.cpp — gd::dist on tensors in GPU memory, through the device's collective
// library (NCCL): the collectives against values computed by hand, DistributedOptimizer and fit on
// 2 ranks against one process on the concatenated batch (on the CPU), and the errors of ranks that
// disagree on where their tensors are. Hidden ([.]) from the plain `dist` run: ctest runs these as
// dist.gpu-emu (2 ranks on the emulated device, its NCCL through shared memory) and dist.gpu (a
// real GPU per rank; "no GPU: ..." and skipped where there is none).
#include <catch2/catch.hpp>

#include <cmath>
#include <cstring>
#include <string>
#include <vector>

#include "gradus/dist.hpp"
#include "gradus/dist/collective.hpp"
#include "gradus/losses.hpp"
#include "gradus/nn.hpp"
#include "gradus/optim.hpp"
#include "gradus/train.hpp"
#include "models.hpp"

#include "../support/gpu.hpp"

namespace gd = gradus;

namespace dist_device_test {

// This rank's GPU, or nullopt after printing "no GPU: <why>" (NCCL wants a GPU per rank: the
// emulated device, which is not NCCL, takes several).
std::optional<gd::Device> rank_gpu() {
  if (!gradus_test::gpu_available()) return std::nullopt;
  const bool emulated = gd::cuda(0).name().find("emulated") != std::string::npos;
  if (!emulated && gd::cuda::device_count() < gd::dist::size()) {
    WARN("no GPU: NCCL needs one GPU per rank; " << gd::cuda::device_count() << " GPU(s) for " << gd::dist::size()
                                                  << " ranks");
    return std::nullopt;
  }
  return gd::Device(gd::cuda(emulated ? 0 : gd::dist::rank() % gd::cuda::device_count()));
}

// Exact in float: quarters below 250, plus the rank.
float value(int rank, int64_t i) { return float(i % 1000) * 0.25f + float(rank); }

template <class T>
gd::Tensor<T> filled(int rank, int64_t n) {
  gd::Tensor<T> t = gd::Tensor<T>::empty({n});
  for (int64_t i = 0; i < n; ++i) t.data()[i] = T(value(rank, i) * (std::is_integral_v<T> ? 4 : 1));
  return t;
}

using dist_models::Mlp;
using dist_models::Net;
using dist_models::rows;

std::vector<gd::Tensor<float>> host_values(const std::vector<gd::Var<float>>& params) {
  std::vector<gd::Tensor<float>> out;
  for (const auto& p : params) out.push_back(p.value().to(gd::cpu).clone());
  return out;
}

bool same_bits_on_every_rank(const std::vector<gd::Tensor<float>>& ts) {
  int bad = 0;
  for (const auto& t : ts) {
    gd::Tensor<float> c = t.clone();
    gd::dist::broadcast(c, 0);
    bad += std::memcmp(c.data(), t.data(), size_t(t.size()) * sizeof(float)) != 0;
  }
  return bad == 0;
}

void require_close(const std::vector<gd::Tensor<float>>& got, const std::vector<gd::Tensor<float>>& want) {
  REQUIRE(got.size() == want.size());
  for (size_t k = 0; k < want.size(); ++k)
    for (int64_t i = 0; i < want[k].size(); ++i) {
      INFO("parameter " << k << " element " << i);
      REQUIRE(got[k].data()[i] == Approx(want[k].data()[i]).epsilon(1e-5).margin(1e-6));
    }
}

}  // namespace dist_device_test

using namespace dist_device_test;

TEST_CASE("dist on a GPU: all_reduce_sum, all_reduce_mean and broadcast stay in device memory", "[.][gpu][dist]") {
  const auto gpu = rank_gpu();
  if (!gpu) return;
  const int r = gd::dist::rank(), ranks = gd::dist::size();
  // 300001 floats: more than the emulated library's 1 MiB window, so it goes in rounds
  for (int64_t n : {int64_t(5), int64_t(300001)}) {
    INFO(n << " elements");
    gd::Tensor<float> f = filled<float>(r, n).to(*gpu);
    gd::Tensor<float> kept = f;  // a second handle: the reduction must not write through it
    gd::dist::all_reduce_sum(f);
    CHECK(f.device() == *gpu);
    gd::Tensor<float> got = f.to(gd::cpu), untouched = kept.to(gd::cpu);
    int64_t wrong = 0, changed = 0;
    for (int64_t i = 0; i < n; ++i) {
      float want = 0;
      for (int q = 0; q < ranks; ++q) want += value(q, i);
      wrong += got.data()[i] != want;
      changed += untouched.data()[i] != value(r, i);
    }
    CHECK(wrong == 0);
    CHECK(changed == 0);

    gd::Tensor<double> d = filled<double>(r, n).to(*gpu);
    gd::dist::all_reduce_mean(d);
    gd::Tensor<double> mean = d.to(gd::cpu);
    wrong = 0;
    for (int64_t i = 0; i < n; ++i) {
      double want = 0;
      for (int q = 0; q < ranks; ++q) want += double(value(q, i));
      wrong += mean.data()[i] != want / ranks;
    }
    CHECK(wrong == 0);

    gd::Tensor<int64_t> k = filled<int64_t>(r, n).to(*gpu);
    gd::dist::all_reduce_sum(k);
    gd::Tensor<int64_t> ks = k.to(gd::cpu);
    wrong = 0;
    for (int64_t i = 0; i < n; ++i) {
      int64_t want = 0;
      for (int q = 0; q < ranks; ++q) want += int64_t(value(q, i) * 4);
      wrong += ks.data()[i] != want;
    }
    CHECK(wrong == 0);

    const int root = ranks - 1;
    gd::Tensor<float> b = filled<float>(r, n).to(*gpu);
    gd::dist::broadcast(b, root);
    gd::Tensor<float> bs = b.to(gd::cpu);
    wrong = 0;
    for (int64_t i = 0; i < n; ++i) wrong += bs.data()[i] != value(root, i);
    CHECK(wrong == 0);
  }
}

TEST_CASE("dist on a GPU: ranks that disagree on where the tensor is all throw", "[.][gpu][dist]") {
  const auto gpu = rank_gpu();
  if (!gpu) return;
  const int r = gd::dist::rank();
  gd::Tensor<float> t = filled<float>(r, 7);
  if (r == 1) t = t.to(*gpu);
  const auto mixed = Catch::Contains("some ranks hold the tensor in host memory and others on a device");
  CHECK_THROWS_AS(gd::dist::all_reduce_sum(t), gd::device_error);
  CHECK_THROWS_WITH(gd::dist::all_reduce_sum(t), mixed);
  CHECK_THROWS_AS(gd::dist::broadcast(t, 0), gd::device_error);
  CHECK_THROWS_WITH(gd::dist::broadcast(t, 0), mixed);
  // sizes are checked as on the host
  gd::Tensor<float> u = filled<float>(r, 3 + r).to(*gpu);
  CHECK_THROWS_AS(gd::dist::all_reduce_mean(u), gd::shape_error);
}

TEST_CASE("dist on a GPU: DistributedOptimizer on 2 ranks = one process on the concatenated batch",
          "[.][gpu][dist][optimizer]") {
  const auto gpu = rank_gpu();
  if (!gpu) return;
  REQUIRE(gd::dist::size() == 2);
  const int r = gd::dist::rank();
  constexpr int kSteps = 6;
  constexpr int64_t kPerRank = 4;
  // one process on the CPU, the 8 rows, plain Adam, rank 0's initial weights
  Net ref(1000);
  gd::optim::Adam<float> ref_adam(ref.parameters(), {.lr = 0.05});
  for (int s = 0; s < kSteps; ++s)
    ref_adam.minimize(gd::losses::mean_squared_error(rows(3, s, 0, 2 * kPerRank, 2.f), ref(rows(5, s, 0, 2 * kPerRank, 0.f))));
  const auto want = host_values(ref.parameters());

  for (bool overlap : {true, false}) {
    INFO("overlap " << overlap);
    Net net(1000 + uint64_t(r));  // different on each rank until the broadcast
    net.to(*gpu);
    gd::dist::broadcast_parameters(net.d1);  // on the device: through NCCL
    gd::dist::broadcast_parameters(net.d2);
    gd::optim::Adam<float> adam(net.parameters(), {.lr = 0.05});
    // ~42 bytes a bucket: d2's kernel and bias, d1's bias, d1's kernel
    gd::dist::DistributedOptimizer<float> opt(adam, {.bucket_mb = 4e-5, .overlap = overlap});
    for (int s = 0; s < kSteps; ++s) {
      gd::Tensor<float> x = rows(5, s, r * kPerRank, kPerRank, 0.f).to(*gpu);
      gd::Tensor<float> y = rows(3, s, r * kPerRank, kPerRank, 2.f).to(*gpu);
      opt.minimize(gd::losses::mean_squared_error(y, net(x)));
      REQUIRE(opt.last_starts().size() == 3);
      CHECK(opt.last_starts()[0].during_backward == overlap);
    }
    CHECK(opt.buckets() == std::vector<std::vector<size_t>>{{3, 2}, {1}, {0}});
    for (auto p : net.parameters()) {
      CHECK(p.value().device() == *gpu);
      CHECK(p.grad().device() == *gpu);
    }
    const auto got = host_values(net.parameters());
    CHECK(same_bits_on_every_rank(got));
    require_close(got, want);
    CHECK(std::memcmp(got[0].data(), host_values(Net(1000).parameters())[0].data(), sizeof(float) * 16) != 0);
  }
}

TEST_CASE("dist on a GPU: fit with .device and dist::collective() = one process on the concatenated batch",
          "[.][gpu][dist][fit]") {
  const auto gpu = rank_gpu();
  if (!gpu) return;
  REQUIRE(gd::dist::size() == 2);
  const int r = gd::dist::rank();
  const auto mse = [](const gd::Tensor<float>& y, const gd::Var<float>& p) {
    return gd::losses::mean_squared_error(y, p);
  };
  gd::Tensor<float> x = rows(5, 0, 0, 24, 0.f), y = rows(3, 0, 0, 24, 1.f);
  const gd::train::Data<float, float> train{x, y};

  Mlp net(1000 + uint64_t(r));
  net.to(*gpu);
  gd::optim::Adam<float> adam(net.parameters(), {.lr = 0.05});
  gd::train::fit(net, adam, mse, train,
                 {.epochs = 2, .batch_size = 4, .seed = 3, .device = *gpu, .collective = gd::dist::collective()});
  std::vector<gd::Tensor<float>> got;
  for (auto& [name, v] : net.named_parameters()) {
    CHECK(v.value().device() == *gpu);
    got.push_back(v.value().to(gd::cpu).clone());
  }
  CHECK(same_bits_on_every_rank(got));

  Mlp ref(1000);
  gd::optim::Adam<float> ref_adam(ref.parameters(), {.lr = 0.05});
  gd::train::fit(ref, ref_adam, mse, train, {.epochs = 2, .batch_size = 8, .seed = 3});
  std::vector<gd::Tensor<float>> want;
  for (auto& [name, v] : ref.named_parameters()) want.push_back(v.value().clone());
  require_close(got, want);
}
