// benchmarks/translate_step.cpp — the gradus training step of examples/translate alone
// (seq_steps.hpp), for scripts/cpu-peer where LibTorch is not installed; torch_seq_steps.cpp times
// it beside LibTorch. translate_attention/gradus times the step's attention alone: the decoder's
// 12 calls of LuongAttention::attend (scores, softmax, context over the 10 encoder outputs) on
// fixed queries, keys and memory of the step's shapes, forward and the gradients of all three.
#include "seq_steps.hpp"

namespace {

void BM_translate_attention(benchmark::State& state) {
  namespace gd = gradus;
  namespace nn = gradus::nn;
  using seq_steps::kCharUnits, seq_steps::kDstLen, seq_steps::kPairBatch, seq_steps::kSrcLen;
  using V = gd::Var<float>;
  using T = gd::Tensor<float>;
  omp_set_num_threads(int(state.range(0)));
  gd::Rng rng(steps::kSeed);
  nn::LuongAttention<float> attention{{.units = kCharUnits, .memory_units = kCharUnits, .scale = true}, rng};
  const V memory(T::random_normal({kPairBatch, kSrcLen, kCharUnits}, rng, 0, 1));
  const V keys(T::random_normal({kPairBatch, kSrcLen, kCharUnits}, rng, 0, 1));
  std::vector<V> sources{memory, keys};
  for (int64_t t = 0; t < kDstLen; ++t) sources.push_back(V(T::random_normal({kPairBatch, kCharUnits}, rng, 0, 1)));
  for (auto _ : state) {
    V sum = V::constant(T::zeros({kPairBatch, kCharUnits}));
    for (int64_t t = 0; t < kDstLen; ++t) sum = gd::to_var(sum + attention.attend(sources[size_t(2 + t)], keys, memory).context);
    benchmark::DoNotOptimize(gd::gradients(gd::to_var(gd::sum(sum)), sources));
  }
}

}  // namespace

GRADUS_STEP_BENCH(seq_steps::BM_gradus_translate, "translate_step/gradus");
GRADUS_STEP_BENCH(BM_translate_attention, "translate_attention/gradus");

BENCHMARK_MAIN();
