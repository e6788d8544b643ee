// benchmarks/lstm_step.cpp — one SGD training step of an LSTM over 35 steps: x [32,35,128] ->
// nn::LSTM 128 (return_sequences) -> dense 64 at every step -> softmax cross-entropy, full BPTT,
// float (see steps.hpp). The LibTorch peer and the ratio are in torch_steps.cpp; this program
// times gradus alone (for profiling, or without LibTorch).
#include "steps.hpp"

GRADUS_STEP_BENCH(steps::BM_gradus_lstm, "lstm_step/gradus");

BENCHMARK_MAIN();
