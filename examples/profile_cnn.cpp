// examples/profile_cnn.cpp — where the time of a CNN training step goes (gd::profile).
//
// The LeNet-style CNN of examples/cnn.cpp on real Fashion-MNIST batches of 128: one warm-up
// step, then three profiled steps, each inside a Scope "step". Prints the op table (self time,
// FLOPs, GFLOP/s, peak memory), the module-scope table and the parameter table, and writes into
// the output directory (default runs/profile_cnn):
//   trace.json                   the three steps as a Chrome trace (chrome://tracing or
//                                https://ui.perfetto.dev: open the file)
//   events.out.tfevents.*        the graph of one step and each step's per-node timings
//                                (`tensorboard --logdir runs/profile_cnn`, Graphs tab)
// Exits 1 when the ops' self times cover less than 90% of the profiled steps' wall time.
// Usage: profile_cnn [output_dir]
#include <chrono>
#include <cstdio>
#include <filesystem>
#include <iostream>
#include <string>

#include <gradus/data/fashion_mnist.hpp>
#include <gradus/gradus.hpp>
#include <gradus/losses.hpp>
#include <gradus/nn.hpp>
#include <gradus/optim.hpp>
#include <gradus/profile.hpp>
#include <gradus/summary.hpp>

namespace gd = gradus;
namespace nn = gradus::nn;
using Tensor = gd::Tensor<float>;

static int run(int argc, char** argv) {
  const std::filesystem::path out = argc > 1 ? argv[1] : "runs/profile_cnn";
  std::filesystem::create_directories(out);
  constexpr int64_t kBatch = 128;
  const auto data = gd::datasets::fashion_mnist();
  const Tensor images = gd::eval(data.train_images.reshape({-1, 28, 28, 1}) - 0.5f);

  gd::Rng rng(42);
  nn::Sequential net(
      nn::Conv2d<float>({.in = 1, .filters = 32, .kernel_size = {5, 5}, .padding = gd::Padding::same,
                         .activation = nn::relu}, rng),
      nn::MaxPool2d{},
      nn::Conv2d<float>({.in = 32, .filters = 64, .kernel_size = {5, 5}, .padding = gd::Padding::same,
                         .activation = nn::relu}, rng),
      nn::MaxPool2d{},
      nn::Flatten{},
      nn::Dense<float>({.in = 7 * 7 * 64, .out = 500, .activation = nn::relu}, rng),
      nn::Dense<float>({.in = 500, .out = 10}, rng));
  gd::optim::Adam opt(net.parameters(), {.lr = 1e-3});

  auto step = [&](int64_t i) {
    const Tensor x = gd::slice(images, {i * kBatch, 0, 0, 0}, {kBatch, 28, 28, 1});
    const gd::Tensor<int64_t> y = gd::slice(data.train_labels, {i * kBatch}, {kBatch});
    opt.zero_grad();
    auto loss = gd::losses::sparse_softmax_cross_entropy_with_logits(y, net(x));
    gd::backward(loss);
    opt.step();
    return loss.item();
  };
  step(0);  // warm-up: caches and lazy layers built outside the profile

  gd::profile::Profiler prof;
  prof.attach(net, "cnn");
  double wall_ns = 0;
  for (int64_t i = 1; i <= 3; ++i) {
    prof.start();
    const auto t0 = std::chrono::steady_clock::now();
    float loss;
    {
      gd::profile::Scope s("step");
      loss = step(i);
    }
    wall_ns += double(std::chrono::duration_cast<std::chrono::nanoseconds>(std::chrono::steady_clock::now() - t0).count());
    prof.stop();
    std::printf("step %lld: loss %.4f\n", static_cast<long long>(i), loss);
  }
  const auto events = prof.events();

  namespace pf = gd::profile;
  std::cout << '\n' << pf::format_report(pf::report(events, {.group_by = pf::GroupBy::op, .top = 15}), "ops, 3 steps (self time)")
            << '\n' << pf::format_report(pf::report(events, {.group_by = pf::GroupBy::scope, .nested_scopes = true}),
                                         "module scopes, 3 steps")
            << '\n' << pf::format_parameters(prof.parameters()) << '\n';

  pf::write_chrome_trace(out / "trace.json", events);
  {
    gd::summary::FileWriter writer(out);
    std::vector<pf::Event> first;  // the graph of one step
    for (const auto& e : events)
      if (first.empty() || e.start_ns < events.front().end_ns) first.push_back(e);
    writer.graph(pf::graph_def(first, prof.parameters()));
    writer.run_metadata("profiled_steps", 3, pf::step_stats(events));
  }
  std::printf("wrote %s and a TensorBoard run (graph, step stats) in %s\n", (out / "trace.json").c_str(), out.c_str());

  const pf::StepSummary sum = pf::summarize(events);
  double op_self = 0;
  for (const auto& e : events)
    if (e.kind != pf::EventKind::scope) op_self += double(e.self_ns());
  const double covered = op_self / wall_ns;
  std::printf("3 steps: %.1f ms wall, %.1f ms in ops (%.1f%%), %.2f GFLOP, %.1f GFLOP/s\n", wall_ns / 1e6,
              op_self / 1e6, 100 * covered, sum.flops / 1e9, sum.flops / wall_ns);
  if (covered < 0.9) {
    std::printf("FAIL: the ops account for less than 90%% of the wall time\n");
    return 1;
  }
  return 0;
}

int main(int argc, char** argv) { return gd::guard_main([&] { return run(argc, argv); }); }
