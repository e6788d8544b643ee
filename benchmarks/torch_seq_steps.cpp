// benchmarks/torch_seq_steps.cpp — the training steps of examples/word_lm and examples/translate
// (seq_steps.hpp) beside the same models in LibTorch, in one process (repetitions interleaved with
// --benchmark_enable_random_interleaving). Each LibTorch twin (for the word LM: torch::nn::Embedding,
// a 2-layer torch::nn::LSTM with batch_first, F::linear with the embedding weight,
// F::cross_entropy, clip_grad_norm_, torch::optim::SGD) starts from gradus' weights and refuses to
// run unless two steps of it agree with gradus'.
// Threads: the benchmark argument (omp_set_num_threads for gradus, at::set_num_threads for LibTorch).
#include <torch/torch.h>

#include <cmath>
#include <exception>
#include <string>
#include <vector>

#include "seq_steps.hpp"

namespace {

namespace F = torch::nn::functional;
using namespace seq_steps;

torch::Tensor to_torch(const gd::Tensor<float>& t) {
  std::vector<int64_t> dims(t.shape().begin(), t.shape().end());
  return torch::from_blob(const_cast<float*>(t.data()), dims, torch::kFloat32).clone();
}
torch::Tensor to_torch(const Ids& t) {
  std::vector<int64_t> dims(t.shape().begin(), t.shape().end());
  return torch::from_blob(const_cast<int64_t*>(t.data()), dims, torch::kInt64).clone();
}

struct TorchWordLm {
  torch::nn::Embedding embed{kWords, kUnits};
  torch::nn::LSTM lstm{torch::nn::LSTMOptions(kUnits, kUnits).num_layers(2).batch_first(true)};
  torch::Tensor bias = torch::zeros({kWords}, torch::requires_grad());
  torch::optim::SGD opt;

