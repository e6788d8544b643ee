// benchmarks/torch_steps.cpp — LibTorch peers of mlp_step, cnn_step and lstm_step: the same
// models, shapes, data, initial weights and SGD step, written the usual LibTorch way
// (torch::nn modules, F::cross_entropy, torch::optim::SGD; NCHW for the CNN; torch::nn::LSTM with
// batch_first for the LSTM). The gradus steps of steps.hpp run in this process too, interleaved
// with these, so benchmarks/run takes the gradus / LibTorch ratio from one process.
// Threads: at::set_num_threads (intra-op), inter-op threads 1; gradus: omp_set_num_threads.
// Each torch benchmark refuses to run unless two steps of it agree with gradus' from the same
// weights, so both time the same computation.
#include <torch/torch.h>

#include <cmath>
#include <exception>
#include <string>

#include "steps.hpp"

namespace {

namespace F = torch::nn::functional;
using steps::Batches;
using steps::kBatch;
using steps::kClasses;
using steps::kHidden;
using steps::kLr;
using steps::kPixels;
using steps::kSeqEmbed;
using steps::kSeqVocab;
using steps::kSeqUnits;
using steps::Tensor;

// A copy of a gradus tensor (as long as it lives, a blob view would do; a copy is simpler).
torch::Tensor to_torch(const Tensor& t) {
  std::vector<int64_t> dims(t.shape().begin(), t.shape().end());
  return torch::from_blob(const_cast<float*>(t.data()), dims, torch::kFloat32).clone();
}
torch::Tensor to_torch(const steps::Ids& t) {
  std::vector<int64_t> dims(t.shape().begin(), t.shape().end());
  return torch::from_blob(const_cast<int64_t*>(t.data()), dims, torch::kInt64).clone();
}

struct TorchBatches {
  std::vector<torch::Tensor> x, y;
  TorchBatches(const Batches& b, std::vector<int64_t> x_shape, bool integer_x = false) {
    for (size_t i = 0; i < b.x.size(); ++i) {
      torch::Tensor xi = to_torch(b.x[i]).reshape(x_shape).contiguous();
      x.push_back(integer_x ? xi.to(torch::kInt64) : xi);
      y.push_back(to_torch(b.y[i]));
    }
  }
};

void copy_linear(torch::nn::Linear& l, const gradus::nn::Dense<float>& d) {
  l->weight.copy_(to_torch(d.kernel().value()).t());
  l->bias.copy_(to_torch(d.bias().value()));
}

struct TorchMlp {
  torch::nn::Linear l1{kPixels, kHidden}, l2{kHidden, kClasses};
  torch::optim::SGD opt;

  explicit TorchMlp(const steps::GradusMlp& g) : opt(params(), torch::optim::SGDOptions(kLr)) {
    torch::NoGradGuard no_grad;
    copy_linear(l1, g.d1);
    copy_linear(l2, g.d2);
  }
  std::vector<torch::Tensor> params() {
    auto p = l1->parameters();
    for (auto& q : l2->parameters()) p.push_back(q);
    return p;
  }
  float step(const torch::Tensor& x, const torch::Tensor& y) {
    opt.zero_grad();
    torch::Tensor loss = F::cross_entropy(l2(torch::relu(l1(x))), y);
    loss.backward();
    opt.step();
    return loss.item<float>();
  }
};

struct TorchCnn {
  torch::nn::Conv2d c1{torch::nn::Conv2dOptions(1, 32, 5)};
  torch::nn::Conv2d c2{torch::nn::Conv2dOptions(32, 64, 5)};
  torch::nn::Linear l1{4 * 4 * 64, kHidden}, l2{kHidden, kClasses};
  torch::optim::SGD opt;

  explicit TorchCnn(const steps::GradusCnn& g) : opt(params(), torch::optim::SGDOptions(kLr)) {
    torch::NoGradGuard no_grad;
    // gradus: kernel [KH,KW,C,F], NHWC flatten (h, w, c); torch: weight [F,C,KH,KW], NCHW flatten (c, h, w)
    c1->weight.copy_(to_torch(g.c1.kernel().value()).permute({3, 2, 0, 1}));
    c1->bias.copy_(to_torch(g.c1.bias().value()));
    c2->weight.copy_(to_torch(g.c2.kernel().value()).permute({3, 2, 0, 1}));
    c2->bias.copy_(to_torch(g.c2.bias().value()));
    l1->weight.copy_(to_torch(g.d1.kernel().value()).reshape({4, 4, 64, kHidden}).permute({3, 2, 0, 1}).reshape({kHidden, -1}));
    l1->bias.copy_(to_torch(g.d1.bias().value()));
    copy_linear(l2, g.d2);
  }
  std::vector<torch::Tensor> params() {
    std::vector<torch::Tensor> p;
    for (auto* m : {c1.ptr().get(), c2.ptr().get()})
      for (auto& q : m->parameters()) p.push_back(q);
    for (auto* m : {l1.ptr().get(), l2.ptr().get()})
      for (auto& q : m->parameters()) p.push_back(q);
    return p;
  }
  float step(const torch::Tensor& x, const torch::Tensor& y) {
    opt.zero_grad();
    torch::Tensor h = F::max_pool2d(torch::relu(c1(x)), F::MaxPool2dFuncOptions(2));
    h = F::max_pool2d(torch::relu(c2(h)), F::MaxPool2dFuncOptions(2));
    torch::Tensor loss = F::cross_entropy(l2(torch::relu(l1(h.flatten(1)))), y);
    loss.backward();
    opt.step();
    return loss.item<float>();
  }
};

struct TorchLstm {
  torch::nn::Embedding embed{kSeqVocab, kSeqEmbed};
  torch::nn::LSTM lstm{torch::nn::LSTMOptions(kSeqEmbed, kSeqUnits).batch_first(true)};
  torch::nn::Linear head{kSeqUnits, kSeqVocab};
  torch::optim::SGD opt;

