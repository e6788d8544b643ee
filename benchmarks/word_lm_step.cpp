// benchmarks/word_lm_step.cpp — the gradus training step of examples/word_lm alone (seq_steps.hpp),
// for scripts/cpu-peer where LibTorch is not installed; torch_seq_steps.cpp times it beside LibTorch.
#include "seq_steps.hpp"

GRADUS_STEP_BENCH(seq_steps::BM_gradus_word_lm, "word_lm_step/gradus");

BENCHMARK_MAIN();
