// benchmarks/optimizer_step.cpp — one optimizer update of the LeNet CNN's parameters (1.63 M
// floats in eight tensors; weights, gradients and state far larger than the caches), float:
//   adam/gradus  optim::Adam::step(): kernel::AdamUpdate, one pass over each parameter
//   adam/eigen   hand-written: the same update, one Eigen pass over each parameter in pieces of
//                1024 elements (OpenMP over the pieces at 2 threads)
//   sgd/gradus   optim::SGD::step(): one read of w and g and one write of w, the floor of any update
// threads = OpenMP threads for both.
#include <benchmark/benchmark.h>
#include <omp.h>

#include <gradus/core/eigen.hpp>  // Eigen/Core, included as gradus includes it
#include <algorithm>
#include <cmath>
#include <cstdint>
#include <vector>

#include <gradus/gradus.hpp>

namespace gd = gradus;

namespace {

constexpr double kLr = 1e-3, kBeta1 = 0.9, kBeta2 = 0.999, kEps = 1e-8;

/// The LeNet CNN's parameters (benchmarks/cnn_step.cpp), each with a gradient.
std::vector<gd::Var<float>> lenet_parameters() {
  gd::Rng rng(1);
  std::vector<gd::Var<float>> params;
  for (const gd::Shape& s : {gd::Shape{5, 5, 1, 32}, gd::Shape{32}, gd::Shape{5, 5, 32, 64}, gd::Shape{64},
                             gd::Shape{3136, 500}, gd::Shape{500}, gd::Shape{500, 10}, gd::Shape{10}})
    params.emplace_back(gd::Tensor<float>::random_normal(s, rng, 0, 0.1), true);
  for (const gd::Var<float>& p : params) gd::backward(gd::sum(gd::square(p)));  // .grad() = 2 w
  return params;
}

void set_threads(benchmark::State& state) { omp_set_num_threads(int(state.range(0))); }

void BM_adam_gradus(benchmark::State& state) {
  set_threads(state);
  const std::vector<gd::Var<float>> params = lenet_parameters();
  gd::optim::Adam<float> adam(params, {.lr = kLr, .beta1 = kBeta1, .beta2 = kBeta2, .epsilon = kEps});
  for (auto _ : state) adam.step();
}

void BM_adam_eigen(benchmark::State& state) {
  set_threads(state);
  using A = Eigen::Map<Eigen::ArrayXf>;
  using CA = Eigen::Map<const Eigen::ArrayXf>;
  std::vector<gd::Var<float>> params = lenet_parameters();
  std::vector<Eigen::ArrayXf> m, v;
  for (const gd::Var<float>& p : params) {
    m.push_back(Eigen::ArrayXf::Zero(p.size()));
    v.push_back(Eigen::ArrayXf::Zero(p.size()));
  }
  int64_t t = 0;
  for (auto _ : state) {
    ++t;
    const float alpha = float(kLr * std::sqrt(1 - std::pow(kBeta2, double(t))) / (1 - std::pow(kBeta1, double(t))));
    for (size_t k = 0; k < params.size(); ++k) {
      float* w = params[k].value().data();
      const float* g = params[k].grad().data();
      const int64_t n = params[k].size(), pieces = (n + 1023) / 1024;
#pragma omp parallel for schedule(static) if (n >= 65536)
      for (int64_t q = 0; q < pieces; ++q) {
        const int64_t i = q * 1024, len = std::min<int64_t>(1024, n - i);
        A W(w + i, len), M(m[k].data() + i, len), V(v[k].data() + i, len);
        const CA G(g + i, len);
        M = float(kBeta1) * M + float(1 - kBeta1) * G;
        V = float(kBeta2) * V + float(1 - kBeta2) * G.square();
        W = W - alpha * M / (V.sqrt() + float(kEps));
      }
    }
  }
}

void BM_sgd_gradus(benchmark::State& state) {
  set_threads(state);
  const std::vector<gd::Var<float>> params = lenet_parameters();
  gd::optim::SGD<float> sgd(params, {.lr = kLr});
  for (auto _ : state) sgd.step();
}

#define OPTIMIZER_BENCH(fn, label) \
  BENCHMARK(fn)->Name("optimizer_step/" label)->ArgName("threads")->Arg(1)->Arg(2)->UseRealTime()->Unit(benchmark::kMicrosecond)
OPTIMIZER_BENCH(BM_adam_gradus, "adam/gradus");
OPTIMIZER_BENCH(BM_adam_eigen, "adam/eigen");
OPTIMIZER_BENCH(BM_sgd_gradus, "sgd/gradus");

}  // namespace

BENCHMARK_MAIN();
