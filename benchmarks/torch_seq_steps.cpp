// benchmarks/torch_seq_steps.cpp — the training step of examples/word_lm (seq_steps.hpp) beside the
// same model in LibTorch, in one process (repetitions interleaved with
// --benchmark_enable_random_interleaving). The LibTorch twin (torch::nn::Embedding, a 2-layer
// torch::nn::LSTM with batch_first, F::linear with the embedding weight, F::cross_entropy,
// clip_grad_norm_, torch::optim::SGD) starts from gradus' weights and refuses to run unless two
// steps of it agree with gradus'.
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

std::string check_against_gradus() try {
  const Windows& w = windows();
  GradusWordLm g;
  TorchWordLm t(g);
  for (size_t i = 0; i < 2; ++i) {
    const float lg = g.step(w.x[i], w.y[i]), lt = t.step(to_torch(w.x[i]), to_torch(w.y[i]));
    if (!(std::abs(lg - lt) <= 1e-3f * std::max(1.f, std::abs(lg))))
      return "loss " + std::to_string(lt) + " differs from gradus' " + std::to_string(lg) + " at step " +
             std::to_string(i);
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
  for (auto _ : state) {
    benchmark::DoNotOptimize(t.step(x[i], y[i]));
    i = (i + 1) % x.size();
  }
  state.SetItemsProcessed(int64_t(state.iterations()) * kBatch * kSteps);
}

GRADUS_STEP_BENCH(seq_steps::BM_gradus_word_lm, "word_lm_step/gradus");
GRADUS_STEP_BENCH(BM_torch_word_lm, "word_lm_step/torch");

}  // namespace

BENCHMARK_MAIN();
