// benchmarks/translate_step.cpp — the gradus training step of examples/translate alone
// (seq_steps.hpp), for scripts/cpu-peer where LibTorch is not installed; torch_seq_steps.cpp times
// it beside LibTorch.
#include "seq_steps.hpp"

GRADUS_STEP_BENCH(seq_steps::BM_gradus_translate, "translate_step/gradus");

BENCHMARK_MAIN();
