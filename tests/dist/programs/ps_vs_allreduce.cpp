// tests/dist/programs/ps_vs_allreduce.cpp — one model trained two ways, for the comparison of
// docs/distributed.md: synchronous data parallelism (DistributedOptimizer's all-reduce, every
// rank a worker) and a parameter-server job (rank 0 serves with Adam, the others are workers,
// AsyncOptimizer). The model is the MLP of dist_mlp_throughput (784→500→10, relu, Adam 1e-3,
// batch 128 per worker) on a synthetic task: inputs uniform in [0, 1), labels the argmax of a
// fixed random linear teacher, 8192 examples, each worker its own half.
//   OMP_NUM_THREADS=1 mpirun --allow-run-as-root --oversubscribe -np 2 dist_ps_vs_allreduce sync [steps]
//   OMP_NUM_THREADS=1 mpirun --allow-run-as-root --oversubscribe -np 3 dist_ps_vs_allreduce ps [steps] [max_staleness]
// Prints on rank 0: the mean training loss of the workers over each window of 25 steps (a step:
// one batch on every worker), then steps, seconds, worker steps per second, optimizer updates per
// second, examples per second, and the loss on all 8192 examples at the end.
#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <string>
#include <vector>

#include "gradus/dist.hpp"
#include "gradus/losses.hpp"
#include "gradus/nn.hpp"
#include "gradus/optim.hpp"

namespace gd = gradus;

namespace {

namespace nn = gd::nn;

constexpr int64_t kExamples = 8192, kBatch = 128, kInputs = 784, kClasses = 10, kWindow = 25;

struct Task {
  gd::Tensor<float> x;
  gd::Tensor<int64_t> y;
};

// The same on every rank: a fixed generator.
Task make_task() {
  gd::Rng rng(42);
  Task t{gd::Tensor<float>::empty({kExamples, kInputs}), gd::Tensor<int64_t>::empty({kExamples})};
  for (int64_t i = 0; i < t.x.size(); ++i) t.x.data()[i] = float(rng.uniform());
  std::vector<float> teacher(size_t(kInputs * kClasses));
  for (auto& v : teacher) v = float(rng.uniform()) - 0.5f;
  for (int64_t i = 0; i < kExamples; ++i) {
    int64_t best = 0;
    float best_v = -1e30f;
    for (int64_t c = 0; c < kClasses; ++c) {
      float v = 0;
      for (int64_t j = 0; j < kInputs; ++j) v += t.x.data()[i * kInputs + j] * teacher[size_t(j * kClasses + c)];
      if (v > best_v) best_v = v, best = c;
    }
    t.y.data()[i] = best;
  }
  return t;
}

// Rows [first, first + kBatch) of the task, wrapping around the worker's half.
void batch_of(const Task& t, int worker, int workers, int64_t step, gd::Tensor<float>& x, gd::Tensor<int64_t>& y) {
  const int64_t part = kExamples / workers, batches = part / kBatch;
  const int64_t first = int64_t(worker) * part + (step % batches) * kBatch;
  std::copy(t.x.data() + first * kInputs, t.x.data() + (first + kBatch) * kInputs, x.data());
  std::copy(t.y.data() + first, t.y.data() + first + kBatch, y.data());
}

template <class Net>
float full_loss(Net& net, const Task& t) {
  gd::no_grad off;
  gd::Var<float> l = gd::losses::sparse_softmax_cross_entropy_with_logits(t.y, net(gd::Var<float>::constant(t.x)));
  return l.item();
}

}  // namespace

int main(int argc, char** argv) {
  gd::dist::Context ctx(argc, argv);
  return gd::dist::guard_main(ctx, [&] {
    const std::string mode = argc > 1 ? argv[1] : "sync";
    const int64_t steps = argc > 2 ? std::atoll(argv[2]) : 200;
    const int staleness = argc > 3 ? std::atoi(argv[3]) : -1;
    const bool ps = mode == "ps";
    if (!ps && mode != "sync") throw gd::value_error("ps_vs_allreduce: the mode is sync or ps, got " + mode);
    const Task task = make_task();
    gd::Rng rng(7);  // the same initial weights everywhere (the jobs also start every rank from rank 0's)
    nn::Sequential net(nn::Dense<float>({.in = kInputs, .out = 500, .activation = nn::relu}, rng),
                       nn::Dense<float>({.in = 500, .out = kClasses}, rng));
    const float initial = full_loss(net, task);
    const int64_t windows = (steps + kWindow - 1) / kWindow;
    std::vector<double> window_loss(size_t(windows), 0.0);
    gd::Tensor<float> x = gd::Tensor<float>::empty({kBatch, kInputs});
    gd::Tensor<int64_t> y = gd::Tensor<int64_t>::empty({kBatch});
    const gd::dist::AsyncOptions options{.num_servers = 1, .max_staleness = staleness};
    const int workers = ps ? ctx.size() - 1 : ctx.size();
    int64_t updates = 0;
    ctx.barrier();
    const auto t0 = std::chrono::steady_clock::now();
    const auto train = [&](auto& opt, int worker) {
      for (int64_t s = 0; s < steps; ++s) {
        batch_of(task, worker, workers, s, x, y);
        gd::Var<float> loss = gd::losses::sparse_softmax_cross_entropy_with_logits(y, net(gd::Var<float>::constant(x)));
        window_loss[size_t(s / kWindow)] += double(loss.item());
        opt.minimize(loss);
      }
    };
    if (ps && gd::dist::is_parameter_server(options)) {
      gd::optim::Adam<float> adam(net.parameters(), {.lr = 1e-3});
      updates = gd::dist::run_parameter_server(adam, options).updates;
    } else if (ps) {
      gd::dist::AsyncOptimizer<float> opt(net.parameters(), options);
      train(opt, opt.worker_index());
      opt.finish();
    } else {
      gd::dist::broadcast_parameters(net);
      gd::optim::Adam<float> adam(net.parameters(), {.lr = 1e-3});
      gd::dist::DistributedOptimizer<float> opt(adam);
      train(opt, ctx.rank());
      updates = steps;
    }
    ctx.barrier();
    const double secs = std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
    gd::Tensor<double> w = gd::Tensor<double>::from(window_loss, {windows});
    gd::dist::all_reduce_sum(w);  // the servers add zeros
    const float final_loss = full_loss(net, task);
    if (ctx.rank() == 0) {
      std::printf("%s%s ranks %d workers %d\n", mode.c_str(),
                  ps ? (" max_staleness " + std::to_string(staleness)).c_str() : "", ctx.size(), workers);
      std::printf("mean training loss by window of %lld steps:", (long long)kWindow);
      for (int64_t k = 0; k < windows; ++k) {
        const int64_t n = std::min(kWindow, steps - k * kWindow);
        std::printf(" %.4f", w.data()[k] / double(n * workers));
      }
      std::printf("\nsteps %lld seconds %.2f steps/s %.1f updates/s %.1f examples/s %.0f loss %.4f -> %.4f\n",
                  (long long)steps, secs, double(steps) / secs, double(updates) / secs,
                  double(steps * kBatch * workers) / secs, initial, final_loss);
    }
    return 0;
  });
}