  explicit TorchWordLm(const GradusWordLm& g) : opt(params(), torch::optim::SGDOptions(kLr)) {
    torch::NoGradGuard no_grad;
    embed->weight.copy_(to_torch(g.embed.embeddings().value()));
    const nn::LSTM<float>* layers[2] = {&g.l1, &g.l2};
    for (int l = 0; l < 2; ++l) {  // gate order i, f, g, o in both; gradus' kernels are transposed
      const std::string s = std::to_string(l);
      lstm->named_parameters()["weight_ih_l" + s].copy_(to_torch(layers[l]->cell().kernel().value()).t());
      lstm->named_parameters()["weight_hh_l" + s].copy_(to_torch(layers[l]->cell().recurrent_kernel().value()).t());
      lstm->named_parameters()["bias_ih_l" + s].copy_(to_torch(layers[l]->cell().bias().value()));
      lstm->named_parameters()["bias_hh_l" + s].zero_();
      // gradus' LSTM has one bias; torch's second one would double every bias update
      lstm->named_parameters()["bias_hh_l" + s].set_requires_grad(false);
    }
  }
  std::vector<torch::Tensor> params() {
    auto p = embed->parameters();
    for (const auto& item : lstm->named_parameters())
      if (item.key().find("bias_hh") == std::string::npos) p.push_back(item.value());
    p.push_back(bias);
    return p;
  }
  float step(const torch::Tensor& x, const torch::Tensor& y) {
    opt.zero_grad();
    torch::Tensor h = std::get<0>(lstm(embed(x))).reshape({-1, kUnits});
    torch::Tensor loss = F::cross_entropy(F::linear(h, embed->weight, bias), y);
    (loss * float(kSteps)).backward();
    torch::nn::utils::clip_grad_norm_(params(), kClip);
    opt.step();
    return loss.item<float>();
  }
};

// Empty when LibTorch's loss lt agrees with gradus' lg at step i (relative 1e-3), else why not.
std::string loss_mismatch(float lg, float lt, size_t i) {
  if (std::abs(lg - lt) <= 1e-3f * std::max(1.f, std::abs(lg))) return {};
  return "loss " + std::to_string(lt) + " differs from gradus' " + std::to_string(lg) + " at step " + std::to_string(i);
}

std::string check_against_gradus() try {
  const Windows& w = windows();
  GradusWordLm g;
  TorchWordLm t(g);
  for (size_t i = 0; i < 2; ++i) {
    const float lg = g.step(w.x[i], w.y[i]), lt = t.step(to_torch(w.x[i]), to_torch(w.y[i]));
    if (std::string err = loss_mismatch(lg, lt, i); !err.empty()) return err;
  }
  return {};
} catch (const std::exception& ex) {
  return ex.what();
}

void BM_torch_word_lm(benchmark::State& state) {
  at::set_num_threads(int(state.range(0)));
  if (const std::string err = check_against_gradus(); !err.empty()) return state.SkipWithError(err.c_str());
  const Windows& w = windows();
  std::vector<torch::Tensor> x, y;
  for (size_t i = 0; i < w.x.size(); ++i) x.push_back(to_torch(w.x[i])), y.push_back(to_torch(w.y[i]));
  GradusWordLm g;
  TorchWordLm t(g);
  for (size_t i = 0; i < 2; ++i) t.step(x[i], y[i]);  // warm up, as gradus' step
  size_t i = 0;
  const bench::RoundTrips trips(state, state.range(0));
  for (auto _ : state) {
    benchmark::DoNotOptimize(t.step(x[i], y[i]));
    i = (i + 1) % x.size();
  }
  state.SetItemsProcessed(int64_t(state.iterations()) * kBatch * kSteps);
}

// The translation step: torch::nn::LSTM encoder, LSTMCell decoder with input feeding, scaled Luong
// attention written with bmm and softmax, as a LibTorch user writes it.
struct TorchTranslate {
  torch::nn::Embedding src_embed{kSrcChars, kCharEmbed}, dst_embed{kDstChars, kCharEmbed};
  torch::nn::LSTM encoder{torch::nn::LSTMOptions(kCharEmbed, kCharUnits).batch_first(true)};
  torch::nn::LSTMCell decoder{torch::nn::LSTMCellOptions(kCharEmbed + kCharUnits, kCharUnits)};
  torch::nn::Linear memory_layer{torch::nn::LinearOptions(kCharUnits, kCharUnits).bias(false)};
  torch::Tensor g = torch::ones({}, torch::requires_grad());
  torch::nn::Linear combine{torch::nn::LinearOptions(2 * kCharUnits, kCharUnits).bias(false)};
  torch::nn::Linear out{kCharUnits, kDstChars};
  torch::optim::Adam opt;

