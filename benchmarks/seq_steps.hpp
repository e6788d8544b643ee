// benchmarks/seq_steps.hpp — the gradus training step of examples/word_lm and its data, shared by
// word_lm_step.cpp (gradus alone, for scripts/cpu-peer) and torch_seq_steps.cpp (beside LibTorch):
//   word-LM  ids [20, 35] in [0, 10000) -> embedding 200 -> LSTM 200 -> LSTM 200 -> logits h · Eᵀ + b
//            with the embedding tied to the output projection; cross-entropy summed over the 35
//            steps and averaged over the batch (the PTB tutorial's loss); full BPTT over the window;
//            gradients clipped to global norm 5; SGD with lr 1; no dropout (so that peers compute
//            the same numbers). The ids are drawn log-uniformly (Zipf-like frequencies).
#pragma once
#include <cmath>
#include <vector>

#include "steps.hpp"

namespace seq_steps {

namespace gd = gradus;
namespace nn = gradus::nn;
using Ids = gd::Tensor<int64_t>;
using V = gd::Var<float>;

inline constexpr int64_t kWords = 10000, kUnits = 200, kBatch = 20, kSteps = 35, kWindows = 4;
inline constexpr float kLr = 1.0f;
inline constexpr double kClip = 5.0;

struct Windows {
  std::vector<Ids> x, y;  // x [20, 35], y [20 * 35]
};

inline const Windows& windows() {
  static const Windows w = [] {
    gd::Rng rng(9);
    Windows out;
    for (int64_t i = 0; i < kWindows; ++i) {
      Ids x({kBatch, kSteps}), y({kBatch * kSteps});
      for (int64_t j = 0; j < x.size(); ++j) {
        x.data()[j] = int64_t(std::pow(double(kWords), rng.uniform())) - 1;  // log-uniform: Zipf-like
        y.data()[j] = int64_t(std::pow(double(kWords), rng.uniform())) - 1;
      }
      out.x.push_back(x);
      out.y.push_back(y);
    }
    return out;
  }();
  return w;
}

struct GradusWordLm {
  gd::Rng rng{steps::kSeed};
  nn::Embedding<float> embed{{.vocab = kWords, .dim = kUnits, .initializer = gd::init::random_uniform{-0.1, 0.1}}, rng};
  nn::LSTM<float> l1{{.in = kUnits, .units = kUnits, .return_sequences = true}, rng};
  nn::LSTM<float> l2{{.in = kUnits, .units = kUnits, .return_sequences = true}, rng};
  V bias{gd::Tensor<float>::zeros({kWords})};
  gd::optim::SGD<float> opt{params(), {.lr = kLr}};

  std::vector<V> params() {
    std::vector<V> p = steps::parameters_of(embed, l1, l2);
    p.push_back(bias);
    return p;
  }
  float step(const Ids& x, const Ids& y) {
    const V h = gd::reshape(l2.forward(l1.forward(embed.forward(x))), {-1, kUnits});
    const V logits(gd::matmul(h, embed.embeddings(), {.transpose_b = true}) + bias);
    const V loss = gd::losses::sparse_softmax_cross_entropy_with_logits(y, logits);
    opt.zero_grad();
    gd::backward(V(loss * float(kSteps)));
    gd::optim::clip_by_global_norm(opt.params(), kClip);
    opt.step();
    return loss.item();
  }
};

inline void BM_gradus_word_lm(benchmark::State& state) {
  omp_set_num_threads(int(state.range(0)));
  const Windows& w = windows();
  GradusWordLm g;
  for (size_t i = 0; i < 2; ++i) g.step(w.x[i], w.y[i]);  // warm up: the allocator's first touch of its pages
  size_t i = 0;
  for (auto _ : state) {
    benchmark::DoNotOptimize(g.step(w.x[i], w.y[i]));
    i = (i + 1) % w.x.size();
  }
  state.SetItemsProcessed(int64_t(state.iterations()) * kBatch * kSteps);
}

}  // namespace seq_steps
