// benchmarks/steps.hpp — the training steps of the layer benchmarks (mlp_step, cnn_step,
// lstm_step) as Google Benchmark functions, over the models and data of step_models.hpp.
// Threads: the benchmark argument, set with omp_set_num_threads (gradus' kernels and Eigen's
// GEMM read it).
#pragma once
#include <benchmark/benchmark.h>
#include <omp.h>

#include "host_state.hpp"
#include "step_models.hpp"

namespace steps {

/// Times model.step over `batches`, cycled, at the benchmark's thread count.
template <class Model>
void run_steps(benchmark::State& state, const Batches& batches, int64_t examples, gd::Precision precision = gd::fp32) {
  omp_set_num_threads(int(state.range(0)));
  const gd::autocast mixed(precision);  // bf16: every float product of the step in bfloat16
  Model m;
  size_t i = 0;
  const bench::RoundTrips trips(state, state.range(0));
  for (auto _ : state) {
    benchmark::DoNotOptimize(m.step(batches.x[i], batches.y[i]));
    i = (i + 1) % batches.x.size();
  }
  state.SetItemsProcessed(int64_t(state.iterations()) * examples);
}

inline void BM_gradus_mlp(benchmark::State& state) { run_steps<GradusMlp>(state, image_batches(), kBatch); }
inline void BM_gradus_cnn(benchmark::State& state) { run_steps<GradusCnn>(state, image_batches(), kBatch); }
/// The same steps under gd::autocast(gd::bf16).
inline void BM_gradus_mlp_bf16(benchmark::State& state) {
  run_steps<GradusMlp>(state, image_batches(), kBatch, gd::bf16);
}
inline void BM_gradus_cnn_bf16(benchmark::State& state) {
  run_steps<GradusCnn>(state, image_batches(), kBatch, gd::bf16);
}
inline void BM_gradus_lstm(benchmark::State& state) { run_steps<GradusLstm>(state, sequence_batches(), kSeqBatch); }

}  // namespace steps

namespace steps {
/// 1 and 2 threads, and every core where there are more than 2 (the device machine's CPU peer table).
inline void thread_counts(benchmark::internal::Benchmark* b) {
  b->Arg(1)->Arg(2);
  if (omp_get_num_procs() > 2) b->Arg(omp_get_num_procs());
}
}  // namespace steps

/// Registers `fn` as "<model>/<impl>/threads:1", ":2" and ":<cores>" on a machine of more than 2
/// cores (wall-clock time, as benchmarks/run reads them).
#define GRADUS_STEP_BENCH(fn, name) \
  BENCHMARK(fn)->Name(name)->ArgName("threads")->Apply(steps::thread_counts)->UseRealTime()->Unit(benchmark::kMillisecond)