  explicit TorchTranslate(const GradusTranslate& m) : opt(params(), torch::optim::AdamOptions(2e-3)) {
    torch::NoGradGuard no_grad;
    src_embed->weight.copy_(to_torch(m.src_embed.embeddings().value()));
    dst_embed->weight.copy_(to_torch(m.dst_embed.embeddings().value()));
    auto lstm = [](auto& named, const std::string& suffix, const auto& cell) {
      named["weight_ih" + suffix].copy_(to_torch(cell.kernel().value()).t());
      named["weight_hh" + suffix].copy_(to_torch(cell.recurrent_kernel().value()).t());
      named["bias_ih" + suffix].copy_(to_torch(cell.bias().value()));
      named["bias_hh" + suffix].zero_();
      named["bias_hh" + suffix].set_requires_grad(false);  // gradus' LSTM has one bias
    };
    auto enc = encoder->named_parameters();
    lstm(enc, "_l0", m.encoder.cell());
    auto dec = decoder->named_parameters();
    lstm(dec, "", m.decoder);
    for (const auto& [name, v] : m.attention.named_parameters())
      if (name == "memory_layer.kernel") memory_layer->weight.copy_(to_torch(v.value()).t());
    combine->weight.copy_(to_torch(m.combine.kernel().value()).t());
    out->weight.copy_(to_torch(m.out.kernel().value()).t());
    out->bias.copy_(to_torch(m.out.bias().value()));
  }
  std::vector<torch::Tensor> params() {
    std::vector<torch::Tensor> p;
    for (auto* mod : std::initializer_list<torch::nn::Module*>{src_embed.get(), dst_embed.get(), encoder.get(),
                                                               decoder.get(), memory_layer.get(), combine.get(), out.get()})
      for (const auto& item : mod->named_parameters())
        if (item.key().find("bias_hh") == std::string::npos) p.push_back(item.value());
    p.push_back(g);
    return p;
  }
  float step(const torch::Tensor& src, const torch::Tensor& dec_in, const torch::Tensor& dec_out) {
    opt.zero_grad();
    auto [memory, state] = encoder(src_embed(src));
    torch::Tensor h = std::get<0>(state).squeeze(0), c = std::get<1>(state).squeeze(0);
    const torch::Tensor keys = memory_layer(memory);  // [N, Te, u]
    torch::Tensor a = torch::zeros({kPairBatch, kCharUnits});
    const torch::Tensor emb = dst_embed(dec_in);
    std::vector<torch::Tensor> logits;
    for (int64_t t = 0; t < kDstLen; ++t) {
      std::tie(h, c) = decoder(torch::cat({emb.select(1, t), a}, 1), std::make_tuple(h, c));
      const torch::Tensor w = torch::softmax(torch::bmm(keys, h.unsqueeze(2)).squeeze(2) * g, 1);  // [N, Te]
      const torch::Tensor context = torch::bmm(w.unsqueeze(1), memory).squeeze(1);
      a = torch::tanh(combine(torch::cat({context, h}, 1)));
      logits.push_back(out(a));
    }
    torch::Tensor loss = F::cross_entropy(torch::stack(logits, 1).reshape({-1, kDstChars}), dec_out.reshape({-1}));
    loss.backward();
    opt.step();
    return loss.item<float>();
  }
};

std::string check_translate() try {
  const Pairs& p = pairs();
  GradusTranslate g;
  TorchTranslate t(g);
  for (size_t i = 0; i < 2; ++i) {
    const float lg = g.step(p.src[i], p.dec_in[i], p.dec_out[i]);
    const float lt = t.step(to_torch(p.src[i]), to_torch(p.dec_in[i]), to_torch(p.dec_out[i]));
    if (std::string err = loss_mismatch(lg, lt, i); !err.empty()) return err;
  }
  return {};
} catch (const std::exception& ex) {
  return ex.what();
}

void BM_torch_translate(benchmark::State& state) {
  at::set_num_threads(int(state.range(0)));
  if (const std::string err = check_translate(); !err.empty()) return state.SkipWithError(err.c_str());
  const Pairs& p = pairs();
  std::vector<torch::Tensor> s, di, d;
  for (size_t i = 0; i < p.src.size(); ++i)
    s.push_back(to_torch(p.src[i])), di.push_back(to_torch(p.dec_in[i])), d.push_back(to_torch(p.dec_out[i]));
  GradusTranslate g;
  TorchTranslate t(g);
  for (size_t i = 0; i < 2; ++i) t.step(s[i], di[i], d[i]);  // warm up, as gradus' step
  size_t i = 0;
  const bench::RoundTrips trips(state, state.range(0));
  for (auto _ : state) {
    benchmark::DoNotOptimize(t.step(s[i], di[i], d[i]));
    i = (i + 1) % s.size();
  }
  state.SetItemsProcessed(int64_t(state.iterations()) * kPairBatch);
}

GRADUS_STEP_BENCH(seq_steps::BM_gradus_word_lm, "word_lm_step/gradus");
GRADUS_STEP_BENCH(BM_torch_word_lm, "word_lm_step/torch");
GRADUS_STEP_BENCH(seq_steps::BM_gradus_translate, "translate_step/gradus");
GRADUS_STEP_BENCH(BM_torch_translate, "translate_step/torch");

}  // namespace

BENCHMARK_MAIN();
