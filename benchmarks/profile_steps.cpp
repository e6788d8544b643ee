// benchmarks/profile_steps.cpp — where a training step of steps.hpp spends its time: runs a few
// warm-up steps of the MLP, CNN or char-LSTM, then profiles `steps` more under gd::profile and
// prints the op and module tables (self time, GFLOP/s). The step is the one bench_{mlp,cnn,lstm}_step
// and bench_torch_steps time, so the tables explain their rows.
//
//   bench_profile_steps [mlp|cnn|lstm] [steps=10] [threads=1]
#include <omp.h>

#include <iostream>
#include <string>

#include <gradus/profile.hpp>

#include "steps.hpp"

namespace {

template <class Model>
int profile(const steps::Batches& batches, int n) {
  namespace pf = gradus::profile;
  Model m;
  for (size_t i = 0; i < 3; ++i) (void)m.step(batches.x[i % batches.x.size()], batches.y[i % batches.y.size()]);
  pf::Profiler prof;
  prof.start();
  for (int i = 0; i < n; ++i) {
    pf::Scope step("step");
    (void)m.step(batches.x[size_t(i) % batches.x.size()], batches.y[size_t(i) % batches.y.size()]);
  }
  prof.stop();
  const auto events = prof.events();
  const pf::StepSummary sum = pf::summarize(events);
  std::cout << pf::format_report(pf::report(events, {.group_by = pf::GroupBy::op, .top = 15}), "ops (self time)")
            << n << " steps: " << sum.wall_ns / 1e6 / n << " ms a step, " << sum.flops / 1e9 / n << " GFLOP a step, "
            << (sum.wall_ns > 0 ? sum.flops / double(sum.wall_ns) : 0.0) << " GFLOP/s\n";
  return 0;
}

}  // namespace

int main(int argc, char** argv) {
  const std::string model = argc > 1 ? argv[1] : "lstm";
  const int n = argc > 2 ? std::stoi(argv[2]) : 10;
  const int threads = argc > 3 ? std::stoi(argv[3]) : 1;
  omp_set_num_threads(threads);
  std::cout << model << ", " << n << " steps, " << threads << " thread(s)\n";
  if (model == "mlp") return profile<steps::GradusMlp>(steps::image_batches(), n);
  if (model == "cnn") return profile<steps::GradusCnn>(steps::image_batches(), n);
  if (model == "lstm") return profile<steps::GradusLstm>(steps::sequence_batches(), n);
  std::cerr << "bench_profile_steps: unknown model '" << model << "' (expected mlp, cnn or lstm)\n";
  return 2;
}
