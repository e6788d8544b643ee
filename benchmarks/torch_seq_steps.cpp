// benchmarks/torch_seq_steps.cpp — the training step of examples/word_lm beside the same model
// in LibTorch, in one process (repetitions interleaved with --benchmark_enable_random_interleaving):
//   word-LM  ids [20, 35] in [0, 10000) -> embedding 200 -> LSTM 200 -> LSTM 200 -> logits h · Eᵀ + b
//            with the embedding tied to the output projection; cross-entropy summed over the 35
//            steps and averaged over the batch (the PTB tutorial's loss); full BPTT over the window;
//            gradients clipped to global norm 5; SGD with lr 1. Dropout is off in both, so that the
//            two steps compute the same numbers (the example's dropout draws differ between libraries).
// The LibTorch twin (torch::nn::Embedding, a 2-layer torch::nn::LSTM with batch_first,
// F::linear with the embedding weight, F::cross_entropy, clip_grad_norm_, torch::optim::SGD)
// starts from gradus' weights and refuses to run unless two steps of it agree with gradus'.
// The ids are drawn with Zipf-like frequencies (a word's cost does not depend on which it is).
// Threads: the benchmark argument (omp_set_num_threads for gradus, at::set_num_threads for LibTorch).
#include <torch/torch.h>

#include <cmath>
#include <exception>
#include <string>
#include <vector>

#include "steps.hpp"

namespace {

namespace gd = gradus;
namespace nn = gradus::nn;
namespace F = torch::nn::functional;
using Ids = gd::Tensor<int64_t>;
using V = gd::Var<float>;

constexpr int64_t kWords = 10000, kUnits = 200, kBatch = 20, kSteps = 35, kWindows = 4;
constexpr float kLr = 1.0f;
constexpr double kClip = 5.0;

struct Windows {
  std::vector<Ids> x, y;  // x [20, 35], y [20 * 35]
};

const Windows& windows() {
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

void BM_gradus_word_lm(benchmark::State& state) {
  omp_set_num_threads(int(state.range(0)));
  const Windows& w = windows();
  GradusWordLm g;
  size_t i = 0;
  for (auto _ : state) {
    benchmark::DoNotOptimize(g.step(w.x[i], w.y[i]));
    i = (i + 1) % w.x.size();
  }
  state.SetItemsProcessed(int64_t(state.iterations()) * kBatch * kSteps);
}

void BM_torch_word_lm(benchmark::State& state) {
  at::set_num_threads(int(state.range(0)));
  if (const std::string err = check_against_gradus(); !err.empty()) return state.SkipWithError(err.c_str());
  const Windows& w = windows();
  std::vector<torch::Tensor> x, y;
  for (size_t i = 0; i < w.x.size(); ++i) x.push_back(to_torch(w.x[i])), y.push_back(to_torch(w.y[i]));
  GradusWordLm g;
  TorchWordLm t(g);
  size_t i = 0;
  for (auto _ : state) {
    benchmark::DoNotOptimize(t.step(x[i], y[i]));
    i = (i + 1) % x.size();
  }
  state.SetItemsProcessed(int64_t(state.iterations()) * kBatch * kSteps);
}

GRADUS_STEP_BENCH(BM_gradus_word_lm, "word_lm_step/gradus");
GRADUS_STEP_BENCH(BM_torch_word_lm, "word_lm_step/torch");

}  // namespace

BENCHMARK_MAIN();