  explicit TorchLstm(const steps::GradusLstm& g) : opt(params(), torch::optim::SGDOptions(kLr)) {
    torch::NoGradGuard no_grad;
    embed->weight.copy_(to_torch(g.embed.embeddings().value()));
    // gate order i, f, g (c), o in both; gradus kernel [in, 4u] is torch's weight_ih [4u, in] transposed
    lstm->named_parameters()["weight_ih_l0"].copy_(to_torch(g.lstm.cell().kernel().value()).t());
    lstm->named_parameters()["weight_hh_l0"].copy_(to_torch(g.lstm.cell().recurrent_kernel().value()).t());
    lstm->named_parameters()["bias_ih_l0"].copy_(to_torch(g.lstm.cell().bias().value()));
    lstm->named_parameters()["bias_hh_l0"].zero_();
    copy_linear(head, g.head);
  }
  std::vector<torch::Tensor> params() {
    auto p = embed->parameters();
    for (auto& q : lstm->parameters()) p.push_back(q);
    for (auto& q : head->parameters()) p.push_back(q);
    return p;
  }
  /// x: ids [N, T] as int64.
  float step(const torch::Tensor& x, const torch::Tensor& y) {
    opt.zero_grad();
    torch::Tensor h = std::get<0>(lstm(embed(x)));  // [N, T, units]
    torch::Tensor loss = F::cross_entropy(head(h.reshape({-1, kSeqUnits})), y);
    loss.backward();
    torch::nn::utils::clip_grad_norm_(params(), steps::kClipNorm);
    opt.step();
    return loss.item<float>();
  }
};

// Two steps of the gradus model and its LibTorch twin from the same weights; an error message
// unless the losses agree.
template <class G, class M>
std::string check_against_gradus(const Batches& b, const TorchBatches& tb) try {
  G g;
  M m(g);
  for (size_t i = 0; i < 2; ++i) {
    const float lg = g.step(b.x[i], b.y[i]), lt = m.step(tb.x[i], tb.y[i]);
    if (!(std::abs(lg - lt) <= 1e-3f * std::max(1.f, std::abs(lg))))
      return "loss " + std::to_string(lt) + " differs from gradus' " + std::to_string(lg) + " at step " +
             std::to_string(i);
  }
  return {};
} catch (const std::exception& ex) {
  return ex.what();
}

template <class G, class M>
void run_torch(benchmark::State& state, const Batches& b, std::vector<int64_t> x_shape, int64_t examples,
               bool integer_x = false) {
  at::set_num_threads(int(state.range(0)));
  const TorchBatches tb(b, std::move(x_shape), integer_x);
  if (const std::string err = check_against_gradus<G, M>(b, tb); !err.empty()) return state.SkipWithError(err.c_str());
  G g;
  M m(g);
  size_t i = 0;
  const bench::RoundTrips trips(state, state.range(0));
  for (auto _ : state) {
    benchmark::DoNotOptimize(m.step(tb.x[i], tb.y[i]));
    i = (i + 1) % tb.x.size();
  }
  state.SetItemsProcessed(int64_t(state.iterations()) * examples);
}

void BM_torch_mlp(benchmark::State& state) {
  run_torch<steps::GradusMlp, TorchMlp>(state, steps::image_batches(), {kBatch, kPixels}, kBatch);
}
void BM_torch_cnn(benchmark::State& state) {
  run_torch<steps::GradusCnn, TorchCnn>(state, steps::image_batches(), {kBatch, 1, 28, 28}, kBatch);
}
void BM_torch_lstm(benchmark::State& state) {
  run_torch<steps::GradusLstm, TorchLstm>(state, steps::sequence_batches(),
                                          {steps::kSeqBatch, steps::kSeqSteps}, steps::kSeqBatch, true);
}

GRADUS_STEP_BENCH(BM_torch_mlp, "mlp_step/torch");
GRADUS_STEP_BENCH(steps::BM_gradus_mlp, "mlp_step/gradus");
GRADUS_STEP_BENCH(BM_torch_cnn, "cnn_step/torch");
GRADUS_STEP_BENCH(steps::BM_gradus_cnn, "cnn_step/gradus");
GRADUS_STEP_BENCH(BM_torch_lstm, "lstm_step/torch");
GRADUS_STEP_BENCH(steps::BM_gradus_lstm, "lstm_step/gradus");

}  // namespace

int main(int argc, char** argv) {
  at::set_num_interop_threads(1);  // only allowed before any inter-op work
  benchmark::Initialize(&argc, argv);
  if (benchmark::ReportUnrecognizedArguments(argc, argv)) return 1;
  benchmark::RunSpecifiedBenchmarks();
  benchmark::Shutdown();
  return 0;
}
