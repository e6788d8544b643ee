// benchmarks/lstm_step.cpp — one SGD training step of the char-LSTM language model over 35 steps:
// ids [32,35] -> embedding 64 -> nn::LSTM 128 (return_sequences) -> dense 256 at every step ->
// softmax cross-entropy, full BPTT, clipping to global norm 5, float (see steps.hpp). The LibTorch peer and the ratio are in torch_steps.cpp; this program
// times gradus alone (for profiling, or without LibTorch).
#include "steps.hpp"

GRADUS_STEP_BENCH(steps::BM_gradus_lstm, "lstm_step/gradus");

BENCHMARK_MAIN();
