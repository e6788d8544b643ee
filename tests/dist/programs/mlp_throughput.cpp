// tests/dist/programs/mlp_throughput.cpp — training throughput of the MLP (784→500→10, relu,
// batch 128 per rank, Adam) under gd::dist, for the README's scaling numbers:
//   OMP_NUM_THREADS=1 mpirun --allow-run-as-root --oversubscribe -np 2 dist_mlp_throughput [steps] [overlap 0|1] [bucket_mb]
//   OMP_NUM_THREADS=2 mpirun --allow-run-as-root -np 1 dist_mlp_throughput
// Prints on rank 0: ranks, steps, seconds, examples per second (all ranks together).
#include <chrono>
#include <cstdio>
#include <cstdlib>

#include "gradus/dist.hpp"
#include "gradus/losses.hpp"
#include "gradus/nn.hpp"
#include "gradus/optim.hpp"

namespace gd = gradus;

int main(int argc, char** argv) {
  gd::dist::Context ctx(argc, argv);
  const int steps = argc > 1 ? std::atoi(argv[1]) : 50;
  const bool overlap = argc > 2 ? std::atoi(argv[2]) != 0 : true;
  const double bucket_mb = argc > 3 ? std::atof(argv[3]) : 25.0;
  const int64_t batch = 128;
  gd::Rng rng(1 + uint64_t(ctx.rank()));
  gd::nn::Dense<float> d1({.in = 784, .out = 500, .activation = gd::nn::relu}, rng), d2({.in = 500, .out = 10}, rng);
  gd::dist::broadcast_parameters(d1);
  gd::dist::broadcast_parameters(d2);
  auto params = d1.parameters();
  for (auto& p : d2.parameters()) params.push_back(p);
  gd::optim::Adam<float> adam(params, {.lr = 1e-3});
  gd::dist::DistributedOptimizer<float> opt(adam, {.bucket_mb = bucket_mb, .overlap = overlap});
  gd::Tensor<float> x = gd::Tensor<float>::empty({batch, 784});
  gd::Tensor<int64_t> y = gd::Tensor<int64_t>::empty({batch});
  for (int64_t i = 0; i < x.size(); ++i) x.data()[i] = float(rng.uniform());
  for (int64_t i = 0; i < batch; ++i) y.data()[i] = (i * 7 + ctx.rank()) % 10;
  auto step = [&] {
    gd::Var<float> logits = d2(d1(gd::Var<float>::constant(x)));
    opt.minimize(gd::losses::sparse_softmax_cross_entropy_with_logits(y, logits));
  };
  for (int i = 0; i < 5; ++i) step();  // warm-up: caches, buckets
  ctx.barrier();
  const auto t0 = std::chrono::steady_clock::now();
  for (int i = 0; i < steps; ++i) step();
  ctx.barrier();
  const double s = std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
  if (ctx.rank() == 0)
    std::printf("ranks %d steps %d seconds %.3f examples/s %.0f\n", ctx.size(), steps, s,
                double(steps) * double(batch) * ctx.size() / s);
  return 0;
}
