// tests/dist/programs/mlp_throughput.cpp — training throughput of the MLP (784→500→10, relu,
// batch 128 per rank, Adam) or, with `cnn` as the fourth argument, of the LeNet CNN of
// benchmarks/steps.hpp (5×5×32 VALID, pool, 5×5×64 VALID, pool, 1024→500→10) under gd::dist, for
// the scaling numbers of docs/distributed.md:
//   OMP_NUM_THREADS=1 mpirun --allow-run-as-root --oversubscribe -np 2 dist_mlp_throughput [steps] [overlap 0|1] [bucket_mb] [mlp|cnn]
//   OMP_NUM_THREADS=2 mpirun --allow-run-as-root -np 1 dist_mlp_throughput
// Prints on rank 0: ranks, steps, seconds, examples per second (all ranks together).
#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <string>

#include "gradus/dist.hpp"
#include "gradus/losses.hpp"
#include "gradus/nn.hpp"
#include "gradus/optim.hpp"

namespace gd = gradus;

namespace {

namespace nn = gd::nn;

/// Times `steps` training steps of `net` on batches of 128 random inputs of `shape`.
template <class Net>
int run(gd::dist::Context& ctx, Net& net, gd::Shape shape, int steps, bool overlap, double bucket_mb, const char* name,
        gd::Rng& rng) {
  const int64_t batch = shape[0];
  gd::dist::broadcast_parameters(net);
  gd::optim::Adam<float> adam(net.parameters(), {.lr = 1e-3});
  gd::dist::DistributedOptimizer<float> opt(adam, {.bucket_mb = bucket_mb, .overlap = overlap});
  gd::Tensor<float> x = gd::Tensor<float>::empty(shape);
  gd::Tensor<int64_t> y = gd::Tensor<int64_t>::empty({batch});
  for (int64_t i = 0; i < x.size(); ++i) x.data()[i] = float(rng.uniform());
  for (int64_t i = 0; i < batch; ++i) y.data()[i] = (i * 7 + ctx.rank()) % 10;
  auto step = [&] {
    gd::Var<float> logits = net(gd::Var<float>::constant(x));
    opt.minimize(gd::losses::sparse_softmax_cross_entropy_with_logits(y, logits));
  };
  for (int i = 0; i < 5; ++i) step();  // warm-up: caches, buckets
  ctx.barrier();
  const auto t0 = std::chrono::steady_clock::now();
  for (int i = 0; i < steps; ++i) step();
  ctx.barrier();
  const double s = std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
  if (ctx.rank() == 0)
    std::printf("%s ranks %d steps %d seconds %.3f examples/s %.0f\n", name, ctx.size(), steps, s,
                double(steps) * double(batch) * ctx.size() / s);
  return 0;
}

}  // namespace

int main(int argc, char** argv) {
  gd::dist::Context ctx(argc, argv);
  const int steps = argc > 1 ? std::atoi(argv[1]) : 50;
  const bool overlap = argc > 2 ? std::atoi(argv[2]) != 0 : true;
  const double bucket_mb = argc > 3 ? std::atof(argv[3]) : 25.0;
  const bool cnn = argc > 4 && std::string(argv[4]) == "cnn";
  gd::Rng rng(1 + uint64_t(ctx.rank()));
  if (cnn) {
    nn::Sequential net(nn::Conv2d<float>({.in = 1, .filters = 32, .kernel_size = {5, 5}, .padding = gd::Padding::valid,
                                          .activation = nn::relu}, rng),
                       nn::MaxPool2d{},
                       nn::Conv2d<float>({.in = 32, .filters = 64, .kernel_size = {5, 5}, .padding = gd::Padding::valid,
                                          .activation = nn::relu}, rng),
                       nn::MaxPool2d{}, nn::Flatten{},
                       nn::Dense<float>({.in = 1024, .out = 500, .activation = nn::relu}, rng),
                       nn::Dense<float>({.in = 500, .out = 10}, rng));
    return run(ctx, net, {128, 28, 28, 1}, steps, overlap, bucket_mb, "cnn", rng);
  }
  nn::Sequential net(nn::Dense<float>({.in = 784, .out = 500, .activation = nn::relu}, rng),
                     nn::Dense<float>({.in = 500, .out = 10}, rng));
  return run(ctx, net, {128, 784}, steps, overlap, bucket_mb, "mlp", rng);
}
