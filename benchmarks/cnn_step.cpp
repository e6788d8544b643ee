// benchmarks/cnn_step.cpp — one SGD training step of the LeNet CNN (conv 5x5x32 VALID ReLU ->
// maxpool 2 -> conv 5x5x64 VALID ReLU -> maxpool 2 -> dense 1024-500 ReLU -> dense 10), batch 128 of
// 28x28x1 Fashion-MNIST images, NHWC, float (see steps.hpp). The LibTorch peer and the ratio are
// in torch_steps.cpp; this program times gradus alone (for profiling, or without LibTorch).
#include "steps.hpp"

GRADUS_STEP_BENCH(steps::BM_gradus_cnn, "cnn_step/gradus");
GRADUS_STEP_BENCH(steps::BM_gradus_cnn_bf16, "cnn_step/gradus_bf16");

BENCHMARK_MAIN();
