// benchmarks/gemm_shapes.hpp — the float GEMMs bench_gemm and bench_gemm_interleaved time:
// 1024^3, those of one training step of the MLP 784-500-10 and of the LeNet CNN at batch 128, as
// backend::gemm receives them, one of the translation model's decoder cell, the word-LM's widest
// input gradient, and thin products of
// few rows (inference on one example, a beam of 4; gemm_inplace.hpp, loop_gemm).
#pragma once
#include <array>
#include <cstdint>
#include <vector>

/// {m, k, n, a transposed, b transposed}: c = a · b as backend::gemm receives it.
inline const std::vector<std::array<int64_t, 5>> gemm_shapes = {
    {1024, 1024, 1024, 0, 0},
    // MLP 784-500-10: forward of each layer, then dW1 = x^T g1, dW2 = h^T g2, dh = g2 W2^T
    {128, 784, 500, 0, 0}, {128, 500, 10, 0, 0}, {784, 128, 500, 1, 0}, {500, 128, 10, 1, 0}, {128, 10, 500, 0, 1},
    // LeNet CNN: conv2d runs im2col tiles of about 256 KiB, a multiple of 12 rows (2616 rows of 25
    // for conv1, 72 rows of 800 for conv2): forward, dfilter = patches^T g, dpatches = g W^T (conv2
    // only). On a CPU with AVX2 or AVX-512, conv1 (one input channel) runs as a direct convolution
    // instead, without these GEMMs; its rows stay for comparison.
    {2616, 25, 32, 0, 0}, {25, 2616, 32, 1, 0}, {72, 800, 64, 0, 0}, {800, 72, 64, 1, 0}, {72, 64, 800, 0, 1},
    // and its dense layers 1024-500-10 (the 500-10 ones are the MLP's)
    {128, 1024, 500, 0, 0}, {1024, 128, 500, 1, 0}, {128, 500, 1024, 0, 1},
    // the translation step's decoder LSTM cell at batch 64, forward: its input [embedding;
    // attentional vector] (48 + 192) against the kernel's 4 x 192 gate columns
    {64, 240, 768, 0, 0},
    // the word-LM step's input gradient of its logits layer (20 x 35 positions, 10,000 words, 200
    // units): its 200 columns leave a last panel of 8 (AVX-512) on every 12 rows
    {700, 10000, 200, 0, 1},
    // thin: one, two and four examples through the MLP's first layer, forward and with W stored
    // transposed (one row against a row-major B runs as loops; the others read B in place)
    {1, 784, 500, 0, 0}, {1, 784, 500, 0, 1}, {2, 784, 500, 0, 0}, {2, 784, 500, 0, 1}, {4, 784, 500, 0, 0},
    {4, 784, 500, 0, 1}};
