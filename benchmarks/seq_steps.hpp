// benchmarks/seq_steps.hpp — the gradus training step of examples/word_lm and its data, shared by
// word_lm_step.cpp (gradus alone, for scripts/cpu-peer) and torch_seq_steps.cpp (beside LibTorch):
//   word-LM  ids [20, 35] in [0, 10000) -> embedding 200 -> LSTM 200 -> LSTM 200 -> logits h · Eᵀ + b
//            with the embedding tied to the output projection; cross-entropy summed over the 35
//            steps and averaged over the batch (the PTB tutorial's loss); full BPTT over the window;
//            gradients clipped to global norm 5; SGD with lr 1; no dropout (so that peers compute
//            the same numbers). The ids are drawn log-uniformly (Zipf-like frequencies).
//   translate  the training step of examples/translate on random words of fixed length (below).
#pragma once
#include <cmath>
#include <vector>

#include <gradus/nn/tied_output.hpp>

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
  nn::TiedOutput<float> out{embed};  // h · Eᵀ + bias, the example's output layer (bias zeros)
  gd::optim::SGD<float> opt{steps::parameters_of(embed, l1, l2, out), {.lr = kLr}};

  float step(const Ids& x, const Ids& y) {
    const V h = gd::reshape(l2.forward(l1.forward(embed.forward(x))), {-1, kUnits});
    const V logits = out.forward(h);
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
  const bench::RoundTrips trips(state, state.range(0));
  for (auto _ : state) {
    benchmark::DoNotOptimize(g.step(w.x[i], w.y[i]));
    i = (i + 1) % w.x.size();
  }
  state.SetItemsProcessed(int64_t(state.iterations()) * kBatch * kSteps);
}

// translate step: a batch of 64 words of 10 English characters (32 symbols) -> 12 German
// characters (40 symbols), the model of examples/translate: Embedding(32, 48) -> LSTM(192) encoder
// whose final state starts an LSTMCell(192) decoder fed [Embedding(40, 48)(previous character);
// previous attentional vector], scaled Luong attention over the encoder outputs, attentional vector
// tanh(W_c [context; h]), logits W_o · it; mean cross-entropy over the 64 x 12 characters
// (sequence_loss with unit weights); Adam with lr 2e-3. Fixed lengths (no padding).
inline constexpr int64_t kSrcChars = 32, kDstChars = 40, kSrcLen = 10, kDstLen = 12, kPairBatch = 64,
                         kCharEmbed = 48, kCharUnits = 192;

struct Pairs {
  std::vector<Ids> src, dec_in, dec_out;
};

inline const Pairs& pairs() {
  static const Pairs p = [] {
    gd::Rng rng(13);
    Pairs out;
    for (int64_t i = 0; i < kWindows; ++i) {
      Ids s({kPairBatch, kSrcLen}), di({kPairBatch, kDstLen}), d({kPairBatch, kDstLen});
      for (int64_t j = 0; j < s.size(); ++j) s.data()[j] = 3 + int64_t(rng.uniform() * double(kSrcChars - 3)) % (kSrcChars - 3);
      for (int64_t j = 0; j < d.size(); ++j) d.data()[j] = 3 + int64_t(rng.uniform() * double(kDstChars - 3)) % (kDstChars - 3);
      for (int64_t n = 0; n < kPairBatch; ++n)
        for (int64_t t = 0; t < kDstLen; ++t) di.data()[n * kDstLen + t] = t == 0 ? 1 : d.data()[n * kDstLen + t - 1];
      out.src.push_back(s), out.dec_in.push_back(di), out.dec_out.push_back(d);
    }
    return out;
  }();
  return p;
}

struct GradusTranslate {
  gd::Rng rng{steps::kSeed};
  nn::Embedding<float> src_embed{{.vocab = kSrcChars, .dim = kCharEmbed}, rng};
  nn::Embedding<float> dst_embed{{.vocab = kDstChars, .dim = kCharEmbed}, rng};
  nn::LSTM<float> encoder{{.in = kCharEmbed, .units = kCharUnits, .return_sequences = true}, rng};
  nn::LSTMCell<float> decoder{{.in = kCharEmbed + kCharUnits, .units = kCharUnits}, rng};
  nn::LuongAttention<float> attention{{.units = kCharUnits, .memory_units = kCharUnits, .scale = true}, rng};
  nn::Dense<float> combine{{.in = 2 * kCharUnits, .out = kCharUnits, .activation = nn::tanh, .use_bias = false}, rng};
  nn::Dense<float> out{{.in = kCharUnits, .out = kDstChars}, rng};
  gd::optim::Adam<float> opt{steps::parameters_of(src_embed, dst_embed, encoder, decoder, attention, combine, out),
                             {.lr = 2e-3}};
  gd::Tensor<float> mask = gd::Tensor<float>::ones({kPairBatch, kDstLen});

  float step(const Ids& src, const Ids& dec_in, const Ids& dec_out) {
    auto [memory, state] = encoder.forward_with_state(src_embed.forward(src));
    const V keys = attention.keys(memory);
    V a = V::constant(gd::Tensor<float>::zeros({kPairBatch, kCharUnits}));
    const V emb = dst_embed.forward(dec_in);  // [N, Td, E]
    std::vector<V> logits;
    for (int64_t t = 0; t < kDstLen; ++t) {
      const V e = gd::to_var(gd::reshape(gd::slice(emb, {0, t, 0}, {kPairBatch, 1, kCharEmbed}), {kPairBatch, kCharEmbed}));
      state = decoder.step(gd::to_var(gd::concat({e, a}, 1)), state);
      const auto att = attention.attend(state.h, keys, memory);
      a = combine.forward(gd::to_var(gd::concat({att.context, state.h}, 1)));
      logits.push_back(out.forward(a));
    }
    const V loss = gd::to_var(gd::losses::sequence_loss(dec_out, gd::to_var(gd::stack(logits, 1)), mask));
    opt.minimize(loss);
    return loss.item();
  }
};

inline void BM_gradus_translate(benchmark::State& state) {
  omp_set_num_threads(int(state.range(0)));
  const Pairs& p = pairs();
  GradusTranslate g;
  for (size_t i = 0; i < 2; ++i) g.step(p.src[i], p.dec_in[i], p.dec_out[i]);  // warm up
  size_t i = 0;
  const bench::RoundTrips trips(state, state.range(0));
  for (auto _ : state) {
    benchmark::DoNotOptimize(g.step(p.src[i], p.dec_in[i], p.dec_out[i]));
    i = (i + 1) % p.src.size();
  }
  state.SetItemsProcessed(int64_t(state.iterations()) * kPairBatch);
}

}  // namespace seq_steps
