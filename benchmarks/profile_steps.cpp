// benchmarks/profile_steps.cpp — where a training step of steps.hpp or seq_steps.hpp spends its
// time: runs a few warm-up steps of the MLP, CNN, char-LSTM, word-LM or translation model, then
// profiles `steps` more under gd::profile and prints the op table (self time, GFLOP/s). The step is
// the one bench_{mlp,cnn,lstm,word_lm,translate}_step and scripts/cpu-peer time, so the tables
// explain their rows.
//
//   bench_profile_steps [mlp|cnn|lstm|word_lm|translate] [steps=10] [threads=1]
#include <omp.h>

#include <iostream>
#include <string>

#include <gradus/profile.hpp>

#include "seq_steps.hpp"  // and steps.hpp

namespace {

/// Runs step(i) for i = 0, 1, 2 to warm up, then for i < n under the profiler, and prints the
/// op table and the rates of the profiled steps.
template <class Step>
int profile(int n, Step&& step) {
  namespace pf = gradus::profile;
  for (int i = 0; i < 3; ++i) step(size_t(i));
  pf::Profiler prof;
  prof.start();
  for (int i = 0; i < n; ++i) {
    pf::Scope scope("step");
    step(size_t(i));
  }
  prof.stop();
  const auto events = prof.events();
  const pf::StepSummary sum = pf::summarize(events);
  std::cout << pf::format_report(pf::report(events, {.group_by = pf::GroupBy::op, .top = 15}), "ops (self time)")
            << n << " steps: " << sum.wall_ns / 1e6 / n << " ms a step, " << sum.flops / 1e9 / n << " GFLOP a step, "
            << (sum.wall_ns > 0 ? sum.flops / double(sum.wall_ns) : 0.0) << " GFLOP/s\n";
  return 0;
}

/// A model of steps.hpp over its batches, cycled.
template <class Model>
int profile_model(const steps::Batches& batches, int n) {
  Model m;
  return profile(n, [&](size_t i) { (void)m.step(batches.x[i % batches.x.size()], batches.y[i % batches.y.size()]); });
}

}  // namespace

int main(int argc, char** argv) {
  const std::string model = argc > 1 ? argv[1] : "lstm";
  const int n = argc > 2 ? std::stoi(argv[2]) : 10;
  const int threads = argc > 3 ? std::stoi(argv[3]) : 1;
  omp_set_num_threads(threads);
  std::cout << model << ", " << n << " steps, " << threads << " thread(s)\n";
  if (model == "mlp") return profile_model<steps::GradusMlp>(steps::image_batches(), n);
  if (model == "cnn") return profile_model<steps::GradusCnn>(steps::image_batches(), n);
  if (model == "lstm") return profile_model<steps::GradusLstm>(steps::sequence_batches(), n);
  if (model == "word_lm") {
    seq_steps::GradusWordLm m;
    const seq_steps::Windows& w = seq_steps::windows();
    return profile(n, [&](size_t i) { (void)m.step(w.x[i % w.x.size()], w.y[i % w.y.size()]); });
  }
  if (model == "translate") {
    seq_steps::GradusTranslate m;
    const seq_steps::Pairs& p = seq_steps::pairs();
    return profile(n, [&](size_t i) {
      const size_t j = i % p.src.size();
      (void)m.step(p.src[j], p.dec_in[j], p.dec_out[j]);
    });
  }
  std::cerr << "bench_profile_steps: unknown model '" << model << "' (expected mlp, cnn, lstm, word_lm or translate)\n";
  return 2;
}
