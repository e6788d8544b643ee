// benchmarks/profile_overhead.cpp — what the profiler hooks cost when no profiler runs: the MLP
// training step of mlp_step.cpp (784-500(ReLU)-10, batch 128, SGD) built twice from
// profile_overhead_step.cpp, once as the library is (every op's hook: one relaxed atomic load
// and a branch) and once with -DGRADUS_NO_PROFILER (no hooks at all), each in a shared library
// of its own so the two builds of the same inline headers never mix, and the hooks build with a
// Profiler recording. Registers, for 1 and 2 threads (and every core on a machine of more), the
// three steps one after the other,
//   profile_overhead/hooks/threads:N   profile_overhead/nohooks/threads:N   profile_overhead/profiled/threads:N
// and prints after the runs, for each thread count, hooks / nohooks and profiled / nohooks of the wall-clock times
// (medians when run with --benchmark_repetitions). Refuses to time anything unless the first
// three losses of the two builds agree. This file includes no gradus header: the steps live in
// the libraries.
//   build-bench/benchmarks/bench_profile_overhead --benchmark_repetitions=5
//       --benchmark_enable_random_interleaving=true        (one command line)
#include <benchmark/benchmark.h>
#include <omp.h>

#include <algorithm>
#include <cmath>
#include <cstdint>
#include <cstdio>
#include <exception>
#include <map>
#include <string>
#include <utility>
#include <vector>

float run_mlp_step_hooks(int64_t n);    // profile_overhead_step.cpp, hooks compiled in
float run_mlp_step_nohooks(int64_t n);  // profile_overhead_step.cpp, -DGRADUS_NO_PROFILER
float run_mlp_step_profiled(int64_t n);  // the hooks build with a Profiler recording

namespace {

// The first three steps of both builds, one thread: their losses must agree (the same model
// from the same seed on the same batches; only the hooks differ).
bool same_losses() try {
  omp_set_num_threads(1);
  for (int i = 0; i < 3; ++i) {
    const float a = run_mlp_step_hooks(1), b = run_mlp_step_nohooks(1);
    if (!(std::abs(a - b) <= 1e-5f * std::max(1.f, std::abs(b)))) {
      std::fprintf(stderr, "profile_overhead: step %d: loss %.8g with the hooks, %.8g without\n", i + 1, double(a),
                   double(b));
      return false;
    }
  }
  return true;
} catch (const std::exception& e) {
  std::fprintf(stderr, "profile_overhead: %s\n", e.what());
  return false;
}

template <float (*Step)(int64_t)>
void BM_step(benchmark::State& state) {
  omp_set_num_threads(int(state.range(0)));
  for (auto _ : state) benchmark::DoNotOptimize(Step(1));
  state.SetItemsProcessed(int64_t(state.iterations()) * 128);  // examples (steps::kBatch)
}

// The console output as usual, and the wall-clock time of every run kept by name: the median
// when repetitions are asked for, else the single run's.
class RatioReporter : public benchmark::ConsoleReporter {
 public:
  void ReportRuns(const std::vector<Run>& runs) override {
    ConsoleReporter::ReportRuns(runs);
    for (const Run& r : runs) {
      if (r.iterations == 0) continue;  // skipped with an error
      const bool median = r.run_type == Run::RT_Aggregate && r.aggregate_name == "median";
      if (r.run_type == Run::RT_Aggregate && !median) continue;
      std::string name = r.run_name.str();  // without the aggregate's suffix
      if (const auto at = name.rfind("/real_time"); at != std::string::npos) name.erase(at);
      if (median || !medians_.count(name)) (median ? medians_ : singles_)[name] = r.GetAdjustedRealTime();
    }
  }
  /// The time of `name`: its median, else its last single run; NaN when it did not run.
  double time(const std::string& name) const {
    if (auto it = medians_.find(name); it != medians_.end()) return it->second;
    if (auto it = singles_.find(name); it != singles_.end()) return it->second;
    return std::nan("");
  }

 private:
  std::map<std::string, double> medians_, singles_;
};

}  // namespace

int main(int argc, char** argv) {
  benchmark::Initialize(&argc, argv);
  if (benchmark::ReportUnrecognizedArguments(argc, argv)) return 1;
  if (!same_losses()) return 1;
  std::vector<int> threads = {1, 2};
  if (omp_get_num_procs() > 2) threads.push_back(omp_get_num_procs());
  for (int t : threads)  // interleaved: hooks then nohooks at each thread count
    for (auto [name, fn] : {std::pair{"profile_overhead/hooks", &BM_step<run_mlp_step_hooks>},
                            std::pair{"profile_overhead/nohooks", &BM_step<run_mlp_step_nohooks>},
                            std::pair{"profile_overhead/profiled", &BM_step<run_mlp_step_profiled>}})
      benchmark::RegisterBenchmark(name, fn)
          ->ArgName("threads")
          ->Arg(t)
          ->UseRealTime()
          ->Unit(benchmark::kMillisecond);
  RatioReporter reporter;
  benchmark::RunSpecifiedBenchmarks(&reporter);
  std::printf("\nwall-clock time per step: hooks (no profiler running), nohooks (GRADUS_NO_PROFILER), profiled\n");
  for (int t : threads) {
    const std::string suffix = "/threads:" + std::to_string(t);
    const double hooks = reporter.time("profile_overhead/hooks" + suffix),
                 none = reporter.time("profile_overhead/nohooks" + suffix),
                 on = reporter.time("profile_overhead/profiled" + suffix);
    if (std::isnan(hooks) || std::isnan(none)) continue;  // filtered out
    std::printf("threads:%-3d hooks %8.3f ms  nohooks %8.3f ms  hooks/nohooks %.4f  profiled %8.3f ms  profiled/nohooks %.4f\n",
                t, hooks, none, hooks / none, on, on / none);
  }
  benchmark::Shutdown();
  return 0;
}
